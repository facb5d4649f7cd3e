//! Host-side drivers of the built-in workloads: build the initial tasks and data, run them on a
//! backend, and verify the result on every run.

pub mod args;
pub mod contains;
pub mod fib;
pub mod memset;
pub mod skew;
pub mod stall;
pub mod uts;

use serde::Serialize;

use mgws::report::RunReport;

/// A verified run of a workload.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub workload: String,
    pub report: RunReport,
    /// The workload's result, as JSON (e.g. `{"nodes": .., "leaves": .., "depth": ..}`).
    pub result: serde_json::Value,
    /// True when the result matched the workload's independent check.
    pub verified: bool,
    /// What the check compared, for humans.
    pub check: String,
}

pub use mgws::rows::ResultRows;

/// Checks, before either is built, that the host has room for a run of `n` indexed tasks with one
/// `u64` slot each (`flag` names the setting): the slots, and the tasks where the host lists them
/// (`listed`, or where the backend lists indexed tasks on the host).
pub fn check_host_for_slots(
    flag: std::fmt::Arguments<'_>,
    n: u64,
    backend: &mgws::Backend,
    listed: bool,
) -> mgws::Result<()> {
    use mgws::memory::{bytes_of, check_host};
    let on_host = listed || backend.lists_indexed_tasks_on_host();
    let tasks = if on_host { n } else { 0 };
    let bytes = bytes_of::<mgws::TaskStruct>(tasks).saturating_add(bytes_of::<u64>(n));
    check_host(flag, bytes)
}

/// Result rows to allocate for a run of `sched` on `backend`: one per worker. The CPU backend
/// runs exactly `sched.workers()` workers; a GPU backend may size its grid by occupancy, so other
/// backends get rows for up to [`MAX_DEVICE_WORKERS`] workers (1 MiB) until backends report their
/// worker count before a run. A worker without a row fails its tasks with a clear error code
/// (`NO_RESULT_ROW`), never writes out of bounds.
pub fn result_rows(sched: &mgws::Scheduler, backend: &mgws::Backend) -> u32 {
    use mgws::{Device, ProcessLayout};
    let device_rows = sched.workers().max(MAX_DEVICE_WORKERS);
    match (&backend.device, &backend.layout) {
        (Device::Cpu, ProcessLayout::OneProcess) => sched.workers(),
        // CPU workers beside the GPUs come after every GPU worker.
        (Device::Cuda(cuda), ProcessLayout::OneProcess) => device_rows + cuda.cpu_workers,
        _ => device_rows,
    }
}

/// See [`result_rows`].
pub const MAX_DEVICE_WORKERS: u32 = 1 << 14;
