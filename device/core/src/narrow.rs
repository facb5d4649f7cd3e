//! [`NarrowContext`]: what a narrow task sees of its worker while other narrow tasks run beside
//! it on the worker's other lanes, in the mgws loop and the kernel per level (`exec/narrow.rs`)
//! and in the lean static kernel (`baseline::lean_static`); what differs between them is behind
//! `NarrowWorker`. Its lanes are its group's, numbered from 0; the barrier, the broadcast and
//! the collectives are the group's; its spawns reserve slots with the lanes' atomic on the
//! worker's spawn cursor; updates of the worker's own state (result slots, heartbeats) take the
//! worker's narrow lock, since several tasks may make them at once.

use crate::context::{task_update, Context, TaskContext, TaskExecutor, Update};
use crate::error::RunError;
use crate::exec::{SpawnRoom, WorkerCore};
use crate::platform::{Platform, ProtocolStep, Scope};
use crate::scratch::{NARROW_LOCK, NARROW_SPAWNS};
use crate::spec::Spec;

pub(crate) use worker::NarrowWorker;

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
/// share the banks of shared memory, where `X`'s registry keeps the rotation
/// ([`TaskExecutor::ROTATED_SLOTS`]).
#[inline(always)]
pub(crate) const fn slots_rotated<P: Platform, T, X: TaskExecutor<T>>() -> bool {
    P::MIN_LANES >= 32 && X::ROTATED_SLOTS
}

/// The quarter a lane starts a 64-byte slot at: half its slot index, modulo 4 (two slots of one
/// 128-byte line start at opposite halves of the banks already).
#[inline(always)]
fn quarter_shift(address: usize) -> usize {
    (address >> 7) & 3
}

mod worker {
    use crate::context::Context;
    use crate::platform::{Platform, Scope};

    /// What a [`super::NarrowContext`] needs of the worker its group belongs to: the mgws
    /// worker's core during a narrow batch, or the lean static kernel during a round. Public in
    /// a private module: sealed.
    ///
    /// # Safety
    /// `whole().lanes_area()` is the worker's lanes area (one `u64` per lane); `narrow_word` is
    /// the worker's narrow word `index` (scratch), which only the lanes' atomics and lock calls
    /// touch while narrow tasks run; `spawn_slot` is valid for a task, and no other position of
    /// the batch gets it.
    pub unsafe trait NarrowWorker {
        type P: Platform;
        type Task: Copy;
        /// The context of a task that has the worker to itself: what a narrow task sees the
        /// same (its worker, its data, its atomics, the clock; the lanes area is the worker's).
        type Whole: Context<Task = Self::Task>;
        fn whole(&self) -> &Self::Whole;
        fn platform(&self) -> &Self::P;
        /// The scope of task atomics.
        fn scope(&self) -> Scope;
        fn narrow_word(&self, index: usize) -> *mut u32;
        /// The spawn cursor's value as the batch started.
        fn spawn_base(&self) -> u32;
        /// This lane has just reserved `count` spawn positions.
        fn reserved(&mut self, count: u32);
        /// The slot of the batch's spawn `position`; `None` where there is none (nothing is
        /// written, and the batch fails).
        fn spawn_slot(&self, position: u32) -> Option<*mut Self::Task>;
        /// Counts a heartbeat and writes the worker's progress record.
        ///
        /// # Safety
        /// This lane holds the narrow lock.
        unsafe fn heartbeat_locked(&self);
    }
}

/// The atomic word type of `W`'s platform.
type WordOf<W> = <<W as NarrowWorker>::P as Platform>::Word;

/// The [`Context`] of a narrow task: `width` lanes of a worker that runs other tasks on its
/// other lanes.
pub struct NarrowContext<W> {
    w: W,
    width: u32,
    /// Whether its spawns write their slots' quarters rotated ([`slots_rotated`]).
    rotate: bool,
}

impl<W: NarrowWorker> NarrowContext<W> {
    #[inline(always)]
    pub(crate) fn new(w: W, width: u32, rotate: bool) -> Self {
        NarrowContext { w, width, rotate }
    }

    /// The worker's side of the context (the lean kernel reads what its lanes reserved).
    #[inline(always)]
    pub(crate) fn worker(&self) -> &W {
        &self.w
    }

    /// Reserves `count` slots for this lane's spawns (one atomic for the lanes that call
    /// together) and writes spawn `k` with `fill(k, slot)`; a spawn with no slot anywhere is not
    /// written (the batch fails, see `NarrowWorker::spawn_slot`).
    #[inline(always)]
    fn reserve(&mut self, count: u32, fill: impl Fn(u32, *mut W::Task)) {
        let cursor = self.w.narrow_word(NARROW_SPAWNS);
        // Relaxed (the lanes' atomic) suffices: it only makes the reservations disjoint; the
        // slots and the cursor's final value reach the other lanes through the batch's end
        // barrier.
        // SAFETY: the worker's spawn cursor, a scratch word only the lanes' atomics touch during
        // a batch (`NarrowWorker`'s contract).
        let first = unsafe { self.w.platform().lanes_fetch_add(cursor, count) };
        let first = first.wrapping_sub(self.w.spawn_base());
        self.w.reserved(count);
        for k in 0..count {
            if let Some(slot) = self.w.spawn_slot(first + k) {
                fill(k, slot);
            }
        }
    }

    /// Runs `f` holding the worker's narrow lock, whose acquire and release order each holder's
    /// updates (a result slot, the heartbeats and progress record) after the last holder's.
    #[inline(always)]
    fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        let (p, lock) = (self.w.platform(), self.w.narrow_word(NARROW_LOCK));
        // SAFETY: the worker's narrow lock, a scratch word only the lanes' lock calls touch
        // during a batch (`NarrowWorker`'s contract).
        unsafe { p.lanes_lock(lock) };
        let r = f();
        // SAFETY: this lane took it above.
        unsafe { p.lanes_unlock(lock) };
        r
    }

    /// This group's words of the worker's lanes area.
    #[inline(always)]
    fn group_area(&self) -> *mut u64 {
        let first = self.w.platform().lane_id() & !(self.width - 1);
        // SAFETY: the lanes area holds one word per lane of the worker.
        unsafe { self.w.whole().lanes_area().add(first as usize) }
    }
}

impl<W: NarrowWorker> Context for NarrowContext<W> {
    type Task = W::Task;

    #[inline(always)]
    fn lane_id(&self) -> u32 {
        self.w.platform().lane_id() & (self.width - 1)
    }
    #[inline(always)]
    fn lane_count(&self) -> u32 {
        self.width
    }
    #[inline(always)]
    fn worker_id(&self) -> u32 {
        self.w.whole().worker_id()
    }
    #[inline(always)]
    fn barrier(&self) {
        self.w.platform().group_barrier(self.width)
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
    fn spawn_from(&mut self, source: u32, task: &W::Task) {
        if self.lane_id() == source {
            let rotate = self.rotate;
            // SAFETY: the slot is this reservation's alone and valid for a task.
            self.reserve(1, |_, slot| unsafe { write_task(slot, task, rotate) });
        }
    }
    #[inline(always)]
    fn spawn_each(&mut self, count: u32, task: &W::Task) {
        if self.lane_id() < count {
            let rotate = self.rotate;
            // SAFETY: as in `spawn_from`.
            self.reserve(1, |_, slot| unsafe { write_task(slot, task, rotate) });
        }
    }
    #[inline(always)]
    unsafe fn spawn_each_in_place(&mut self, count: u32, fill: impl Fn(Option<*mut W::Task>)) {
        if self.lane_id() < count {
            self.reserve(1, |_, slot| fill(Some(slot)));
        } else {
            fill(None);
        }
    }
    #[inline(always)]
    fn spawn_many(&mut self, count: u32, make: impl Fn(u32) -> W::Task) {
        // Lane `j` of the group builds tasks `j, j + width, ...`.
        let (lane, width, rotate) = (self.lane_id(), self.width, self.rotate);
        let mine = count.saturating_sub(lane).div_ceil(width);
        // SAFETY: as in `spawn_from`.
        self.reserve(mine, |k, slot| unsafe {
            write_task(slot, &make(lane + k * width), rotate)
        });
    }
    #[inline(always)]
    unsafe fn atomic_add(&self, target: *mut u64, value: u64) -> u64 {
        // SAFETY: the caller meets this method's contract.
        unsafe { self.w.whole().atomic_add(target, value) }
    }
    #[inline(always)]
    unsafe fn reduce_add(&self, target: *mut u64, value: u64) {
        // SAFETY: the caller meets this method's contract.
        unsafe { self.w.whole().reduce_add(target, value) }
    }
    #[inline(always)]
    unsafe fn single_writer_add(&self, target: *mut u64, value: u64) {
        // Other tasks of this worker may add to the same word at once: shared.
        // SAFETY: the caller meets this method's contract.
        unsafe { task_update::<WordOf<W>>(target, value, self.w.scope(), Update::Add, true) }
    }
    #[inline(always)]
    unsafe fn single_writer_max(&self, target: *mut u64, value: u64) {
        // SAFETY: as in `single_writer_add`.
        unsafe { task_update::<WordOf<W>>(target, value, self.w.scope(), Update::Max, true) }
    }
    #[inline(always)]
    fn now_ns(&self) -> u64 {
        self.w.whole().now_ns()
    }
    #[inline(always)]
    fn heartbeat(&self) {
        if self.is_leader() {
            // SAFETY: this lane holds the narrow lock.
            self.locked(|| unsafe { self.w.heartbeat_locked() });
        }
    }
    #[inline(always)]
    fn area(&self, index: usize) -> u64 {
        self.w.whole().area(index)
    }
    #[inline(always)]
    fn area_limit(&self, index: usize) -> u64 {
        self.w.whole().area_limit(index)
    }
    #[inline(always)]
    fn tasks_run(&self) -> u64 {
        self.w.whole().tasks_run()
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

/// The worker's side of a [`NarrowContext`] in the mgws loop and the kernel per level: the core
/// during a narrow batch with `room`.
pub(crate) struct CoreBatch<'w, 'e, P: Platform, T, S: Spec> {
    whole: TaskContext<'w, 'e, P, T, S>,
    room: SpawnRoom,
}

impl<'w, 'e, P: Platform, T: Copy, S: Spec> CoreBatch<'w, 'e, P, T, S> {
    #[inline(always)]
    pub(crate) fn new(core: &'w mut WorkerCore<'e, P, T, S>, room: SpawnRoom) -> Self {
        let whole = TaskContext::new(core);
        CoreBatch { whole, room }
    }
}

// SAFETY: the lanes area and the narrow words are the layout's, in the worker's scratch; the
// narrow words are touched only by the lanes' atomics and lock during a batch; a position's
// slot is its own (`WorkerCore::spawn_slot`).
unsafe impl<'w, 'e, P: Platform, T: Copy, S: Spec> NarrowWorker for CoreBatch<'w, 'e, P, T, S> {
    type P = P;
    type Task = T;
    type Whole = TaskContext<'w, 'e, P, T, S>;

    #[inline(always)]
    fn whole(&self) -> &Self::Whole {
        &self.whole
    }
    #[inline(always)]
    fn platform(&self) -> &P {
        &self.whole.core.p
    }
    #[inline(always)]
    fn scope(&self) -> Scope {
        self.whole.core.scope()
    }
    #[inline(always)]
    fn narrow_word(&self, index: usize) -> *mut u32 {
        self.whole.core.narrow_word(index)
    }
    #[inline(always)]
    fn spawn_base(&self) -> u32 {
        self.room.base
    }
    #[inline(always)]
    fn reserved(&mut self, _count: u32) {
        self.platform().protocol_step(ProtocolStep::NarrowSpawn);
    }
    #[inline(always)]
    fn spawn_slot(&self, position: u32) -> Option<*mut T> {
        self.whole.core.spawn_slot(self.room, position)
    }
    #[inline(always)]
    unsafe fn heartbeat_locked(&self) {
        // SAFETY: this lane holds the narrow lock, which every writer of the leader state and
        // the progress record takes during a batch.
        unsafe { self.whole.core.write_progress(1) }
    }
}

/// A barrier of every lane of the worker that tells each whether any lane passed true: the
/// platform's instruction where it has one, else a reduction through `area`.
///
/// # Safety
/// `area` is the worker's lanes area (one word per lane), which no lane uses otherwise during
/// the call; every lane calls it.
#[inline(always)]
pub(crate) unsafe fn lanes_any<P: Platform>(p: &P, area: *mut u64, value: bool) -> bool {
    if let Some(any) = p.barrier_any(value) {
        return any;
    }
    // SAFETY: each lane writes its own word between two barriers (the caller's guarantee).
    unsafe { area.add(p.lane_id() as usize).write_volatile(value as u64) };
    p.barrier();
    let any = (0..p.lane_count() as usize)
        // SAFETY: written before the barrier.
        .any(|lane| unsafe { area.add(lane).read_volatile() } != 0);
    p.barrier();
    any
}

/// The error a failed narrow batch fails the run with: the first lane's packed error among
/// those that failed (each lane passes its own, 0 if none), on lane 0, the lane that records it;
/// a bare task failure of `worker` on the others.
///
/// # Safety
/// As for [`lanes_any`].
#[inline(always)]
pub(crate) unsafe fn first_error<P: Platform>(
    p: &P,
    area: *mut u64,
    packed: u64,
    worker: u32,
) -> RunError {
    // SAFETY: as in `lanes_any`.
    unsafe { area.add(p.lane_id() as usize).write_volatile(packed) };
    p.barrier();
    let mut first = 0;
    if p.is_leader() {
        first = (0..p.lane_count() as usize)
            // SAFETY: written before the barrier.
            .map(|lane| unsafe { area.add(lane).read_volatile() })
            .find(|&w| w != 0)
            .unwrap_or(0);
    }
    p.barrier();
    RunError::unpack(first).unwrap_or(RunError::TaskFailed {
        worker,
        tag: 0,
        code: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::{read_task, write_task};

    /// A 64-byte task of distinct bytes, aligned as a slot.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[repr(C, align(16))]
    struct Task([u8; 64]);

    #[test]
    fn rotated_and_plain_slots_hold_the_same_layout() {
        // Registries choose the order (`TaskExecutor::ROTATED_SLOTS`), and every other path
        // copies slots whole: either order must leave the task in its plain layout. Eight slots
        // span four 128-byte lines, every starting quarter.
        let mut ring = [Task([0; 64]); 8];
        for (i, rotate_write) in [(0usize, true), (1, false)] {
            for (s, slot) in ring.iter_mut().enumerate() {
                let task = Task(core::array::from_fn(|b| (s * 64 + b + i) as u8));
                let slot = slot as *mut Task;
                // SAFETY: `slot` is a valid, aligned slot of the ring.
                unsafe { write_task(slot, &task, rotate_write) };
                // SAFETY: as above; no reference to the slot is live.
                let written = unsafe { slot.read() };
                assert_eq!(written, task, "slot {s}, written rotated: {rotate_write}");
                for rotate_read in [true, false] {
                    // SAFETY: as above.
                    let read = unsafe { read_task(slot, rotate_read) };
                    assert_eq!(read, task, "slot {s}, read rotated: {rotate_read}");
                }
            }
        }
    }
}
