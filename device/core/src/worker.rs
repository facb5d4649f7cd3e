//! The mgws worker loop (thesis Listing 5). The queue operations it calls, which move tasks
//! between a worker's local queue, its public queue, its overflow stack, the initial task set and
//! other workers, are [`WorkerCore`]'s (`exec/`). The baselines (`baseline/`) share the worker's
//! core and task context, not this loop.
//!
//! Every function here is executed by all lanes of a worker in lockstep (see `exec/mod.rs`).

use crate::bridge::BRIDGE_INTERVAL;
use crate::context::{Tagged, TaskExecutor};
use crate::exec::{IndexedClaim, OnFull, WorkerCore};
use crate::layout::Env;
use crate::platform::Platform;
use crate::spec::{BridgeFollower, Spec};

/// An mgws worker: its scheduler state plus the executor of its tasks.
pub struct Worker<'e, P: Platform, T, X, S: Spec> {
    core: WorkerCore<'e, P, T, S>,
    exec: &'e X,
}

impl<'e, P: Platform, T: Copy + Tagged, X: TaskExecutor<T>, S: Spec> Worker<'e, P, T, X, S> {
    /// Worker `id` on platform `p`.
    ///
    /// # Safety
    /// As for [`Worker::start`].
    #[inline(always)]
    unsafe fn new(p: P, env: &'e Env<P::Word, T>, exec: &'e X, id: u32) -> Self {
        Worker {
            // SAFETY: the caller's guarantees, which include a valid shared state.
            core: unsafe { WorkerCore::new(p, env, id, OnFull::Publish) },
            exec,
        }
    }

    /// Starts worker `id` and runs it to the end. In a bridged run only the bridge worker runs
    /// the bridged loop; the others run the plain loop of `S` ([`BridgeFollower`]), so that none
    /// of the bridge's tests sit between their tasks.
    ///
    /// # Safety
    /// `env` must describe live orchestration memory laid out as [`crate::layout`] says, `id` must be
    /// a worker of `env.topology`, the platform's scratch must hold `ScratchLayout::new(...)`
    /// bytes for this configuration, and every lane of the worker must make the same call.
    #[inline(always)]
    pub unsafe fn start(p: P, env: &'e Env<P::Word, T>, exec: &'e X, id: u32) {
        if S::bridged(&env.config) && id != env.bridge_worker {
            // SAFETY: the caller's guarantees; the follower spec differs from `S` only in the
            // bridge's steps, and `Spec::matches` accepts it for a bridged configuration.
            unsafe { Worker::<'e, P, T, X, BridgeFollower<S>>::new(p, env, exec, id) }.run();
        } else if S::bridged(&env.config) {
            // SAFETY: the caller's guarantees.
            unsafe { Self::run_bridge_worker(p, env, exec, id) };
        } else {
            // SAFETY: the caller's guarantees.
            unsafe { Self::new(p, env, exec, id) }.run();
        }
    }

    /// The bridge worker's loop, out of line: its calls into the bridge take its core's address,
    /// which keeps that core in local memory, and inlined beside the followers' loop it made a
    /// GPU's bridged entry larger, with the followers' registers spilled.
    ///
    /// # Safety
    /// As for [`Worker::start`].
    #[inline(never)]
    unsafe fn run_bridge_worker(p: P, env: &'e Env<P::Word, T>, exec: &'e X, id: u32) {
        // SAFETY: the caller's guarantees.
        unsafe { Self::new(p, env, exec, id) }.run();
    }

    /// The worker loop: runs until termination is detected or the run is aborted.
    #[inline(always)]
    fn run(mut self) {
        let c = &mut self.core;
        c.clear_damping();
        // An initial claim takes at least the tasks one step runs side by side; where every task
        // is narrow and the registry asks for it, a claim of indexed tasks runs without a copy
        // through the local queue.
        let batch = c.uniform_batch::<X>();
        let step = batch.unwrap_or(1);
        // Not for a bridged run's bridge worker, which serves the other side from its local
        // queue; its followers run in place as in a plain run.
        let in_place = X::INDEXED_IN_PLACE && !S::bridged(&c.env.config) && batch.is_some();
        let mut claim = IndexedClaim::default();
        loop {
            c.tick_and_check();
            if c.aborted {
                break;
            }
            if S::bridged(&c.env.config) && c.iterations as u64 & (BRIDGE_INTERVAL - 1) == 0 {
                // The bridge worker answers the other side's request from its local queue.
                c.bridge_serve();
            }
            if c.local_len() > 0 {
                c.keep_surplus_unless_wanted();
                // A surplus (a steal's, or room a task made for its spawns) is published
                // first. Checking the public word costs a load and a broadcast (two barriers on
                // a GPU): do it every `release_interval` tasks (RELEASE_CHECK_INTERVAL and up)
                // rather than before every task as Listing 5 does.
                if c.surplus > 0
                    || (c.local_len() >= c.release_min_local(self.exec)
                        && c.iterations & (c.release_interval - 1) == 0
                        && c.should_release())
                {
                    c.publish_surplus_or_release(self.exec);
                    continue;
                }
                c.run_local_batch(self.exec);
                continue;
            }
            if c.spill_len > 0 {
                c.refill_from_spill();
                continue;
            }
            if in_place && claim.left > 0 {
                // The local queue is empty: one batch of the claim, made from the template.
                let width = c.narrow_width(self.exec);
                c.run_narrow_batch(self.exec, width, Some(&mut claim));
                continue;
            }
            // While its own home range lasts, a worker claims from it before it looks at its
            // public queue: it releases nothing there while initial tasks remain (a surplus of
            // spawns published there is for thieves), and the look cost a round trip to memory
            // per chunk of initial tasks.
            if !c.own_range_exhausted && c.load_initial(step, in_place.then_some(&mut claim)) {
                continue;
            }
            if c.acquire() {
                continue;
            }
            if !c.initial_exhausted && c.load_initial(step, in_place.then_some(&mut claim)) {
                continue;
            }
            if c.steal(self.exec) {
                continue;
            }
            if !c.initial_exhausted {
                // Some home range still holds unclaimed tasks (its owner is busy and not idle):
                // keep looking rather than count as idle, so that only a worker that found
                // every initial task claimed ever enters the termination protocol.
                continue;
            }
            if S::bridged(&c.env.config) && c.bridge_receive() {
                continue;
            }
            if c.idle_step() {
                break;
            }
        }
        c.finish();
    }
}
