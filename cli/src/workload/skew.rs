//! SKEW: `tasks` independent tasks whose costs are skewed by `k` ANDs of `bits`-bit hashes
//! (`mgws_tasks::workloads::skew`). Verified slot by slot against a sequential computation.

use rayon::prelude::*;

use mgws_tasks::workloads::skew::{output_descriptor, SkewTask, MAX_BITS, MAX_K};
use mgws_tasks::{SkewTasks, TaskStruct};

use super::Outcome;
use mgws::backend::Backend;
use mgws::error::{Error, Result};
use mgws::job::{u64_bytes_mut, AreaBytes, Job};
use mgws::report::RunReport;
use mgws::scheduler::Scheduler;

/// The most SKEW tasks one run may have (the output descriptor's size is a u32 of bytes).
pub const MAX_TASKS: u64 = (u32::MAX / 8) as u64;

/// The parameters of a SKEW run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SkewConfig {
    pub tasks: u64,
    pub k: u32,
    pub bits: u32,
    pub seed: u64,
}

impl SkewConfig {
    /// Checks the parameters, naming the flag that is out of range.
    pub fn check(&self) -> Result<()> {
        if self.tasks == 0 || self.tasks > MAX_TASKS {
            return Err(Error::Input(format!(
                "--tasks must be between 1 and {MAX_TASKS}, not {}",
                self.tasks
            )));
        }
        if self.k > MAX_K {
            return Err(Error::Input(format!(
                "--k must be at most {MAX_K}, not {}",
                self.k
            )));
        }
        if self.bits == 0 || self.bits > MAX_BITS {
            return Err(Error::Input(format!(
                "--bits must be between 1 and {MAX_BITS}, not {}",
                self.bits
            )));
        }
        Ok(())
    }

    fn task(&self, index: u64) -> SkewTask {
        SkewTask {
            index,
            seed: self.seed,
            k: self.k,
            bits: self.bits,
        }
    }

    /// Initial task 0, writing to data area 0: task `i` is its [`TaskStruct::indexed`]`(i)`, the
    /// index being the task's first parameter word.
    pub fn template(&self) -> TaskStruct {
        SkewTasks::task(&self.task(0)).with_data(0, output_descriptor(0, self.tasks))
    }

    /// Total units of work of the run.
    pub fn total_cost(&self) -> u64 {
        (0..self.tasks)
            .into_par_iter()
            .map(|i| self.task(i).cost())
            .sum()
    }
}

/// One run: the slots and the report.
pub fn run_once(
    sched: &Scheduler,
    backend: &Backend,
    cfg: &SkewConfig,
) -> Result<(Vec<u64>, RunReport)> {
    cfg.check()?;
    let n = cfg.tasks;
    super::check_host_for_slots(format_args!("--tasks {n}"), n, backend, false)?;
    let mut slots = mgws::memory::try_filled(format_args!("--tasks {n}"), n, 0u64)?;
    let report = backend.run(
        sched,
        &SkewTasks,
        Job::indexed(cfg.template(), n).area(0, AreaBytes::ReadWrite(u64_bytes_mut(&mut slots))),
    )?;
    Ok((slots, report))
}

/// The slots that differ from a sequential computation (computed in parallel on the host).
pub fn wrong_slots(cfg: &SkewConfig, slots: &[u64]) -> u64 {
    slots
        .par_iter()
        .enumerate()
        .filter(|(i, &v)| v != cfg.task(*i as u64).expected_slot())
        .count() as u64
}

/// Runs SKEW on `backend` and verifies every slot.
pub fn run(sched: &Scheduler, backend: &Backend, cfg: &SkewConfig) -> Result<Outcome> {
    let (slots, report) = run_once(sched, backend, cfg)?;
    let wrong = wrong_slots(cfg, &slots);
    let units = cfg.total_cost();
    Ok(Outcome {
        workload: "skew".into(),
        result: serde_json::json!({
            "tasks": cfg.tasks, "k": cfg.k, "bits": cfg.bits, "units": units, "wrong": wrong,
        }),
        verified: wrong == 0 && report.tasks_run == cfg.tasks,
        check: format!(
            "{} slots, {units} units of work (k = {}, {} bits): {wrong} differ from a sequential \
             computation; {} tasks ran",
            cfg.tasks, cfg.k, cfg.bits, report.tasks_run
        ),
        report,
    })
}
