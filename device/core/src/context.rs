//! What a running task sees of its worker: the [`Context`] trait (its lanes and their
//! collectives, spawning, checked typed views of its data, per-worker accumulators and a progress
//! heartbeat) and [`TaskContext`], its implementation over a [`WorkerCore`], which serves the mgws
//! loop and the kernel-per-level baseline (only where a spawn goes when the local queue is full
//! differs: `exec::OnFull`). The lean static baseline implements [`Context`] over its own state
//! (`baseline::lean_static`).

use bytemuck::Pod;

use crate::data::{Access, DataDescriptor};
use crate::error::TaskError;
use crate::exec::WorkerCore;
use crate::layout::AREA_WRITABLE;
use crate::platform::{AtomicWord, Ordering, Platform, Scope};
use crate::spec::Spec;

/// The word a task atomic (`Context::atomic_add`, `reduce_add`, `single_writer_add`,
/// `single_writer_max`) names by its address.
///
/// # Safety
/// `target` meets [`Context::atomic_add`]'s contract and stays valid for `'a`.
#[inline(always)]
unsafe fn task_word<'a, W: AtomicWord>(target: *mut u64) -> &'a W {
    // SAFETY: every platform that runs tasks has a word type that is `repr(transparent)` over a
    // u64 (see `AtomicWord`); the caller guarantees the address.
    unsafe { &*(target as *const W) }
}

/// [`Context::atomic_add`] at `scope`, for every context.
///
/// # Safety
/// As for [`Context::atomic_add`].
#[inline(always)]
pub(crate) unsafe fn task_fetch_add<W: AtomicWord>(
    target: *mut u64,
    value: u64,
    scope: Scope,
) -> u64 {
    // SAFETY: the caller's guarantee.
    let word = unsafe { task_word::<W>(target) };
    // Relaxed, as the method promises.
    word.fetch_add(value, Ordering::Relaxed, scope)
}

/// What a task's single-writer update of a word does: [`Context::single_writer_add`] or
/// [`Context::single_writer_max`].
#[derive(Clone, Copy)]
pub(crate) enum Update {
    Add,
    Max,
}

/// `update` of the word at `target` by `value` at `scope`; `shared` where other tasks may update
/// the word at once (narrow tasks side by side, or any task: [`Context::reduce_add`]): then
/// atomic and relaxed.
///
/// # Safety
/// As for [`Context::atomic_add`]; without `shared`, also [`Context::single_writer_add`]'s
/// single writer and no reads before the run ended.
#[inline(always)]
pub(crate) unsafe fn task_update<W: AtomicWord>(
    target: *mut u64,
    value: u64,
    scope: Scope,
    update: Update,
    shared: bool,
) {
    // SAFETY: the caller's guarantee.
    let word = unsafe { task_word::<W>(target) };
    match (update, shared) {
        (Update::Add, false) => word.add_single_writer(value, scope),
        (Update::Add, true) => word.add_relaxed(value, scope),
        (Update::Max, false) => word.max_single_writer(value, scope),
        (Update::Max, true) => word.max_relaxed(value, scope),
    }
}

/// Runs a task. Implemented by the task registry (`mgws-tasks`), which dispatches on the task tag.
pub trait TaskExecutor<T>: Sync {
    /// True if some task of this executor is narrow: it declares fewer lanes than a worker may
    /// have ([`TaskExecutor::width`]). Only then does a worker look at its tasks' widths.
    const NARROW: bool = false;
    /// The width of every task, where all tags share one (0 for the whole worker); `None` where
    /// they differ, and a worker reads each task's.
    const UNIFORM_WIDTH: Option<u32> = Some(0);
    /// Words each lane loads before it stores any in the copies on the publishing paths (a
    /// publish into the ring, from the overflow stack or the local queue; a steal's tasks beyond
    /// the local queue's half onto the overflow stack): 1, 2, 4 or 8 (a worker of another value
    /// does not compile).
    /// More words in flight made FIB and N-Queens faster on a GPU and UTS T1L slower
    /// (docs/results.md), so each registry chooses (`#[registry(publish_copy_batch = N)]`).
    const PUBLISH_COPY_BATCH: u32 = 1;

    /// Whether a worker whose tasks all have one narrow width runs a claim of indexed initial
    /// tasks (`Env::initial_counted_word`) straight from the template, a batch at a time, instead
    /// of copying the claim through its local queue. It saves a copy in and out of the scratch
    /// per task, and costs registers in every worker of the registry, whose jobs then seldom
    /// start from a few listed tasks (`#[registry(indexed_in_place)]`; MEMSET's; docs/results.md).
    const INDEXED_IN_PLACE: bool = false;

    /// Whether narrow tasks read and write their 64-byte slots of the local queue a quarter at a
    /// time in rotated order on a GPU (`narrow.rs`): lanes whose slots lie 128 bytes apart
    /// (FIB's two children per lane) then hit different banks of shared memory. The rotation
    /// moves each slot's quarters between registers, about 50 warp instructions per slot; tasks
    /// whose lanes spawn irregular counts pay that without the banks' gain: N-Queens and UTS
    /// took 14-20% less time without it, FIB 22% more (docs/results.md), so each registry
    /// chooses (`#[registry(plain_slots)]` turns it off).
    const ROTATED_SLOTS: bool = true;

    /// The lanes a task of `task`'s tag runs on: a power of two from 1 to 32, or 0 for the
    /// whole worker (the default). A worker with at most that many lanes runs it on all of them.
    #[inline(always)]
    fn width(&self, _task: &T) -> u32 {
        0
    }

    /// Runs `task` on every lane of the context (the whole worker, or a narrow task's lanes);
    /// all of them call it and must return the same result.
    fn execute<C: Context<Task = T>>(&self, task: &T, ctx: &mut C) -> Result<(), TaskError>;
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

/// What a running task sees of its worker: its lanes and their collectives, a spawner, the data
/// areas and the watchdog. Every lane of the worker runs the task and makes the same calls.
///
/// An implementation provides the primitives (the methods without a default); the checked data
/// views, the collectives and the lane helpers are written once here on top of them.
pub trait Context {
    /// The task type spawned tasks have.
    type Task: Copy;

    /// This lane's index in the worker.
    fn lane_id(&self) -> u32;
    /// The number of lanes of the worker.
    fn lane_count(&self) -> u32;
    /// The id of the worker running the task.
    fn worker_id(&self) -> u32;
    /// Waits for every lane of the worker.
    fn barrier(&self);
    /// Lane 0's `value`, on every lane.
    fn broadcast(&self, value: u64) -> u64;
    /// Enqueues the `task` of lane `source` as a new task; the other lanes' `task` is ignored.
    /// Every lane must call it with the same `source`.
    fn spawn_from(&mut self, source: u32, task: &Self::Task);
    /// Enqueues the `task` of every lane `0..count` as new tasks, in lane order: lanes compute
    /// children in parallel and publish them with one barrier. Every lane must call it with the
    /// same `count`, at most [`Context::lane_count`]; the `task` of lanes `>= count` is ignored.
    fn spawn_each(&mut self, count: u32, task: &Self::Task);
    /// [`Context::spawn_each`] with each lane's task written in place: `fill` gets this lane's
    /// new slot (`None` on lanes without one) and writes the task into it; it may run more than
    /// once (a worker whose local queue holds fewer than twice `count` tasks places them in
    /// parts). A task that spawns writes its children into the queue rather than building them
    /// first (`mgws_tasks::Ctx::spawn_each_like`). The default writes into a local value and
    /// calls `spawn_each`.
    ///
    /// # Safety
    /// `fill` initialises the whole task behind the pointer it is given, and calls nothing on
    /// this context; every lane calls it with the same `count`, at most
    /// [`Context::lane_count`].
    #[inline(always)]
    unsafe fn spawn_each_in_place(&mut self, count: u32, fill: impl Fn(Option<*mut Self::Task>)) {
        let mut task = core::mem::MaybeUninit::<Self::Task>::uninit();
        fill(Some(task.as_mut_ptr()));
        // SAFETY: `fill` initialised it (this method's contract).
        self.spawn_each(count, unsafe { &task.assume_init() });
    }
    /// Atomically adds `value` to the `u64` at `target` with relaxed ordering at the run's
    /// orchestration scope, and returns the previous value.
    ///
    /// # Safety
    /// `target` must be valid, 8-byte aligned and only accessed atomically during the run, and
    /// lie in a data area (on a GPU: global memory, i.e. device, mapped host or peer memory, never
    /// shared memory).
    unsafe fn atomic_add(&self, target: *mut u64, value: u64) -> u64;
    /// Atomically adds `value` to the `u64` at `target`, as [`Context::atomic_add`], returning
    /// nothing, so that the worker does not wait for the word: a GPU issues a fire-and-forget
    /// reduction (`red`), a CPU (and a GPU PE over NVSHMEM's device API) a relaxed `fetch_add`
    /// ([`crate::AtomicWord::add_relaxed`]). The assembler turns an `atom` whose result is unused
    /// into a `red` too, but not in every build: in one MEMSET's `atomic_add` stayed an `atom`,
    /// and MEMSET ran slower (docs/results.md).
    ///
    /// # Safety
    /// As for [`Context::atomic_add`].
    unsafe fn reduce_add(&self, target: *mut u64, value: u64);
    /// Adds `value` to the `u64` at `target`, a word that only this worker writes during the run
    /// (its row of a result table): call it on one lane. Returns nothing, so that the worker
    /// does not wait for the word: a GPU issues a fire-and-forget reduction, a CPU a plain load
    /// and store ([`crate::AtomicWord::add_single_writer`]).
    ///
    /// # Safety
    /// As for [`Context::atomic_add`]; in addition no other worker writes the word during the
    /// run, and nothing reads it until the run ended.
    unsafe fn single_writer_add(&self, target: *mut u64, value: u64);
    /// Raises the `u64` at `target` to at least `value`, as [`Context::single_writer_add`].
    ///
    /// # Safety
    /// As for [`Context::single_writer_add`].
    unsafe fn single_writer_max(&self, target: *mut u64, value: u64);
    /// The platform's monotonic clock in nanoseconds (0 where it has none).
    fn now_ns(&self) -> u64;
    /// Tells the watchdog that this worker is making progress inside a long task: lane 0 counts
    /// a heartbeat and writes the worker's progress record (`WorkerProgress::heartbeats`).
    ///
    /// The watchdog measures progress, not task length, but a worker writes its record only once
    /// per `progress_interval` (256) loop iterations, each running at most one task: tasks that
    /// take longer than the hang timeout / 256 on average (about 39 ms with the default 10 s)
    /// should call this at least every timeout / 2. Cheap (six volatile 8-byte stores on lane
    /// 0); any lane may call it, the others do nothing. The GPU kernel-per-level baseline
    /// keeps no per-worker records, and there it does nothing.
    fn heartbeat(&self);
    /// Base address of data area `index` on this worker's device (0 if unset). Unchecked, for
    /// the built-in workloads' hot paths; tasks use [`Context::read`], [`Context::write`] and
    /// [`Context::accumulate`].
    #[doc(hidden)]
    fn area(&self, index: usize) -> u64;
    /// Data area `index`'s size in bytes, with [`AREA_WRITABLE`] set if tasks may write it (0 if
    /// unset).
    #[doc(hidden)]
    fn area_limit(&self, index: usize) -> u64;
    /// One `u64` per lane of this worker's scratch, for the collectives. Only the collectives
    /// below use it, between two barriers.
    #[doc(hidden)]
    fn lanes_area(&self) -> *mut u64;
    /// The platform's [`Platform::barrier_any`](crate::Platform::barrier_any), for
    /// [`Context::any`].
    #[doc(hidden)]
    fn barrier_any(&self, value: bool) -> Option<bool>;
    /// Tasks this worker has started, this one included: the same on every lane, so a task may
    /// branch on it (a bound on how much work one worker does, for example).
    fn tasks_run(&self) -> u64;
    /// Runs `f`, an update of the worker's own state (its result-table slot), so that no other
    /// task of the worker updates it meanwhile: narrow tasks side by side take a lock; a task
    /// that has the worker to itself just runs `f`.
    #[doc(hidden)]
    #[inline(always)]
    fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }

    /// Enqueues `count` new tasks, task `k` being `make(k)`. Every lane of the task calls it with
    /// the same `count`; the lanes build the tasks together (a narrow task of one lane builds
    /// them all and reserves their slots with one atomic of its warp, shared with the lanes
    /// beside it).
    #[inline(always)]
    fn spawn_many(&mut self, count: u32, make: impl Fn(u32) -> Self::Task) {
        let lanes = self.lane_count();
        let mut first = 0;
        while first < count {
            let part = (count - first).min(lanes);
            let task = make(first + self.lane_id().min(part - 1));
            self.spawn_each(part, &task);
            first += part;
        }
    }

    /// True on lane 0.
    #[inline(always)]
    fn is_leader(&self) -> bool {
        self.lane_id() == 0
    }

    /// The sum of every lane's `value`, on every lane.
    #[inline(always)]
    fn sum(&self, value: u64) -> u64 {
        reduce(self, value, |a, b| a.wrapping_add(b))
    }
    /// True on every lane if any lane passed true. One instruction on a GPU (a barrier that
    /// reduces); elsewhere a reduction through the scratch, whose loop of one load per lane held
    /// a GPU worker's registers too (docs/results.md).
    #[inline(always)]
    fn any(&self, value: bool) -> bool {
        match self.barrier_any(value) {
            Some(any) => any,
            None => reduce(self, value as u64, |a, b| a | b) != 0,
        }
    }
    /// The maximum of every lane's `value`, on every lane.
    #[inline(always)]
    fn max(&self, value: u64) -> u64 {
        reduce(self, value, |a, b| a.max(b))
    }

    /// Enqueues lane 0's `task` as a new task. Every lane must call it.
    #[inline(always)]
    fn spawn(&mut self, task: &Self::Task) {
        self.spawn_from(0, task);
    }

    /// Runs `f` on lane 0 only and returns its result there (`None` on the other lanes): the
    /// explicit form of a single-lane side effect (a store, a counter update), so that code
    /// correct with one lane stays correct with 32. No barrier is implied.
    #[inline(always)]
    fn leader<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        if self.is_leader() {
            Some(f())
        } else {
            None
        }
    }

    /// This lane's share of the indices `0..len`: `lane, lane + lanes, ...` (every index on
    /// exactly one lane; consecutive lanes touch consecutive indices, which coalesces on a GPU).
    #[inline(always)]
    fn lane_range(&self, len: u64) -> core::iter::StepBy<core::ops::Range<u64>> {
        (self.lane_id() as u64..len).step_by(self.lane_count() as usize)
    }

    /// The data of a `Read` descriptor into a read-only data area (`Job::input`,
    /// `AreaBytes::Read`) as `&[U]`, checked against the descriptor's access, its data area's
    /// bounds and `U`'s alignment; a [`TaskError`] names what failed.
    ///
    /// A descriptor into a writable area is refused with [`TaskError::WrongAccess`]: other tasks
    /// (or this one, through [`Context::write`]) may write there while the slice lives. Read
    /// such data element by element with [`DataMut::get`].
    #[inline(always)]
    fn read<U: Pod>(&self, d: &DataDescriptor) -> Result<&[U], TaskError> {
        if d.access() != Some(Access::Read) {
            return Err(TaskError::WrongAccess);
        }
        let (ptr, bytes) = checked(self, d, false)?;
        let (ptr, len) = typed::<U>(ptr, bytes)?;
        // `checked` found the area; a writable one cannot be lent as a shared slice.
        if self.area_limit(d.area as usize) & AREA_WRITABLE != 0 {
            return Err(TaskError::WrongAccess);
        }
        // SAFETY: the range lies inside a live data area (checked), is aligned and a whole
        // number of `U`s (checked), and `U: Pod` is valid for any bytes. The area outlives the
        // task and is read-only (checked above): no checked view writes it, and the host does
        // not touch it until the run ended.
        Ok(unsafe { core::slice::from_raw_parts(ptr, len) })
    }

    /// The data of a `ReadWrite` descriptor as a writable view of `U`s, checked like
    /// [`Context::read`] and against the area being writable.
    #[inline(always)]
    fn write<U: Pod>(&self, d: &DataDescriptor) -> Result<DataMut<'_, U>, TaskError> {
        let (ptr, bytes) = checked(self, d, true)?;
        let (ptr, len) = typed::<U>(ptr, bytes)?;
        Ok(DataMut {
            ptr,
            len,
            _life: core::marker::PhantomData,
        })
    }

    /// Updates this worker's slot of result table `results` on lane 0 only: the table's area
    /// holds one slot per worker, each [`accumulator_stride`]`(size_of::<U>())` bytes apart (the
    /// host's `mgws::PerWorker<U>`), and `f` runs on a copy of this worker's slot that is then
    /// written back. No other worker touches the slot, so no atomics are needed; the host merges
    /// the slots after the run. Returns `f`'s result on lane 0, `None` elsewhere. A job that did
    /// not attach the table fails the task with [`TaskError::NoArea`].
    #[inline(always)]
    fn accumulate<U: Pod, R>(
        &self,
        results: crate::ResultTable<U>,
        f: impl FnOnce(&mut U) -> R,
    ) -> Result<Option<R>, TaskError> {
        let (base, len) = checked_area(self, results.area() as usize, true)?;
        let stride = accumulator_stride(core::mem::size_of::<U>());
        let at = self.worker_id() as u64 * stride as u64;
        if at + core::mem::size_of::<U>() as u64 > len {
            return Err(TaskError::NoSlot);
        }
        // In the area: checked above.
        let slot = (base + at) as *mut u8;
        let (slot, _) = typed::<U>(slot, core::mem::size_of::<U>())?;
        Ok(self.leader(|| {
            self.exclusive(|| {
                // SAFETY: the slot is aligned, inside a writable area, and only this worker
                // reads or writes it during the run (one slot per worker), one task at a time
                // (`exclusive`), on that task's leader lane.
                let mut value = unsafe { slot.read_volatile() };
                let r = f(&mut value);
                // SAFETY: as above.
                unsafe { slot.write_volatile(value) };
                r
            })
        }))
    }
}

/// Combines every lane's `value` with `f`, on every lane (through [`Context::lanes_area`]).
#[inline(always)]
fn reduce<C: Context + ?Sized>(ctx: &C, value: u64, f: impl Fn(u64, u64) -> u64) -> u64 {
    if ctx.lane_count() == 1 {
        return value;
    }
    let area = ctx.lanes_area();
    let lane = ctx.lane_id() as usize;
    // SAFETY: the lanes area has one word per lane; each lane writes only its own.
    unsafe { area.add(lane).write_volatile(value) };
    ctx.barrier();
    let mut acc = value;
    for other in 0..ctx.lane_count() as usize {
        if other != lane {
            // SAFETY: written by that lane before the barrier.
            acc = f(acc, unsafe { area.add(other).read_volatile() });
        }
    }
    ctx.barrier();
    acc
}

/// The bytes `d` names, checked: the descriptor is in use (`Read` or `ReadWrite`; also
/// `ReadWrite` if `write`), its area exists (and is writable if `write`), and the range lies
/// inside the area. Returns the address and the size.
#[inline(always)]
fn checked<C: Context + ?Sized>(
    ctx: &C,
    d: &DataDescriptor,
    write: bool,
) -> Result<(*mut u8, usize), TaskError> {
    let access = d.access().ok_or(TaskError::WrongAccess)?;
    match (access, write) {
        (Access::Read, false) | (Access::ReadWrite, _) => {}
        _ => return Err(TaskError::WrongAccess),
    }
    let (base, len) = checked_area(ctx, d.area as usize, write)?;
    let end = d
        .offset
        .checked_add(d.size as u64)
        .ok_or(TaskError::OutOfBounds)?;
    if end > len {
        return Err(TaskError::OutOfBounds);
    }
    Ok(((base + d.offset) as *mut u8, d.size as usize))
}

/// Data area `area`'s base address and length, checked: it exists, and is writable if `write`.
#[inline(always)]
fn checked_area<C: Context + ?Sized>(
    ctx: &C,
    area: usize,
    write: bool,
) -> Result<(u64, u64), TaskError> {
    let (base, limit) = (ctx.area(area), ctx.area_limit(area));
    if base == 0 || limit == 0 {
        return Err(TaskError::NoArea);
    }
    if write && limit & AREA_WRITABLE == 0 {
        return Err(TaskError::WrongAccess);
    }
    Ok((base, limit & !AREA_WRITABLE))
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

/// [`Context`] over a [`WorkerCore`]: the context of tasks run by the mgws loop and the
/// kernel-per-level baseline.
pub struct TaskContext<'w, 'e, P: Platform, T, S: Spec> {
    pub(crate) core: &'w mut WorkerCore<'e, P, T, S>,
}

/// A checked, writable view of a `ReadWrite` descriptor's data as `[U]` (see
/// [`Context::write`]). Elements are read and written one at a time through the view, never
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
        // SAFETY: i < len, the view lies inside its area (checked by `Context::write`) and
        // `U: Pod` is valid for any bytes; a volatile read of one element, no reference.
        (i < self.len).then(|| unsafe { self.ptr.add(i).read_volatile() })
    }
    /// Writes element `i`; `Err(OutOfBounds)` past the end. Lanes must write disjoint elements
    /// (use [`Context::lane_range`]).
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

impl<'w, 'e, P: Platform, T: Copy, S: Spec> TaskContext<'w, 'e, P, T, S> {
    #[inline(always)]
    pub(crate) fn new(core: &'w mut WorkerCore<'e, P, T, S>) -> Self {
        TaskContext { core }
    }
}

impl<P: Platform, T: Copy, S: Spec> Context for TaskContext<'_, '_, P, T, S> {
    type Task = T;

    #[inline(always)]
    fn lane_id(&self) -> u32 {
        self.core.p.lane_id()
    }
    #[inline(always)]
    fn lane_count(&self) -> u32 {
        self.core.p.lane_count()
    }
    #[inline(always)]
    fn worker_id(&self) -> u32 {
        if S::bridged(&self.core.env.config) {
            // A bridged worker's loop keeps more state live, and with `global_id` too its UTS
            // entries spilled at their register cap; it loads the base instead.
            self.core.id + self.core.env.worker_base as u32
        } else {
            self.core.global_id
        }
    }
    #[inline(always)]
    fn barrier(&self) {
        self.core.p.barrier()
    }
    #[inline(always)]
    fn broadcast(&self, value: u64) -> u64 {
        self.core.p.broadcast(value)
    }
    #[inline(always)]
    fn spawn_from(&mut self, source: u32, task: &T) {
        self.core.count(|s| s.tasks_spawned += 1);
        self.core.push_local(source, task);
    }
    #[inline(always)]
    fn spawn_each(&mut self, count: u32, task: &T) {
        let count = count.min(self.lane_count());
        self.core.count(|s| s.tasks_spawned += count as u64);
        self.core.push_each(count, task);
    }
    #[inline(always)]
    unsafe fn spawn_each_in_place(&mut self, count: u32, fill: impl Fn(Option<*mut T>)) {
        let count = count.min(self.lane_count());
        self.core.count(|s| s.tasks_spawned += count as u64);
        // SAFETY: `fill` initialises what it is given (this method's contract).
        unsafe { self.core.push_each_in_place(count, fill) };
    }
    #[inline(always)]
    unsafe fn atomic_add(&self, target: *mut u64, value: u64) -> u64 {
        // SAFETY: the caller meets this method's contract.
        unsafe { task_fetch_add::<P::Word>(target, value, self.core.scope()) }
    }
    #[inline(always)]
    unsafe fn reduce_add(&self, target: *mut u64, value: u64) {
        // SAFETY: the caller meets `atomic_add`'s contract, all that a shared update needs.
        unsafe { task_update::<P::Word>(target, value, self.core.scope(), Update::Add, true) }
    }
    #[inline(always)]
    unsafe fn single_writer_add(&self, target: *mut u64, value: u64) {
        // SAFETY: the caller meets this method's contract.
        unsafe { task_update::<P::Word>(target, value, self.core.scope(), Update::Add, false) }
    }
    #[inline(always)]
    unsafe fn single_writer_max(&self, target: *mut u64, value: u64) {
        // SAFETY: the caller meets this method's contract.
        unsafe { task_update::<P::Word>(target, value, self.core.scope(), Update::Max, false) }
    }

    #[inline(always)]
    fn now_ns(&self) -> u64 {
        self.core.p.now_ns()
    }
    #[inline(always)]
    fn heartbeat(&self) {
        if self.core.p.is_leader() {
            // SAFETY: lane 0, outside a narrow batch.
            unsafe { self.core.write_progress(1) };
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
        self.core.lanes_area()
    }
    #[inline(always)]
    fn barrier_any(&self, value: bool) -> Option<bool> {
        self.core.p.barrier_any(value)
    }
}
