//! Runs the Collatz example with a user-defined registry on the CPU backend or on a GPU, and
//! checks every output slot against a sequential computation.
//!
//! ```text
//! custom-task [N] [--backend cpu|cuda] [--ptx PATH] [--workers W]
//! ```
//! The CPU is the default. On a GPU the kernel is the one embedded in the registry
//! (`CustomTasks::KERNEL_PTX`, built by `build.rs`), or the PTX file `--ptx` names.

use std::path::PathBuf;
use std::process::ExitCode;

use mgws::cuda::CudaBackend;
use mgws::job::u64_bytes_mut;
use mgws::{Access, DataDescriptor, Registry};
use mgws::{AreaBytes, Job, Scheduler};
use mgws_example_custom_task::{collatz_steps, CollatzRange, CustomTasks};

struct Args {
    n: u64,
    cuda: bool,
    ptx: Option<PathBuf>,
    workers: Option<u32>,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        n: 1 << 20,
        cuda: false,
        ptx: None,
        workers: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--backend" => match value("--backend")?.as_str() {
                "cpu" => args.cuda = false,
                "cuda" => args.cuda = true,
                other => return Err(format!("unknown backend {other:?} (cpu or cuda)")),
            },
            "--ptx" => args.ptx = Some(PathBuf::from(value("--ptx")?)),
            "--workers" => {
                args.workers = Some(
                    value("--workers")?
                        .parse()
                        .map_err(|e| format!("--workers: {e}"))?,
                )
            }
            n => args.n = n.parse().map_err(|_| format!("not a task count: {n:?}"))?,
        }
    }
    if args.n == 0 || args.n > (u32::MAX / 8) as u64 {
        return Err(format!("N must be between 1 and {}", u32::MAX / 8));
    }
    Ok(args)
}

/// The embedded kernel, written to a file for the CUDA backend (which loads PTX files today).
fn embedded_ptx() -> Result<PathBuf, String> {
    let ptx = CustomTasks::KERNEL_PTX.ok_or("the registry declares no kernel")?;
    if let Some(reason) = ptx
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("// mgws-builder: "))
    {
        return Err(format!("the kernel was {reason}"));
    }
    let path = std::env::temp_dir().join(format!("custom-task-{}.ptx", std::process::id()));
    std::fs::write(&path, ptx).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

fn run(args: &Args) -> mgws::Result<bool> {
    let cuda = CudaBackend {
        ptx: args.ptx.clone(),
        ..CudaBackend::new()
    };
    let mut builder = Scheduler::builder();
    if args.cuda {
        let workers = match args.workers {
            Some(w) => w,
            None => cuda.max_workers::<CustomTasks>(32, 32, 1)?,
        };
        builder = builder.workers(workers).lanes(32);
    } else if let Some(w) = args.workers {
        builder = builder.workers(w);
    }
    let sched = builder.build()?;
    let out = DataDescriptor::new(0, 0, (args.n * 8) as u32, Access::ReadWrite);
    let tasks = [CustomTasks::task(&CollatzRange {
        start: 0,
        len: args.n,
    })
    .with_data(0, out)];
    let mut slots = vec![0u64; args.n as usize];
    let job = Job::new(&tasks).area(0, AreaBytes::ReadWrite(u64_bytes_mut(&mut slots)));
    let report = if args.cuda {
        cuda.run(&sched, &CustomTasks, job)?
    } else {
        mgws::cpu::run(&sched, &CustomTasks, job)?
    };
    let wrong = slots
        .iter()
        .enumerate()
        .filter(|&(x, &v)| v != collatz_steps(x as u64 + 1))
        .count();
    println!(
        "collatz 1..={} on {}: {} workers x {} lanes, {} tasks in {:.4} s; {} of {} slots wrong",
        args.n,
        report.backend,
        report.workers,
        report.lanes,
        report.tasks_run,
        report.elapsed_s,
        wrong,
        args.n
    );
    Ok(wrong == 0)
}

fn main() -> ExitCode {
    let args = match parse().and_then(|mut a| {
        if a.cuda && a.ptx.is_none() {
            a.ptx = Some(embedded_ptx()?);
        }
        Ok(a)
    }) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("custom-task: {e}");
            return ExitCode::from(1);
        }
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(2),
        Err(e) => {
            eprintln!("custom-task: error: {e}");
            ExitCode::from(1)
        }
    }
}
