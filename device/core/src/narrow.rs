//! [`NarrowContext`]: what a narrow task sees of its worker while other narrow tasks run beside
//! it on the worker's other lanes (`exec/narrow.rs`). Its lanes are its group's, numbered from 0;
//! the barrier, the broadcast and the collectives are the group's; its spawns reserve slots with
//! the lanes' atomic on the worker's spawn cursor; updates of the worker's own state (result
//! slots, heartbeats) take the worker's narrow lock, since several tasks may make them at once.

use crate::context::{task_word, Context};
use crate::exec::{SpawnRoom, WorkerCore};
use crate::platform::{AtomicWord, Ordering, Platform, ProtocolStep};
use crate::scratch::{NARROW_LOCK, NARROW_SPAWNS};
use crate::spec::Spec;

/// Where a narrow batch's spawn at `position` (counted from the batch's first) goes when the
/// ring has `room` free slots from the batch's first: the ring, then the overflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpawnPlace {
    /// Ring slot `i` after the batch's first.
    Ring(u32),
    /// Overflow slot `j` after the overflow's first free one.
    Overflow(u32),
}

/// The [`SpawnPlace`] of spawn `position` with `room` ring slots: a reservation's positions are
/// disjoint, so its slots are; after the batch the ring holds `min(total, room)` of them and the
/// overflow the rest, each once.
#[inline(always)]
pub fn spawn_place(room: u32, position: u32) -> SpawnPlace {
    if position < room {
        SpawnPlace::Ring(position)
    } else {
        SpawnPlace::Overflow(position - room)
    }
}

/// Reads the task at `slot`, one lane's own. On a GPU (`rotate`), lanes that read consecutive
/// 64-byte slots of shared memory would all start at the same bank; each reads its slot's four
/// 16-byte quarters starting at a quarter set by the slot's position, so that eight lanes that
/// read together touch 32 distinct banks. Elsewhere, and for other sizes or alignments, a plain
/// read.
///
/// # Safety
/// As for `slot.read()`.
#[inline(always)]
pub(crate) unsafe fn read_task<T: Copy>(slot: *const T, rotate: bool) -> T {
    if !rotate || core::mem::size_of::<T>() != 64 || slot as usize & 15 != 0 {
        // SAFETY: the caller's guarantee.
        return unsafe { slot.read() };
    }
    let (q, r) = (slot as *const u128, quarter_shift(slot as usize));
    // SAFETY: the slot's 64 bytes are its four aligned quarters.
    let mut v = unsafe {
        [
            q.add(r).read(),
            q.add((r + 1) & 3).read(),
            q.add((r + 2) & 3).read(),
            q.add((r + 3) & 3).read(),
        ]
    };
    // v[k] holds quarter (r + k) & 3: rotate right by r, with fixed indices (a register array
    // indexed by a variable would live in local memory).
    if r & 1 != 0 {
        v = [v[3], v[0], v[1], v[2]];
    }
    if r & 2 != 0 {
        v = [v[2], v[3], v[0], v[1]];
    }
    // SAFETY: T is 64 bytes and plain data (`Copy`, read from a slot that held one).
    unsafe { core::mem::transmute_copy(&v) }
}

/// Writes `task` into `slot`, quarters rotated as [`read_task`] reads them.
///
/// # Safety
/// As for `slot.write(..)`.
#[inline(always)]
pub(crate) unsafe fn write_task<T: Copy>(slot: *mut T, task: &T, rotate: bool) {
    if !rotate || core::mem::size_of::<T>() != 64 || slot as usize & 15 != 0 {
        // SAFETY: the caller's guarantee.
        return unsafe { slot.write(*task) };
    }
    let (q, r) = (slot as *mut u128, quarter_shift(slot as usize));
    // SAFETY: T is 64 bytes: four quarters.
    let mut v: [u128; 4] = unsafe { core::mem::transmute_copy(task) };
    // Rotate left by r: v[k] becomes quarter (r + k) & 3.
    if r & 1 != 0 {
        v = [v[1], v[2], v[3], v[0]];
    }
    if r & 2 != 0 {
        v = [v[2], v[3], v[0], v[1]];
    }
    // SAFETY: as in `read_task`.
    unsafe {
        q.add(r).write(v[0]);
        q.add((r + 1) & 3).write(v[1]);
        q.add((r + 2) & 3).write(v[2]);
        q.add((r + 3) & 3).write(v[3]);
    }
}

/// Whether lanes read and write their own tasks rotated ([`read_task`]): on a GPU, whose lanes
/// share the banks of shared memory.
#[inline(always)]
pub(crate) const fn rotate<P: Platform>() -> bool {
    P::MIN_LANES >= 32
}

/// The quarter a lane starts a 64-byte slot at: half its slot index, modulo 4 (two slots of one
/// 128-byte line start at opposite halves of the banks already).
#[inline(always)]
fn quarter_shift(address: usize) -> usize {
    (address >> 7) & 3
}

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
        self.core.p.protocol_step(ProtocolStep::NarrowSpawn);
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
            self.reserve(1, |_, slot| unsafe {
                write_task(slot, task, rotate::<P>())
            });
        }
    }
    #[inline(always)]
    fn spawn_each(&mut self, count: u32, task: &T) {
        if self.lane_id() < count {
            // SAFETY: as in `spawn_from`.
            self.reserve(1, |_, slot| unsafe {
                write_task(slot, task, rotate::<P>())
            });
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
            write_task(slot, &make(lane + k * width), rotate::<P>())
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
