//! The local queue (a ring in the worker's scratch) and the overflow stack: pushing spawned
//! tasks, popping the next, making room and spilling, and running a batch of local tasks.

use super::{OnFull, WorkerCore};
use crate::bridge::BRIDGE_INTERVAL;
use crate::context::{Tagged, TaskExecutor};
use crate::error::RunError;
use crate::local_ring::LocalRing;
use crate::operation::Operation;
use crate::platform::Platform;
use crate::spec::Spec;

impl<'e, P: Platform, T: Copy, S: Spec> WorkerCore<'e, P, T, S> {
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

    // ----- local queue and overflow stack -------------------------------------------------------

    #[inline(always)]
    pub(crate) fn local_len(&self) -> u64 {
        self.local_head.wrapping_sub(self.local_tail) as u64
    }

    #[inline(always)]
    pub(crate) fn local_slot(&self, position: u64) -> *mut T {
        self.local_ring().slot(position)
    }

    #[inline(always)]
    pub(crate) fn local_ring(&self) -> LocalRing<T> {
        LocalRing {
            base: self.scratch_at::<T>(self.layout.local_slots),
            capacity: self.local_capacity,
        }
    }

    /// Overflow slots per worker, read from the configuration where needed (not held in
    /// registers for the whole loop).
    #[inline(always)]
    pub(crate) fn spill_capacity(&self) -> u64 {
        self.env.config.spill_capacity as u64
    }

    #[inline(always)]
    pub(crate) fn spill_slot(&self, index: u64) -> *mut T {
        // SAFETY: the host allocates spill_capacity tasks per worker; index < spill_capacity.
        unsafe {
            self.env
                .spill
                .add((self.id as u64 * self.spill_capacity() + index) as usize)
        }
    }

    /// Takes the newest local task (depth-first order for spawning workloads).
    #[inline(always)]
    pub(crate) fn pop_local(&mut self) -> T {
        self.local_head = self.local_head.wrapping_sub(1);
        // SAFETY: position local_head holds a task written by this worker's lanes before a barrier.
        let task = unsafe { self.local_slot(self.local_head as u64).read() };
        // The slot may be overwritten by the next write to the local queue: every lane must have
        // read it first. That barrier is deferred to the next write (`settle_pop`), so a task that
        // spawns nothing costs no barrier here.
        self.pop_pending.set(true);
        task
    }

    /// The barrier a popped slot owes before the local queue is written again (see `pop_local`);
    /// every exchange's barriers pay it too.
    #[inline(always)]
    pub(crate) fn settle_pop(&self) {
        if self.pop_pending.get() {
            self.p.barrier();
            self.pop_pending.set(false);
        }
    }

    /// Pushes lane `source`'s `task` onto the local queue, making room first if it is full.
    #[inline(always)]
    pub(crate) fn push_local(&mut self, source: u32, task: &T) {
        if self.local_len() == self.local_capacity {
            self.make_room();
            if self.aborted {
                return;
            }
        }
        self.settle_pop();
        if self.p.lane_id() == source {
            // SAFETY: the slot is free (len < capacity) and only this lane writes it.
            unsafe { self.local_slot(self.local_head as u64).write(*task) };
        }
        self.local_head = self.local_head.wrapping_add(1);
        self.p.barrier();
    }

    /// Pushes the `task` of each lane `0..count` (`count <= lane_count`), in lane order, with one
    /// barrier instead of one per task.
    #[inline(always)]
    pub(crate) fn push_each(&mut self, count: u32, task: &T) {
        if count as u64 > self.local_capacity / 2 {
            // More tasks than half the local queue: one at a time, making room as needed.
            for source in 0..count {
                self.push_local(source, task);
            }
            return;
        }
        if !self.make_room_for(count) {
            return;
        }
        if let Some(slot) = self.each_slot(0, count) {
            // SAFETY: the slot is free (`make_room_for`, `each_slot`); only this lane writes it.
            unsafe { slot.write(*task) };
        }
        self.commit_each(count);
    }

    /// [`WorkerCore::push_each`] with each lane's task written in place by `fill`, given this
    /// lane's slot (`None` on lanes outside the tasks it places). More tasks than half the local
    /// queue go in parts, `fill` running again for each (a local queue of at least twice the
    /// lanes, as the GPU's default, needs one part).
    ///
    /// # Safety
    /// `fill` initialises the whole task behind the pointer it is given.
    #[inline(always)]
    pub(crate) unsafe fn push_each_in_place(&mut self, count: u32, fill: impl Fn(Option<*mut T>)) {
        let part = (self.local_capacity / 2).max(1) as u32;
        let mut done = 0;
        while done < count {
            let n = (count - done).min(part);
            if !self.make_room_for(n) {
                return;
            }
            fill(self.each_slot(done, n));
            self.commit_each(n);
            done += n;
        }
    }

    /// Makes room in the local queue for `count <= local_capacity / 2` more tasks; false after
    /// an abort, when nothing may be pushed.
    #[inline(always)]
    fn make_room_for(&mut self, count: u32) -> bool {
        while self.local_len() + count as u64 > self.local_capacity {
            self.make_room();
            if self.aborted {
                return false;
            }
        }
        true
    }

    /// After [`WorkerCore::make_room_for`]: settles the last pop and returns this lane's slot
    /// among the next `count`, which lanes `first..first + count` write in order (`None` on the
    /// other lanes).
    #[inline(always)]
    fn each_slot(&self, first: u32, count: u32) -> Option<*mut T> {
        self.settle_pop();
        let lane = self.p.lane_id().wrapping_sub(first);
        (lane < count).then(|| self.local_slot((self.local_head as u64) + lane as u64))
    }

    /// Publishes the `count` tasks written into the slots of [`WorkerCore::each_slot`] to this
    /// worker's lanes, with one barrier.
    #[inline(always)]
    fn commit_each(&mut self, count: u32) {
        self.local_head = self.local_head.wrapping_add(count);
        self.p.barrier();
    }

    /// Frees room in a full local queue, as the algorithm running the worker decides (see
    /// [`OnFull`]). Only reached when the ring is full, never on the path of a task that fits.
    ///
    /// mgws moves the oldest half onto the overflow stack and adds it to the worker's `surplus`,
    /// which the loop publishes after the task, at its one publish site
    /// (`publish_surplus_or_release`). Publishing here, inside the task, inlined `publish` at
    /// every spawn call site, and each copy added registers to the FIB and UTS worker entries.
    #[inline(always)]
    pub(crate) fn make_room(&mut self) {
        let half = self.local_capacity / 2;
        match self.on_full {
            OnFull::Publish => {
                if self.spill(half) {
                    self.surplus += half as u32;
                }
            }
            OnFull::Frontier(sink) => self.flush_to(sink),
        }
        // Back to the task that spawned (see `run_next_local`).
        self.set_operation(Operation::RunTask);
    }

    /// Moves the `count` oldest local tasks onto the overflow stack. False (and the run fails
    /// with [`RunError::SpillOverflow`]) when they do not fit.
    #[inline(always)]
    pub(crate) fn spill(&mut self, count: u64) -> bool {
        self.set_operation(Operation::Spill);
        if (self.spill_len as u64) + count > self.spill_capacity() {
            let (worker, capacity) = (self.id, self.spill_capacity() as u32);
            self.fail(RunError::SpillOverflow { worker, capacity });
            return false;
        }
        let (tail, top) = (self.local_tail as u64, self.spill_len as u64);
        self.copy_tasks(
            count,
            |j| self.local_slot(tail + j),
            |j| self.spill_slot(top + j),
        );
        self.p.barrier();
        self.local_tail = self.local_tail.wrapping_add(count as u32);
        self.spill_len += count as u32;
        self.count(|s| s.spills += 1);
        true
    }

    /// Moves the newest overflow tasks back into the (empty) local queue.
    #[inline(always)]
    pub(crate) fn refill_from_spill(&mut self) {
        self.set_operation(Operation::Spill);
        let count = (self.spill_len as u64).min(self.local_capacity / 2);
        let (from, head) = (self.spill_len as u64 - count, self.local_head as u64);
        self.settle_pop();
        self.copy_tasks_to_scratch(
            count,
            |j| self.spill_slot(from + j),
            |j| self.local_slot(head + j),
        );
        self.p.barrier();
        self.spill_len -= count as u32;
        self.local_head = self.local_head.wrapping_add(count as u32);
        self.set_operation(Operation::RunTask);
    }
}
