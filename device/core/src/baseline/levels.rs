//! The kernel-per-level baseline: one call runs one level. Worker `first, first + stride, ...` of
//! the frontier (the env's initial tasks) run on this worker; the tasks they spawn are collected in
//! the local queue and moved to the next frontier (`LevelSink::out`) after each task, or earlier
//! when the local queue fills. The host runs the levels one after the other.

use crate::context::{Tagged, TaskExecutor};
use crate::exec::{LevelSink, OnFull, WorkerCore};
use crate::layout::Env;
use crate::platform::{AtomicWord, Ordering, Platform};
use crate::spec::Spec;

/// One worker of one level of the kernel-per-level baseline.
pub struct LevelWorker<'e, P: Platform, T, X, S: Spec> {
    core: WorkerCore<'e, P, T, S>,
    exec: &'e X,
    sink: LevelSink<P::Word, T>,
}

impl<'e, P: Platform, T: Copy + Tagged, X: TaskExecutor<T>, S: Spec> LevelWorker<'e, P, T, X, S> {
    /// Worker `id` of a level run whose frontier is `env`'s initial tasks (an [`Env::bare`]
    /// suffices).
    ///
    /// # Safety
    /// `env`'s initial tasks and data areas are valid, `id` is a worker of its topology, the
    /// scratch holds the layout, `sink.out` holds `sink.out_capacity` tasks and `sink.counters`
    /// four words, all alive for the call, and every lane makes the same call.
    #[inline(always)]
    pub unsafe fn new(
        p: P,
        env: &'e Env<P::Word, T>,
        exec: &'e X,
        id: u32,
        sink: LevelSink<P::Word, T>,
    ) -> Self {
        LevelWorker {
            // SAFETY: the caller's guarantees; errors go to the sink's counters.
            core: unsafe { WorkerCore::new(p, env, id, OnFull::Frontier(sink)) },
            exec,
            sink,
        }
    }

    /// Runs frontier tasks `first, first + stride, ...` and moves their children to the sink.
    #[inline(always)]
    pub fn run(mut self, first: u64, stride: u64) {
        let c = &mut self.core;
        // A frontier is a list: the host lists or fills an indexed job's first one.
        debug_assert!(!c.env.initial_indexed(), "a level's frontier is listed");
        let total = c.env.initial_len;
        let mut next = first;
        while next < total {
            c.tick();
            if c.aborted {
                break;
            }
            let ahead = next + stride;
            if ahead < total {
                // This worker's next frontier task, loaded after the current one ran: the hint
                // lets its memory latency overlap this task instead of adding to it.
                // SAFETY: ahead < initial_len, so the address lies within the frontier.
                let at = unsafe { c.env.initial.add(ahead as usize) } as *const u8;
                c.p.prefetch(at, core::mem::size_of::<T>());
            }
            // Narrow tasks of one width run side by side, a group of lanes each (see
            // `exec/narrow.rs`): the worker loads as many of its tasks as it has groups.
            // No more than the local queue holds (the batch is loaded into it).
            let batch = c.uniform_batch::<X>().map_or(1, |groups| {
                groups
                    .min((total - next).div_ceil(stride))
                    .min(c.local_capacity)
            });
            if batch == 1 {
                c.load_one(next);
            } else {
                c.load_strided(next, stride, batch);
            }
            c.run_next_local(self.exec);
            c.flush_to(self.sink);
            next += stride * batch;
        }
        if c.p.is_leader() {
            // Relaxed: a per-launch count the host reads after the launch.
            self.sink
                .counter(LevelSink::<P::Word, T>::TASKS_RUN)
                .fetch_add(c.tasks_run, Ordering::Relaxed, c.scope);
        }
        c.finish();
    }
}
