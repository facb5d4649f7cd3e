//! The worker loop (thesis Listing 5) and the queue operations that move tasks between a worker's
//! local queue, its public queue, its overflow stack, the initial task set and other workers.
//!
//! Every function here is executed by all lanes of a worker in lockstep. Lane 0 performs the
//! atomics and hands its decisions to the other lanes through `WorkerCore::exchange`; all lanes
//! copy tasks together. Uniform state (local-queue positions, flags, the iteration count) is kept
//! as an identical copy on every lane, so it needs no communication; what only lane 0 uses (the
//! victim generator, statistics, voting state) is its [`LeaderState`] in the scratch.

use crate::config::{OverflowMode, RunFlags, TerminationMode};
use crate::error::{RunError, TaskError};
use crate::layout::{Env, ScratchLayout, WorkerProgress, WorkerStats, EXCHANGE_WORDS};
use crate::operation::Operation;
use crate::platform::{AtomicWord, Ordering, Platform, ProtocolStep, Scope};
use crate::public_queue::{Claim, OwnerView, PublicQueue};
use crate::termination::{IdleCounter, VoteOutcome, VotingTree};
use crate::victim::VictimPicker;

/// Loop iterations between two checks of whether the own public queue ran empty (a power of two).
pub const RELEASE_CHECK_INTERVAL: u64 = 4;

/// Other workers' home ranges a worker tries per `load_initial` once its own is claimed.
pub const INITIAL_VICTIM_TRIES: usize = 2;

/// Runs a task. Implemented by the task registry (`mgws-tasks`), which dispatches on the task tag.
pub trait TaskExecutor<T>: Sync {
    /// Runs `task` on every lane of the worker; all lanes call it and must return the same result.
    fn execute<P: Platform>(
        &self,
        task: &T,
        ctx: &mut TaskContext<'_, '_, P, T>,
    ) -> Result<(), TaskError>;
}

/// The scheduler state of one worker, shared by the loop and the task context.
pub struct WorkerCore<'e, P: Platform, T> {
    p: P,
    env: &'e Env<P::Word, T>,
    id: u32,
    queue: u32,
    scope: Scope,
    layout: ScratchLayout,
    local_capacity: u64,
    spill_capacity: u64,
    flags: RunFlags,
    // Uniform state: identical on every lane.
    local_tail: u64,
    local_head: u64,
    spill_len: u64,
    initial_exhausted: bool,
    /// This worker's own home range of initial tasks has been claimed to its end.
    own_range_exhausted: bool,
    idle: bool,
    aborted: bool,
    iterations: u64,
    // Lane 0's counters of the hot path. The rest of lane 0's state is a [`LeaderState`] in the
    // scratch.
    tasks_run: u64,
    /// A popped slot may still be read by some lane (see `pop_local`).
    pop_pending: core::cell::Cell<bool>,
    // Baseline modes.
    static_mode: bool,
    level: Option<LevelSink<P::Word, T>>,
}

/// The part of a worker's state that only lane 0 uses and that the hot path never touches. It lives
/// in the worker's scratch (shared memory on a GPU), not in the worker: kept in registers for the
/// whole loop, these values pushed a GPU worker's hot values out to local memory (commit message
/// and docs/results.md: UTS T1L +6% on an H100 from moving the statistics alone).
#[derive(Clone)]
pub struct LeaderState {
    /// The worker's counters (`tasks_run` is kept in the worker: the watchdog's progress reports
    /// read it).
    pub stats: WorkerStats,
    /// The victim picker: lane 0 draws every victim and hands it to the others.
    pub picker: VictimPicker,
    /// Voting-tree termination: the public queue's claim count at this worker's last vote.
    pub claims_at_last_vote: u64,
    /// Voting-tree termination: the last round this worker voted in.
    pub voted_round: u64,
    /// What the worker is doing, for the watchdog's progress reports.
    pub operation: Operation,
}

/// A worker: its scheduler state plus the executor of its tasks.
pub struct Worker<'e, P: Platform, T, X> {
    core: WorkerCore<'e, P, T>,
    exec: &'e X,
}

/// What a running task sees of its worker: its lanes, a spawner and the data areas.
pub struct TaskContext<'w, 'e, P: Platform, T> {
    core: &'w mut WorkerCore<'e, P, T>,
}

impl<'e, P: Platform, T: Copy, X: TaskExecutor<T>> Worker<'e, P, T, X> {
    /// Worker `id` on platform `p`.
    ///
    /// # Safety
    /// `env` must describe live orchestration memory laid out as [`crate::layout`] says, `id` must be
    /// a worker of `env.topology`, the platform's scratch must hold `ScratchLayout::new(...)`
    /// bytes for this configuration, and every lane of the worker must make the same call.
    #[inline(always)]
    pub unsafe fn new(p: P, env: &'e Env<P::Word, T>, exec: &'e X, id: u32) -> Self {
        let cfg = &env.config;
        let queue = env.topology.queue_of_worker(id, cfg.workers_per_queue);
        let flags = cfg.run_flags();
        let layout = ScratchLayout::new(
            cfg.local_capacity,
            core::mem::size_of::<T>(),
            p.lane_count(),
            env.topology.queues(),
        );
        debug_assert!(p.scratch_len() >= layout.total);
        let worker = Worker {
            core: WorkerCore {
                scope: Scope::from_u32(cfg.queue_scope),
                local_capacity: cfg.local_capacity as u64,
                spill_capacity: cfg.spill_capacity as u64,
                p,
                env,
                id,
                queue,
                layout,
                flags,
                local_tail: 0,
                local_head: 0,
                spill_len: 0,
                initial_exhausted: false,
                own_range_exhausted: false,
                idle: false,
                aborted: false,
                iterations: 0,
                tasks_run: 0,
                pop_pending: core::cell::Cell::new(false),
                static_mode: false,
                level: None,
            },
            exec,
        };
        if worker.core.p.is_leader() {
            let state = LeaderState {
                stats: WorkerStats::default(),
                picker: VictimPicker::new(
                    cfg.seed,
                    id,
                    queue,
                    &env.topology,
                    cfg.same_device_bias_permille,
                    flags.contains(RunFlags::SAME_DEVICE_ONLY),
                ),
                claims_at_last_vote: 0,
                voted_round: 0,
                operation: Operation::Start,
            };
            // SAFETY: the scratch holds the layout (the caller's guarantee); only lane 0 touches
            // the leader state.
            unsafe { worker.core.leader_state().write(state) };
        }
        worker
    }

    /// The worker loop: runs until termination is detected or the run is aborted.
    #[inline(always)]
    pub fn run(mut self) {
        let c = &mut self.core;
        c.clear_damping();
        loop {
            c.tick();
            if c.aborted {
                break;
            }
            if c.local_len() > 0 {
                // Checking the public word costs a broadcast (two barriers on a GPU): do it every
                // RELEASE_CHECK_INTERVAL tasks rather than before every task as Listing 5 does.
                if c.local_len() >= 2
                    && c.iterations & (RELEASE_CHECK_INTERVAL - 1) == 0
                    && c.should_release()
                {
                    c.release(c.local_len() / 2);
                    continue;
                }
                c.run_next_local(self.exec);
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
            if c.idle_step() {
                break;
            }
        }
        c.finish();
    }

    /// The static-assignment baseline (thesis 6.8): worker `id` of `W` runs initial tasks
    /// `id, id + W, ...` and everything they spawn, depth-first on its own: no public queue, no
    /// stealing, no termination protocol. Same task execution, same local queue and overflow stack.
    #[inline(always)]
    pub fn run_static(self) {
        let (id, total, stride) = (
            self.core.id as u64,
            self.core.env.initial_len,
            self.core.env.config.workers as u64,
        );
        self.run_static_share(id, total, stride);
    }

    /// [`Self::run_static`] over the initial tasks `first, first + stride, ...` below `end`
    /// (`end <= initial_len`): strided shares suit a GPU's blocks, contiguous ones (`stride` 1)
    /// a CPU thread's caches.
    #[inline(always)]
    pub fn run_static_share(mut self, first: u64, end: u64, stride: u64) {
        let c = &mut self.core;
        c.static_mode = true;
        let total = end.min(c.env.initial_len);
        let mut next = first;
        loop {
            c.tick();
            if c.aborted {
                break;
            }
            if c.local_len() > 0 {
                c.run_next_local(self.exec);
            } else if c.spill_len > 0 {
                c.refill_from_spill();
            } else if next < total {
                c.load_one(next);
                next += stride;
            } else {
                break;
            }
        }
        c.finish();
    }

    /// One level of the kernel-per-level baseline: this worker runs frontier tasks (the env's
    /// initial tasks) `first, first + stride, ...`; every task they spawn is appended to
    /// `sink.out` instead of being run.
    #[inline(always)]
    pub fn run_level(mut self, sink: LevelSink<P::Word, T>, first: u64, stride: u64) {
        let c = &mut self.core;
        c.level = Some(sink);
        let total = c.env.initial_len;
        let mut next = first;
        while next < total {
            c.tick();
            if c.aborted {
                break;
            }
            c.load_one(next);
            c.run_next_local(self.exec);
            next += stride;
        }
        if c.p.is_leader() {
            sink.counter(LevelSink::<P::Word, T>::TASKS_RUN).fetch_add(
                c.tasks_run,
                Ordering::Relaxed,
                c.scope,
            );
        }
        c.finish();
    }
}

/// Where the kernel-per-level baseline puts spawned tasks.
pub struct LevelSink<W, T> {
    /// The next frontier.
    pub out: *mut T,
    /// Tasks `out` holds; children beyond it are counted but dropped (the host reports that).
    pub out_capacity: u64,
    /// `[spawned, first error (RunError::pack), tasks run, reserved]`.
    pub counters: *const W,
}

impl<W, T> Clone for LevelSink<W, T> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}
impl<W, T> Copy for LevelSink<W, T> {}

impl<W: AtomicWord, T> LevelSink<W, T> {
    pub const SPAWNED: usize = 0;
    pub const ERROR: usize = 1;
    pub const TASKS_RUN: usize = 2;

    /// Appends `task` to the next frontier (one lane per task); a task beyond `out_capacity` is
    /// counted but dropped, and the host reports that the frontier outgrew its buffer.
    #[inline(always)]
    fn append(&self, task: &T, scope: Scope)
    where
        T: Copy,
    {
        let index = self
            .counter(Self::SPAWNED)
            .fetch_add(1, Ordering::Relaxed, scope);
        if index < self.out_capacity {
            // SAFETY: the index was claimed by this fetch-add alone and is in bounds.
            unsafe { self.out.add(index as usize).write(*task) };
        }
    }

    fn counter(&self, index: usize) -> &W {
        // SAFETY: the host passes four counters.
        unsafe { &*self.counters.add(index) }
    }
}

impl<'e, P: Platform, T: Copy> WorkerCore<'e, P, T> {
    /// Counts a loop iteration; every `progress_interval` reports progress and checks for abort.
    #[inline(always)]
    fn tick(&mut self) {
        self.iterations += 1;
        if self.iterations & (self.env.config.progress_interval as u64 - 1) == 0 {
            self.report_progress();
            self.check_abort();
        }
    }

    /// Lane 0's state in the scratch (see [`LeaderState`]).
    #[inline(always)]
    fn leader_state(&self) -> *mut LeaderState {
        self.scratch_at::<LeaderState>(self.layout.leader)
    }

    /// Runs `f` on lane 0's [`LeaderState`]. Lane 0 only: the other lanes have none.
    #[inline(always)]
    fn with_leader<R>(&self, f: impl FnOnce(&mut LeaderState) -> R) -> R {
        debug_assert!(self.p.is_leader());
        // SAFETY: lane 0 initialised the state in `Worker::new` and is the only lane that touches
        // it; no reference to it outlives this call, and calls do not nest.
        f(unsafe { &mut *self.leader_state() })
    }

    /// Records what the worker is doing now (lane 0 keeps it for the progress reports).
    #[inline(always)]
    fn set_operation(&self, operation: Operation) {
        if self.p.is_leader() {
            self.with_leader(|l| l.operation = operation);
        }
    }

    /// Counts an event: `update` runs on lane 0's statistics in the scratch (the other lanes skip
    /// it). Spawns are counted here too, once per spawn.
    #[inline(always)]
    fn count(&self, update: impl FnOnce(&mut WorkerStats)) {
        if self.p.is_leader() {
            self.with_leader(|l| update(&mut l.stats));
        }
    }

    /// This worker's statistics so far. Lane 0 only.
    #[inline(always)]
    fn stats(&self) -> WorkerStats {
        let mut stats = self.with_leader(|l| l.stats);
        stats.tasks_run = self.tasks_run;
        stats
    }

    /// Pops the newest local task and runs it on all lanes; a task error stops the run.
    #[inline(always)]
    fn run_next_local<X: TaskExecutor<T>>(&mut self, exec: &X) {
        let task = self.pop_local();
        self.set_operation(Operation::RunTask);
        self.tasks_run += 1;
        if let Err(e) = exec.execute(&task, &mut TaskContext { core: self }) {
            let worker = self.id;
            self.fail(match e {
                TaskError::UnknownTag(tag) => RunError::UnknownTag { worker, tag },
                TaskError::Failed(code) => RunError::TaskFailed { worker, code },
            });
        }
    }

    /// Copies initial task `index` into the (empty) local queue.
    #[inline(always)]
    fn load_one(&mut self, index: u64) {
        let (initial, head) = (self.env.initial, self.local_head);
        self.settle_pop();
        // SAFETY: index < initial_len, and this worker alone was assigned that task.
        self.copy_tasks(
            1,
            |_| unsafe { initial.add(index as usize) },
            |_| self.local_slot(head),
        );
        self.p.barrier();
        self.local_head += 1;
    }

    // ----- lanes -----------------------------------------------------------------------------

    /// Hands lane 0's `values` to every lane.
    #[inline]
    fn exchange<const N: usize>(&self, values: [u64; N]) -> [u64; N] {
        const { assert!(N <= EXCHANGE_WORDS) };
        if self.p.lane_count() == 1 {
            return values;
        }
        let base = self.scratch_at::<u64>(self.layout.exchange);
        if self.p.is_leader() {
            for (i, v) in values.iter().enumerate() {
                // SAFETY: the exchange area holds EXCHANGE_WORDS words of this worker's scratch,
                // and only lane 0 writes it, between two barriers.
                unsafe { base.add(i).write_volatile(*v) };
            }
        }
        self.p.barrier();
        self.pop_pending.set(false);
        let mut out = [0u64; N];
        for (i, o) in out.iter_mut().enumerate() {
            // SAFETY: as above; the barrier ordered lane 0's writes before these reads.
            *o = unsafe { base.add(i).read_volatile() };
        }
        self.p.barrier();
        out
    }

    #[inline(always)]
    fn scratch_at<U>(&self, offset: usize) -> *mut U {
        // SAFETY: offsets come from the ScratchLayout that sized this worker's scratch.
        unsafe { self.p.scratch().add(offset) as *mut U }
    }

    /// Copies `count` tasks with all lanes: word `i` of the flattened range goes to lane
    /// `i % lanes`, so consecutive lanes touch consecutive words (coalesced on a GPU).
    #[inline]
    fn copy_tasks(&self, count: u64, src: impl Fn(u64) -> *const T, dst: impl Fn(u64) -> *mut T) {
        const { assert!(core::mem::size_of::<T>() & 7 == 0 && core::mem::align_of::<T>() >= 8) };
        if P::SINGLE_LANE {
            // One lane copies whole tasks (decided at compile time: a GPU kernel has no such
            // branch).
            for task in 0..count {
                // SAFETY: as below.
                unsafe { dst(task).write(src(task).read()) };
            }
            return;
        }
        let lanes = self.p.lane_count() as u64;
        let words = (core::mem::size_of::<T>() / 8) as u64;
        let mut i = self.p.lane_id() as u64;
        while i < count * words {
            let (task, word) = (i / words, (i % words) as usize);
            // SAFETY: callers pass task addresses that are valid for `count` tasks and owned by
            // this worker under the queue protocol (claimed, locked, or local).
            unsafe {
                let v = (src(task) as *const u64).add(word).read();
                (dst(task) as *mut u64).add(word).write(v);
            }
            i += lanes;
        }
    }

    // ----- local queue and overflow stack -------------------------------------------------------

    #[inline(always)]
    fn local_len(&self) -> u64 {
        self.local_head - self.local_tail
    }

    #[inline(always)]
    fn local_slot(&self, position: u64) -> *mut T {
        self.local_ring().slot(position)
    }

    #[inline(always)]
    fn local_ring(&self) -> LocalRing<T> {
        LocalRing {
            base: self.scratch_at::<T>(self.layout.local_slots),
            capacity: self.local_capacity,
        }
    }

    #[inline(always)]
    fn spill_slot(&self, index: u64) -> *mut T {
        // SAFETY: the host allocates spill_capacity tasks per worker; index < spill_capacity.
        unsafe {
            self.env
                .spill
                .add((self.id as u64 * self.spill_capacity + index) as usize)
        }
    }

    /// Takes the newest local task (depth-first order for spawning workloads).
    #[inline(always)]
    fn pop_local(&mut self) -> T {
        self.local_head -= 1;
        // SAFETY: position local_head holds a task written by this worker's lanes before a barrier.
        let task = unsafe { self.local_slot(self.local_head).read() };
        // The slot may be overwritten by the next write to the local queue: every lane must have
        // read it first. That barrier is deferred to the next write (`settle_pop`), so a task that
        // spawns nothing costs no barrier here.
        self.pop_pending.set(true);
        task
    }

    /// The barrier a popped slot owes before the local queue is written again (see `pop_local`);
    /// every exchange's barriers pay it too.
    #[inline(always)]
    fn settle_pop(&self) {
        if self.pop_pending.get() {
            self.p.barrier();
            self.pop_pending.set(false);
        }
    }

    /// Pushes lane `source`'s `task` onto the local queue, making room first if it is full.
    #[inline(always)]
    fn push_local(&mut self, source: u32, task: &T) {
        if let Some(sink) = self.level {
            if self.p.lane_id() == source {
                sink.append(task, self.scope);
            }
            return;
        }
        if self.local_len() == self.local_capacity {
            self.make_room();
            if self.aborted {
                return;
            }
        }
        self.settle_pop();
        if self.p.lane_id() == source {
            // SAFETY: the slot is free (len < capacity) and only this lane writes it.
            unsafe { self.local_slot(self.local_head).write(*task) };
        }
        self.local_head += 1;
        self.p.barrier();
    }

    /// Pushes the `task` of each lane `0..count` (`count <= lane_count`), in lane order, with one
    /// barrier instead of one per task.
    #[inline(always)]
    fn push_each(&mut self, count: u32, task: &T) {
        let lane = self.p.lane_id();
        if let Some(sink) = self.level {
            if lane < count {
                sink.append(task, self.scope);
            }
            return;
        }
        let count64 = count as u64;
        if count64 > self.local_capacity / 2 {
            // More tasks than half the local queue: one at a time, making room as needed.
            for source in 0..count {
                self.push_local(source, task);
            }
            return;
        }
        while self.local_len() + count64 > self.local_capacity {
            self.make_room();
            if self.aborted {
                return;
            }
        }
        self.settle_pop();
        if lane < count {
            // SAFETY: slots head..head+count are free (checked above); each lane writes its own.
            unsafe { self.local_slot(self.local_head + lane as u64).write(*task) };
        }
        self.local_head += count64;
        self.p.barrier();
    }

    /// Frees half of a full local queue: into the public queue if it has room, else onto the
    /// overflow stack.
    #[inline(always)]
    fn make_room(&mut self) {
        let half = self.local_capacity / 2;
        let moved = if self.static_mode {
            0
        } else {
            self.release(half)
        };
        if moved == 0 && !self.aborted {
            self.spill(half);
        }
    }

    /// Moves the `count` oldest local tasks onto the overflow stack.
    #[inline(always)]
    fn spill(&mut self, count: u64) {
        self.set_operation(Operation::Spill);
        if self.spill_len + count > self.spill_capacity {
            let (worker, capacity) = (self.id, self.spill_capacity as u32);
            self.fail(RunError::SpillOverflow { worker, capacity });
            return;
        }
        let (tail, top) = (self.local_tail, self.spill_len);
        self.copy_tasks(
            count,
            |j| self.local_slot(tail + j),
            |j| self.spill_slot(top + j),
        );
        self.p.barrier();
        self.local_tail += count;
        self.spill_len += count;
        self.count(|s| s.spills += 1);
    }

    /// Moves the newest overflow tasks back into the (empty) local queue.
    #[inline(always)]
    fn refill_from_spill(&mut self) {
        self.set_operation(Operation::Spill);
        let count = self.spill_len.min(self.local_capacity / 2);
        let (from, head) = (self.spill_len - count, self.local_head);
        self.settle_pop();
        self.copy_tasks(
            count,
            |j| self.spill_slot(from + j),
            |j| self.local_slot(head + j),
        );
        self.p.barrier();
        self.spill_len -= count;
        self.local_head += count;
    }

    // ----- own public queue --------------------------------------------------------------------

    #[inline(always)]
    fn own_queue(&self) -> PublicQueue<'e, P::Word> {
        // SAFETY: `queue` is this worker's queue, a valid index of the env's topology.
        let header = unsafe { self.env.header(self.queue) };
        PublicQueue::new(header, self.env.config.public_capacity as u64, self.scope)
    }

    #[inline(always)]
    fn abort_flag(&self) -> impl Fn() -> bool + 'e {
        // SAFETY: the shared state outlives the run.
        let shared = unsafe { self.env.shared() };
        let scope = self.scope;
        move || shared.abort.load(Ordering::Relaxed, scope) != 0
    }

    /// Listing 5's "if the public queue is empty, release": while initial tasks remain, idle
    /// workers take those instead of stealing, so releasing would only add copies. Lane 0 checks
    /// the public word, and every 32 iterations the initial-task cursor.
    #[inline(always)]
    fn should_release(&mut self) -> bool {
        let check_cursor =
            !self.initial_exhausted && self.iterations & (8 * RELEASE_CHECK_INTERVAL - 1) == 0;
        if !self.initial_exhausted && !check_cursor {
            // Nothing to decide: the answer is "no" while initial tasks remain (uniform on every
            // lane, so no exchange is needed).
            return false;
        }
        let mut answer = [0u64; 2];
        if self.p.is_leader() {
            let word = self.own_queue().peek();
            let empty = !PublicQueue::<P::Word>::looks_stealable(word) && !word.locked();
            let mut exhausted = self.initial_exhausted;
            if check_cursor {
                // SAFETY: the shared state outlives the run.
                let done = unsafe { self.env.shared() }
                    .initial_ranges_done
                    .load(Ordering::Relaxed, self.scope);
                exhausted = done >= self.env.initial_ranges();
            }
            answer = [empty as u64, exhausted as u64];
        }
        let [empty, exhausted] = self.exchange(answer);
        self.initial_exhausted = exhausted != 0;
        empty != 0 && self.initial_exhausted
    }

    /// Moves up to `want` of the oldest local tasks into the public queue and opens a new epoch.
    /// Returns how many moved (0 when the public queue has no free slot).
    #[inline(always)]
    fn release(&mut self, want: u64) -> u64 {
        self.set_operation(Operation::Release);
        self.p.protocol_step(ProtocolStep::Release);
        let (tail, ring) = (self.local_tail, self.local_ring());
        let moved = self.publish(want, |j| ring.slot(tail + j) as *const T);
        self.local_tail += moved;
        if moved > 0 {
            self.count(|s| s.releases += 1);
        }
        moved
    }

    /// The owner's side of adding tasks to its public queue: lock, wait for the next epoch index
    /// to drain, copy up to `want` tasks from `src` to the head of the ring, reopen. Returns the
    /// number of tasks published.
    #[inline(always)]
    fn publish(&mut self, want: u64, src: impl Fn(u64) -> *const T) -> u64 {
        let queue = self.own_queue();
        let abort = self.abort_flag();
        let mut plan = [0u64; 2];
        let mut view: Option<OwnerView> = None;
        if self.p.is_leader() {
            plan = match queue.lock(&self.p, &abort) {
                None => [0, 1],
                Some(v) => {
                    let next = 1 - v.word.epoch() as usize;
                    let mut ok = queue.wait_drained(&self.p, next, &abort);
                    let mut free = queue.free_slots(&v);
                    if ok && free < want && !queue.ending_epoch_drained(&v) {
                        // The ending epoch's thieves are still copying: wait for them rather than
                        // publish fewer tasks.
                        ok = queue.wait_drained_current(&self.p, &v, &abort);
                        free = queue.free_slots(&v);
                    }
                    view = Some(v);
                    if ok {
                        [want.min(free), 0]
                    } else {
                        [0, 1]
                    }
                }
            };
        }
        let [count, aborted] = self.exchange(plan);
        if aborted != 0 {
            self.aborted = true;
            return 0;
        }
        let head = self.exchange([view.map_or(0, |v| v.head)])[0];
        let capacity = queue.capacity;
        let env = self.env;
        let q = self.queue;
        // SAFETY: positions head..head+count are free ring slots of our locked queue.
        self.copy_tasks(count, src, |j| unsafe {
            env.slot(q, ring_index(head + j, capacity))
        });
        self.p.barrier();
        if let Some(v) = view {
            queue.reopen(&self.p, &v, v.first_unclaimed, v.head + count);
        }
        count
    }

    /// Moves tasks from the public queue into the empty local queue: `min(ceil(n/2), local/2)`
    /// of the `n` unclaimed tasks, the newest ones. Returns false if the public queue had none.
    #[inline(always)]
    fn acquire(&mut self) -> bool {
        let queue = self.own_queue();
        let abort = self.abort_flag();
        let mut plan = [0u64; 3];
        let mut view: Option<OwnerView> = None;
        if self.p.is_leader() && PublicQueue::<P::Word>::looks_stealable(queue.peek()) {
            self.p.protocol_step(ProtocolStep::Acquire);
            plan = match queue.lock(&self.p, &abort) {
                None => [0, 0, 1],
                Some(v) => {
                    let next = 1 - v.word.epoch() as usize;
                    let ok = queue.wait_drained(&self.p, next, &abort);
                    let take = v.available().div_ceil(2).min(self.local_capacity / 2);
                    view = Some(v);
                    [take, v.head - take, !ok as u64]
                }
            };
        }
        let [take, from, aborted] = self.exchange(plan);
        if aborted != 0 {
            self.aborted = true;
            return false;
        }
        if take == 0 {
            if let Some(v) = view {
                queue.reopen(&self.p, &v, v.first_unclaimed, v.head);
            }
            return false;
        }
        self.set_operation(Operation::Acquire);
        let capacity = queue.capacity;
        let (env, q, head) = (self.env, self.queue, self.local_head);
        // SAFETY: positions from..from+take are unclaimed tasks of our locked queue.
        self.copy_tasks(
            take,
            |j| unsafe { env.slot(q, ring_index(from + j, capacity)) },
            |j| self.local_slot(head + j),
        );
        self.p.barrier();
        self.local_head += take;
        self.count(|s| s.acquires += 1);
        // Leave the idle count while still holding the lock: a co-owner that finds the queue
        // quiescent after the unlock must not also find every worker idle.
        self.leave_idle();
        if let Some(v) = view {
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
    fn load_initial(&mut self) -> bool {
        self.set_operation(Operation::LoadInitial);
        self.p.protocol_step(ProtocolStep::LoadInitial);
        let mut plan = [0u64; 4];
        if self.p.is_leader() {
            let mut victims = [None; INITIAL_VICTIM_TRIES];
            if self.own_range_exhausted {
                let topology = &self.env.topology;
                self.with_leader(|l| {
                    for v in victims.iter_mut() {
                        *v = l.picker.pick(topology);
                    }
                });
            }
            let mut claim = None;
            let mut own_done = self.own_range_exhausted;
            if !own_done {
                claim = self.claim_initial(self.queue);
                own_done = claim.is_none();
            }
            for q in victims.into_iter().flatten() {
                if claim.is_some() {
                    break;
                }
                claim = self.claim_initial(q);
            }
            let (start, count) = claim.unwrap_or((0, 0));
            // SAFETY: the shared state outlives the run.
            let done = unsafe { self.env.shared() }
                .initial_ranges_done
                .load(Ordering::Relaxed, self.scope);
            plan = [
                start,
                count,
                own_done as u64,
                (done >= self.env.initial_ranges()) as u64,
            ];
        }
        let [start, count, own_done, all_done] = self.exchange(plan);
        self.own_range_exhausted = own_done != 0;
        if all_done != 0 {
            self.initial_exhausted = true;
        }
        if count == 0 {
            return false;
        }
        let (initial, head) = (self.env.initial, self.local_head);
        // The next chunk of the same range is likely this worker's next claim.
        let next = (start + count).min(self.env.initial_len);
        let ahead = count.min(self.env.initial_len - next);
        // SAFETY: next + ahead <= initial_len, so the hinted range lies within the initial set.
        self.p.prefetch(
            unsafe { initial.add(next as usize) } as *const u8,
            (ahead as usize) * core::mem::size_of::<T>(),
        );
        // SAFETY: tasks start..start+count of the initial set were claimed by this worker alone.
        self.copy_tasks(
            count,
            // Read forwards (the prefetcher follows), written reversed, so that the LIFO local
            // queue also runs the chunk in its original order (the tasks' own data, e.g. the
            // articles of consecutive CONTAINS tasks, is then walked forwards too).
            |j| unsafe { initial.add((start + j) as usize) },
            |j| self.local_slot(head + count - 1 - j),
        );
        self.p.barrier();
        self.local_head += count;
        self.count(|s| s.initial_loads += 1);
        true
    }

    /// Lane 0: claims up to one chunk of queue `q`'s home range; `(first task, count)`, or `None`
    /// when that range has been claimed to its end.
    #[inline(always)]
    fn claim_initial(&self, q: u32) -> Option<(u64, u64)> {
        let (lo, hi) = self.env.initial_range(q);
        let len = hi - lo;
        // SAFETY: q is a queue of the env's topology (this worker's or the picker's choice).
        let claimed = &unsafe { self.env.header(q) }.initial_claimed;
        // Relaxed throughout: the initial tasks were written by the host before the run, and
        // each fetch-add hands out a disjoint interval of the range.
        if len == 0 || claimed.load(Ordering::Relaxed, self.scope) >= len {
            return None;
        }
        let chunk = self.env.config.initial_chunk as u64;
        let offset = claimed.fetch_add(chunk, Ordering::Relaxed, self.scope);
        if offset >= len {
            return None;
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
        Some((lo + offset, chunk.min(len - offset)))
    }

    // ----- stealing ----------------------------------------------------------------------------

    #[inline(always)]
    fn damping_bit(&self, queue: u32) -> (*mut u64, u64) {
        let words = self.scratch_at::<u64>(self.layout.damping);
        // SAFETY: the damping bitmap has one bit per queue.
        (
            unsafe { words.add(queue as usize / 64) },
            1u64 << (queue % 64),
        )
    }

    #[inline(always)]
    fn clear_damping(&self) {
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

    /// Lane 0's steal attempt on `victim`, with the configured overflow prevention.
    #[inline(always)]
    fn claim_from(
        &mut self,
        victim: u32,
    ) -> Option<(crate::word::QueueWord, crate::share::StealShare)> {
        // SAFETY: the picker returns valid queue indices.
        let header = unsafe { self.env.header(victim) };
        let queue = PublicQueue::new(header, self.env.config.public_capacity as u64, self.scope);
        let damping = self.env.config.overflow_mode() == OverflowMode::Damping;
        let (word, bit) = self.damping_bit(victim);
        // SAFETY: the bitmap word is in this worker's scratch and only lane 0 uses it.
        let marked_empty = damping && unsafe { word.read() } & bit != 0;
        if !damping || marked_empty {
            self.p.protocol_step(ProtocolStep::StealLoad);
            if !PublicQueue::<P::Word>::looks_stealable(queue.peek()) {
                return None;
            }
        }
        self.count(|s| s.steal_attempts += 1);
        let result = match queue.claim(&self.p) {
            Claim::Claimed { word, share } => Some((word, share)),
            Claim::Empty | Claim::Locked => None,
        };
        if damping {
            // SAFETY: as above.
            unsafe {
                let w = word.read();
                word.write(if result.is_some() { w & !bit } else { w | bit });
            }
        }
        result
    }

    /// One steal attempt. The stolen tasks go to the local queue (up to half its capacity) and the
    /// rest to this worker's public queue, where others can steal them again.
    #[inline(always)]
    fn steal(&mut self) -> bool {
        self.set_operation(Operation::Steal);
        let mut plan = [0u64; 4];
        if self.p.is_leader() {
            let topology = &self.env.topology;
            if let Some(victim) = self.with_leader(|l| l.picker.pick(topology)) {
                if let Some((word, share)) = self.claim_from(victim) {
                    plan = [word.0, share.offset, share.count, victim as u64];
                }
            }
        }
        let [word, offset, count, victim] = self.exchange(plan);
        if count == 0 {
            return false;
        }
        let victim = victim as u32;
        self.p.protocol_step(ProtocolStep::StealCopy);
        let word = crate::word::QueueWord(word);
        let capacity = self.env.config.public_capacity as u64;
        let env = self.env;
        let src = move |j: u64| -> *const T {
            // SAFETY: the claimed share's slots belong to this thief until it completes the steal.
            unsafe { env.slot(victim, ring_index(word.tail() + offset + j, capacity)) }
        };
        let to_local = count.min((self.local_capacity / 2).max(1));
        let head = self.local_head;
        self.copy_tasks(to_local, src, |j| self.local_slot(head + j));
        self.p.barrier();
        self.local_head += to_local;
        self.leave_idle();
        // The rest goes onto the overflow stack first, so that the claim completes before this
        // worker waits for anything: a thief never waits while holding a claim, which is what
        // keeps owners' waits for drained epochs free of cycles.
        let rest = count - to_local;
        let top = self.spill_len;
        let spilled = rest > 0 && top + rest <= self.spill_capacity;
        if spilled {
            self.copy_tasks(rest, |j| src(to_local + j), |j| self.spill_slot(top + j));
            self.p.barrier();
            self.spill_len += rest;
        }
        if self.p.is_leader() {
            // SAFETY: victim is a valid queue index.
            let header = unsafe { self.env.header(victim) };
            PublicQueue::new(header, capacity, self.scope).complete(&self.p, word, count);
            self.count(|s| {
                s.steals += 1;
                s.tasks_stolen += count;
            });
        }
        if rest > 0 && !spilled {
            let (worker, capacity) = (self.id, self.spill_capacity as u32);
            self.fail(RunError::SpillOverflow { worker, capacity });
        } else if spilled {
            // Re-publish the surplus where other thieves can take it, newest first.
            let (spill, base, cap) = (
                self.env.spill,
                self.id as u64 * self.spill_capacity,
                self.spill_capacity,
            );
            let end = top + rest;
            let _ = cap;
            // SAFETY: spill slots top..top+rest hold the surplus written above.
            let published = self.publish(rest, |j| unsafe {
                spill.add((base + end - 1 - j) as usize)
            });
            self.spill_len -= published;
        }
        true
    }

    // ----- termination -------------------------------------------------------------------------

    /// Leaves the idle count after gaining work, before any steal that gave the work completes.
    #[inline(always)]
    fn leave_idle(&mut self) {
        if self.idle {
            if self.p.is_leader()
                && self.env.config.termination_mode() == TerminationMode::IdleCounter
            {
                self.p.protocol_step(ProtocolStep::IdleLeave);
                self.idle_counter().leave();
            }
            self.idle = false;
            self.report_progress();
        }
    }

    #[inline(always)]
    fn idle_counter(&self) -> IdleCounter<'e, P::Word> {
        // SAFETY: the shared state outlives the run.
        let shared = unsafe { self.env.shared() };
        IdleCounter {
            counter: &shared.idle_workers,
            workers: self.env.config.workers as u64,
            scope: self.scope,
        }
    }

    /// The idle path of the loop: nothing local, public, initial or stealable was found. Returns
    /// true when the run is over.
    #[inline(always)]
    fn idle_step(&mut self) -> bool {
        self.set_operation(Operation::Idle);
        self.count(|s| s.idle_rounds += 1);
        let ignore_in_flight = self.flags.contains(RunFlags::BREAK_IN_FLIGHT_RULE);
        let mut plan = [0u64; 3];
        if self.p.is_leader() {
            let abort = (self.abort_flag())();
            let quiescent = self.own_queue().quiescent(ignore_in_flight);
            let mut became_idle = false;
            let terminate = match self.env.config.termination_mode() {
                TerminationMode::IdleCounter => {
                    if !self.idle && quiescent.is_some() {
                        self.p.protocol_step(ProtocolStep::IdleEnter);
                        self.idle_counter().enter();
                        became_idle = true;
                    }
                    (self.idle || became_idle) && self.idle_counter().all_idle()
                }
                TerminationMode::VotingTree => {
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
                    // SAFETY: the shared state outlives the run.
                    let tree = VotingTree {
                        tree: self.env.tree,
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
            plan = [terminate as u64, abort as u64, became_idle as u64];
        }
        let [terminate, abort, became_idle] = self.exchange(plan);
        if became_idle != 0 {
            self.idle = true;
            self.report_progress();
        }
        if abort != 0 {
            self.aborted = true;
            return true;
        }
        if terminate == 0 {
            self.p.relax();
        }
        terminate != 0
    }

    // ----- errors, progress, exit --------------------------------------------------------------

    /// Records `error` (the first one wins) and aborts the run. Called by all lanes.
    #[inline(always)]
    fn fail(&mut self, error: RunError) {
        if let Some(sink) = self.level {
            if self.p.is_leader() {
                let _ = sink
                    .counter(LevelSink::<P::Word, T>::ERROR)
                    .compare_exchange(
                        0,
                        error.pack(),
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                        self.scope,
                    );
            }
            self.aborted = true;
            return;
        }
        if self.p.is_leader() {
            // SAFETY: the shared state outlives the run.
            let shared = unsafe { self.env.shared() };
            let _ = shared.error.compare_exchange(
                0,
                error.pack(),
                Ordering::AcqRel,
                Ordering::Relaxed,
                self.scope,
            );
            shared.abort.store(1, Ordering::Release, self.scope);
        }
        self.aborted = true;
    }

    #[inline(always)]
    fn check_abort(&mut self) {
        let flag = self.p.is_leader()
            && match self.level {
                Some(sink) => {
                    sink.counter(LevelSink::<P::Word, T>::ERROR)
                        .load(Ordering::Relaxed, self.scope)
                        != 0
                }
                None => (self.abort_flag())(),
            };
        if self.exchange([flag as u64])[0] != 0 {
            self.aborted = true;
        }
    }

    #[inline(always)]
    fn report_progress(&self) {
        if !self.p.is_leader() || self.env.progress.is_null() {
            return;
        }
        let operation = self.with_leader(|l| l.operation);
        let state = if operation == Operation::Exited {
            2
        } else {
            self.idle as u64
        };
        let progress = WorkerProgress {
            iterations: self.iterations,
            tasks_run: self.tasks_run,
            last_operation: operation as u64,
            state,
        };
        // SAFETY: one progress record per worker; only this worker's lane 0 writes it. Volatile so
        // that the host's watchdog, reading concurrently, sees the stores.
        unsafe {
            self.env
                .progress
                .add(self.id as usize)
                .write_volatile(progress)
        };
    }

    #[inline(always)]
    fn finish(&mut self) {
        self.set_operation(Operation::Exited);
        self.report_progress();
        if self.p.is_leader() {
            if !self.env.stats.is_null() {
                // SAFETY: one stats record per worker, written only by this worker's lane 0.
                unsafe {
                    self.env
                        .stats
                        .add(self.id as usize)
                        .write_volatile(self.stats())
                };
            }
            // A level run's bare env has no shared state.
            if !self.env.shared.is_null() {
                // SAFETY: the shared state outlives the run.
                unsafe { self.env.shared() }.exited_workers.fetch_add(
                    1,
                    Ordering::Release,
                    self.scope,
                );
            }
        }
        self.p.barrier();
    }
}

/// `position` reduced to a ring of `capacity` slots: a mask for power-of-two capacities (the
/// defaults), which saves a 64-bit division per copied word on a GPU.
#[inline(always)]
pub fn ring_index(position: u64, capacity: u64) -> u64 {
    if capacity & (capacity - 1) == 0 {
        position & (capacity - 1)
    } else {
        ring_index_by_division(position, capacity)
    }
}

/// [`ring_index`] for a capacity that is not a power of two, out of line: inlined, the division
/// (on a GPU a 64-bit and a 32-bit remainder sequence with a branch between them) was repeated at
/// every one of the worker's ring accesses, in the middle of its hot path, for a configuration
/// the defaults never use.
#[cold]
#[inline(never)]
fn ring_index_by_division(position: u64, capacity: u64) -> u64 {
    position % capacity
}

/// The local queue's ring in scratch memory.
#[derive(Clone, Copy)]
struct LocalRing<T> {
    base: *mut T,
    capacity: u64,
}

impl<T> LocalRing<T> {
    #[inline(always)]
    fn slot(self, position: u64) -> *mut T {
        // SAFETY: the ring holds `capacity` tasks; the index is reduced modulo the capacity.
        unsafe { self.base.add(ring_index(position, self.capacity) as usize) }
    }
}

impl<'e, P: Platform, T: Copy> TaskContext<'_, 'e, P, T> {
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

    /// Base address of data area `index` on this worker's device (0 if unset).
    #[inline(always)]
    pub fn area(&self, index: usize) -> u64 {
        self.core.env.areas.get(index).copied().unwrap_or(0)
    }
}
