//! The worker's own public queue: when to release tasks to it, publishing them (from the local
//! queue or the overflow stack) and acquiring them back; and the loop's periodic checks
//! (progress, the abort flag, the end of the initial set).

use super::WorkerCore;
use crate::config::RELEASE_CHECK_INTERVAL;
use crate::context::TaskExecutor;
use crate::initial_end::InitialSetEnd;
use crate::local_ring::{ring_index, ring_slot_after};
use crate::operation::Operation;
use crate::platform::{AtomicWord, Ordering, Platform, ProtocolStep};
use crate::public_queue::{OwnerView, PublicQueue};
use crate::share::claimed_by;
use crate::spec::Spec;

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

impl<'e, P: Platform, T: Copy, S: Spec> WorkerCore<'e, P, T, S> {
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
    /// delays the first release). On several devices through the own device's relay.
    #[inline(always)]
    pub(super) fn initial_set_claimed(&self) -> bool {
        let t = &self.env.topology;
        if S::may_span_devices(&self.env.config) && t.devices > 1 {
            return self
                .initial_set_end(t.device_of_worker(self.id))
                .all_claimed();
        }
        // SAFETY: the shared state outlives the run.
        let done = unsafe { self.env.shared() }
            .initial_ranges_done
            .load(Ordering::Relaxed, self.scope);
        done >= self.env.initial_ranges()
    }

    /// Device `d`'s view of the initial set's end (runs over several devices).
    #[inline(always)]
    pub(super) fn initial_set_end(&self, d: u32) -> InitialSetEnd<'e, P::Word> {
        // SAFETY: the shared state outlives the run, and the host gives every device of the
        // topology its words (`Env::device_idle`), which outlive the run too.
        let (shared, device) = unsafe { (self.env.shared(), &*self.env.device_idle[d as usize]) };
        InitialSetEnd {
            device,
            device_ranges: self.env.device_initial_ranges(d),
            global: &shared.initial_ranges_done,
            ranges: self.env.initial_ranges(),
            scope: self.scope,
        }
    }

    /// Listing 5's "if the public queue is empty, release": while initial tasks remain, idle
    /// workers take those instead of stealing, so releasing would only add copies and the answer
    /// is "no" (uniform on every lane: no exchange). Then lane 0 checks the public word.
    ///
    /// The check also sets the interval to the next one: back to [`RELEASE_CHECK_INTERVAL`] when
    /// the queue is empty (thieves took what was released), twice as long, up to
    /// [`Platform::RELEASE_CHECK_INTERVAL_MAX`], when it still holds tasks nobody took, and
    /// unchanged while a thief holds its lock.
    #[inline(always)]
    pub(crate) fn should_release(&mut self) -> bool {
        if !self.initial_exhausted {
            return false;
        }
        let (empty, stocked) = self.own_queue_state();
        self.release_interval = next_release_interval(
            self.release_interval,
            P::RELEASE_CHECK_INTERVAL_MAX,
            empty,
            stocked,
        );
        empty
    }

    /// Drops the surplus mark while the own public queue could not take it, or half a ring of
    /// a larger one: its unclaimed tasks and `min(surplus, capacity / 2)` together exceed a
    /// ring. Thieves have tasks to take there already, and a publish into a stocked queue paid
    /// its lock, its waits and its release for few tasks or none (FIB's local queue overflows
    /// over and over while few thieves come; docs/results.md). The tasks stay on the overflow
    /// stack, where a later release or `refill_from_spill` takes them. A surplus larger than
    /// half a ring (UTS T3's root spawns 2000 children) is published into a queue that is less
    /// than half full, so that the run's first thieves find it. Keeping the surplus off every
    /// queue that was not empty starved UTS's thieves (T1L ran a third slower), and off one
    /// holding half a ring cost T2L 6%. The word is read Relaxed: a stale answer only keeps a
    /// surplus back or publishes it, and `publish` works on the word it loads itself.
    #[inline(always)]
    pub(crate) fn keep_surplus_unless_wanted(&mut self) {
        if self.surplus == 0 {
            return;
        }
        let (unclaimed, locked) = self.own_queue_unclaimed();
        let room = self.env.config.public_capacity as u64;
        let wanted = (self.surplus as u64).min(room / 2);
        if !locked && unclaimed + wanted > room {
            self.surplus = 0;
        }
    }

    /// Every lane gets `(empty, stocked)` of the own public queue: empty when it holds no
    /// unclaimed task and no owner holds its lock, stocked when it holds unclaimed tasks and no
    /// lock (as [`PublicQueue::looks_stealable`]).
    #[inline(always)]
    fn own_queue_state(&self) -> (bool, bool) {
        let (unclaimed, locked) = self.own_queue_unclaimed();
        (!locked && unclaimed == 0, !locked && unclaimed > 0)
    }

    /// Lane 0 reads the own public word once, and every lane gets its unclaimed tasks and
    /// whether it is locked. Read Relaxed: a stale answer only moves a release by one check, and
    /// `publish` works on the word it loads itself.
    #[inline(always)]
    fn own_queue_unclaimed(&self) -> (u64, bool) {
        let mut answer = [0u64; 1];
        if self.p.is_leader() {
            let word = self.own_queue().peek();
            let unclaimed = word.initial() - claimed_by(word.initial(), word.steals());
            answer = [unclaimed << 1 | word.locked() as u64];
        }
        let [answer] = self.exchange(answer);
        (answer >> 1, answer & 1 != 0)
    }

    /// The worker's one place that publishes into its own public queue and opens a new epoch:
    /// the `surplus` on top of the overflow stack (a steal's, or what `make_room` moved there
    /// during the last task), newest first, if there is one; else, as Listing 5's release, the
    /// overflow stack's tasks if it holds any, else up to half the local tasks, the oldest. One
    /// call site keeps one inlined copy of [`WorkerCore::publish`] in the kernel: a second one,
    /// inside `steal`, added registers to the MEMSET entry (ptxas). Every
    /// publication that moves tasks counts as a release in the statistics.
    #[inline(always)]
    pub(crate) fn publish_surplus_or_release<X: TaskExecutor<T>>(&mut self, _: &X) {
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
        let moved = self.publish::<X>(want, source);
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
    pub(crate) fn publish<X: TaskExecutor<T>>(&mut self, want: u64, src: TaskRun<T>) -> u64 {
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
        self.copy_tasks_to_publish::<X>(
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
        self.copy_tasks_to_scratch(
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

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::exec::OnFull;
    use crate::one_lane::OneLane;
    use crate::spec::FromConfig;
    use crate::word::{QueueWord, STEAL_INCREMENT};
    use crate::{Env, HostWord, QueueHeader, SchedConfig, Scope, ScratchLayout, DATA_AREAS};

    #[test]
    fn a_surplus_stays_off_a_queue_that_could_not_take_it() {
        let mut config = SchedConfig::new(1);
        config.public_capacity = 64;
        // SAFETY: a queue header is atomic words, valid all zero.
        let header: QueueHeader<HostWord> = unsafe { core::mem::zeroed() };
        let mut env =
            Env::<HostWord, [u64; 8]>::bare(config, 1, core::ptr::null(), 0, [0; DATA_AREAS]);
        env.queue_headers[0] = &header;
        let layout = ScratchLayout::new(
            config.local_capacity,
            64,
            1,
            env.topology.device_queues_max(),
        );
        let mut scratch = std::vec![0u128; layout.total.div_ceil(16)];
        let p = OneLane::with_scratch(&mut scratch);
        // SAFETY: the env has worker 0's queue header and configuration, the scratch its layout;
        // the worker touches nothing else here.
        let mut w = unsafe { WorkerCore::<_, _, FromConfig>::new(p, &env, 0, OnFull::Publish) };
        let open =
            |initial: u64, steals: u64| QueueWord::open(0, initial, 0).0 + steals * STEAL_INCREMENT;
        // (word, surplus, whether it is kept for a publish). A surplus of 5: 60 or more of 64
        // unclaimed could not take it, and it stays on the overflow stack; fewer, a locked word
        // or an empty one publish it. A surplus of 100, more than half a ring: kept only once
        // more than half the ring (32) is unclaimed.
        for (word, surplus, published) in [
            (open(64, 0), 5, false),
            (open(60, 0), 5, false),
            (open(59, 0), 5, true),
            (open(64, 1), 5, true),
            (open(0, 0), 5, true),
            (QueueWord(open(64, 0)).with_lock().0, 5, true),
            (open(32, 0), 100, true),
            (open(33, 0), 100, false),
        ] {
            header.word.store(word, Ordering::Relaxed, Scope::Device);
            w.surplus = surplus;
            w.keep_surplus_unless_wanted();
            let kept = if published { surplus } else { 0 };
            assert_eq!(w.surplus, kept, "word {word:#x}, surplus {surplus}");
        }
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
