//! The `mgws` command line: parsing errors, the dispatch of each command, and the PE processes
//! of multi-process runs. The flags are in [`crate::args`], their translation into a scheduler in
//! [`crate::translate`], what is printed in [`crate::output`].

use clap::{Parser, Subcommand};
use mgws::error::Result;
use mgws::scheduler::Scheduler;
use mgws_tasks::{ContainsTasks, FibTasks, MemsetTasks, Registry, SkewTasks, StallTasks, UtsTasks};

use crate::args::{DeviceArg, WorkloadCmd};
use crate::output::{self, outcome_code, outcome_json, outcome_text};
use crate::workload::Outcome;

/// The `mgws` command line, as clap parses it.
#[derive(Parser, Debug)]
#[command(
    name = "mgws",
    version,
    about = "MGWS: work stealing in which GPUs schedule their own work"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The commands of `mgws`.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one workload and verify its result.
    Run {
        #[command(subcommand)]
        workload: WorkloadCmd,
    },
    /// Run a workload with mgws, static assignment, rayon and sequentially for several worker
    /// counts; print tasks/s (min/median/max over repetitions) and write CSV and an SVG plot.
    Bench {
        #[command(subcommand)]
        workload: crate::bench::BenchCmd,
    },
}

/// Reports a command line that did not parse: help and version go to stdout (exit 0); anything
/// else is a usage error on stderr (and, under `--json`, a JSON error on stdout), exit
/// [`output::EXIT_USAGE`].
pub fn usage_error(e: &clap::Error, json: bool) -> i32 {
    use clap::error::ErrorKind;
    // Printing can only fail on a closed or full stream; there is nothing left to tell then.
    let _ = e.print();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => output::EXIT_OK,
        _ => {
            if json {
                let rendered = e.render().to_string();
                let first = rendered.lines().next().unwrap_or_default();
                let message = first.strip_prefix("error: ").unwrap_or(first);
                let _ = output::json(&output::json_error(message, "usage"));
            }
            output::EXIT_USAGE
        }
    }
}

/// Serves `pe`, a PE process that a multi-process run of this program started (`--processes`),
/// with the built-in registry of its run; returns the process's exit code.
pub fn serve_pe(pe: mgws::processes::Pe) -> i32 {
    let name = match pe.registry_name() {
        Ok(name) => name,
        Err(e) => return pe.refuse(&e.to_string()),
    };
    match name.as_str() {
        MemsetTasks::NAME => pe.serve::<MemsetTasks>(),
        ContainsTasks::NAME => pe.serve::<ContainsTasks>(),
        UtsTasks::NAME => pe.serve::<UtsTasks>(),
        FibTasks::NAME => pe.serve::<FibTasks>(),
        SkewTasks::NAME => pe.serve::<SkewTasks>(),
        StallTasks::NAME => pe.serve::<StallTasks>(),
        other => {
            let reason = format!("the run's registry `{other}` is none of this program's");
            pe.refuse(&reason)
        }
    }
}

/// Runs the parsed command line; returns the process exit code ([`output`]'s codes).
pub fn main_with(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Run { mut workload } => {
            workload.sched_mut().reject_inapplicable()?;
            workload.sched_mut().show_progress = true;
            let baselines = std::mem::take(&mut workload.sched_mut().baselines);
            let json = workload.sched_mut().json;
            let repeat = workload.sched_mut().repeat;
            let (outcome, sched) = run_workload(&workload)?;
            let mut code = outcome_code(&outcome);
            let mut main = if json {
                outcome_json(&outcome, &sched)
            } else {
                output::emit(&outcome_text(&outcome))?;
                serde_json::Value::Null
            };
            let mut repeats = Vec::new();
            for _ in 1..repeat {
                let (o, s) = run_workload(&workload)?;
                code = code.max(outcome_code(&o));
                if json {
                    repeats.push(outcome_json(&o, &s));
                } else {
                    output::emit(&outcome_text(&o))?;
                }
            }
            if json && !repeats.is_empty() {
                main["repeats"] = repeats.into();
            }
            // Baselines: the same workload, built and verified the same way, in this process, on
            // the same kind of device (`auto` resolved once, by the main run).
            let on_gpu = !baselines.is_empty() && workload.on_gpu()?;
            let mut extra = Vec::new();
            for baseline in baselines {
                let sched = workload.sched_mut();
                sched.method = baseline.method();
                if !on_gpu {
                    sched.device = DeviceArg::Cpu;
                }
                // The CPU baselines run in this one process.
                sched.processes = None;
                match run_workload(&workload) {
                    Ok((o, s)) => {
                        code = code.max(outcome_code(&o));
                        if json {
                            let mut v = outcome_json(&o, &s);
                            v["baseline"] = baseline.name().into();
                            extra.push(v);
                        } else {
                            output::emit(&outcome_text(&o))?;
                        }
                    }
                    Err(e) => {
                        // A baseline that fails fails the command: its figures are missing.
                        eprintln!("mgws: baseline {}: error: {e}", baseline.name());
                        code = code.max(output::EXIT_ERROR);
                        if json {
                            let mut v = output::json_error(&e.to_string(), e.kind());
                            v["baseline"] = baseline.name().into();
                            extra.push(v);
                        }
                    }
                }
            }
            if json {
                if !extra.is_empty() {
                    main["baselines"] = extra.into();
                }
                output::json(&main)?;
            }
            Ok(code)
        }
        Command::Bench { workload } => crate::bench::main(workload),
    }
}

/// Runs one workload command; returns its outcome and the scheduler it ran with.
fn run_workload(workload: &WorkloadCmd) -> Result<(Outcome, Scheduler)> {
    let (outcome, sched) = match workload {
        WorkloadCmd::Memset {
            tasks,
            corrupt_tag_of,
            sched,
        } => {
            let s = sched.scheduler::<MemsetTasks>()?;
            (
                crate::workload::memset::run_with_fault(
                    &s,
                    &sched.backend::<MemsetTasks>()?,
                    *tasks,
                    *corrupt_tag_of,
                )?,
                s,
            )
        }
        WorkloadCmd::Contains { args, sched } => {
            let corpus = args.load()?;
            let s = sched.scheduler::<ContainsTasks>()?;
            (
                crate::workload::contains::run(
                    &s,
                    &sched.backend::<ContainsTasks>()?,
                    &corpus,
                    args.word.as_bytes(),
                )?,
                s,
            )
        }
        WorkloadCmd::Uts { args, sched } => {
            let cfg = args.config()?;
            let mut sched = sched.clone();
            sched.spill_capacity = sched.spill_capacity.or(cfg.spill_hint());
            let sched = &sched;
            let s = sched.scheduler::<UtsTasks>()?;
            (
                crate::workload::uts::run(&s, &sched.backend::<UtsTasks>()?, &cfg)?,
                s,
            )
        }
        WorkloadCmd::Fib { args, sched } => {
            let s = sched.scheduler::<FibTasks>()?;
            (
                crate::workload::fib::run(&s, &sched.backend::<FibTasks>()?, args.n)?,
                s,
            )
        }
        WorkloadCmd::Skew {
            tasks,
            k,
            bits,
            cost_seed,
            sched,
        } => {
            let cfg = crate::workload::skew::SkewConfig {
                tasks: *tasks,
                k: *k,
                bits: *bits,
                seed: *cost_seed,
            };
            cfg.check()?;
            let s = sched.scheduler::<SkewTasks>()?;
            (
                crate::workload::skew::run(&s, &sched.backend::<SkewTasks>()?, &cfg)?,
                s,
            )
        }
        WorkloadCmd::Stall {
            tasks,
            nanos,
            sched,
        } => {
            let s = sched.scheduler::<StallTasks>()?;
            (
                crate::workload::stall::run(&s, &sched.backend::<StallTasks>()?, *tasks, *nanos)?,
                s,
            )
        }
    };
    Ok((outcome, sched))
}
