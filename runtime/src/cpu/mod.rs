//! The CPU backend: each worker is `lanes` threads running the scheduler core's worker loop, the
//! same code the GPU kernels run. The baselines run the core's baseline loops on the same
//! threads: **static** through the pipeline ([`CpuMethod::Static`]), **levels** through the
//! level loop ([`level_device::CpuLevels`]).

pub(crate) mod arena;
mod barrier;
pub(crate) mod device;
pub mod level_device;
pub(crate) mod panics;
pub(crate) mod platform;
pub mod threads;

use mgws_core::TaskExecutor;
use mgws_tasks::TaskStruct;

#[cfg(feature = "cuda")]
pub(crate) use device::check_bridged;
pub use device::{BridgeLink, CpuDevice, CpuMethod, CpuPlaced};
pub use platform::CpuPlatform;

use crate::error::Result;
use crate::job::Job;
use crate::report::RunReport;
use crate::scheduler::Scheduler;

/// The CPU backend's settings for those left open: one lane per worker, the scheduler's default
/// local capacity (the thesis's 32), one worker per CPU and unshared public queues.
pub fn defaults(
    lanes: Option<u32>,
    local_capacity: Option<u32>,
    workers: Option<u32>,
    queue_sharing: Option<u32>,
) -> crate::device::Defaults {
    crate::device::Defaults {
        lanes: lanes.unwrap_or(1),
        local_capacity: local_capacity.unwrap_or(mgws_core::SchedConfig::new(1).local_capacity),
        workers: workers.unwrap_or_else(crate::scheduler::default_workers),
        queue_sharing: queue_sharing.unwrap_or(1),
        public_capacity: None,
    }
}

/// Runs `job` on CPU threads with the task registry `registry` (the pipeline with a
/// [`CpuDevice`]).
pub fn run<R: TaskExecutor<TaskStruct> + Sync>(
    sched: &Scheduler,
    registry: &R,
    job: Job<'_>,
) -> Result<RunReport> {
    crate::pipeline::run(
        &mut CpuDevice::new(sched, registry),
        sched,
        job,
        std::time::Instant::now(),
    )
}

/// Runs `job` with the static-assignment baseline on CPU threads (the pipeline with a
/// [`CpuDevice`] running [`CpuMethod::Static`]).
pub fn run_static<R: TaskExecutor<TaskStruct> + Sync>(
    sched: &Scheduler,
    registry: &R,
    job: Job<'_>,
) -> Result<RunReport> {
    let mut device = CpuDevice::with_method(sched, registry, CpuMethod::Static);
    crate::pipeline::run(&mut device, sched, job, std::time::Instant::now())
}

/// Runs `job` with the level-by-level baseline on CPU threads (the level loop with
/// [`level_device::CpuLevels`]); `level_capacity`: tasks per frontier buffer.
pub fn run_levels<R: TaskExecutor<TaskStruct> + Sync>(
    sched: &Scheduler,
    registry: &R,
    job: Job<'_>,
    level_capacity: Option<u64>,
) -> Result<RunReport> {
    let mut device = level_device::CpuLevels::new(sched, registry, level_capacity);
    crate::levels::run(&mut device, sched, job, std::time::Instant::now())
}
