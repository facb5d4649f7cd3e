//! Runs the Collatz example with its own registry on the CPU or on a GPU, and checks every output
//! slot against a sequential computation.
//!
//! ```text
//! custom-task [N] [--device cpu|cuda] [--workers W] [--lanes L] [--processes P]
//! ```
//! The CPU is the default. On a GPU the kernel is the one the registry embeds
//! (`CustomTasks::KERNEL_PTX`, built by `build.rs`); a build without the GPU tools embeds the
//! reason instead, and `--device cuda` prints it. `--processes P` runs the workers in P copies
//! of this program, one PE each (on the CPU, sharing one memory file; with `--device cuda`, one
//! GPU each, joined by NVSHMEM): `main` serves its PE first when it is one.

use std::process::ExitCode;

use mgws::cuda::CudaBackend;
use mgws::{Access, Backend, DataDescriptor, Job, Scheduler};
use mgws_example_custom_task::{collatz_steps, CollatzRange, CustomTasks};

struct Args {
    n: u64,
    backend: Backend,
    workers: Option<u32>,
    lanes: Option<u32>,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        n: 1 << 20,
        backend: Backend::cpu(),
        workers: None,
        lanes: None,
    };
    let mut processes = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        let number = |name: &str, v: String| v.parse().map_err(|e| format!("{name} {v:?}: {e}"));
        match a.as_str() {
            "--device" => match value("--device")?.as_str() {
                "cpu" => args.backend = Backend::cpu(),
                "cuda" => args.backend = Backend::cuda(CudaBackend::new()),
                other => return Err(format!("unknown device {other:?} (cpu or cuda)")),
            },
            "--workers" => args.workers = Some(number("--workers", value("--workers")?)?),
            "--lanes" => args.lanes = Some(number("--lanes", value("--lanes")?)?),
            "--processes" => processes = Some(number("--processes", value("--processes")?)?),
            n => args.n = n.parse().map_err(|_| format!("not a task count: {n:?}"))?,
        }
    }
    if args.n == 0 || args.n > (u32::MAX / 8) as u64 {
        return Err(format!("N must be between 1 and {}", u32::MAX / 8));
    }
    if let Some(p) = processes {
        args.backend = args.backend.processes(p);
    }
    Ok(args)
}

/// Runs Collatz over `1..=n` and returns the number of wrong slots.
fn run(args: &Args) -> mgws::Result<usize> {
    // The backend fills in what is left open: on a GPU as many workers as fit, 32 lanes and two
    // workers per public queue.
    let mut builder = Scheduler::builder();
    if let Some(n) = args.workers {
        builder = builder.workers(n);
    }
    if let Some(n) = args.lanes {
        builder = builder.lanes(n);
    }
    let sched = builder.build_for::<CustomTasks>(&args.backend)?;
    let out = DataDescriptor::new(0, 0, (args.n * 8) as u32, Access::ReadWrite);
    let tasks = [CustomTasks::task(&CollatzRange {
        start: 0,
        len: args.n,
    })
    .with_data(0, out)];
    let mut slots = vec![0u64; args.n as usize];
    let job = Job::new(&tasks).output(0, &mut slots);
    let report = args.backend.run(&sched, &CustomTasks, job)?;
    let wrong = (0..args.n)
        .filter(|&x| slots[x as usize] != collatz_steps(x + 1))
        .count();
    println!(
        "collatz 1..={} on {}: {} workers x {} lanes, {} tasks in {:.4} s; {wrong} of {} slots wrong",
        args.n,
        report.backend,
        report.workers,
        report.lanes,
        report.tasks_run,
        report.elapsed_s,
        args.n
    );
    Ok(wrong)
}

fn main() -> ExitCode {
    // A copy of this program that a run over processes started serves its PE, nothing else.
    if let Some(pe) = mgws::processes::Pe::from_env() {
        std::process::exit(pe.serve::<CustomTasks>());
    }
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("custom-task: {e}");
            return ExitCode::from(64);
        }
    };
    match run(&args) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(2),
        Err(e) => {
            eprintln!("custom-task: error: {e}");
            ExitCode::from(1)
        }
    }
}
