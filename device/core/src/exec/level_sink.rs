//! Where a kernel-per-level run puts the tasks a level spawns, and its counters: what a
//! [`WorkerCore`](super::WorkerCore) of that baseline moves its local tasks to
//! ([`OnFull::Frontier`](super::OnFull)).

use crate::platform::AtomicWord;

/// Where a level run puts spawned tasks, and its counters.
pub struct LevelSink<W, T> {
    /// The next frontier.
    pub out: *mut T,
    /// Tasks `out` holds; children beyond it are counted but dropped (the host reports that).
    pub out_capacity: u64,
    /// `[spawned, first error (RunError::pack), tasks run, abort]`, zeroed before each level.
    pub counters: *const W,
}

impl<W, T> Clone for LevelSink<W, T> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<W, T> Copy for LevelSink<W, T> {}

impl<W: AtomicWord, T> LevelSink<W, T> {
    /// Counter: tasks spawned in this level (also those that did not fit `out`).
    pub const SPAWNED: usize = 0;
    /// Counter: the level's first error, packed by `RunError::pack`.
    pub const ERROR: usize = 1;
    /// Counter: tasks run in this level.
    pub const TASKS_RUN: usize = 2;
    /// Counter: nonzero once a worker failed; the others stop at their next check.
    pub const ABORT: usize = 3;

    /// Counter `index` (one of the constants above).
    #[inline(always)]
    pub fn counter(&self, index: usize) -> &W {
        debug_assert!(index < 4);
        // SAFETY: the host passes four live counters (the sink's contract).
        unsafe { &*self.counters.add(index) }
    }
}
