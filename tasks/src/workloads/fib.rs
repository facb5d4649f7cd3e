//! FIB: naive recursive Fibonacci as a task tree. Task `fib(n)` with `n >= 2` spawns `fib(n-1)`
//! and `fib(n-2)`; a leaf (`n < 2`) adds `n` to its worker's sum. The sum over all leaves is
//! `fib(n)`, and the tree has `2 * fib(n+1) - 1` nodes, both known in closed form.
//!
//! Tasks are tiny, so FIB measures the scheduler's per-task cost under spawning, where MEMSET
//! measures it for a flat task set.

use mgws_core::TaskError;

use crate::data::{Access, DataDescriptor};
use crate::task::{TaskFunctor, TaskStruct};
use crate::workloads::rows;
use crate::Ctx;

/// Result-row columns.
pub const COL_SUM: usize = 0;
pub const COL_NODES: usize = 1;

/// The largest `n` a run accepts: fib(93) is the largest Fibonacci number in a u64, and trees
/// much beyond n = 50 would take days anyway.
pub const MAX_N: u64 = 93;

/// One node of the call tree.
#[mgws_tasks::task]
#[derive(Debug, PartialEq, Eq)]
pub struct FibTask {
    pub n: u64,
}

impl FibTask {
    /// How many children node `n` has: 2, or none for a leaf.
    #[inline]
    pub fn child_count(self) -> u32 {
        if self.n >= 2 {
            2
        } else {
            0
        }
    }
    /// Child `k` (0 or 1) of an inner node: `fib(n - 1)`, then `fib(n - 2)`.
    #[inline]
    pub fn child(self, k: u32) -> FibTask {
        FibTask {
            n: self.n - 1 - u64::from(k),
        }
    }
    /// The children of node `n` (none for a leaf).
    #[inline]
    pub fn children(self) -> Option<[FibTask; 2]> {
        (self.child_count() == 2).then(|| [self.child(0), self.child(1)])
    }
    /// What a leaf contributes to the sum.
    #[inline]
    pub fn leaf_value(self) -> u64 {
        if self.n >= 2 {
            0
        } else {
            self.n
        }
    }
}

impl TaskFunctor for FibTask {
    #[inline(always)]
    fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        let row = rows::row(ctx, task.data[0])?;
        row.add(ctx, COL_SUM, self.leaf_value());
        row.add(ctx, COL_NODES, 1);
        // Both children with one reservation (a narrow task's spawns cost one each).
        ctx.spawn_many(self.child_count(), |k| task.with_params(&self.child(k)));
        Ok(())
    }
}

/// The result-table descriptor of a FIB run with `workers` workers, at offset 0 of `area`.
pub fn rows_descriptor(area: u8, workers: u32) -> DataDescriptor {
    DataDescriptor::new(area, 0, workers * rows::ROW_BYTES as u32, Access::ReadWrite)
}

/// fib(n), computed iteratively (n <= [`MAX_N`]).
pub fn fib(n: u64) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        let c = a.wrapping_add(b);
        a = b;
        b = c;
    }
    a
}

/// Nodes of the call tree of fib(n): `2 * fib(n + 1) - 1`.
pub fn tree_nodes(n: u64) -> u64 {
    2 * fib(n + 1) - 1
}
