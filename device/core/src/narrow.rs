//! [`NarrowContext`]: what a narrow task sees of its worker while other narrow tasks run beside
//! it on the worker's other lanes (`exec/narrow.rs`). Its lanes are its group's, numbered from 0;
//! the barrier, the broadcast and the collectives are the group's; its spawns reserve slots with
//! the lanes' atomic on the worker's spawn cursor; updates of the worker's own state (result
//! slots, heartbeats) take the worker's narrow lock, since several tasks may make them at once.

use crate::context::{task_word, Context};
use crate::exec::{SpawnRoom, WorkerCore};
use crate::platform::{AtomicWord, Ordering, Platform};
use crate::scratch::{NARROW_LOCK, NARROW_SPAWNS};
use crate::spec::Spec;

/// The [`Context`] of a narrow task: `width` lanes of a worker that runs other tasks on its
/// other lanes.
pub struct NarrowContext<'w, 'e, P: Platform, T, S: Spec> {
    core: &'w mut WorkerCore<'e, P, T, S>,
    width: u32,
    room: SpawnRoom,
}

impl<'w, 'e, P: Platform, T: Copy, S: Spec> NarrowContext<'w, 'e, P, T, S> {
    #[inline(always)]
    pub(crate) fn new(core: &'w mut WorkerCore<'e, P, T, S>, width: u32, room: SpawnRoom) -> Self {
        NarrowContext { core, width, room }
    }

    /// Reserves `count` slots for this lane's spawns (one atomic for the lanes that call
    /// together) and writes spawn `k` with `fill(k, slot)`; a spawn with no slot anywhere is not
    /// written (the batch fails, see `WorkerCore::spawn_slot`).
    #[inline(always)]
    fn reserve(&self, count: u32, fill: impl Fn(u32, *mut T)) {
        let cursor = self.core.narrow_word(NARROW_SPAWNS);
        // SAFETY: the worker's spawn cursor, a scratch word only the lanes' atomics touch during
        // a batch.
        let first = unsafe { self.core.p.lanes_fetch_add(cursor, count) };
        let first = first.wrapping_sub(self.room.base);
        for k in 0..count {
            if let Some(slot) = self.core.spawn_slot(self.room, first + k) {
                fill(k, slot);
            }
        }
    }

    /// Runs `f` holding the worker's narrow lock.
    #[inline(always)]
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        let lock = self.core.narrow_word(NARROW_LOCK);
        // SAFETY: the worker's narrow lock, a scratch word only the lanes' lock calls touch.
        unsafe { self.core.p.lanes_lock(lock) };
        let r = f();
        // SAFETY: this lane took it above.
        unsafe { self.core.p.lanes_unlock(lock) };
        r
    }

    /// This group's words of the worker's lanes area.
    #[inline(always)]
    fn group_area(&self) -> *mut u64 {
        let first = self.core.p.lane_id() & !(self.width - 1);
        // SAFETY: the lanes area holds one word per lane of the worker.
        unsafe {
            self.core
                .scratch_at::<u64>(self.core.layout.lanes_area)
                .add(first as usize)
        }
    }
}

impl<P: Platform, T: Copy, S: Spec> Context for NarrowContext<'_, '_, P, T, S> {
    type Task = T;

    #[inline(always)]
    fn lane_id(&self) -> u32 {
        self.core.p.lane_id() & (self.width - 1)
    }
    #[inline(always)]
    fn lane_count(&self) -> u32 {
        self.width
    }
    #[inline(always)]
    fn worker_id(&self) -> u32 {
        if S::bridged(&self.core.env.config) {
            // As `TaskContext::worker_id`.
            self.core.id + self.core.env.worker_base as u32
        } else {
            self.core.global_id
        }
    }
    #[inline(always)]
    fn barrier(&self) {
        self.core.p.group_barrier(self.width)
    }
    #[inline(always)]
    fn broadcast(&self, value: u64) -> u64 {
        if self.width == 1 {
            return value;
        }
        let area = self.group_area();
        if self.is_leader() {
            // SAFETY: the group's first word, written by its first lane between two barriers.
            unsafe { area.write_volatile(value) };
        }
        self.barrier();
        // SAFETY: written before the barrier.
        let v = unsafe { area.read_volatile() };
        self.barrier();
        v
    }
    #[inline(always)]
    fn spawn_from(&mut self, source: u32, task: &T) {
        if self.lane_id() == source {
            // SAFETY: the slot is this reservation's alone and valid for a task.
            self.reserve(1, |_, slot| unsafe { slot.write(*task) });
        }
    }
    #[inline(always)]
    fn spawn_each(&mut self, count: u32, task: &T) {
        if self.lane_id() < count {
            // SAFETY: as in `spawn_from`.
            self.reserve(1, |_, slot| unsafe { slot.write(*task) });
        }
    }
    #[inline(always)]
    unsafe fn spawn_each_in_place(&mut self, count: u32, fill: impl Fn(Option<*mut T>)) {
        if self.lane_id() < count {
            self.reserve(1, |_, slot| fill(Some(slot)));
        } else {
            fill(None);
        }
    }
    #[inline(always)]
    fn spawn_many(&mut self, count: u32, make: impl Fn(u32) -> T) {
        // Lane `j` of the group builds tasks `j, j + width, ...`.
        let (lane, width) = (self.lane_id(), self.width);
        let mine = count.saturating_sub(lane).div_ceil(width);
        // SAFETY: as in `spawn_from`.
        self.reserve(mine, |k, slot| unsafe {
            slot.write(make(lane + k * width))
        });
    }
    #[inline(always)]
    unsafe fn atomic_add(&self, target: *mut u64, value: u64) -> u64 {
        // SAFETY: the caller meets this method's contract.
        let word = unsafe { task_word::<P::Word>(target) };
        word.fetch_add(value, Ordering::Relaxed, self.core.scope())
    }
    #[inline(always)]
    unsafe fn single_writer_add(&self, target: *mut u64, value: u64) {
        // Other tasks of this worker may add to the same word at once: an atomic add.
        // SAFETY: the caller meets this method's contract.
        let word = unsafe { task_word::<P::Word>(target) };
        word.add_relaxed(value, self.core.scope())
    }
    #[inline(always)]
    unsafe fn single_writer_max(&self, target: *mut u64, value: u64) {
        // SAFETY: as in `single_writer_add`.
        let word = unsafe { task_word::<P::Word>(target) };
        word.max_relaxed(value, self.core.scope())
    }
    #[inline(always)]
    fn now_ns(&self) -> u64 {
        self.core.p.now_ns()
    }
    #[inline(always)]
    fn heartbeat(&self) {
        if self.is_leader() {
            // SAFETY: this lane holds the narrow lock, which every writer of the leader state
            // and the progress record takes during a batch.
            self.locked(|| unsafe { self.core.write_progress(1) });
        }
    }
    #[inline(always)]
    fn area(&self, index: usize) -> u64 {
        self.core.env.area(index)
    }
    #[inline(always)]
    fn area_limit(&self, index: usize) -> u64 {
        self.core.env.area_limit(index)
    }
    #[inline(always)]
    fn tasks_run(&self) -> u64 {
        self.core.tasks_run
    }
    #[inline(always)]
    fn lanes_area(&self) -> *mut u64 {
        self.group_area()
    }
    #[inline(always)]
    fn barrier_any(&self, _value: bool) -> Option<bool> {
        None
    }
    #[inline(always)]
    fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R {
        self.locked(f)
    }
}
