//! Runs the Collatz example with a user-defined registry on the CPU backend or on a GPU, and
//! checks every output slot against a sequential computation.
//!
//! ```text
//! custom-task [N] [--backend cpu|cuda] [--ptx PATH] [--workers W]
//! ```
//! On a GPU the PTX is this crate's own kernel: `cargo xtask ptx --crate mgws-example-custom-task`.

use std::path::PathBuf;
use std::process::ExitCode;

use mgws::cuda::CudaBackend;
use mgws::job::u64_bytes_mut;
use mgws::{AreaBytes, Job, Scheduler};
use mgws_example_custom_task::{collatz_steps, CollatzRange, CustomTasks};
use mgws_tasks::{Access, DataDescriptor};

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
    let args = match parse() {
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
