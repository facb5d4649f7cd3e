//! What a running task sees of its worker ([`TaskContext`]): its lanes and their collectives,
//! spawning, checked typed views of its data, per-worker accumulators and a progress heartbeat.
//! The same context serves the mgws loop and the baselines: only where a spawn goes when the local
//! queue is full differs (`exec::OnFull`).

use bytemuck::Pod;

use crate::data::{Access, DataDescriptor};
use crate::error::TaskError;
use crate::exec::WorkerCore;
use crate::layout::AREA_WRITABLE;
use crate::platform::{AtomicWord, Ordering, Platform};

/// Runs a task. Implemented by the task registry (`mgws-tasks`), which dispatches on the task tag.
pub trait TaskExecutor<T>: Sync {
    /// Runs `task` on every lane of the worker; all lanes call it and must return the same result.
    fn execute<P: Platform>(
        &self,
        task: &T,
        ctx: &mut TaskContext<'_, '_, P, T>,
    ) -> Result<(), TaskError>;
}

/// A task type whose tag names it in errors (`RunError::TaskFailed::tag`).
pub trait Tagged {
    /// The task's registry tag.
    fn tag(&self) -> u32;
}

/// Bytes between two slots of a per-worker accumulator area: the slot type's size rounded up to
/// 64 bytes, so that no two workers' slots share a cache line (the host's `PerWorker` lays them
/// out so).
pub const fn accumulator_stride(size: usize) -> usize {
    if size == 0 {
        64
    } else {
        size.div_ceil(64) * 64
    }
}

/// What a running task sees of its worker: its lanes, a spawner and the data areas.
pub struct TaskContext<'w, 'e, P: Platform, T> {
    core: &'w mut WorkerCore<'e, P, T>,
}

/// A checked, writable view of a `ReadWrite` descriptor's data as `[U]` (see
/// [`TaskContext::write`]). Elements are read and written one at a time through the view, never
/// through references, so lanes may write disjoint elements concurrently.
pub struct DataMut<'a, U> {
    ptr: *mut U,
    len: usize,
    _life: core::marker::PhantomData<&'a mut [U]>,
}

impl<U: Pod> DataMut<'_, U> {
    /// Elements in the view.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }
    /// True if the view has no element.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Element `i`, or `None` past the end.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<U> {
        // SAFETY: i < len, the view lies inside its area (checked by `TaskContext::write`) and
        // `U: Pod` is valid for any bytes; a volatile read of one element, no reference.
        (i < self.len).then(|| unsafe { self.ptr.add(i).read_volatile() })
    }
    /// Writes element `i`; `Err(OutOfBounds)` past the end. Lanes must write disjoint elements
    /// (use [`TaskContext::lane_range`]).
    #[inline(always)]
    pub fn set(&self, i: usize, value: U) -> Result<(), TaskError> {
        if i >= self.len {
            return Err(TaskError::OutOfBounds);
        }
        // SAFETY: as in `get`; the descriptor is ReadWrite and the area writable (checked), and
        // the task owns the described bytes while it runs (the descriptor contract).
        unsafe { self.ptr.add(i).write_volatile(value) };
        Ok(())
    }
}

impl<'w, 'e, P: Platform, T: Copy> TaskContext<'w, 'e, P, T> {
    #[inline(always)]
    pub(crate) fn new(core: &'w mut WorkerCore<'e, P, T>) -> Self {
        TaskContext { core }
    }
    /// This lane's index in the worker.
    #[inline(always)]
    pub fn lane_id(&self) -> u32 {
        self.core.p.lane_id()
    }
    /// The number of lanes of the worker.
    #[inline(always)]
    pub fn lane_count(&self) -> u32 {
        self.core.p.lane_count()
    }
    /// The id of the worker running the task.
    #[inline(always)]
    pub fn worker_id(&self) -> u32 {
        self.core.id
    }
    /// Waits for every lane of the worker.
    #[inline(always)]
    pub fn barrier(&self) {
        self.core.p.barrier()
    }
    /// Lane 0's `value`, on every lane.
    #[inline(always)]
    pub fn broadcast(&self, value: u64) -> u64 {
        self.core.p.broadcast(value)
    }
    /// The sum of every lane's `value`, on every lane.
    #[inline(always)]
    pub fn sum(&self, value: u64) -> u64 {
        self.reduce(value, |a, b| a.wrapping_add(b))
    }
    /// True on every lane if any lane passed true.
    #[inline(always)]
    pub fn any(&self, value: bool) -> bool {
        self.reduce(value as u64, |a, b| a | b) != 0
    }
    /// The maximum of every lane's `value`, on every lane.
    #[inline(always)]
    pub fn max(&self, value: u64) -> u64 {
        self.reduce(value, |a, b| a.max(b))
    }

    #[inline(always)]
    fn reduce(&self, value: u64, f: impl Fn(u64, u64) -> u64) -> u64 {
        let p = &self.core.p;
        if p.lane_count() == 1 {
            return value;
        }
        let area = self.core.scratch_at::<u64>(self.core.layout.lanes_area);
        // SAFETY: the lanes area has one word per lane; each lane writes only its own.
        unsafe { area.add(p.lane_id() as usize).write_volatile(value) };
        p.barrier();
        let mut acc = value;
        for lane in 0..p.lane_count() as usize {
            if lane != p.lane_id() as usize {
                // SAFETY: written by that lane before the barrier.
                acc = f(acc, unsafe { area.add(lane).read_volatile() });
            }
        }
        p.barrier();
        acc
    }

    /// Enqueues lane 0's `task` as a new task. Every lane must call it.
    #[inline(always)]
    pub fn spawn(&mut self, task: &T) {
        self.spawn_from(0, task);
    }

    /// Enqueues the `task` of lane `source` as a new task; the other lanes' `task` is ignored.
    /// Every lane must call it with the same `source`.
    #[inline(always)]
    pub fn spawn_from(&mut self, source: u32, task: &T) {
        self.core.count(|s| s.tasks_spawned += 1);
        self.core.push_local(source, task);
    }

    /// Atomically adds `value` to the `u64` at `target` with relaxed ordering at the run's
    /// orchestration scope, and returns the previous value.
    ///
    /// # Safety
    /// `target` must be valid, 8-byte aligned and only accessed atomically during the run, and lie
    /// in a data area (on a GPU: global memory, i.e. device, mapped host or peer memory, never
    /// shared memory).
    #[inline(always)]
    pub unsafe fn atomic_add(&self, target: *mut u64, value: u64) -> u64 {
        // SAFETY: every platform that runs tasks has a word type that is `repr(transparent)` over
        // a u64 (see `AtomicWord`); the caller guarantees the address.
        let word = unsafe { &*(target as *const P::Word) };
        word.fetch_add(value, Ordering::Relaxed, self.core.scope)
    }

    /// Enqueues the `task` of every lane `0..count` as new tasks, in lane order: lanes compute
    /// children in parallel and publish them with one barrier. Every lane must call it with the
    /// same `count`, at most [`TaskContext::lane_count`]; the `task` of lanes `>= count` is ignored.
    #[inline(always)]
    pub fn spawn_each(&mut self, count: u32, task: &T) {
        let count = count.min(self.lane_count());
        self.core.count(|s| s.tasks_spawned += count as u64);
        self.core.push_each(count, task);
    }

    /// The platform's monotonic clock in nanoseconds (0 where it has none).
    #[inline(always)]
    pub fn now_ns(&self) -> u64 {
        self.core.p.now_ns()
    }

    /// Base address of data area `index` on this worker's device (0 if unset). Unchecked, for
    /// the built-in workloads' hot paths; tasks use [`TaskContext::read`],
    /// [`TaskContext::write`] and [`TaskContext::accumulate`].
    #[doc(hidden)]
    #[inline(always)]
    pub fn area(&self, index: usize) -> u64 {
        self.core.env.areas.get(index).copied().unwrap_or(0)
    }

    // ----- lane-safe helpers -------------------------------------------------------------------

    /// Runs `f` on lane 0 only and returns its result there (`None` on the other lanes): the
    /// explicit form of a single-lane side effect (a store, a counter update), so that code
    /// correct with one lane stays correct with 32. No barrier is implied.
    #[inline(always)]
    pub fn leader<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        if self.core.p.is_leader() {
            Some(f())
        } else {
            None
        }
    }

    /// This lane's share of the indices `0..len`: `lane, lane + lanes, ...` (every index on
    /// exactly one lane; consecutive lanes touch consecutive indices, which coalesces on a GPU).
    #[inline(always)]
    pub fn lane_range(&self, len: u64) -> core::iter::StepBy<core::ops::Range<u64>> {
        (self.core.p.lane_id() as u64..len).step_by(self.core.p.lane_count() as usize)
    }

    /// Tells the watchdog that this worker is making progress inside a long task: lane 0 counts
    /// a heartbeat and writes the worker's progress record (`WorkerProgress::heartbeats`).
    ///
    /// The watchdog measures progress, not task length, but a worker writes its record only once
    /// per `progress_interval` (256) loop iterations, each running at most one task: tasks that
    /// take longer than the hang timeout / 256 on average (about 39 ms with the default 10 s)
    /// should call this at least every timeout / 2. Cheap (one volatile store of 40 bytes on
    /// lane 0); any lane may call it, the others do nothing. The GPU kernel-per-level baseline
    /// keeps no per-worker records, and there it does nothing.
    #[inline(always)]
    pub fn heartbeat(&self) {
        if self.core.p.is_leader() {
            self.core.with_leader(|l| l.heartbeats += 1);
            self.core.report_progress();
        }
    }

    // ----- checked data views ------------------------------------------------------------------

    /// The bytes `d` names, checked: the descriptor is in use (`Read` or `ReadWrite`; also
    /// `ReadWrite` if `write`), its area exists (and is writable if `write`), and the range lies
    /// inside the area. Returns the address and the size.
    #[inline(always)]
    fn checked(&self, d: &DataDescriptor, write: bool) -> Result<(*mut u8, usize), TaskError> {
        let access = d.access().ok_or(TaskError::WrongAccess)?;
        match (access, write) {
            (Access::Read, false) | (Access::ReadWrite, _) => {}
            _ => return Err(TaskError::WrongAccess),
        }
        let env = self.core.env;
        let area = d.area as usize;
        let (base, limit) = match (env.areas.get(area), env.area_limits.get(area)) {
            (Some(&b), Some(&l)) if b != 0 && l != 0 => (b, l),
            _ => return Err(TaskError::NoArea),
        };
        if write && limit & AREA_WRITABLE == 0 {
            return Err(TaskError::WrongAccess);
        }
        let len = limit & !AREA_WRITABLE;
        let end = d
            .offset
            .checked_add(d.size as u64)
            .ok_or(TaskError::OutOfBounds)?;
        if end > len {
            return Err(TaskError::OutOfBounds);
        }
        Ok(((base + d.offset) as *mut u8, d.size as usize))
    }

    /// `bytes` at `ptr` as a `[U]`: aligned and a whole number of elements.
    #[inline(always)]
    fn typed<U: Pod>(ptr: *mut u8, bytes: usize) -> Result<(*mut U, usize), TaskError> {
        let size = core::mem::size_of::<U>();
        if size == 0
            || !bytes.is_multiple_of(size)
            || !(ptr as usize).is_multiple_of(core::mem::align_of::<U>())
        {
            return Err(TaskError::Misaligned);
        }
        Ok((ptr as *mut U, bytes / size))
    }

    /// The data of a `Read` descriptor into a read-only data area (`Job::input`,
    /// `AreaBytes::Read`) as `&[U]`, checked against the descriptor's access, its data area's
    /// bounds and `U`'s alignment; a [`TaskError`] names what failed.
    ///
    /// A descriptor into a writable area is refused with [`TaskError::WrongAccess`]: other tasks
    /// (or this one, through [`TaskContext::write`]) may write there while the slice lives. Read
    /// such data element by element with [`DataMut::get`].
    #[inline(always)]
    pub fn read<U: Pod>(&self, d: &DataDescriptor) -> Result<&[U], TaskError> {
        if d.access() != Some(Access::Read) {
            return Err(TaskError::WrongAccess);
        }
        let (ptr, bytes) = self.checked(d, false)?;
        let (ptr, len) = Self::typed::<U>(ptr, bytes)?;
        // `checked` found the area; a writable one cannot be lent as a shared slice.
        if self.core.env.area_limits[d.area as usize] & AREA_WRITABLE != 0 {
            return Err(TaskError::WrongAccess);
        }
        // SAFETY: the range lies inside a live data area (checked), is aligned and a whole
        // number of `U`s (checked), and `U: Pod` is valid for any bytes. The area outlives the
        // task and is read-only (checked above): no checked view writes it, and the host does
        // not touch it until the run ended.
        Ok(unsafe { core::slice::from_raw_parts(ptr, len) })
    }

    /// The data of a `ReadWrite` descriptor as a writable view of `U`s, checked like
    /// [`TaskContext::read`] and against the area being writable.
    #[inline(always)]
    pub fn write<U: Pod>(&self, d: &DataDescriptor) -> Result<DataMut<'_, U>, TaskError> {
        let (ptr, bytes) = self.checked(d, true)?;
        let (ptr, len) = Self::typed::<U>(ptr, bytes)?;
        Ok(DataMut {
            ptr,
            len,
            _life: core::marker::PhantomData,
        })
    }

    /// Updates this worker's slot of a per-worker accumulator area on lane 0 only: `d` is a
    /// `ReadWrite` descriptor of one slot per worker, each [`accumulator_stride`]`(size_of::<U>())`
    /// bytes apart (the host's `mgws::PerWorker<U>`), and `f` runs on a copy of this worker's slot
    /// that is then written back. No other worker touches the slot, so no atomics are needed;
    /// the host merges the slots after the run. Returns `f`'s result on lane 0, `None` elsewhere.
    #[inline(always)]
    pub fn accumulate<U: Pod, R>(
        &self,
        d: &DataDescriptor,
        f: impl FnOnce(&mut U) -> R,
    ) -> Result<Option<R>, TaskError> {
        let (ptr, bytes) = self.checked(d, true)?;
        let stride = accumulator_stride(core::mem::size_of::<U>());
        let at = self.core.id as usize * stride;
        if at + core::mem::size_of::<U>() > bytes {
            return Err(TaskError::NoSlot);
        }
        // SAFETY: in bounds (checked above and by `checked`).
        let slot = unsafe { ptr.add(at) };
        let (slot, _) = Self::typed::<U>(slot, core::mem::size_of::<U>())?;
        Ok(self.leader(|| {
            // SAFETY: the slot is aligned, inside a writable area, and only this worker's lane 0
            // reads or writes it during the run (one slot per worker).
            let mut value = unsafe { slot.read_volatile() };
            let r = f(&mut value);
            // SAFETY: as above.
            unsafe { slot.write_volatile(value) };
            r
        }))
    }
}
