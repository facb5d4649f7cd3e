//! The mgws worker loop (thesis Listing 5) and the queue operations that move tasks between a
//! worker's local queue, its public queue, its overflow stack, the initial task set and other
//! workers. The baselines (`baseline/`) share the worker's core and task context, not this loop.
//!
//! Every function here is executed by all lanes of a worker in lockstep (see `exec.rs`).

use crate::bridge::BRIDGE_INTERVAL;
use crate::config::{
    OverflowMode, RunFlags, TerminationMode, IDLE_PAUSE_MAX_NS, IDLE_PAUSE_MIN_NS,
    INITIAL_COPY_BATCH, INITIAL_VICTIM_TRIES, RELEASE_CHECK_INTERVAL, RELEASE_MIN_LOCAL,
};
use crate::context::{Tagged, TaskExecutor};
use crate::error::RunError;
use crate::exec::{OnFull, WorkerCore};
use crate::layout::{claim_size, Env};
use crate::local_ring::{ring_index, ring_slot_after};
use crate::operation::Operation;
use crate::platform::{AtomicWord, Ordering, Platform, ProtocolStep, Scope};
use crate::public_queue::{Claim, OwnerView, PublicQueue};
use crate::spec::{BridgeFollower, Spec};
use crate::termination::{HierarchicalCounter, IdleCounter, VoteOutcome, VotingTree};
use crate::word::QueueWord;

/// The counting termination detectors, as the idle path drives them.
pub(crate) enum IdleCount<'e, W> {
    Flat(IdleCounter<'e, W>),
    Hierarchical(HierarchicalCounter<'e, W>),
}

impl<W: AtomicWord> IdleCount<'_, W> {
    #[inline(always)]
    fn enter(&self) {
        match self {
            IdleCount::Flat(c) => c.enter(),
            IdleCount::Hierarchical(c) => c.enter(),
        }
    }

    #[inline(always)]
    fn leave(&self) {
        match self {
            IdleCount::Flat(c) => c.leave(),
            IdleCount::Hierarchical(c) => c.leave(),
        }
    }

    #[inline(always)]
    fn all_idle(&self) -> bool {
        match self {
            IdleCount::Flat(c) => c.all_idle(),
            IdleCount::Hierarchical(c) => c.all_idle(),
        }
    }

    #[inline(always)]
    pub(crate) fn any_idle(&self) -> bool {
        match self {
            IdleCount::Flat(c) => c.any_idle(),
            IdleCount::Hierarchical(c) => c.any_idle(),
        }
    }
}

/// A run of tasks in this worker's own memory, as [`WorkerCore::publish`] reads them: task `j`
/// is at `base + ((start + j * step) & mask)`. The local ring (step 1, mask capacity - 1) and
/// the overflow stack read top down (step -1, no mask) are both one, so that one inlined
/// `publish` serves both.
#[derive(Clone, Copy)]
pub(crate) struct TaskRun<T> {
    base: *mut T,
    // `u32`s (wrapping), as every register counts on a GPU: the local ring's capacity divides
    // 2^32, and the overflow stack holds at most `spill_capacity` (a `u32`) tasks.
    start: u32,
    step: u32,
    mask: u32,
}

impl<T> TaskRun<T> {
    /// Task `j` of the run.
    #[inline(always)]
    fn at(&self, j: u64) -> *const T {
        let index = self.start.wrapping_add((j as u32).wrapping_mul(self.step)) & self.mask;
        // SAFETY: the run's constructor names `base` and positions that stay within one
        // allocation (the local ring, or this worker's part of the overflow stack) for every
        // `j` its caller copies.
        unsafe { self.base.add(index as usize) }
    }
}

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
        } else {
            // SAFETY: the caller's guarantees.
            unsafe { Self::new(p, env, exec, id) }.run();
        }
    }

    /// The worker loop: runs until termination is detected or the run is aborted.
    #[inline(always)]
    fn run(mut self) {
        let c = &mut self.core;
        c.clear_damping();
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
                // A surplus (a steal's, or room a task made for its spawns) is published
                // first. Checking the public word costs a load and a broadcast (two barriers on
                // a GPU): do it every `release_interval` tasks (RELEASE_CHECK_INTERVAL and up)
                // rather than before every task as Listing 5 does.
                if c.surplus > 0
                    || (c.local_len() >= RELEASE_MIN_LOCAL.min(c.local_capacity)
                        && c.iterations & (c.release_interval - 1) == 0
                        && c.should_release())
                {
                    c.publish_surplus_or_release();
                    continue;
                }
                c.run_local_batch(self.exec);
                continue;
            }
            if c.spill_len > 0 {
                c.refill_from_spill();
                continue;
            }
            if c.acquire() {
                continue;
            }
            if !c.initial_exhausted && c.load_initial() {
                continue;
            }
            if c.steal() {
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

impl<'e, P: Platform, T: Copy, S: Spec> WorkerCore<'e, P, T, S> {
    // ----- local tasks -------------------------------------------------------------------------

    /// The loop's next iterations that check something (progress and abort, release, the bridge)
    /// are the multiples of this power of two.
    #[inline(always)]
    fn check_cadence(&self) -> u64 {
        let progress = self.env.config.progress_interval as u64;
        // While initial tasks remain, `should_release` answers "no" without looking at anything.
        let cadence = if self.initial_exhausted {
            (self.release_interval as u64).min(progress)
        } else {
            progress
        };
        // The bridge worker (the only one whose spec is bridged) serves the bridge every few
        // iterations.
        if S::bridged(&self.env.config) {
            cadence.min(BRIDGE_INTERVAL)
        } else {
            cadence
        }
    }

    /// Runs the newest local task of this loop iteration, then the next ones, each counted as an
    /// iteration of its own, until an iteration that checks something (see `check_cadence`), an
    /// empty local queue, a surplus to publish or an abort. The loop would run the same tasks in
    /// the same order; the batch only keeps its checks off the path between two tasks (they put
    /// a global load on the path of every task; docs/results.md).
    #[inline(always)]
    pub(crate) fn run_local_batch<X: TaskExecutor<T>>(&mut self, exec: &X)
    where
        T: Tagged,
    {
        // Iteration `iterations` is this one: the next check falls on the next multiple. The
        // count of tasks still allowed is a `u32` (the cadence is at most the progress
        // interval); the batch's length is worked out again after it from `iterations`, which
        // no task changes, rather than held in registers across the tasks.
        let mut left = self.batch_budget() as u32;
        loop {
            self.run_next_local(exec);
            left -= 1;
            // A task that made room left a surplus for the loop to publish: end the batch.
            if left == 0 || self.aborted || self.local_len() == 0 || self.surplus > 0 {
                break;
            }
        }
        self.iterations = self
            .iterations
            .wrapping_add((self.batch_budget() - left as u64 - 1) as u32);
    }

    /// Tasks a batch that starts at this iteration may run: up to the next iteration that checks
    /// something.
    #[inline(always)]
    fn batch_budget(&self) -> u64 {
        let cadence = self.check_cadence();
        cadence - (self.iterations as u64 & (cadence - 1))
    }

    // ----- own public queue --------------------------------------------------------------------

    #[inline(always)]
    pub(crate) fn own_queue(&self) -> PublicQueue<'e, P::Word> {
        // SAFETY: `queue` is this worker's queue, a valid index of the env's topology.
        let header = unsafe { self.env.header(self.queue) };
        PublicQueue::new(header, self.env.config.public_capacity as u64, self.scope)
    }

    #[inline(always)]
    pub(crate) fn abort_flag(&self) -> impl Fn() -> bool + 'e {
        // SAFETY: the env's pointers outlive the run.
        let flag = unsafe { self.env.abort_flag() };
        let scope = self.scope;
        move || flag.load(Ordering::Relaxed, scope) != 0
    }

    /// Counts a loop iteration. Every `progress_interval` iterations it reports progress, and lane
    /// 0 reads the abort flag and, while initial tasks remain, the initial-task cursor (both
    /// Relaxed: a late observation only delays the stop, or the first release), which one
    /// exchange hands to every lane. A worker whose local queue never runs empty learns here
    /// that the initial set is exhausted, which is when it starts to release.
    #[inline(always)]
    pub(crate) fn tick_and_check(&mut self) {
        self.iterations = self.iterations.wrapping_add(1);
        if self.iterations & (self.env.config.progress_interval - 1) != 0 {
            return;
        }
        self.report_progress();
        let mut answer = [0u64; 2];
        if self.p.is_leader() {
            let abort = (self.abort_flag())();
            let exhausted =
                self.initial_exhausted || (self.own_range_claimed() && self.initial_set_claimed());
            answer = [abort as u64, exhausted as u64];
        }
        let [abort, exhausted] = self.exchange(answer);
        self.aborted |= abort != 0;
        self.initial_exhausted = exhausted != 0;
    }

    /// Lane 0: whether this worker's home range has been claimed to its end. Until it is, not
    /// every range is, so the run-wide count need not be read: it lives on the first GPU of a
    /// multi-GPU run, while the own queue's cursor is in the own GPU's memory (Relaxed, as in
    /// `claim_initial`: a stale cursor only delays the first release by one check).
    #[inline(always)]
    fn own_range_claimed(&self) -> bool {
        if self.own_range_exhausted {
            return true;
        }
        let (lo, hi) = self.with_leader(|l| l.own_range);
        // SAFETY: `queue` is this worker's queue, a valid index of the env's topology.
        let claimed = unsafe { self.env.header(self.queue) }
            .initial_claimed
            .load(Ordering::Relaxed, self.scope);
        claimed >= hi - lo
    }

    /// Lane 0: whether every home range has been claimed to its end (Relaxed: a late answer only
    /// delays the first release).
    #[inline(always)]
    fn initial_set_claimed(&self) -> bool {
        // SAFETY: the shared state outlives the run.
        let done = unsafe { self.env.shared() }
            .initial_ranges_done
            .load(Ordering::Relaxed, self.scope);
        done >= self.env.initial_ranges()
    }

    /// Listing 5's "if the public queue is empty, release": while initial tasks remain, idle
    /// workers take those instead of stealing, so releasing would only add copies and the answer
    /// is "no" (uniform on every lane: no exchange). Then lane 0 checks the public word.
    ///
    /// The check also sets the interval to the next one: back to [`RELEASE_CHECK_INTERVAL`] when
    /// the queue is empty (thieves took what was released), twice as long, up to
    /// [`Platform::RELEASE_CHECK_INTERVAL_MAX`], when it still holds tasks nobody took, and
    /// unchanged while a thief holds its lock. The word is read Relaxed, as before: a stale
    /// answer only moves a release by one interval, and `publish` works on the word it loads
    /// itself.
    #[inline(always)]
    pub(crate) fn should_release(&mut self) -> bool {
        if !self.initial_exhausted {
            return false;
        }
        let mut answer = [0u64; 1];
        if self.p.is_leader() {
            let word = self.own_queue().peek();
            let stocked = PublicQueue::<P::Word>::looks_stealable(word);
            let empty = !stocked && !word.locked();
            answer = [empty as u64 | (stocked as u64) << 1];
        }
        let [answer] = self.exchange(answer);
        let (empty, stocked) = (answer & 1 != 0, answer & 2 != 0);
        self.release_interval = next_release_interval(
            self.release_interval,
            P::RELEASE_CHECK_INTERVAL_MAX,
            empty,
            stocked,
        );
        empty
    }

    /// The worker's one place that publishes into its own public queue and opens a new epoch:
    /// the `surplus` on top of the overflow stack (a steal's, or what `make_room` moved there
    /// during the last task), newest first, if there is one; else, as Listing 5's release, the
    /// overflow stack's tasks if it holds any, else up to half the local tasks, the oldest. One
    /// call site keeps one inlined copy of [`WorkerCore::publish`] in the kernel: a second one,
    /// inside `steal`, added registers to the MEMSET entry (ptxas). Every
    /// publication that moves tasks counts as a release in the statistics.
    #[inline(always)]
    pub(crate) fn publish_surplus_or_release(&mut self) {
        self.set_operation(Operation::Release);
        let surplus = self.surplus as u64;
        // A release takes the overflow stack first when it holds tasks: they are older than
        // any local task (the roots of larger subtrees), and only a release shows them to
        // thieves before this worker's local queue runs empty. A task that spawned more than
        // the public queue holds (UTS T3's root: 2000 children) leaves most of them there.
        let (want, from_spill) = if surplus > 0 {
            (surplus, true)
        } else if self.spill_len > 0 {
            (self.spill_len as u64, true)
        } else {
            (self.local_len() / 2, false)
        };
        let source = if from_spill {
            self.newest_spilled()
        } else {
            self.oldest_local()
        };
        self.p.protocol_step(ProtocolStep::Release);
        let moved = self.publish(want, source);
        if from_spill {
            // Whatever did not fit stays on the overflow stack, for `refill_from_spill`.
            self.spill_len -= moved as u32;
            self.surplus = 0;
        } else {
            self.local_tail = self.local_tail.wrapping_add(moved as u32);
        }
        if moved > 0 {
            self.count(|s| s.releases += 1);
        }
        // Back to running tasks: a watchdog report must not show a worker stuck in a task as
        // releasing (acquire, steal and the initial load reset it the same way).
        self.set_operation(Operation::RunTask);
    }

    /// The local tasks from the oldest on, as a source for [`WorkerCore::publish`].
    #[inline(always)]
    fn oldest_local(&self) -> TaskRun<T> {
        TaskRun {
            base: self.local_ring().base,
            start: self.local_tail,
            step: 1,
            mask: self.local_capacity as u32 - 1,
        }
    }

    /// The overflow stack's tasks from the top down, the newest first, as a source for
    /// [`WorkerCore::publish`].
    #[inline(always)]
    fn newest_spilled(&self) -> TaskRun<T> {
        TaskRun {
            base: self.spill_slot(0),
            start: self.spill_len.wrapping_sub(1),
            step: u32::MAX,
            mask: u32::MAX,
        }
    }

    /// The owner's side of adding tasks to its public queue: lock, wait for the next epoch index
    /// to drain, copy up to `want` tasks from `src` to the head of the ring, reopen. Returns the
    /// number of tasks published.
    #[inline(always)]
    pub(crate) fn publish(&mut self, want: u64, src: TaskRun<T>) -> u64 {
        let queue = self.own_queue();
        let abort = self.abort_flag();
        // [count, aborted, the lock's view as `OwnerView::parts`, the head's ring slot]
        let mut plan = [0u64; 6];
        if self.p.is_leader() {
            let locked = queue.lock(&self.p, &abort);
            plan = if locked.held {
                let v = locked.view;
                let next = 1 - v.word.epoch() as usize;
                let mut ok = queue.wait_drained(&self.p, next, &abort);
                let mut free = queue.free_slots(&v);
                if ok && free < want && !queue.ending_epoch_drained(&v) {
                    // The ending epoch's thieves are still copying: wait for them rather than
                    // publish fewer tasks.
                    ok = queue.wait_drained_current(&self.p, &v, &abort);
                    free = queue.free_slots(&v);
                }
                let [word, epoch_tail, head] = v.parts();
                let head_slot = ring_index(head, queue.capacity);
                [
                    want.min(free),
                    !ok as u64,
                    word,
                    epoch_tail,
                    head,
                    head_slot,
                ]
            } else {
                [0, 1, 0, 0, 0, 0]
            };
        }
        let [count, aborted, _, _, _, head_slot] = self.exchange(plan);
        if aborted != 0 {
            self.aborted = true;
            return 0;
        }
        let capacity = queue.capacity;
        // SAFETY: this worker's queue, and every ring has a slot 0.
        let ring = unsafe { self.env.slot(self.queue, 0) };
        // SAFETY: the count slots from the head on are free slots of our locked queue.
        self.copy_tasks(
            count,
            |j| src.at(j),
            |j| unsafe { ring.add(ring_slot_after(head_slot, j, capacity) as usize) },
        );
        self.p.barrier();
        if self.p.is_leader() {
            // The view, read again rather than kept in registers across the copy.
            let [count, _, word, epoch_tail, head] = self.exchanged::<5>();
            let v = OwnerView::from_parts([word, epoch_tail, head]);
            queue.reopen(&self.p, &v, v.first_unclaimed, v.head + count);
        }
        count
    }

    /// Moves tasks from the public queue into the empty local queue: `min(ceil(n/2), local/2)`
    /// of the `n` unclaimed tasks, the newest ones. Returns false if the public queue had none.
    #[inline(always)]
    pub(crate) fn acquire(&mut self) -> bool {
        let queue = self.own_queue();
        let abort = self.abort_flag();
        // [take, from, aborted, locked, the lock's view as `OwnerView::parts`, from's ring slot]
        let mut plan = [0u64; 8];
        if self.p.is_leader() && PublicQueue::<P::Word>::looks_stealable(queue.peek()) {
            self.p.protocol_step(ProtocolStep::Acquire);
            let locked = queue.lock(&self.p, &abort);
            plan = if locked.held {
                let v = locked.view;
                let next = 1 - v.word.epoch() as usize;
                let ok = queue.wait_drained(&self.p, next, &abort);
                let take = v.available().div_ceil(2).min(self.local_capacity / 2);
                let [word, epoch_tail, head] = v.parts();
                let from = head - take;
                let from_slot = ring_index(from, queue.capacity);
                [take, from, !ok as u64, 1, word, epoch_tail, head, from_slot]
            } else {
                [0, 0, 1, 0, 0, 0, 0, 0]
            };
        }
        let [take, _, aborted, locked, _, _, _, from_slot] = self.exchange(plan);
        if aborted != 0 {
            self.aborted = true;
            return false;
        }
        if take == 0 {
            if locked != 0 && self.p.is_leader() {
                let [_, _, _, _, word, epoch_tail, head] = self.exchanged::<7>();
                let v = OwnerView::from_parts([word, epoch_tail, head]);
                queue.reopen(&self.p, &v, v.first_unclaimed, v.head);
            }
            return false;
        }
        self.set_operation(Operation::Acquire);
        let capacity = queue.capacity;
        let head = self.local_head as u64;
        // SAFETY: this worker's queue, and every ring has a slot 0.
        let ring = unsafe { self.env.slot(self.queue, 0) } as *const T;
        // SAFETY: the take slots from `from` on hold unclaimed tasks of our locked queue.
        self.copy_tasks(
            take,
            |j| unsafe { ring.add(ring_slot_after(from_slot, j, capacity) as usize) },
            |j| self.local_slot(head + j),
        );
        self.p.barrier();
        self.local_head = self.local_head.wrapping_add(take as u32);
        self.count(|s| s.acquires += 1);
        self.set_operation(Operation::RunTask);
        // Leave the idle count while still holding the lock: a co-owner that finds the queue
        // quiescent after the unlock must not also find every worker idle.
        self.leave_idle();
        if self.p.is_leader() {
            // The view, read again rather than kept in registers across the copy (`locked` is
            // set: a lock that took tasks).
            let [take, from, _, _, word, epoch_tail, head] = self.exchanged::<7>();
            let v = OwnerView::from_parts([word, epoch_tail, head]);
            // A co-owner's vote must count this as work taken from the shared queue.
            queue.note_owner_take(take);
            queue.reopen(&self.p, &v, v.first_unclaimed, from);
        }
        true
    }

    // ----- initial tasks -----------------------------------------------------------------------

    /// Claims the next chunk of initial tasks: from this worker's own home range (its queue's
    /// contiguous share of the initial set, one fetch-add on its own queue header), else from up
    /// to [`INITIAL_VICTIM_TRIES`] other ranges. Workers claim through their own counters while
    /// their ranges last, so they do not contend on one shared cursor. `initial_exhausted` is set
    /// once every range has been claimed to its end.
    #[inline(always)]
    pub(crate) fn load_initial(&mut self) -> bool {
        self.set_operation(Operation::LoadInitial);
        self.p.protocol_step(ProtocolStep::LoadInitial);
        let mut plan = [0u64; 4];
        if self.p.is_leader() {
            // `(first task, count)`, count 0 for none (see `claim_initial`).
            let mut claim = (0, 0);
            let mut own_done = self.own_range_exhausted;
            if !own_done {
                claim = self.claim_initial(self.queue);
                own_done = claim.1 == 0;
            }
            if self.own_range_exhausted {
                // Victims are picked one at a time, only while no claim succeeded: an array of
                // picks indexed in a loop lived in local memory on a GPU (a stack frame written
                // and read on every claim).
                let topology = &self.env.topology;
                let mut tries = 0;
                while claim.1 == 0 && tries < INITIAL_VICTIM_TRIES {
                    tries += 1;
                    if let Some(q) = self.with_leader(|l| l.picker.pick_initial(topology)) {
                        claim = self.claim_initial(q);
                        let found = claim.1 != 0;
                        self.with_leader(|l| l.picker.record(found));
                    }
                }
            }
            let (start, count) = claim;
            // The run-wide count lives in the shared state (on the first GPU of a multi-GPU run):
            // read only once the own range is claimed, since until then not every range is.
            let all_done = own_done && self.initial_set_claimed();
            plan = [start, count, own_done as u64, all_done as u64];
        }
        let [start, count, own_done, all_done] = self.exchange(plan);
        self.own_range_exhausted = own_done != 0;
        if all_done != 0 {
            self.initial_exhausted = true;
        }
        if count == 0 {
            return false;
        }
        let (initial, head) = (self.env.initial, self.local_head as u64);
        // The next chunk of the same range is likely this worker's next claim.
        let next = (start + count).min(self.env.initial_len);
        let ahead = count.min(self.env.initial_len - next);
        // SAFETY: next + ahead <= initial_len, so the hinted range lies within the initial set.
        self.p.prefetch(
            unsafe { initial.add(next as usize) } as *const u8,
            (ahead as usize) * core::mem::size_of::<T>(),
        );
        // SAFETY: tasks start..start+count of the initial set were claimed by this worker alone.
        self.copy_tasks_batched::<INITIAL_COPY_BATCH>(
            count,
            // Read forwards (the prefetcher follows), written reversed, so that the LIFO local
            // queue also runs the chunk in its original order (the tasks' own data, e.g. the
            // articles of consecutive CONTAINS tasks, is then walked forwards too).
            |j| unsafe { initial.add((start + j) as usize) },
            |j| self.local_slot(head + count - 1 - j),
        );
        self.p.barrier();
        self.local_head = self.local_head.wrapping_add(count as u32);
        self.count(|s| s.initial_loads += 1);
        self.set_operation(Operation::RunTask);
        true
    }

    /// Lane 0: claims up to one chunk of queue `q`'s home range; `(first task, count)`, with a
    /// count of 0 when that range has been claimed to its end. Not an `Option`, whose payload
    /// the compiler left undefined on the empty path and merged into registers carried around
    /// a GPU worker's whole loop (see `PublicQueue::lock`).
    #[inline(always)]
    pub(crate) fn claim_initial(&self, q: u32) -> (u64, u64) {
        let (lo, hi) = if q == self.queue {
            self.with_leader(|l| l.own_range)
        } else {
            self.env.initial_range(q)
        };
        let len = hi - lo;
        // SAFETY: q is a queue of the env's topology (this worker's or the picker's choice).
        let claimed = &unsafe { self.env.header(q) }.initial_claimed;
        // Relaxed throughout: the initial tasks were written by the host before the run, and
        // each fetch-add hands out a disjoint interval of the range.
        let seen = claimed.load(Ordering::Relaxed, self.scope);
        if len == 0 || seen >= len {
            return (0, 0);
        }
        // Sized by what remained when read: a stale count only makes this claim larger than its
        // guided share (a claim past the range's end is cut to it below).
        let per_queue = if S::shared_queues(&self.env.config) {
            self.env.config.workers_per_queue
        } else {
            1
        };
        let chunk = claim_size(self.env.config.initial_chunk as u64, len - seen, per_queue);
        let offset = claimed.fetch_add(chunk, Ordering::Relaxed, self.scope);
        if offset >= len {
            return (0, 0);
        }
        if offset + chunk >= len {
            // The claim that reaches the range's end is unique: count the range as done.
            // SAFETY: the shared state outlives the run.
            unsafe { self.env.shared() }.initial_ranges_done.fetch_add(
                1,
                Ordering::Relaxed,
                self.scope,
            );
        }
        (lo + offset, chunk.min(len - offset))
    }

    // ----- stealing ----------------------------------------------------------------------------

    #[inline(always)]
    pub(crate) fn damping_bit(&self, queue: u32) -> (*mut u64, u64) {
        let words = self.scratch_at::<u64>(self.layout.damping);
        // SAFETY: the damping bitmap has one bit per queue.
        (
            unsafe { words.add(queue as usize / 64) },
            1u64 << (queue % 64),
        )
    }

    #[inline(always)]
    pub(crate) fn clear_damping(&self) {
        let words = (self.env.topology.queues() as usize).div_ceil(64);
        let base = self.scratch_at::<u64>(self.layout.damping);
        let mut i = self.p.lane_id() as usize;
        while i < words {
            // SAFETY: i indexes the damping bitmap of this worker's scratch.
            unsafe { base.add(i).write(0) };
            i += self.p.lane_count() as usize;
        }
        self.p.barrier();
    }

    /// Lane 0's steal attempt on `victim`, with the configured overflow prevention: the claim as
    /// `[word, share offset, share count, victim]`, all 0 when nothing was claimed. Every word is
    /// defined on both outcomes: an `Option` whose payload is undefined when empty let the
    /// compiler merge the payload into registers carried around the whole worker loop on a GPU.
    #[inline(always)]
    pub(crate) fn claim_from(&mut self, victim: u32) -> [u64; 4] {
        // SAFETY: the picker returns valid queue indices.
        let header = unsafe { self.env.header(victim) };
        let queue = PublicQueue::new(header, self.env.config.public_capacity as u64, self.scope);
        let damping = S::overflow(&self.env.config) == OverflowMode::Damping;
        let (word, bit) = self.damping_bit(victim);
        // SAFETY: the bitmap word is in this worker's scratch and only lane 0 uses it.
        let marked_empty = damping && unsafe { word.read() } & bit != 0;
        if !damping || marked_empty {
            self.p.protocol_step(ProtocolStep::StealLoad);
            if !PublicQueue::<P::Word>::looks_stealable(queue.peek()) {
                return [0; 4];
            }
        }
        self.count(|s| s.steal_attempts += 1);
        let plan = match queue.claim(&self.p) {
            Claim::Claimed { word, share } => [word.0, share.offset, share.count, victim as u64],
            Claim::Empty | Claim::Locked => [0; 4],
        };
        if damping {
            // SAFETY: as above.
            unsafe {
                let w = word.read();
                word.write(if plan[2] != 0 { w & !bit } else { w | bit });
            }
        }
        plan
    }

    /// One steal attempt. The stolen tasks go to the local queue (up to half its capacity) and the
    /// rest onto the overflow stack as this worker's `surplus`, which the loop's next iteration
    /// publishes to its public queue, where others can steal them again.
    #[inline(always)]
    pub(crate) fn steal(&mut self) -> bool {
        self.set_operation(Operation::Steal);
        let mut plan = [0u64; 4];
        if self.p.is_leader() {
            let topology = &self.env.topology;
            if let Some(victim) = self.with_leader(|l| l.picker.pick(topology)) {
                plan = self.claim_from(victim);
                let found = plan[2] != 0;
                self.with_leader(|l| l.picker.record(found));
            }
        }
        let [word, offset, count, victim] = self.exchange(plan);
        if count == 0 {
            return false;
        }
        self.p.protocol_step(ProtocolStep::StealCopy);
        let capacity = self.env.config.public_capacity as u64;
        // The victim's ring and the share's first position, worked out once: the copies below
        // then hold two values instead of the claim's four and the topology lookup of every
        // copied word's queue.
        // SAFETY: victim is a valid queue index, and every ring has a slot 0.
        let ring = unsafe { self.env.slot(victim as u32, 0) } as *const T;
        // The word's tail is a ring slot and the share lies within one epoch (at most the
        // capacity), so the share's first slot is one wrap away (as `claimed_index` says).
        let start = ring_slot_after(QueueWord(word).tail(), offset, capacity);
        let src = move |j: u64| -> *const T {
            // SAFETY: the claimed share's slots belong to this thief until it completes the steal.
            unsafe { ring.add(ring_slot_after(start, j, capacity) as usize) }
        };
        // Up to half the local queue goes there; the rest onto the overflow stack, in the same
        // copy, so that the claim completes before this worker waits for anything: a thief
        // never waits while holding a claim, which is what keeps owners' waits for drained
        // epochs free of cycles.
        let to_local = count.min((self.local_capacity / 2).max(1));
        let rest = count - to_local;
        let (head, top) = (self.local_head as u64, self.spill_len as u64);
        let spilled = rest > 0 && top + rest <= self.spill_capacity();
        let copied = if spilled { count } else { to_local };
        self.copy_tasks(copied, src, |j| {
            if j < to_local {
                self.local_slot(head + j)
            } else {
                self.spill_slot(top + (j - to_local))
            }
        });
        self.p.barrier();
        self.local_head = self.local_head.wrapping_add(to_local as u32);
        if spilled {
            self.spill_len += rest as u32;
        }
        self.leave_idle();
        if self.p.is_leader() {
            // The claim, as exchanged, read again rather than kept in registers across the
            // copies (on a GPU they pushed worker state into local memory).
            let [word, _, count, victim] = self.exchanged::<4>();
            // SAFETY: victim is a valid queue index.
            let header = unsafe { self.env.header(victim as u32) };
            PublicQueue::new(header, capacity, self.scope).complete(
                &self.p,
                QueueWord(word),
                count,
            );
            self.count(|s| {
                s.steals += 1;
                s.tasks_stolen += count;
            });
        }
        if rest > 0 && !spilled {
            let (worker, capacity) = (self.id, self.spill_capacity() as u32);
            self.fail(RunError::SpillOverflow { worker, capacity });
        } else {
            // Published at the next iteration (`publish_surplus_or_release`), before any task
            // runs: the local queue is not empty, so the loop takes that branch first.
            self.surplus = rest as u32;
        }
        self.set_operation(Operation::RunTask);
        true
    }

    // ----- termination -------------------------------------------------------------------------

    /// Leaves the idle count after gaining work, before any steal that gave the work completes.
    #[inline(always)]
    pub(crate) fn leave_idle(&mut self) {
        if self.idle {
            if self.p.is_leader() {
                if let Some(counter) = self.idle_count() {
                    self.p.protocol_step(ProtocolStep::IdleLeave);
                    counter.leave();
                }
            }
            self.idle = false;
            self.report_progress();
        }
    }

    #[inline(always)]
    pub(crate) fn idle_counter(&self) -> IdleCounter<'e, P::Word> {
        // SAFETY: the shared state outlives the run.
        let shared = unsafe { self.env.shared() };
        IdleCounter {
            counter: &shared.idle_workers,
            workers: self.env.config.workers as u64,
            scope: self.scope,
        }
    }

    /// The run's counting detector (the flat or the hierarchical idle counter), or `None` under
    /// voting trees.
    #[inline(always)]
    pub(crate) fn idle_count(&self) -> Option<IdleCount<'e, P::Word>> {
        match S::termination(&self.env.config) {
            TerminationMode::IdleCounter => Some(IdleCount::Flat(self.idle_counter())),
            TerminationMode::Hierarchical => {
                Some(IdleCount::Hierarchical(self.hierarchical_counter()))
            }
            TerminationMode::VotingTree => None,
        }
    }

    #[inline(always)]
    pub(crate) fn hierarchical_counter(&self) -> HierarchicalCounter<'e, P::Word> {
        let t = &self.env.topology;
        let d = t.device_of_worker(self.id) as usize;
        // SAFETY: the shared state outlives the run, and the host gives every device of the
        // topology its counter word (`Env::device_idle`), which outlives the run too.
        let (shared, device) = unsafe { (self.env.shared(), &*self.env.device_idle[d]) };
        HierarchicalCounter {
            device,
            device_workers: t.workers_on(d) as u64,
            // Only this device's workers update its counter, and it lives in their memory.
            device_scope: Scope::Device,
            global: &shared.idle_devices,
            devices: t.devices as u64,
            scope: self.scope,
        }
    }

    /// The idle path of the loop: nothing local, public, initial or stealable was found. Returns
    /// true when the run is over.
    #[inline(always)]
    pub(crate) fn idle_step(&mut self) -> bool {
        self.set_operation(Operation::Idle);
        self.count(|s| s.idle_rounds += 1);
        let ignore_in_flight = self.flags.contains(RunFlags::BREAK_IN_FLIGHT_RULE);
        // [terminate, abort, became idle, the pause after this round]
        let mut plan = [0u64; 4];
        if self.p.is_leader() {
            // Idle rounds in a row (no other loop iteration between them) double the pause.
            let iteration = self.iterations;
            let streak = self.with_leader(|l| {
                let streak = if iteration == l.last_idle_iteration.wrapping_add(1) {
                    l.idle_streak.saturating_add(1)
                } else {
                    0
                };
                l.last_idle_iteration = iteration;
                l.idle_streak = streak;
                streak
            });
            let abort = (self.abort_flag())();
            let mut became_idle = false;
            let terminate = match self.idle_count() {
                Some(counter) => {
                    // The own queue is read only by a worker that may enter the count: once
                    // counted, it stays idle until it gains work, and its rounds only poll the
                    // count. The check is a chain of dependent loads (the word, then the
                    // epochs' completion counters), which every idle round of every worker
                    // waited for before (much of a short run's idle path, ncu).
                    if !self.idle && self.own_queue().quiescent(ignore_in_flight).is_some() {
                        self.p.protocol_step(ProtocolStep::IdleEnter);
                        counter.enter();
                        became_idle = true;
                    }
                    let all = (self.idle || became_idle) && counter.all_idle();
                    if S::bridged(&self.env.config) {
                        self.bridge_decide(all)
                    } else if S::follows_bridge(&self.env.config) {
                        // The decision implies that this side stays all idle, so a follower
                        // looks for it only once its detector says so: until then it polls only
                        // what a plain run polls, in its own GPU's memory where it can.
                        all && self.bridge_decision()
                    } else {
                        all
                    }
                }
                None => {
                    // A voting worker reports its queue's state in every vote.
                    let quiescent = self.own_queue().quiescent(ignore_in_flight);
                    let targeted = match quiescent {
                        Some(claims) => {
                            let t = claims != self.with_leader(|l| l.claims_at_last_vote)
                                && !self.flags.contains(RunFlags::BREAK_TARGETED_RULE);
                            Some((claims, t))
                        }
                        None => None,
                    };
                    let vote_idle = matches!(targeted, Some((_, false)));
                    became_idle = !self.idle && quiescent.is_some();
                    self.p.protocol_step(ProtocolStep::Vote);
                    let tree = VotingTree {
                        tree: self.env.tree,
                        // SAFETY: the shared state outlives the run.
                        shared: unsafe { self.env.shared() },
                        topology: &self.env.topology,
                        scope: self.scope,
                    };
                    let id = self.id;
                    let outcome = self.with_leader(|l| {
                        let outcome = tree.step(id, vote_idle, &mut l.voted_round);
                        if outcome == VoteOutcome::Voted {
                            if let Some((claims, _)) = targeted {
                                l.claims_at_last_vote = claims;
                            }
                        }
                        outcome
                    });
                    outcome == VoteOutcome::Terminate
                }
            };
            plan = [
                terminate as u64,
                abort as u64,
                became_idle as u64,
                idle_pause_ns(streak) as u64,
            ];
        }
        let [terminate, abort, became_idle, pause] = self.exchange(plan);
        if became_idle != 0 {
            self.idle = true;
            self.report_progress();
        }
        if abort != 0 {
            self.aborted = true;
            return true;
        }
        if terminate == 0 {
            self.p.idle_pause(pause as u32);
        }
        terminate != 0
    }
}

/// The release check's next interval, at most `max`, after a check that found the own public
/// queue `empty` or `stocked` (holding tasks nobody took) or neither (a thief holds its lock): see
/// [`WorkerCore::should_release`].
#[inline(always)]
pub(crate) fn next_release_interval(interval: u32, max: u32, empty: bool, stocked: bool) -> u32 {
    if empty {
        RELEASE_CHECK_INTERVAL as u32
    } else if stocked {
        (interval * 2).min(max)
    } else {
        interval
    }
}

/// The pause after the `streak`-th idle round in a row (0-based): [`IDLE_PAUSE_MIN_NS`] doubled
/// `streak` times, at most [`IDLE_PAUSE_MAX_NS`].
#[inline(always)]
pub(crate) fn idle_pause_ns(streak: u32) -> u32 {
    // The minimum shifted 16 times fits a u32 and is past the maximum.
    const {
        assert!(IDLE_PAUSE_MIN_NS <= u32::MAX >> 16 && IDLE_PAUSE_MIN_NS << 16 >= IDLE_PAUSE_MAX_NS)
    };
    (IDLE_PAUSE_MIN_NS << streak.min(16)).min(IDLE_PAUSE_MAX_NS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idle_pause_doubles_up_to_its_maximum() {
        assert_eq!(idle_pause_ns(0), IDLE_PAUSE_MIN_NS);
        assert_eq!(idle_pause_ns(1), 2 * IDLE_PAUSE_MIN_NS);
        let mut last = 0;
        for streak in 0..100 {
            let pause = idle_pause_ns(streak);
            assert!(pause >= last && pause <= IDLE_PAUSE_MAX_NS);
            last = pause;
        }
        assert_eq!(last, IDLE_PAUSE_MAX_NS);
        assert_eq!(idle_pause_ns(u32::MAX), IDLE_PAUSE_MAX_NS);
    }

    /// The GPU block's maximum; the tests use it as a plain number.
    const MAX: u32 = 32;

    #[test]
    fn the_release_interval_doubles_while_the_queue_stays_stocked() {
        let min = RELEASE_CHECK_INTERVAL as u32;
        assert!(min.is_power_of_two() && MAX.is_power_of_two() && min < MAX);
        let mut interval = min;
        let mut checks = 0;
        while interval < MAX {
            let next = next_release_interval(interval, MAX, false, true);
            assert_eq!(next, 2 * interval);
            interval = next;
            checks += 1;
        }
        assert_eq!(checks, (MAX / min).trailing_zeros());
        assert_eq!(next_release_interval(MAX, MAX, false, true), MAX);
        // A platform whose maximum is the minimum never backs off.
        assert_eq!(next_release_interval(min, min, false, true), min);
    }

    #[test]
    fn an_empty_queue_brings_the_release_interval_back_and_a_locked_one_keeps_it() {
        let min = RELEASE_CHECK_INTERVAL as u32;
        for interval in [min, 2 * min, MAX] {
            assert_eq!(next_release_interval(interval, MAX, true, false), min);
            // Locked: neither empty nor stocked.
            assert_eq!(next_release_interval(interval, MAX, false, false), interval);
        }
    }
}
