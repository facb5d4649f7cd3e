//! Narrow tasks side by side: a worker whose next local task is narrow (its executor declares
//! fewer lanes for its tag than the worker has) pops up to `lanes / width` such tasks at once and
//! runs each on its own group of lanes ([`NarrowContext`]). Their spawns reserve slots with one
//! atomic per warp on a cursor in the scratch (`Platform::lanes_fetch_add`, a prefix sum over the
//! lanes that spawn together): the slots freed by the popped tasks and the free part of the ring
//! first, the overflow stack beyond it. Stealing, publishing and termination see only the local
//! queue and the overflow stack, as after a worker-wide task.

use super::{IndexedClaim, OnFull, WorkerCore};
use crate::config::RELEASE_MIN_LOCAL;
use crate::context::{Tagged, TaskExecutor};
use crate::error::RunError;
use crate::narrow::{
    first_error, lanes_any, read_task, slots_rotated, spawn_place, CoreBatch, NarrowContext,
    SpawnPlace,
};
use crate::operation::Operation;
use crate::platform::{AtomicWord, Ordering, Platform};
use crate::scratch::NARROW_SPAWNS;
use crate::spec::Spec;

/// Where a narrow batch's spawns go: the batch's first free ring position and how many slots
/// the ring has from there; spawns beyond them overflow.
#[derive(Clone, Copy)]
pub(crate) struct SpawnRoom {
    /// The ring position of the batch's first spawn (the lowest popped task's).
    pub head: u32,
    /// Free ring slots from `head` on.
    pub room: u32,
    /// The spawn cursor's value when the batch started.
    pub base: u32,
}

impl<'e, P: Platform, T: Copy + Tagged, S: Spec> WorkerCore<'e, P, T, S> {
    /// The lanes the next local task runs on when it is narrow: its declared width where that
    /// is below the worker's lanes, else 0 (the whole worker).
    #[inline(always)]
    pub(crate) fn narrow_width<X: TaskExecutor<T>>(&self, exec: &X) -> u32 {
        let width = match X::UNIFORM_WIDTH {
            Some(width) => width,
            None => {
                // SAFETY: the local queue is not empty (the caller's check); every lane reads
                // the same slot, written before a barrier.
                let top = unsafe { &*self.local_slot(self.local_head.wrapping_sub(1) as u64) };
                exec.width(top)
            }
        };
        if width != 0 && width < self.p.lane_count() {
            width
        } else {
            0
        }
    }

    /// The tasks of one batch where every task has the same narrow width: one per group of that
    /// many lanes; `None` for worker-wide tasks, tasks of several widths, and a width of the
    /// whole worker or more.
    #[inline(always)]
    pub(crate) fn uniform_batch<X: TaskExecutor<T>>(&self) -> Option<u64> {
        match X::UNIFORM_WIDTH {
            Some(width) if X::NARROW && width != 0 && width < self.p.lane_count() => {
                Some((self.p.lane_count() / width) as u64)
            }
            _ => None,
        }
    }

    /// The fewest local tasks a worker keeps when it releases: [`RELEASE_MIN_LOCAL`], and for
    /// narrow tasks two batches (a batch of one task per group), so that a release does not
    /// leave the next batch short of tasks and send the worker back to its public queue.
    #[inline(always)]
    pub(crate) fn release_min_local<X: TaskExecutor<T>>(&self, _: &X) -> u64 {
        let batch = self.uniform_batch::<X>().unwrap_or(1);
        (RELEASE_MIN_LOCAL * batch).min(self.local_capacity)
    }

    /// Runs the narrow tasks of `width` lanes on top of the local queue, up to one per group of
    /// `width` lanes, side by side; counts as one loop iteration. A local queue more than half
    /// full first makes room (the loop publishes the surplus), so that the spawns mostly land in
    /// the ring.
    #[inline(always)]
    pub(crate) fn run_narrow_batch<X: TaskExecutor<T>>(
        &mut self,
        exec: &X,
        width: u32,
        claim: Option<&mut IndexedClaim>,
    ) {
        let groups = self.p.lane_count() / width;
        let len = self.local_len();
        // With `claim` (only where every task has one narrow width and the registry runs indexed
        // tasks in place): the batch makes the claim's next tasks from the template, pops
        // nothing, and leaves the local queue's tasks below its spawns.
        let (indexed, next, left) = match claim.as_deref() {
            Some(c) if X::INDEXED_IN_PLACE => (true, c.next, c.left),
            _ => (false, 0, 0),
        };
        debug_assert!(!indexed || left > 0, "a batch with no task");
        let count = match X::UNIFORM_WIDTH {
            _ if indexed => (left as u64).min(groups as u64),
            Some(_) => len.min(groups as u64),
            None => self.narrow_run(exec, width, groups),
        };
        let kept = if indexed { len } else { len - count };
        if kept > self.local_capacity / 2 {
            // The loop publishes the surplus (mgws), or the tasks went to the next frontier
            // (kernel-per-level), before the next batch.
            self.make_room();
            return;
        }
        let popped = if indexed { 0 } else { count as u32 };
        let head = self.local_head.wrapping_sub(popped);
        let room = SpawnRoom {
            head,
            room: (self.local_capacity - kept) as u32,
            base: self.narrow_base,
        };
        // Every lane reads its group's task before any lane spawns into the popped slots.
        self.settle_pop();
        let group = self.p.lane_id() / width;
        let mine = (group < count as u32).then(|| {
            if indexed {
                // SAFETY: tasks next..next + left were claimed by this worker alone and lie
                // below initial_len.
                return unsafe { self.env.initial_task(next + group as u64) };
            }
            let slot = self.local_slot(head as u64 + count - 1 - group as u64);
            // SAFETY: positions head..head + count hold tasks written before a barrier; group
            // `g` takes the `g`-th newest.
            unsafe { read_task(slot, slots_rotated::<P, T, X>()) }
        });
        let first_tag = if indexed {
            // SAFETY: as above (the batch's first, for the hang report).
            unsafe { self.env.initial_task(next) }.tag()
        } else {
            // SAFETY: as above (the newest, for the hang report).
            unsafe { &*self.local_slot(head as u64 + count - 1) }.tag()
        };
        self.p.barrier();
        self.local_head = head;
        if let Some(c) = claim {
            c.next = next + count;
            c.left = left - count as u32;
        }
        self.tasks_run += count;
        self.note_task(first_tag);
        let mut failure = 0;
        if let Some(task) = mine {
            let worker = self.id;
            let rotate = slots_rotated::<P, T, X>();
            let mut ctx = NarrowContext::new(CoreBatch::new(self, room), width, rotate);
            if let Err(e) = exec.execute(&task, &mut ctx) {
                failure = e.into_run_error(worker, task.tag()).pack();
            }
        }
        // The barrier orders every lane's spawns (slots and cursor) before the reads below.
        // SAFETY: the lanes area, which no task uses any more.
        let failed = unsafe { lanes_any(&self.p, self.lanes_area(), failure != 0) };
        // SAFETY: the cursor is this worker's scratch word; every lane's update of it happened
        // before the barrier above, and none updates it until the next batch.
        let cursor = unsafe { self.narrow_word(NARROW_SPAWNS).read_volatile() };
        self.narrow_base = cursor;
        let spawned = cursor.wrapping_sub(room.base);
        let in_ring = spawned.min(room.room);
        let overflowed = spawned - in_ring;
        self.local_head = head.wrapping_add(in_ring);
        self.count(|s| {
            s.tasks_spawned += spawned as u64;
            s.narrow_batches += 1;
        });
        if let OnFull::Publish = self.on_full {
            if overflowed > 0 {
                self.count(|s| s.spills += 1);
                let capacity = self.spill_capacity() as u32;
                if self.spill_len + overflowed > capacity {
                    // The slots past the stack's end were not written (`spawn_slot`).
                    let worker = self.id;
                    self.fail(RunError::SpillOverflow { worker, capacity });
                } else {
                    self.spill_len += overflowed;
                    self.surplus += overflowed;
                }
            }
        }
        if failed {
            // SAFETY: as above.
            let error = unsafe { first_error(&self.p, self.lanes_area(), failure, self.id) };
            self.fail(error);
        }
        self.set_operation(Operation::RunTask);
    }

    /// How many of the top local tasks (at most `groups`) are narrow of `width` lanes: a batch
    /// runs tasks of one width. Lane 0 looks, the others are told.
    #[inline(always)]
    fn narrow_run<X: TaskExecutor<T>>(&self, exec: &X, width: u32, groups: u32) -> u64 {
        let mut plan = [0u64; 1];
        if self.p.is_leader() {
            let len = self.local_len().min(groups as u64);
            let mut n = 0;
            while n < len {
                let at = self.local_head.wrapping_sub(1 + n as u32) as u64;
                // SAFETY: a position of the local queue, written before a barrier.
                if exec.width(unsafe { &*self.local_slot(at) }) != width {
                    break;
                }
                n += 1;
            }
            plan[0] = n;
        }
        self.exchange(plan)[0]
    }
}

impl<'e, P: Platform, T: Copy, S: Spec> WorkerCore<'e, P, T, S> {
    /// The slot of spawn `position` (counted from the batch's first) of a narrow batch with
    /// `room`: in the ring while it has room, then on the overflow stack (mgws) or in the next
    /// frontier (kernel-per-level). `None` when neither has room: nothing is written there, and
    /// the batch fails (mgws) or the host counts the lost spawns (level runs).
    #[inline(always)]
    pub(crate) fn spawn_slot(&self, room: SpawnRoom, position: u32) -> Option<*mut T> {
        let beyond = match spawn_place(room.room, position) {
            SpawnPlace::Ring(i) => return Some(self.local_slot(room.head.wrapping_add(i) as u64)),
            SpawnPlace::Overflow(j) => j as u64,
        };
        match self.on_full {
            OnFull::Publish => {
                let at = self.spill_len as u64 + beyond;
                (at < self.spill_capacity()).then(|| self.spill_slot(at))
            }
            OnFull::Frontier(sink) => {
                // One reservation per overflowing spawn: the ring holds a level run's spawns
                // unless a batch spawns more than its room.
                let at = sink
                    .counter(crate::exec::LevelSink::<P::Word, T>::SPAWNED)
                    .fetch_add(1, Ordering::Relaxed, self.scope);
                // SAFETY: at < out_capacity: a slot of the next frontier that this reservation
                // alone owns.
                (at < sink.out_capacity).then(|| unsafe { sink.out.add(at as usize) })
            }
        }
    }

    /// Narrow word `index` of this worker's scratch ([`crate::scratch::NARROW_SPAWNS`],
    /// [`crate::scratch::NARROW_LOCK`]).
    #[inline(always)]
    pub(crate) fn narrow_word(&self, index: usize) -> *mut u32 {
        self.scratch_at::<u32>(self.layout.narrow + 4 * index)
    }

    /// The worker's lanes area: one word per lane of its scratch.
    #[inline(always)]
    pub(crate) fn lanes_area(&self) -> *mut u64 {
        self.scratch_at::<u64>(self.layout.lanes_area)
    }
}
