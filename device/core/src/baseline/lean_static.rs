//! The static-assignment baseline (thesis 6.8), lean: worker `w` of `W` runs the initial tasks of
//! its contiguous share `[w n / W, (w + 1) n / W)` one at a time and everything they spawn,
//! depth-first, from a stack in its scratch. No queues, no stealing, no termination protocol and
//! none of [`crate::WorkerCore`]'s state: per initial task the lanes copy the 64-byte struct into
//! scratch (one 8-byte word per lane), wait at one barrier, run the task, and wait at a second
//! barrier before the slot is reused. That is the shape of a hand-written CUDA block-per-task
//! static kernel, with mgws's task semantics: the same functors through the same [`Context`]
//! interface, the same errors, the abort flag and the progress records the watchdog reads.
//!
//! A full stack moves its older half to the worker's overflow area (`Env::spill`), which refills
//! the stack when it runs empty.
//!
//! Narrow tasks (an executor whose tasks all declare `width` lanes, fewer than the worker has:
//! [`TaskExecutor::UNIFORM_WIDTH`]) run as a static kernel at that width would: the worker's
//! `lanes / width` lane groups run a round of as many tasks side by side, group `g` the `g`-th,
//! each with a [`NarrowContext`] over a `LeanRound`, and wait at one barrier after it. A round
//! takes the top of the stack, else the next initial tasks (consecutive tasks on consecutive
//! groups). Its spawns reserve slots with the lanes' atomic on the scratch's spawn cursor: the
//! stack's free room first, the overflow area beyond it; a stack more than half full first moves
//! its older half there, so that the spawns mostly land in the stack.

use core::marker::PhantomData;

use crate::baseline::static_share;
use crate::context::{task_fetch_add, task_update, Context, Tagged, TaskExecutor, Update};
use crate::error::RunError;
use crate::layout::{Env, WorkerProgress, WorkerStats};
use crate::narrow::{
    first_error, lanes_any, read_task, slots_rotated, spawn_place, NarrowContext, NarrowWorker,
    SpawnPlace,
};
use crate::operation::Operation;
use crate::platform::{AtomicWord, Ordering, Platform, Scope};
use crate::scratch::{ScratchLayout, NARROW_LOCK, NARROW_SPAWNS};
use crate::spec::Spec;

/// One worker of the lean static-assignment baseline.
pub struct LeanStatic<'e, P: Platform, T, S: Spec> {
    p: P,
    env: &'e Env<P::Word, T>,
    id: u32,
    /// The spawned-task stack (scratch), `capacity` slots.
    stack: *mut T,
    /// The slot the current initial task is copied into (scratch).
    current: *mut T,
    /// One `u64` per lane for the collectives (scratch).
    lanes: *mut u64,
    capacity: u32,
    spill_capacity: u64,
    /// `progress_interval - 1` (a power of two minus one), kept in a register.
    progress_mask: u64,
    // Uniform state: identical on every lane.
    len: u32,
    spill_len: u64,
    /// A popped slot may still be read by some lane: the next write to the stack waits first.
    pop_pending: bool,
    aborted: bool,
    tasks_run: u64,
    /// The tag last written to `Env::task_tags` plus one (0: none yet).
    noted_tag: u64,
    tasks_spawned: u64,
    /// Heartbeats of long tasks (`Context::heartbeat` takes `&self`).
    heartbeats: core::cell::Cell<u64>,
    spec: PhantomData<S>,
}

impl<'e, P: Platform, T: Copy + Tagged, S: Spec> LeanStatic<'e, P, T, S> {
    /// Worker `id` on platform `p`.
    ///
    /// # Safety
    /// `env` must be valid (its shared state included, which records errors and carries the abort
    /// flag; its initial tasks and, for spawning tasks, `spill_capacity` overflow slots per
    /// worker), `id` a worker of its topology, the scratch must hold
    /// `ScratchLayout::new(local_capacity, size_of::<T>(), lanes, queues)` bytes, and every lane
    /// makes the same call.
    #[inline(always)]
    pub unsafe fn new(p: P, env: &'e Env<P::Word, T>, id: u32) -> Self {
        const { assert!(core::mem::size_of::<T>() == 8 * crate::scratch::EXCHANGE_WORDS) };
        let cfg = &env.config;
        let layout = ScratchLayout::new(
            cfg.local_capacity,
            core::mem::size_of::<T>(),
            p.lane_count(),
            env.topology.device_queues_max(),
        );
        debug_assert!(p.scratch_len() >= layout.total);
        let base = p.scratch();
        let mut worker = LeanStatic {
            // SAFETY: the offsets come from the layout the caller guarantees the scratch holds;
            // the exchange area is 8 words, one task.
            stack: unsafe { base.add(layout.local_slots) } as *mut T,
            // SAFETY: as for `stack`.
            current: unsafe { base.add(layout.exchange) } as *mut T,
            // SAFETY: as for `stack`.
            lanes: unsafe { base.add(layout.lanes_area) } as *mut u64,
            capacity: cfg.local_capacity,
            spill_capacity: cfg.spill_capacity as u64,
            progress_mask: (cfg.progress_interval as u64).max(1) - 1,
            p,
            env,
            id,
            len: 0,
            spill_len: 0,
            pop_pending: false,
            aborted: false,
            tasks_run: 0,
            noted_tag: 0,
            tasks_spawned: 0,
            heartbeats: core::cell::Cell::new(0),
            spec: PhantomData,
        };
        if !S::matches(cfg) {
            worker.fail(RunError::WrongEntry { worker: id });
        }
        worker
    }

    /// Runs this worker's share of the initial tasks and what they spawn, then reports.
    #[inline(always)]
    pub fn run<X: TaskExecutor<T>>(self, exec: &X) {
        // Narrow tasks run side by side. The test is a constant for worker-wide executors
        // (compiled away: their loops below stay as they were) and where the platform's fewest
        // lanes exceed the width (a GPU block).
        if let Some(width) = X::UNIFORM_WIDTH {
            if width != 0
                && !P::SINGLE_LANE
                && (width < P::MIN_LANES || width < self.p.lane_count())
            {
                return self.run_narrow(exec, width);
            }
        }
        // A GPU block has a lane per word of a task (32 or more lanes, 8 words): its loop copies
        // with one load per lane and no loop, and the word loop for fewer lanes (CPU workers) is
        // not compiled into it at all (`Platform::MIN_LANES`): present, even unused, it held
        // registers across the GPU loop and slowed MEMSET (docs/results.md).
        let words = core::mem::size_of::<T>() / 8;
        if P::MIN_LANES as usize >= words || self.p.lane_count() as usize >= words {
            self.run_loop::<X, true>(exec)
        } else {
            self.run_loop::<X, false>(exec)
        }
    }

    #[inline(always)]
    fn run_loop<X: TaskExecutor<T>, const LANE_PER_WORD: bool>(mut self, exec: &X) {
        let env = self.env;
        let (first, end) = static_share(self.id, env.config.workers, env.initial_len);
        let (lane, lanes) = (self.p.lane_id() as usize, self.p.lane_count() as usize);
        let words = core::mem::size_of::<T>() / 8;
        // With a lane per word, each lane loads its word of the next task while the current one
        // runs (one load in flight per lane), so the load's latency overlaps the task and its
        // barriers instead of adding to them.
        // SAFETY: `first < end <= initial_len` where read; lanes >= words do not load.
        let load = |task: u64| unsafe { env.initial_word(task, lane) };
        let mut ahead = if LANE_PER_WORD && lane < words && first < end {
            load(first)
        } else {
            0
        };
        let mut next = first;
        while next < end && !self.aborted {
            if LANE_PER_WORD {
                if lane < words {
                    // SAFETY: the current slot was read by every lane before the barrier that
                    // ended the previous round.
                    unsafe { (self.current as *mut u64).add(lane).write(ahead) };
                    if next + 1 < end {
                        ahead = load(next + 1);
                    }
                }
            } else {
                // Word `i` of the task goes to lane `i % lanes`.
                let mut word = lane;
                while word < words {
                    // SAFETY: next < initial_len, assigned to this worker alone; the current slot
                    // is free as above.
                    unsafe {
                        let v = env.initial_word(next, word);
                        (self.current as *mut u64).add(word).write(v);
                    }
                    word += lanes;
                }
            }
            self.p.barrier();
            // SAFETY: written before the barrier above.
            let task = unsafe { self.current.read() };
            self.run_task(exec, &task);
            while (self.len > 0 || self.spill_len > 0) && !self.aborted {
                self.run_spawned(exec);
            }
            next += 1;
            // Every lane has read the current slot before the next task overwrites it.
            self.p.barrier();
            self.pop_pending = false;
        }
        self.finish();
    }

    #[inline(always)]
    fn run_task<X: TaskExecutor<T>>(&mut self, exec: &X, task: &T) {
        self.tasks_run += 1;
        // Only a new tag is stored (see `WorkerCore::note_task`).
        let word = task.tag() as u64 + 1;
        if word != self.noted_tag {
            self.noted_tag = word;
            if self.p.is_leader() {
                // SAFETY: lane 0 of this worker.
                unsafe { self.env.note_task(self.id, task.tag()) };
            }
        }
        if let Err(e) = exec.execute(task, &mut LeanContext { w: self }) {
            let error = e.into_run_error(self.id, task.tag());
            self.fail(error);
        }

        // Every `progress_interval` tasks, initial or spawned (a worker may run a whole tree
        // from one initial task): a progress record for the watchdog, and the abort flag.
        if self.tasks_run & self.progress_mask == 0 {
            self.report(Operation::RunTask);
            self.check_abort();
        }
    }

    /// Pops the newest spawned task (refilling the stack from the overflow area first if it is
    /// empty) and runs it.
    #[inline(always)]
    fn run_spawned<X: TaskExecutor<T>>(&mut self, exec: &X) {
        if self.len == 0 {
            self.refill();
        }
        self.len -= 1;
        // SAFETY: slot `len` holds a task pushed before a barrier.
        let task = unsafe { self.stack.add(self.len as usize).read() };
        self.pop_pending = true;
        self.run_task(exec, &task);
    }

    /// Waits until every lane read the last popped slot, if a write may reuse it.
    #[inline(always)]
    fn settle(&mut self) {
        if self.pop_pending {
            self.p.barrier();
            self.pop_pending = false;
        }
    }

    /// Pushes the `task` of lanes `first_lane..first_lane + count` onto the stack, in lane
    /// order, spilling when it is full.
    #[inline(always)]
    fn push(&mut self, first_lane: u32, count: u32, task: &T) {
        let mut done = 0;
        while done < count {
            if self.len == self.capacity {
                self.spill();
                if self.aborted {
                    return;
                }
            }
            let room = (self.capacity - self.len).min(count - done);
            self.settle();
            let lane = self.p.lane_id();
            let from = first_lane + done;
            if lane >= from && lane < from + room {
                let slot = self.len + (lane - from);
                // SAFETY: slot < capacity is free; each pushing lane writes its own.
                unsafe { self.stack.add(slot as usize).write(*task) };
            }
            self.len += room;
            self.p.barrier();
            done += room;
        }
    }

    /// Moves the older half of the full stack (`capacity / 2` tasks; a narrow run's stack may be
    /// fuller than half) to the overflow area.
    #[inline(always)]
    fn spill(&mut self) {
        let half = (self.capacity / 2) as u64;
        if self.spill_len + half > self.spill_capacity {
            let capacity = self.spill_capacity as u32;
            self.fail(RunError::SpillOverflow {
                worker: self.id,
                capacity,
            });
            return;
        }
        self.settle();
        let base = self.id as u64 * self.spill_capacity + self.spill_len;
        let (spill, stack) = (self.env.spill, self.stack);
        // SAFETY: slots base..base+half belong to this worker's overflow area (checked above).
        self.copy(
            half,
            |j| unsafe { stack.add(j as usize) },
            |j| unsafe { spill.add((base + j) as usize) },
        );
        self.p.barrier();
        let keep = self.len as u64 - half;
        // SAFETY: the newer half moves down within the stack; source and target ranges do not
        // overlap (half >= keep).
        self.copy(
            keep,
            |j| unsafe { stack.add((half + j) as usize) },
            |j| unsafe { stack.add(j as usize) },
        );
        self.p.barrier();
        self.len = keep as u32;
        self.spill_len += half;
    }

    /// Moves the newest overflow tasks into the empty stack.
    #[inline(always)]
    fn refill(&mut self) {
        let count = self.spill_len.min((self.capacity / 2).max(1) as u64);
        let from = self.id as u64 * self.spill_capacity + self.spill_len - count;
        let (spill, stack) = (self.env.spill, self.stack);
        self.settle();
        // SAFETY: slots from..from+count hold spilled tasks of this worker.
        self.copy(
            count,
            |j| unsafe { spill.add((from + j) as usize) },
            |j| unsafe { stack.add(j as usize) },
        );
        self.p.barrier();
        self.spill_len -= count;
        self.len = count as u32;
    }

    /// Copies `count` tasks with all lanes, word by word.
    #[inline(always)]
    fn copy(&self, count: u64, src: impl Fn(u64) -> *const T, dst: impl Fn(u64) -> *mut T) {
        let words = (core::mem::size_of::<T>() / 8) as u64;
        let lanes = self.p.lane_count() as u64;
        let mut i = self.p.lane_id() as u64;
        while i < count * words {
            let (t, w) = (i / words, (i % words) as usize);
            // SAFETY: the callers pass ranges valid for `count` tasks that this worker owns.
            unsafe {
                let v = (src(t) as *const u64).add(w).read();
                (dst(t) as *mut u64).add(w).write(v);
            }
            i += lanes;
        }
    }

    /// Records `error` (the first one wins) and aborts the run (orderings as in
    /// `WorkerCore::fail`: AcqRel/Relaxed compare-exchange, Release abort store).
    #[inline(always)]
    fn fail(&mut self, error: RunError) {
        if self.p.is_leader() {
            // SAFETY: the shared state outlives the run (`new`'s contract).
            let shared = unsafe { self.env.shared() };
            let scope = S::scope(&self.env.config);
            let _ = shared.error.compare_exchange(
                0,
                error.pack(),
                Ordering::AcqRel,
                Ordering::Relaxed,
                scope,
            );
            // SAFETY: as above.
            unsafe { self.env.raise_abort(scope) };
        }
        self.aborted = true;
    }

    /// Lane 0 reads the abort flag (Relaxed: a late observation only delays the stop) and hands
    /// it to every lane.
    #[inline(always)]
    fn check_abort(&mut self) {
        // SAFETY: as in `fail`.
        let flag = self.p.is_leader()
            && unsafe { self.env.abort_flag() }.load(Ordering::Relaxed, S::scope(&self.env.config))
                != 0;
        if self.p.broadcast(flag as u64) != 0 {
            self.aborted = true;
        }
    }

    /// Lane 0 writes this worker's progress record for the watchdog.
    #[inline(always)]
    fn report(&self, operation: Operation) {
        if !self.p.is_leader() {
            return;
        }
        let (tasks, heartbeats) = (self.tasks_run, self.heartbeats.get());
        let record = WorkerProgress::at(tasks, tasks, operation, false, heartbeats, || {
            self.p.now_ns()
        });
        // SAFETY: lane 0 of this worker.
        unsafe { self.env.write_progress(self.id, record) };
    }

    /// [`LeanStatic::run`] for tasks of `width` lanes, fewer than the worker has: rounds of up to
    /// `lanes / width` tasks side by side, from the top of the stack (refilled from the overflow
    /// area when it runs empty, halved into it when more than half full) while it holds any,
    /// else the next initial tasks. A round waits at one barrier after its tasks (the lanes
    /// learn there whether any spawned or failed), and at one before them where it reuses popped
    /// slots or the last round spawned or failed.
    #[inline(always)]
    fn run_narrow<X: TaskExecutor<T>>(mut self, exec: &X, width: u32) {
        let env = self.env;
        let (first, end) = static_share(self.id, env.config.workers, env.initial_len);
        let lanes = self.p.lane_count();
        let (groups, group) = (lanes / width, self.p.lane_id() / width);
        let layout = ScratchLayout::new(
            env.config.local_capacity,
            core::mem::size_of::<T>(),
            lanes,
            env.topology.device_queues_max(),
        );
        // SAFETY: the layout's narrow words, in the scratch (`new`'s contract).
        let narrow = unsafe { self.p.scratch().add(layout.narrow) } as *mut u32;
        // The tasks' heartbeat count: the exchange area's first word, which no task is copied
        // into here (groups read theirs in place).
        let heartbeats = self.current as *mut u64;
        if self.p.is_leader() {
            // SAFETY: words of this worker's scratch that no lane uses before the barrier below,
            // which orders these stores (a GPU's shared memory starts uninitialised) before
            // every lane's atomics on them.
            unsafe {
                narrow.add(NARROW_SPAWNS).write_volatile(0);
                narrow.add(NARROW_LOCK).write_volatile(0);
                heartbeats.write_volatile(0);
            }
        }
        self.p.barrier();
        // Uniform: the spawn cursor's value as the round starts, whether the last round spawned
        // or failed, the next initial task.
        let (mut base, mut pending, mut next) = (0u32, false, first);
        // This lane's task's packed error in the last round, 0 if none.
        let mut failure = 0u64;
        while !self.aborted {
            if self.len == 0 && self.spill_len > 0 {
                self.refill();
            } else if self.len > self.capacity / 2 {
                // Room for the round's spawns first (as the mgws loop makes before a narrow
                // batch): spawns past the room land in the overflow area above older tasks, out
                // of depth-first order, and UTS T1 overflowed it when the stack kept them.
                self.spill();
                continue;
            }
            let stacked = self.len > 0;
            let (count, mine) = if stacked {
                let (count, top) = (self.len.min(groups), self.len as usize);
                self.len -= count;
                let rotate = slots_rotated::<P, T, X>();
                // SAFETY: slots below `top` hold tasks written before a barrier; group `g`
                // takes the `g`-th newest.
                let mine = (group < count).then(|| unsafe {
                    read_task(self.stack.add(top - 1 - group as usize), rotate)
                });
                (count, mine)
            } else if next < end {
                let count = (end - next).min(groups as u64) as u32;
                // SAFETY: next + group < end <= initial_len, in this worker's share alone.
                let mine =
                    (group < count).then(|| unsafe { env.initial_task(next + group as u64) });
                next += count as u64;
                (count, mine)
            } else {
                break;
            };
            // Every lane read its popped slot before a spawn reuses it, and the cursor (below)
            // before any lane reserves again; the last round's failures are told here.
            if (stacked || pending) && self.lanes_any(failure != 0) {
                self.fail_with_first(failure);
                pending = false;
                break;
            }
            let before = self.tasks_run;
            self.tasks_run += count as u64;
            let mut reserved = false;
            if let Some(task) = mine {
                // Group 0's task, which every round has (see `WorkerCore::note_task`).
                let word = task.tag() as u64 + 1;
                if self.p.is_leader() && word != self.noted_tag {
                    self.noted_tag = word;
                    // SAFETY: lane 0 of this worker.
                    unsafe { env.note_task(self.id, task.tag()) };
                }
                let worker = self.id;
                let round = LeanRound {
                    whole: LeanContext { w: &mut self },
                    narrow,
                    heartbeats,
                    base,
                    reserved: false,
                };
                let mut ctx = NarrowContext::new(round, width, slots_rotated::<P, T, X>());
                if let Err(e) = exec.execute(&task, &mut ctx) {
                    failure = e.into_run_error(worker, task.tag()).pack();
                }
                reserved = ctx.worker().reserved;
            }
            // The barrier orders every lane's spawns (slots and cursor) before the reads below.
            pending = self.lanes_any(failure != 0 || reserved);
            if pending {
                // SAFETY: the cursor is this worker's scratch word; every lane's update of it
                // happened before the barrier above, and none updates it before the next
                // round's first barrier.
                let cursor = unsafe { narrow.add(NARROW_SPAWNS).read_volatile() };
                let spawned = cursor.wrapping_sub(base);
                base = cursor;
                self.tasks_spawned += spawned as u64;
                let in_stack = spawned.min(self.capacity - self.len);
                self.len += in_stack;
                let overflowed = (spawned - in_stack) as u64;
                if self.spill_len + overflowed > self.spill_capacity {
                    // The slots past the overflow area's end were not written (`slot`).
                    let capacity = self.spill_capacity as u32;
                    self.fail(RunError::SpillOverflow {
                        worker: self.id,
                        capacity,
                    });
                } else {
                    self.spill_len += overflowed;
                }
            }
            // As `run_task`, once the count passes a multiple of `progress_interval`.
            if (before ^ self.tasks_run) > self.progress_mask {
                self.take_heartbeats(heartbeats);
                self.report(Operation::RunTask);
                self.check_abort();
            }
        }
        // The last round's failures.
        if pending && self.lanes_any(failure != 0) {
            self.fail_with_first(failure);
        }
        self.take_heartbeats(heartbeats);
        self.finish();
    }

    /// Lane 0 takes the narrow tasks' heartbeat count (scratch) for its progress record.
    #[inline(always)]
    fn take_heartbeats(&self, count: *const u64) {
        if self.p.is_leader() {
            // SAFETY: the count is written under the narrow lock during a round, and read
            // between rounds, after a barrier.
            self.heartbeats.set(unsafe { count.read_volatile() });
        }
    }

    /// A barrier that tells every lane whether any lane passed true.
    #[inline(always)]
    fn lanes_any(&self, value: bool) -> bool {
        // SAFETY: the lanes area, which no task uses between rounds.
        unsafe { lanes_any(&self.p, self.lanes, value) }
    }

    /// Fails the run with the first lane's packed error among those that failed (each lane
    /// passes its own, 0 if none).
    #[inline(always)]
    fn fail_with_first(&mut self, packed: u64) {
        // SAFETY: as in `lanes_any`.
        let error = unsafe { first_error(&self.p, self.lanes, packed, self.id) };
        self.fail(error);
    }

    /// The scope of task atomics.
    #[inline(always)]
    fn scope(&self) -> Scope {
        S::scope(&self.env.config)
    }

    #[inline(always)]
    fn finish(&mut self) {
        self.report(Operation::Exited);
        if self.p.is_leader() && !self.env.stats.is_null() {
            let stats = WorkerStats {
                tasks_run: self.tasks_run,
                tasks_spawned: self.tasks_spawned,
                ..WorkerStats::default()
            };
            // SAFETY: lane 0 of this worker.
            unsafe { self.env.write_stats(self.id, stats) };
        }
        self.p.barrier();
    }
}

/// The [`Context`] of a task run by [`LeanStatic`].
struct LeanContext<'a, 'e, P: Platform, T, S: Spec> {
    w: &'a mut LeanStatic<'e, P, T, S>,
}

impl<P: Platform, T: Copy + Tagged, S: Spec> Context for LeanContext<'_, '_, P, T, S> {
    type Task = T;

    #[inline(always)]
    fn lane_id(&self) -> u32 {
        self.w.p.lane_id()
    }
    #[inline(always)]
    fn lane_count(&self) -> u32 {
        self.w.p.lane_count()
    }
    #[inline(always)]
    fn worker_id(&self) -> u32 {
        self.w.id
    }
    #[inline(always)]
    fn barrier(&self) {
        self.w.p.barrier()
    }
    #[inline(always)]
    fn broadcast(&self, value: u64) -> u64 {
        self.w.p.broadcast(value)
    }
    #[inline(always)]
    fn spawn_from(&mut self, source: u32, task: &T) {
        self.w.tasks_spawned += 1;
        self.w.push(source, 1, task);
    }
    #[inline(always)]
    fn spawn_each(&mut self, count: u32, task: &T) {
        let count = count.min(self.lane_count());
        self.w.tasks_spawned += count as u64;
        if count > 0 {
            self.w.push(0, count, task);
        }
    }
    #[inline(always)]
    unsafe fn atomic_add(&self, target: *mut u64, value: u64) -> u64 {
        // SAFETY: the caller meets this method's contract.
        unsafe { task_fetch_add::<P::Word>(target, value, self.w.scope()) }
    }
    #[inline(always)]
    unsafe fn reduce_add(&self, target: *mut u64, value: u64) {
        // SAFETY: the caller meets `atomic_add`'s contract, all that a shared update needs.
        unsafe { task_update::<P::Word>(target, value, self.w.scope(), Update::Add, true) }
    }
    #[inline(always)]
    unsafe fn single_writer_add(&self, target: *mut u64, value: u64) {
        // SAFETY: the caller meets this method's contract.
        unsafe { task_update::<P::Word>(target, value, self.w.scope(), Update::Add, false) }
    }
    #[inline(always)]
    unsafe fn single_writer_max(&self, target: *mut u64, value: u64) {
        // SAFETY: the caller meets this method's contract.
        unsafe { task_update::<P::Word>(target, value, self.w.scope(), Update::Max, false) }
    }

    #[inline(always)]
    fn now_ns(&self) -> u64 {
        self.w.p.now_ns()
    }
    #[inline(always)]
    fn heartbeat(&self) {
        if self.w.p.is_leader() {
            self.w.heartbeats.set(self.w.heartbeats.get() + 1);
            self.w.report(Operation::RunTask);
        }
    }
    #[inline(always)]
    fn area(&self, index: usize) -> u64 {
        self.w.env.area(index)
    }
    #[inline(always)]
    fn area_limit(&self, index: usize) -> u64 {
        self.w.env.area_limit(index)
    }
    #[inline(always)]
    fn lanes_area(&self) -> *mut u64 {
        self.w.lanes
    }
    #[inline(always)]
    fn barrier_any(&self, value: bool) -> Option<bool> {
        self.w.p.barrier_any(value)
    }
    #[inline(always)]
    fn tasks_run(&self) -> u64 {
        self.w.tasks_run
    }
}

/// The worker's side of a [`NarrowContext`] of [`LeanStatic`] during a round: the stack's free
/// room then the overflow area take the spawns, the scratch keeps the heartbeats.
struct LeanRound<'a, 'e, P: Platform, T, S: Spec> {
    whole: LeanContext<'a, 'e, P, T, S>,
    /// The narrow words (scratch): the spawn cursor and the lock.
    narrow: *mut u32,
    /// The tasks' heartbeat count (scratch).
    heartbeats: *mut u64,
    /// The spawn cursor's value as the round started.
    base: u32,
    /// This lane reserved a slot.
    reserved: bool,
}

// SAFETY: `lanes` and `narrow` are the layout's lanes area and narrow words, in this worker's
// scratch; `run_narrow` zeroes the narrow words before the first round, and only the lanes'
// atomics and lock touch them during one; a position's slot is its own (`spawn_slot`).
unsafe impl<'a, 'e, P: Platform, T: Copy + Tagged, S: Spec> NarrowWorker
    for LeanRound<'a, 'e, P, T, S>
{
    type P = P;
    type Task = T;
    type Whole = LeanContext<'a, 'e, P, T, S>;

    #[inline(always)]
    fn whole(&self) -> &Self::Whole {
        &self.whole
    }
    #[inline(always)]
    fn platform(&self) -> &P {
        &self.whole.w.p
    }
    #[inline(always)]
    fn scope(&self) -> Scope {
        self.whole.w.scope()
    }
    #[inline(always)]
    fn narrow_word(&self, index: usize) -> *mut u32 {
        // SAFETY: `index` names one of the layout's narrow words.
        unsafe { self.narrow.add(index) }
    }
    #[inline(always)]
    fn spawn_base(&self) -> u32 {
        self.base
    }
    #[inline(always)]
    fn reserved(&mut self, count: u32) {
        self.reserved |= count > 0;
    }
    /// The stack's free room, then the overflow area; `None` past its end (the round fails:
    /// `run_narrow`).
    #[inline(always)]
    fn spawn_slot(&self, position: u32) -> Option<*mut T> {
        let w = &*self.whole.w;
        let beyond = match spawn_place(w.capacity - w.len, position) {
            // SAFETY: len + i < capacity: a free slot of the stack.
            SpawnPlace::Ring(i) => return Some(unsafe { w.stack.add((w.len + i) as usize) }),
            SpawnPlace::Overflow(j) => j,
        };
        let at = w.spill_len + beyond as u64;
        let base = w.id as u64 * w.spill_capacity;
        // SAFETY: at < spill_capacity: a free slot of this worker's overflow area.
        (at < w.spill_capacity).then(|| unsafe { w.env.spill.add((base + at) as usize) })
    }
    #[inline(always)]
    unsafe fn heartbeat_locked(&self) {
        let w = &*self.whole.w;
        // SAFETY: the worker's heartbeat count, which tasks touch only under the lock (whose
        // acquire and release order the holders' accesses) and lane 0 between rounds.
        let count = unsafe { self.heartbeats.read_volatile() } + 1;
        // SAFETY: as above.
        unsafe { self.heartbeats.write_volatile(count) };
        let tasks = w.tasks_run;
        let record = WorkerProgress::at(tasks, tasks, Operation::RunTask, false, count, || {
            w.p.now_ns()
        });
        // SAFETY: one lane of this worker at a time: tasks write the record under the lock,
        // lane 0 (`report`) between rounds.
        unsafe { w.env.write_progress(w.id, record) };
    }
}
