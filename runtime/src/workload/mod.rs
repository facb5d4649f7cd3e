//! Host-side drivers of the built-in workloads: build the initial tasks and data, run them on a
//! backend, and verify the result on every run.

pub mod args;
pub mod contains;
pub mod fib;
pub mod memset;
pub mod stall;
pub mod uts;

use serde::Serialize;

use crate::report::RunReport;

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

/// A per-worker result table (see `mgws_tasks::workloads::rows`) whose rows start on 64-byte
/// boundaries, so that no two workers' rows share a cache line (a `Vec<u64>` is only 8-byte
/// aligned, and false sharing of the counters that every task updates costs more than the tasks).
pub struct ResultRows {
    rows: Vec<AlignedRow>,
}

#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct AlignedRow([u64; mgws_tasks::workloads::rows::ROW_WORDS]);

const _: () = assert!(std::mem::size_of::<AlignedRow>() == mgws_tasks::workloads::rows::ROW_BYTES);

impl ResultRows {
    /// A zeroed table of `workers` rows.
    pub fn new(workers: u32) -> Self {
        ResultRows {
            rows: vec![AlignedRow::default(); workers as usize],
        }
    }
    /// The table's bytes, for a read-write data area.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: AlignedRow is plain u64s without padding (size checked above).
        unsafe {
            std::slice::from_raw_parts_mut(
                self.rows.as_mut_ptr() as *mut u8,
                std::mem::size_of_val(self.rows.as_slice()),
            )
        }
    }
    /// The table's words, row after row.
    pub fn words(&self) -> &[u64] {
        // SAFETY: as above.
        unsafe {
            std::slice::from_raw_parts(
                self.rows.as_ptr() as *const u64,
                self.rows.len() * mgws_tasks::workloads::rows::ROW_WORDS,
            )
        }
    }
}

/// Result rows to allocate for a run of `sched` on `backend`: one per worker. The CPU backend
/// runs exactly `sched.workers()` workers; a GPU backend may size its grid by occupancy, so other
/// backends get rows for up to [`MAX_DEVICE_WORKERS`] workers (1 MiB) until backends report their
/// worker count before a run. A worker without a row fails its tasks with a clear error code
/// (`NO_RESULT_ROW`), never writes out of bounds.
pub fn result_rows(sched: &crate::Scheduler, backend: &crate::Backend) -> u32 {
    if matches!(
        backend,
        crate::Backend::Cpu | crate::Backend::CpuStatic { .. }
    ) {
        sched.workers()
    } else {
        sched.workers().max(MAX_DEVICE_WORKERS)
    }
}

/// See [`result_rows`].
pub const MAX_DEVICE_WORKERS: u32 = 1 << 14;
