//! The **levels** baseline's host loop, written once for every device: the frontier of a
//! spawning workload lives in one of two buffers; each level runs every frontier task once,
//! split evenly over the workers (worker `w` of `W` runs tasks `w, w + W, ...` with
//! `mgws_core::LevelWorker`), and appends the tasks they spawn to the other buffer; then the
//! buffers swap. The loop ends at the first empty frontier.
//!
//! What differs per device is one [`LevelDevice`] step: CPU threads (`cpu::level_device`, one
//! broadcast of the thread set per level) or one launch of the `mgws_<kernel>_level` kernel
//! (`cuda::level`). The job's validation, the supervisor (watchdog, hang report, faults, the
//! grace after an abort) and the [`RunReport`] are the pipeline's ([`crate::pipeline`]).
//!
//! A level that spawns more tasks than a frontier buffer holds ends the run with an error that
//! names the level and the flag to raise (`--level-capacity`); no task is dropped silently.

use std::time::Instant;

use mgws_core::RunError;

use crate::device::{Grid, Running, Supervised};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::report::{RunReport, SetupTimes, WorkerReport};
use crate::scheduler::Scheduler;

/// What a device placed for a level run.
#[derive(Clone, Copy, Debug)]
pub struct LevelPlan {
    /// The workers of every level (a level of fewer tasks leaves some idle), their lanes and
    /// configuration.
    pub grid: Grid,
    /// Tasks one frontier buffer holds.
    pub capacity: u64,
}

/// The counters of one level, read after every worker of it exited.
#[derive(Clone, Copy, Debug, Default)]
pub struct LevelCounters {
    /// Tasks spawned (also those that did not fit the next frontier buffer).
    pub spawned: u64,
    /// Tasks run.
    pub tasks_run: u64,
    /// The level's first task error.
    pub error: Option<RunError>,
}

/// One device's level step: what the level loop ([`run`]) asks of a CPU or a GPU.
pub trait LevelDevice {
    /// The name runs of this baseline report as their backend.
    fn name(&self) -> &'static str;

    /// Sizes the grid, allocates the two frontier buffers (of at least the job's task count)
    /// and the level counters, copies the initial tasks into frontier buffer 0 and the data
    /// areas where the workers read them.
    fn place(&mut self, sched: &Scheduler, job: &mut Job<'_>) -> Result<LevelPlan>;

    /// Runs level `level`: the `len` tasks of frontier buffer `level % 2`, spawning into the
    /// other buffer, with zeroed counters; runs `supervise` on the calling thread while the
    /// level runs. `Err` only when nothing was started.
    fn launch_level<T>(
        &mut self,
        level: u32,
        len: u64,
        supervise: impl FnOnce(&dyn Running) -> T,
    ) -> Result<T>;

    /// The counters of the level that just finished.
    fn counters(&mut self) -> Result<LevelCounters>;

    /// After the last level: copies the read-write data areas into `job`; returns what the
    /// device measured per worker (tasks run, time waited for the level's other workers), or
    /// nothing.
    fn read_back(&mut self, job: &mut Job<'_>) -> Result<Vec<WorkerReport>>;

    /// Gives the run's memory up without freeing it: a worker may still run.
    fn leak(&mut self);
}

/// Runs `job` level by level on `device` with the scheduler's settings; `opened` is when the
/// caller began opening the device (the report's `setup_s` counts from it).
pub fn run<D: LevelDevice>(
    device: &mut D,
    sched: &Scheduler,
    mut job: Job<'_>,
    opened: Instant,
) -> Result<RunReport> {
    job.validate()?;
    let placing = Instant::now();
    let plan = device.place(sched, &mut job)?;
    let name = device.name();
    let span = tracing::info_span!(
        "mgws.levels",
        backend = name,
        workers = plan.grid.config.workers,
        lanes = plan.grid.lanes,
        tasks = job.initial.len()
    );
    let _enter = span.enter();
    let capacity = plan.capacity;
    let mut frontier = job.initial.len();
    let mut tasks_run = 0u64;
    let mut level = 0u32;
    let start = Instant::now();
    let setup = SetupTimes {
        open_s: placing.duration_since(opened).as_secs_f64(),
        memory_s: start.duration_since(placing).as_secs_f64(),
        ..SetupTimes::default()
    };
    while frontier > 0 {
        // The supervisor watches each level: a level that stops making progress is a hang.
        let supervised = device.launch_level(level, frontier, |live| {
            crate::pipeline::supervise(live, sched, &plan.grid)
        })?;
        match supervised {
            Supervised::Done => {}
            Supervised::Failed(e) => return Err(e),
            Supervised::Leak(e) => {
                device.leak();
                return Err(e);
            }
        }
        let c = device.counters()?;
        if let Some(e) = c.error {
            return Err(e.into());
        }
        if c.tasks_run != frontier {
            return Err(Error::Config(format!(
                "level {level} of the {name} baseline ran {} of its {frontier} tasks",
                c.tasks_run
            )));
        }
        if c.spawned > capacity {
            return Err(Error::Config(format!(
                "level {} of the {name} baseline spawned {} tasks, more than a frontier buffer \
                 holds ({capacity}); pass a larger --level-capacity",
                level + 1,
                c.spawned
            )));
        }
        tasks_run += frontier;
        frontier = c.spawned;
        level += 1;
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    let finishing = Instant::now();
    let per_worker = device.read_back(&mut job)?;
    tracing::info!(levels = level, tasks_run, elapsed_s, "level run finished");
    Ok(RunReport {
        backend: name.into(),
        workers: plan.grid.config.workers,
        lanes: plan.grid.lanes,
        setup_s: setup.total(),
        setup,
        elapsed_s,
        finish_s: finishing.elapsed().as_secs_f64(),
        wall_s: opened.elapsed().as_secs_f64(),
        tasks_run,
        per_worker,
        cpu_workers_left_out: None,
    })
}
