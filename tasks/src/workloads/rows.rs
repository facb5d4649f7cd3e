//! Per-worker result rows: a workload's counters without contention.
//!
//! A result table holds one row of [`ROW_WORDS`] `u64`s (64 bytes, one cache line) per worker.
//! Only lane 0 of worker `w` ever writes row `w` during a run, through [`ResultRow`]; the
//! host adds the rows up afterwards. Rows are 64-byte apart so that workers never share a line.

use mgws_core::TaskError;

use crate::data::DataDescriptor;
use crate::Ctx;

/// `u64` words per result row.
pub const ROW_WORDS: usize = 8;
/// Bytes per result row.
pub const ROW_BYTES: usize = ROW_WORDS * 8;

/// Error code of a task whose worker has no row in the result table.
pub const NO_RESULT_ROW: u32 = 0x5257_0001;

/// The row of one worker in a result table, from [`row`]: the only way to update a row.
#[derive(Clone, Copy, Debug)]
pub struct ResultRow(*mut u64);

/// The result row of the running worker in the table `table` describes.
///
/// Every lane may call it (the check is uniform); only lane 0 updates the row ([`ResultRow::add`]).
/// The address is computed before the check, without a branch, so that the loads it needs (the
/// area's base, the worker's id) issue together with a task's other loads.
#[inline(always)]
pub fn row(ctx: &impl Ctx, table: DataDescriptor) -> Result<ResultRow, TaskError> {
    try_row(ctx, table).ok_or(TaskError::Failed(NO_RESULT_ROW))
}

/// [`row`] without the error value: `None` where the table has no row for this worker. A task
/// that checks several descriptors tests them together and builds its error off the hot path.
#[inline(always)]
pub fn try_row(ctx: &impl Ctx, table: DataDescriptor) -> Option<ResultRow> {
    let w = ctx.worker_id() as u64;
    let base = table.resolve(ctx.area(table.area as usize)) as *mut u64;
    let row = base.wrapping_add(w as usize * ROW_WORDS);
    let fits = (w + 1) * ROW_BYTES as u64 <= table.size as u64 && table.offset & 7 == 0;
    fits.then_some(ResultRow(row))
}

impl ResultRow {
    /// Adds `value` to column `col` (modulo [`ROW_WORDS`]) on lane 0; the other lanes do
    /// nothing.
    ///
    /// The worker does not wait for the update (`Context::single_writer_add`: on a GPU a
    /// reduction that returns nothing, where a load, an add and a store waited for the row's
    /// round trip to L2 on every task).
    #[inline(always)]
    pub fn add(self, ctx: &impl Ctx, col: usize, value: u64) {
        if ctx.lane_id() == 0 {
            // SAFETY: the row is this worker's row of a result table (`row` checked that it lies
            // in the descriptor, which lies in a data area), only lane 0 of this worker writes
            // it during the run, and the host reads it after; `col % ROW_WORDS` is one of its
            // words.
            unsafe { ctx.single_writer_add(self.0.add(col % ROW_WORDS), value) }
        }
    }

    /// Raises column `col` (modulo [`ROW_WORDS`]) to at least `value` on lane 0, as
    /// [`ResultRow::add`].
    #[inline(always)]
    pub fn max(self, ctx: &impl Ctx, col: usize, value: u64) {
        if ctx.lane_id() == 0 {
            // SAFETY: as in `add`.
            unsafe { ctx.single_writer_max(self.0.add(col % ROW_WORDS), value) }
        }
    }
}

/// A result table named without a descriptor, packed into one `u64` for tasks whose two
/// descriptors are taken: data area (8 bits), rows (24 bits), byte offset (32 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
pub struct PackedTable(pub u64);

impl PackedTable {
    /// Packs `rows` rows at `offset` in `area`; `None` if a field does not fit.
    pub const fn new(area: u8, offset: u64, rows: u32) -> Option<PackedTable> {
        if rows >= 1 << 24 || offset > u32::MAX as u64 {
            return None;
        }
        Some(PackedTable(
            (area as u64) << 56 | (rows as u64) << 32 | offset,
        ))
    }

    /// The equivalent descriptor.
    pub const fn descriptor(self) -> DataDescriptor {
        let rows = (self.0 >> 32) & 0xff_ffff;
        DataDescriptor::new(
            (self.0 >> 56) as u8,
            self.0 & 0xffff_ffff,
            (rows * ROW_BYTES as u64) as u32,
            crate::data::Access::ReadWrite,
        )
    }
}

/// Sums column `col` over result rows.
pub fn column_sum(rows: &[u64], col: usize) -> u64 {
    rows.chunks_exact(ROW_WORDS).map(|r| r[col]).sum()
}

/// The maximum of column `col` over result rows.
pub fn column_max(rows: &[u64], col: usize) -> u64 {
    rows.chunks_exact(ROW_WORDS)
        .map(|r| r[col])
        .max()
        .unwrap_or(0)
}
