//! The static-assignment baseline (thesis 6.8): worker `w` of `W` runs the initial tasks
//! `[w n / W, (w + 1) n / W)` and everything they spawn, depth-first, on its own: no public queue,
//! no stealing, no termination protocol. Same task execution, same local queue and overflow stack
//! as an mgws worker; a full local queue spills.

use crate::context::{Tagged, TaskExecutor};
use crate::exec::{OnFull, WorkerCore};
use crate::layout::Env;
use crate::platform::Platform;
use crate::spec::Spec;

/// One worker of the static-assignment baseline.
pub struct StaticWorker<'e, P: Platform, T, X, S: Spec> {
    core: WorkerCore<'e, P, T, S>,
    exec: &'e X,
}

/// Worker `id`'s contiguous share `[id n / W, (id + 1) n / W)` of `n` initial tasks.
#[inline(always)]
pub fn static_share(id: u32, workers: u32, n: u64) -> (u64, u64) {
    let w = workers.max(1) as u64;
    (id as u64 * n / w, (id as u64 + 1) * n / w)
}

impl<'e, P: Platform, T: Copy + Tagged, X: TaskExecutor<T>, S: Spec> StaticWorker<'e, P, T, X, S> {
    /// Worker `id` on platform `p`.
    ///
    /// # Safety
    /// As for [`crate::Worker::new`]: `env` must be valid (its shared state included, which
    /// records errors and carries the abort flag; the public queues are not used), `id` a worker
    /// of its topology, the scratch must hold the layout, and every lane makes the same call.
    #[inline(always)]
    pub unsafe fn new(p: P, env: &'e Env<P::Word, T>, exec: &'e X, id: u32) -> Self {
        StaticWorker {
            // SAFETY: the caller's guarantees.
            core: unsafe { WorkerCore::new(p, env, id, OnFull::Spill) },
            exec,
        }
    }

    /// Runs this worker's contiguous share of the initial tasks (see [`static_share`]) over
    /// `env.config.workers` workers.
    #[inline(always)]
    pub fn run(self) {
        let (first, end) = static_share(
            self.core.id,
            self.core.env.config.workers,
            self.core.env.initial_len,
        );
        self.run_range(first, end);
    }

    /// Runs initial tasks `first..end` (`end <= initial_len`) and everything they spawn.
    #[inline(always)]
    pub fn run_range(mut self, first: u64, end: u64) {
        let c = &mut self.core;
        let end = end.min(c.env.initial_len);
        let mut next = first;
        loop {
            c.tick();
            if c.aborted {
                break;
            }
            if c.local_len() > 0 {
                c.run_next_local(self.exec);
            } else if c.spill_len > 0 {
                c.refill_from_spill();
            } else if next < end {
                c.load_one(next);
                next += 1;
            } else {
                break;
            }
        }
        c.finish();
    }
}
