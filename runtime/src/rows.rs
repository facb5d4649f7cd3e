//! Per-worker result rows: a table with one cache-line-aligned row per worker, for tasks that
//! accumulate results without contending with other workers.

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
