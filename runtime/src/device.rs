//! The host side of a device: what differs between CPU threads and GPUs when a run is set up,
//! launched, supervised and read back. The scheduler core's [`mgws_core::Platform`] says how a
//! *worker* runs on a device; [`Device`] says how the *host* drives one. Everything else of a run
//! (validation, the configuration and topology, the watchdog, the hang report, errors and the
//! [`RunReport`](crate::RunReport)) is written once, in [`crate::pipeline`].
//!
//! A new device kind (HIP, several processes) implements [`Device`] and [`Running`]; see
//! `docs/design.md`, section 1.7.

use std::time::Duration;

use mgws_core::{
    OverflowMode, RunError, SchedConfig, TerminationMode, Topology, WorkerProgress, WorkerStats,
};

use crate::error::{Error, Result};
use crate::job::Job;
use crate::scheduler::Scheduler;

/// The grid of a run as the device sized it.
#[derive(Clone, Copy, Debug)]
pub struct Grid {
    /// The scheduler's configuration with what the device decides filled in: the worker count
    /// it runs and the scope of the orchestration atomics ([`SchedConfig::queue_scope`]).
    pub config: SchedConfig,
    /// Workers and public queues per device.
    pub topology: Topology,
    /// Lanes per worker.
    pub lanes: u32,
}

/// What a run left behind, read after every worker exited.
#[derive(Clone, Debug, Default)]
pub struct ReadBack {
    /// Wall time of the scheduling phase (from the launch to the last worker's exit, as the
    /// device measures it: a clock on the CPU, events on a GPU).
    pub elapsed_s: f64,
    /// The first error a worker recorded (`SharedState::error`).
    pub error: Option<RunError>,
    /// `SharedState::exited_workers`, where the kernel maintains it (the pipeline checks that
    /// every worker left its loop); `None` where it does not.
    pub exited_workers: Option<u64>,
    /// Per-worker statistics, when the run collected them.
    pub stats: Option<Vec<WorkerStats>>,
    /// Every worker's last progress record.
    pub progress: Vec<WorkerProgress>,
    /// Tasks run, where the device knows better than the statistics (a baseline kernel that
    /// keeps none); `None`: the sum of the statistics, else of the progress records.
    pub tasks_run: Option<u64>,
    /// Per worker, nanoseconds it waited for the others (a baseline that measures it: the
    /// static workers from the end of their share to the end of the run); `None`: not measured.
    pub idle_ns: Option<Vec<u64>>,
    /// Wall time the host spent launching, after the pipeline took `setup_s` and before any
    /// worker ran (a GPU's launch calls behind the launch gate, `cuda/gate.rs`). The report
    /// counts it as set-up. 0 where workers start as they are launched.
    pub launch_s: f64,
}

/// The run-wide counters a hang report shows, read while the workers may still run.
#[derive(Clone, Debug, Default)]
pub struct LiveState {
    /// `SharedState::idle_workers`.
    pub idle_counter: u64,
    /// `SharedState::initial_ranges_done`.
    pub initial_ranges_done: u64,
    /// Home ranges that hold initial tasks.
    pub initial_ranges: u64,
    /// Each worker's public queue word (`u64::MAX` where it could not be read).
    pub queue_words: Vec<u64>,
    /// Each worker's `Env::task_tags` word (tag + 1 of the task it runs, 0: none); empty where
    /// the device keeps none.
    pub task_tags: Vec<u64>,
}

impl LiveState {
    /// Appends the workers of `other` (a later side or device of the same run) to these.
    pub fn absorb(&mut self, other: LiveState) {
        self.task_tags.extend(other.task_tags);
        self.queue_words.extend(other.queue_words);
        self.idle_counter += other.idle_counter;
        self.initial_ranges_done += other.initial_ranges_done;
        self.initial_ranges += other.initial_ranges;
    }
}

/// A launched run, as its supervisor (the pipeline) sees it. Every method may be called while
/// the workers run and after they exited.
pub trait Running {
    /// Waits at most `timeout` for every worker to exit: `Ok(true)` once all have. `Err` when
    /// the device failed (a kernel fault, a failed launch of a later GPU); the pipeline then
    /// aborts the run and waits for the workers that still run.
    fn wait(&self, timeout: Duration) -> Result<bool>;
    /// Every worker's progress record (written by the workers with volatile stores; a torn or
    /// stale record only delays the watchdog by one poll).
    fn progress(&self) -> Vec<WorkerProgress>;
    /// The counters and queue words a hang report shows.
    fn live_state(&self) -> LiveState;
    /// Asks every worker to stop (`SharedState::abort = 1`); best effort, never blocks long.
    fn abort(&self);
    /// How long to wait for the workers after [`Running::abort`] before giving them up (and
    /// leaking the run's memory); `None`: wait for them, they cannot be abandoned (CPU threads
    /// borrow the job).
    fn exit_grace(&self, watchdog: Duration) -> Option<Duration>;
    /// True once some worker raised its abort flag (a failed task, a full overflow stack):
    /// a run of several sides that share no abort word (a bridged run) uses it to stop the
    /// others.
    fn aborted(&self) -> bool {
        false
    }
    /// Ends the workers that did not exit within [`Running::exit_grace`] of the abort, where
    /// the device can (a multi-process run kills its PE processes); true when none is left
    /// running, so the run's memory may be freed. By default it cannot.
    fn give_up(&self) -> bool {
        false
    }
}

/// The host side of one device kind: sizes the grid, places the orchestration memory, launches
/// the workers and reads the results back. The steps are called in this order, once each, by
/// [`crate::pipeline::run`].
pub trait Device {
    /// The memory of one run (orchestration data, initial tasks, data areas, the env).
    type Placed;

    /// The name runs on this device report as their backend.
    fn name(&self) -> &'static str;

    /// Seconds that opening this device spent loading kernel modules (JIT compiles included;
    /// 0 where it loaded none, or found them loaded): [`crate::SetupTimes::module_s`].
    fn module_load_s(&self) -> f64 {
        0.0
    }

    /// Sizes the grid for `sched`: the workers the device runs (it may refuse more than fit at
    /// once), their topology, lanes, and the scope of the orchestration atomics.
    fn size_grid(&mut self, sched: &Scheduler) -> Result<Grid>;

    /// Allocates and places the orchestration memory (zeroed: the initial state), copies the
    /// initial tasks and the data areas of `job` where the workers read them, and writes the env
    /// every worker receives.
    fn place(&mut self, grid: &Grid, job: &mut Job<'_>) -> Result<Self::Placed>;

    /// Launches every worker and runs `supervise` on the calling thread while they run; returns
    /// its value. `Err` only when nothing was launched. A device that launches in parts reports
    /// a later part's failure through [`Running::wait`].
    fn launch<T>(
        &mut self,
        grid: &Grid,
        placed: &Self::Placed,
        supervise: impl FnOnce(&dyn Running) -> T,
    ) -> Result<T>;

    /// Reads the results back after every worker exited: the shared state, the statistics and
    /// progress records, and the read-write data areas into `job`.
    fn read_back(
        &mut self,
        grid: &Grid,
        placed: &Self::Placed,
        job: &mut Job<'_>,
    ) -> Result<ReadBack>;
}

/// How a supervised run ended.
pub enum Supervised {
    /// Every worker exited; read the results back.
    Done,
    /// The run failed and every worker exited (or none started).
    Failed(Error),
    /// The run failed and a worker may still run: its memory must not be freed.
    Leak(Error),
}

/// Splits `total` workers over `devices` devices (GPUs, or CPU domains) as evenly as whole queues
/// allow: each device's share is a multiple of `workers_per_queue`, and the first devices get one
/// queue more when it does not divide evenly.
pub fn split_workers(total: u32, devices: usize, workers_per_queue: u32) -> Result<Vec<u32>> {
    let units = total / workers_per_queue;
    if !total.is_multiple_of(workers_per_queue) || (units as usize) < devices {
        return Err(Error::Config(format!(
            "{total} workers cannot be split over {devices} device(s) in whole queues of \
             {workers_per_queue}: every device needs at least one queue's workers"
        )));
    }
    let n = devices as u32;
    Ok((0..n)
        .map(|d| (units / n + u32::from(d < units % n)) * workers_per_queue)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_split_evenly_in_whole_queues() {
        assert_eq!(split_workers(8448, 2, 1).unwrap(), vec![4224, 4224]);
        assert_eq!(split_workers(12, 2, 2).unwrap(), vec![6, 6]);
        assert_eq!(split_workers(16, 3, 2).unwrap(), vec![6, 6, 4]);
        assert_eq!(split_workers(7, 1, 1).unwrap(), vec![7]);
        assert!(split_workers(6, 2, 4).is_err());
        assert!(split_workers(4, 2, 4).is_err());
    }
}

/// What a backend runs when the caller leaves a setting open: the device reports its own
/// defaults, which [`crate::SchedulerBuilder::build_for`] fills in, so a front end never
/// hard-codes per-backend values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Defaults {
    /// Lanes per worker (CPU: threads per worker; GPU: threads per block).
    pub lanes: u32,
    /// Local-queue capacity in tasks.
    pub local_capacity: u32,
    /// Workers in total (CPU: one per CPU; GPU: as many as are co-resident).
    pub workers: u32,
    /// Workers per public queue (CPU: 1; GPU: [`crate::cuda::CudaBackend::default_queue_sharing`]).
    pub queue_sharing: u32,
    /// Public-queue capacity where the backend takes the registry's (GPU:
    /// [`mgws_tasks::Registry::PUBLIC_CAPACITY`]); `None` keeps the scheduler's (the CPU's, as
    /// it keeps its local queue: a registry's capacities are tuned for its GPU workers).
    pub public_capacity: Option<u32>,
}

/// The scheduler options that pick a kernel entry (and with it the kernel's registers, hence how
/// many workers fit): [`crate::SchedulerBuilder::build_for`] sizes the default worker count for
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelOptions {
    /// Workers per public queue (1, 2 or 4); `None`: the backend's default
    /// (a GPU's: `cuda::CudaBackend::default_queue_sharing`).
    pub workers_per_queue: Option<u32>,
    /// The termination detector.
    pub termination: TerminationMode,
    /// The steal-counter overflow prevention.
    pub overflow: OverflowMode,
}

impl Default for KernelOptions {
    /// The backend's queue sharing, the scheduler's idle counter and steal damping.
    fn default() -> Self {
        let cfg = SchedConfig::new(1);
        KernelOptions {
            workers_per_queue: None,
            termination: cfg.termination_mode(),
            overflow: cfg.overflow_mode(),
        }
    }
}

impl KernelOptions {
    /// A configuration with these options, `workers_per_queue` workers per public queue (and
    /// defaults elsewhere), for picking the entry.
    #[cfg(feature = "cuda")]
    pub(crate) fn config(self, workers_per_queue: u32) -> SchedConfig {
        let mut cfg = SchedConfig::new(workers_per_queue);
        cfg.workers_per_queue = workers_per_queue;
        cfg.termination = self.termination as u32;
        cfg.overflow = self.overflow as u32;
        cfg
    }
}
