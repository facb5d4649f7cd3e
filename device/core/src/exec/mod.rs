//! [`WorkerCore`], the state a worker shares with the tasks it runs, and every operation on it.
//! The mgws loop (`worker.rs`) and the baselines (`baseline/`) each drive one; tasks see it
//! through a [`TaskContext`]. This file holds the state and what every algorithm uses: its lanes,
//! its scratch (exchange area, leader state), errors, the abort flag and progress. The other
//! operations live beside it, one concern per file:
//!
//! - `local.rs`: the local queue and the overflow stack, and running local tasks;
//! - `public.rs`: the own public queue (release, publish, acquire) and the periodic checks;
//! - `initial.rs`: claiming initial tasks from the home ranges;
//! - `steal.rs`: stealing from other workers' public queues;
//! - `idle.rs`: the idle path and termination detection;
//! - the bridge steps of a bridged run are in `crate::bridge`.
//!
//! Every function here is executed by all lanes of a worker in lockstep. Lane 0 performs the
//! atomics and hands its decisions to the other lanes through `WorkerCore::exchange`; all lanes
//! copy tasks together. Uniform state (local-queue positions, flags, the iteration count) is kept
//! as an identical copy on every lane, so it needs no communication; what only lane 0 uses (the
//! victim generator, statistics, voting state) is its [`LeaderState`] in the scratch.

use crate::config::RunFlags;
use crate::context::{Tagged, TaskContext, TaskExecutor};
use crate::error::RunError;
use crate::layout::{Env, WorkerProgress, WorkerStats};
use crate::leader::LeaderState;
use crate::operation::Operation;
use crate::platform::{AtomicWord, Ordering, Platform, Scope};
use crate::scratch::{ScratchLayout, EXCHANGE_WORDS};
use crate::spec::Spec;
use crate::victim::VictimPicker;

mod idle;
mod initial;
mod level_sink;
mod local;
mod narrow;
mod public;
mod steal;

pub use level_sink::LevelSink;
pub(crate) use narrow::SpawnRoom;

/// What a spawn does when the local queue is full: the one place where the algorithms that share
/// [`WorkerCore`] differ inside a task.
#[derive(Clone, Copy)]
pub(crate) enum OnFull<W, T> {
    /// mgws: publish the oldest half to the public queue, else spill it.
    Publish,
    /// Kernel-per-level: move every local task to the next frontier.
    Frontier(LevelSink<W, T>),
}

/// Where a worker's local-queue positions start: 256 pushes before they wrap, so that every run
/// (every test included) crosses the wrap of the `u32` positions early.
pub(crate) const LOCAL_POSITION_START: u32 = u32::MAX - 255;

/// The scheduler state of one worker, shared by the loop that drives it and the task context.
/// `S` fixes the hot-loop options (see [`Spec`]).
pub struct WorkerCore<'e, P: Platform, T, S: Spec> {
    // ----- Who and where: fixed for the run. -----
    pub(crate) p: P,
    pub(crate) env: &'e Env<P::Word, T>,
    pub(crate) id: u32,
    /// `id + env.worker_base`: the worker's id among every device's workers, which tasks see
    /// (`Context::worker_id`). Kept so that a task does not load `worker_base` again: the load
    /// sat on the path of every UTS node (docs/results.md). Bridged entries do not use it.
    pub(crate) global_id: u32,
    pub(crate) queue: u32,
    pub(crate) scope: Scope,
    pub(crate) layout: ScratchLayout,
    pub(crate) flags: RunFlags,
    pub(crate) spec: core::marker::PhantomData<S>,
    // ----- The local queue and the overflow stack (uniform: identical on every lane). -----
    pub(crate) local_capacity: u64,
    /// Local-queue positions, wrapping `u32`s: the capacity (at most 2^16) divides 2^32, so a
    /// position masks to the same slot before and after a wrap, and every register the loop
    /// holds counts on a GPU.
    pub(crate) local_tail: u32,
    pub(crate) local_head: u32,
    /// Tasks on this worker's overflow stack (at most `spill_capacity`, a `u32`).
    pub(crate) spill_len: u32,
    /// Tasks on top of the overflow stack still to be published: what the last steal's local
    /// queue did not take, or what `make_room` moved there during the last task (0 once the loop
    /// published them, before it runs the next task).
    pub(crate) surplus: u32,
    /// A popped slot may still be read by some lane (see `pop_local`).
    pub(crate) pop_pending: core::cell::Cell<bool>,
    /// What a full local queue does (the only algorithm-specific state).
    pub(crate) on_full: OnFull<P::Word, T>,
    // ----- The loop's state (uniform). -----
    pub(crate) initial_exhausted: bool,
    /// This worker's own home range of initial tasks has been claimed to its end.
    pub(crate) own_range_exhausted: bool,
    pub(crate) idle: bool,
    pub(crate) aborted: bool,
    /// Loop iterations, wrapping: only their residues modulo powers of two up to the progress
    /// interval are tested, and lane 0 keeps the exact total for the progress records
    /// ([`LeaderState::iterations_total`]). A `u32`, as every register the loop holds counts on a
    /// GPU.
    pub(crate) iterations: u32,
    /// Loop iterations between two release checks, a power of two from
    /// [`crate::config::RELEASE_CHECK_INTERVAL`] to the platform's
    /// [`Platform::RELEASE_CHECK_INTERVAL_MAX`] (see `should_release`).
    pub(crate) release_interval: u32,
    // ----- Lane 0's counters of the hot path; the rest of lane 0's state is a [`LeaderState`]
    // in the scratch. -----
    pub(crate) tasks_run: u64,
    /// The tag last written to `Env::task_tags` plus one, wrapping (0: none yet). A `u32`, as
    /// every register the loop holds counts on a GPU; so a task of tag `u32::MAX` is noted only
    /// after another tag (no registry has that many, and its executor rejects such a task).
    pub(crate) noted_tag: u32,
    /// The narrow spawn cursor's value after the last narrow batch (uniform; see
    /// `exec/narrow.rs`). Unused, and compiled away, where no task is narrow.
    pub(crate) narrow_base: u32,
}

/// Claimed initial tasks of an indexed set still to run in place, from `next` on (uniform: the
/// same on every lane): narrow batches make them from the template in the lanes' registers
/// instead of copying them through the local queue (`load_initial`). The worker loop holds it,
/// and only where the registry runs indexed tasks in place
/// ([`TaskExecutor::INDEXED_IN_PLACE`]), so other workers keep no register for it.
#[derive(Clone, Copy, Default)]
pub(crate) struct IndexedClaim {
    pub(crate) next: u64,
    /// At most a claim (below `MAX_FIELD`, a queue's capacity bound).
    pub(crate) left: u32,
}

impl<'e, P: Platform, T: Copy, S: Spec> WorkerCore<'e, P, T, S> {
    /// Worker `id` on platform `p`.
    ///
    /// # Safety
    /// `env` must describe live orchestration memory laid out as [`crate::layout`] says (with
    /// `on_full` other than `Frontier`, `env.shared` must be valid; with `Frontier`, the sink's
    /// four counters must be), `id` must be a worker of `env.topology`, the platform's scratch
    /// must hold `ScratchLayout::new(...)` bytes for this configuration, and every lane of the
    /// worker must make the same call.
    #[inline(always)]
    pub(crate) unsafe fn new(
        p: P,
        env: &'e Env<P::Word, T>,
        id: u32,
        on_full: OnFull<P::Word, T>,
    ) -> Self {
        const {
            let max = P::RELEASE_CHECK_INTERVAL_MAX;
            assert!(
                max.is_power_of_two() && max as u64 >= crate::config::RELEASE_CHECK_INTERVAL,
                "RELEASE_CHECK_INTERVAL_MAX must be a power of two, at least RELEASE_CHECK_INTERVAL"
            )
        };
        let cfg = &env.config;
        // Unshared queues are numbered like their workers.
        let queue = if S::shared_queues(cfg) {
            env.topology.queue_of_worker(id, cfg.workers_per_queue)
        } else {
            id
        };
        let flags = cfg.run_flags();
        let layout = ScratchLayout::new(
            cfg.local_capacity,
            core::mem::size_of::<T>(),
            p.lane_count(),
            env.topology.device_queues_max(),
        );
        debug_assert!(p.scratch_len() >= layout.total);
        let core = WorkerCore {
            scope: S::scope(cfg),
            local_capacity: cfg.local_capacity as u64,
            p,
            env,
            id,
            global_id: id + env.worker_base as u32,
            queue,
            layout,
            flags,
            local_tail: LOCAL_POSITION_START,
            local_head: LOCAL_POSITION_START,
            spill_len: 0,
            surplus: 0,
            initial_exhausted: false,
            own_range_exhausted: false,
            idle: false,
            aborted: false,
            iterations: 0,
            release_interval: crate::config::RELEASE_CHECK_INTERVAL as u32,
            tasks_run: 0,
            noted_tag: 0,
            narrow_base: 0,
            pop_pending: core::cell::Cell::new(false),
            on_full,
            spec: core::marker::PhantomData,
        };
        if core.p.is_leader() {
            let state = LeaderState {
                stats: WorkerStats::default(),
                picker: VictimPicker::new(
                    cfg.seed,
                    id,
                    queue,
                    &env.topology,
                    u32::from(cfg.same_device_bias_permille),
                    u32::from(cfg.local_first_tries),
                    flags.contains(RunFlags::SAME_DEVICE_ONLY),
                )
                .initial_on_own_device(flags.contains(RunFlags::INITIAL_OWN_DEVICE)),
                claims_at_last_vote: 0,
                iterations_total: 0,
                iterations_reported: 0,
                voted_round: 0,
                last_idle_iteration: 0,
                idle_streak: 0,
                bridge: crate::bridge::BridgeLedger::default(),
                operation: Operation::Start,
                heartbeats: 0,
                own_range: env.initial_range(queue),
                own_claimed_at_least: 0,
                initial_hint: crate::leader::NO_RANGE,
            };
            // SAFETY: the scratch holds the layout (the caller's guarantee); only lane 0 touches
            // the leader state.
            unsafe { core.leader_state().write(state) };
            // The narrow words start at 0 (`narrow_base`), free; the barriers before the first
            // narrow batch order these stores before any lane's atomics on them.
            for index in [crate::scratch::NARROW_SPAWNS, crate::scratch::NARROW_LOCK] {
                // SAFETY: words of this worker's scratch (the layout's narrow area).
                unsafe { core.narrow_word(index).write_volatile(0) };
            }
        }
        let mut core = core;
        if !S::matches(cfg) {
            let worker = core.id;
            core.fail(RunError::WrongEntry { worker });
        }
        core
    }

    /// Where `fail` records the first error, and the abort word this worker reads: the run's
    /// shared state and the env's abort flag, or a level launch's counters. Worked out where
    /// needed rather than kept: two pointers held for the whole loop pushed a GPU worker's state
    /// into local memory.
    #[inline(always)]
    pub(crate) fn error_and_abort_words(&self) -> (&P::Word, &P::Word) {
        match self.on_full {
            // SAFETY: `new`'s contract: the sink's counters are valid for the run.
            OnFull::Frontier(sink) => unsafe {
                (
                    &*sink.counters.wrapping_add(LevelSink::<P::Word, T>::ERROR),
                    &*sink.counters.wrapping_add(LevelSink::<P::Word, T>::ABORT),
                )
            },
            OnFull::Publish => {
                // SAFETY: `new`'s contract: the env's pointers are valid for the run.
                unsafe { (&self.env.shared().error, self.env.abort_flag()) }
            }
        }
    }

    /// The scope of orchestration and task atomics (a constant in a specialized kernel entry).
    #[inline(always)]
    pub(crate) fn scope(&self) -> Scope {
        self.scope
    }

    /// Counts a loop iteration; every `progress_interval` reports progress and checks for abort.
    #[inline(always)]
    pub(crate) fn tick(&mut self) {
        self.iterations = self.iterations.wrapping_add(1);
        if self.iterations & (self.env.config.progress_interval - 1) == 0 {
            self.report_progress();
            self.check_abort();
        }
    }

    /// Lane 0's state in the scratch (see [`LeaderState`]).
    #[inline(always)]
    pub(crate) fn leader_state(&self) -> *mut LeaderState {
        self.scratch_at::<LeaderState>(self.layout.leader)
    }

    /// Runs `f` on lane 0's [`LeaderState`]. Lane 0 only: the other lanes have none.
    #[inline(always)]
    pub(crate) fn with_leader<R>(&self, f: impl FnOnce(&mut LeaderState) -> R) -> R {
        debug_assert!(self.p.is_leader());
        // SAFETY: lane 0 initialised the state in `WorkerCore::new` and is the only lane that touches
        // it; no reference to it outlives this call, and calls do not nest.
        f(unsafe { &mut *self.leader_state() })
    }

    /// Records what the worker is doing now (lane 0 keeps it for the progress reports).
    #[inline(always)]
    pub(crate) fn set_operation(&self, operation: Operation) {
        if self.p.is_leader() {
            self.with_leader(|l| l.operation = operation);
        }
    }

    /// Counts an event: `update` runs on lane 0's statistics in the scratch (the other lanes skip
    /// it). Spawns are counted here too, once per spawn.
    #[inline(always)]
    pub(crate) fn count(&self, update: impl FnOnce(&mut WorkerStats)) {
        if self.p.is_leader() {
            self.with_leader(|l| update(&mut l.stats));
        }
    }

    /// This worker's statistics so far. Lane 0 only.
    #[inline(always)]
    pub(crate) fn stats(&self) -> WorkerStats {
        let mut stats = self.with_leader(|l| l.stats);
        stats.tasks_run = self.tasks_run;
        stats
    }

    /// Pops the newest local task and runs it on all lanes; a task error stops the run.
    ///
    /// The operation the progress record shows is not written here, once per task: whatever
    /// fills the local queue (loading, acquiring, stealing, refilling, making room) sets
    /// [`Operation::RunTask`] as it ends, so a run of tasks costs one write.
    #[inline(always)]
    pub(crate) fn run_next_local<X: TaskExecutor<T>>(&mut self, exec: &X)
    where
        T: Tagged,
    {
        if X::NARROW {
            let width = self.narrow_width(exec);
            if width != 0 {
                self.run_narrow_batch(exec, width, None);
                return;
            }
        }
        let task = self.pop_local();
        self.tasks_run += 1;
        self.note_task(task.tag());
        if let Err(e) = exec.execute(&task, &mut TaskContext::new(self)) {
            let worker = self.id;
            self.fail(e.into_run_error(worker, task.tag()));
        }
    }

    /// Lane 0 records the tag of the task this worker starts now, for the hang report; only when
    /// it differs from the last one recorded (a run of one task kind stores it once: a store per
    /// task put a global store on the path of every task, which slowed MEMSET; docs/results.md).
    #[inline(always)]
    pub(crate) fn note_task(&mut self, tag: u32) {
        let word = tag.wrapping_add(1);
        if word == self.noted_tag {
            return;
        }
        self.noted_tag = word;
        if self.p.is_leader() {
            // SAFETY: lane 0 of this worker.
            unsafe { self.env.note_task(self.id, tag) };
        }
    }

    /// Copies initial task `index` into the (empty) local queue.
    #[inline(always)]
    pub(crate) fn load_one(&mut self, index: u64) {
        let head = self.local_head as u64;
        self.settle_pop();
        self.copy_initial::<1>(1, |_| index, |_| self.local_slot(head), true);
        self.p.barrier();
        self.local_head = self.local_head.wrapping_add(1);
        self.set_operation(Operation::RunTask);
    }

    /// Copies the `count` initial tasks `first, first + stride, ...` into the (empty) local
    /// queue, the first on top.
    #[inline(always)]
    pub(crate) fn load_strided(&mut self, first: u64, stride: u64, count: u64) {
        let head = self.local_head as u64;
        self.settle_pop();
        self.copy_initial::<1>(
            count,
            |j| first + j * stride,
            |j| self.local_slot(head + count - 1 - j),
            true,
        );
        self.p.barrier();
        self.local_head = self.local_head.wrapping_add(count as u32);
        self.set_operation(Operation::RunTask);
    }

    // ----- lanes -----------------------------------------------------------------------------

    /// Hands lane 0's `values` to every lane.
    #[inline]
    pub(crate) fn exchange<const N: usize>(&self, values: [u64; N]) -> [u64; N] {
        const { assert!(N <= EXCHANGE_WORDS) };
        let base = self.scratch_at::<u64>(self.layout.exchange);
        if self.p.is_leader() {
            for (i, v) in values.iter().enumerate() {
                // SAFETY: the exchange area holds EXCHANGE_WORDS words of this worker's scratch,
                // and only lane 0 writes it, between two barriers.
                unsafe { base.add(i).write_volatile(*v) };
            }
        }
        // A lone lane still wrote the area: `exchanged` reads it again.
        if self.p.lane_count() == 1 {
            return values;
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

    /// The first `N` words the last [`WorkerCore::exchange`] handed over, read again from the
    /// exchange area: a value needed before and after a long copy costs no register in between.
    /// Valid until the next exchange.
    #[inline(always)]
    pub(crate) fn exchanged<const N: usize>(&self) -> [u64; N] {
        const { assert!(N <= EXCHANGE_WORDS) };
        let base = self.scratch_at::<u64>(self.layout.exchange);
        let mut out = [0u64; N];
        for (i, o) in out.iter_mut().enumerate() {
            // SAFETY: the exchange area holds EXCHANGE_WORDS words; nothing writes it between
            // two exchanges.
            *o = unsafe { base.add(i).read_volatile() };
        }
        out
    }

    #[inline(always)]
    pub(crate) fn scratch_at<U>(&self, offset: usize) -> *mut U {
        // SAFETY: offsets come from the ScratchLayout that sized this worker's scratch.
        unsafe { self.p.scratch().add(offset) as *mut U }
    }

    /// Copies `count` tasks with all lanes: word `i` of the flattened range goes to lane
    /// `i % lanes`, so consecutive lanes touch consecutive words (coalesced on a GPU).
    #[inline]
    pub(crate) fn copy_tasks(
        &self,
        count: u64,
        src: impl Fn(u64) -> *const T,
        dst: impl Fn(u64) -> *mut T,
    ) {
        self.copy_tasks_batched::<1>(count, src, dst)
    }

    /// [`WorkerCore::copy_tasks`] on the publishing paths, into global memory (a ring, an
    /// overflow stack), with [`TaskExecutor::PUBLISH_COPY_BATCH`] words of each lane in flight (a
    /// constant: each kernel keeps one of the arms).
    #[inline(always)]
    pub(crate) fn copy_tasks_to_publish<X: TaskExecutor<T>>(
        &self,
        count: u64,
        src: impl Fn(u64) -> *const T,
        dst: impl Fn(u64) -> *mut T,
    ) {
        const { assert!(matches!(X::PUBLISH_COPY_BATCH, 1 | 2 | 4 | 8)) };
        match X::PUBLISH_COPY_BATCH {
            2 => self.copy_tasks_batched::<2>(count, src, dst),
            4 => self.copy_tasks_batched::<4>(count, src, dst),
            8 => self.copy_tasks_batched::<8>(count, src, dst),
            _ => self.copy_tasks(count, src, dst),
        }
    }

    /// [`WorkerCore::copy_tasks`] into this worker's scratch (its local queue) from global
    /// memory: where the platform copies asynchronously, each lane starts all its copies of 16
    /// bytes before it waits for any, so that a steal, an acquire or a refill waits out one
    /// memory latency instead of one per word (with plain loads each word's load waited for the
    /// store before it: the compiler cannot tell the two ranges apart). Elsewhere, and for tasks
    /// not made of 16-byte units, as `copy_tasks`. The caller's barrier after it hands the tasks
    /// to every lane, as after `copy_tasks`.
    #[inline(always)]
    pub(crate) fn copy_tasks_to_scratch(
        &self,
        count: u64,
        src: impl Fn(u64) -> *const T,
        dst: impl Fn(u64) -> *mut T,
    ) {
        let size = core::mem::size_of::<T>();
        if !(P::ASYNC_COPY_TO_SCRATCH
            && size.is_multiple_of(16)
            && core::mem::align_of::<T>() >= 16)
        {
            return self.copy_tasks(count, src, dst);
        }
        let units = (size / 16) as u32;
        debug_assert!(count * units as u64 <= u32::MAX as u64);
        let total = count as u32 * units;
        let lanes = self.p.lane_count();
        let mut i = self.p.lane_id();
        while i < total {
            let (task, unit) = ((i / units) as u64, (i % units) as usize * 16);
            // SAFETY: as in `copy_tasks`; task structs are 16-byte aligned (checked above), the
            // sources of every caller are in global memory and the destinations in the scratch.
            unsafe {
                self.p.copy16_to_scratch(
                    (dst(task) as *mut u8).add(unit),
                    (src(task) as *const u8).add(unit),
                )
            };
            i += lanes;
        }
        self.p.wait_copies();
    }

    /// [`WorkerCore::copy_tasks`] with `BATCH` words of each lane in flight: a round loads `BATCH`
    /// words before it stores any, so that their latencies overlap. Stored one by one, each load
    /// waits for the store before it (the compiler cannot tell the two ranges apart): on a GPU a
    /// chunk of 32 initial tasks waited out eight global-memory latencies in a row. The batch
    /// costs `2 * BATCH` registers, which the copies on UTS's path could not spare (with every
    /// copy batched, T1L ran slower; docs/results.md): the initial chunks use it, and the
    /// publishing paths where the registry asks (`copy_tasks_to_publish`).
    #[inline]
    pub(crate) fn copy_tasks_batched<const BATCH: usize>(
        &self,
        count: u64,
        src: impl Fn(u64) -> *const T,
        dst: impl Fn(u64) -> *mut T,
    ) {
        const { assert!(core::mem::size_of::<T>() & 7 == 0 && core::mem::align_of::<T>() >= 8) };
        const { assert!(BATCH > 0) };
        if P::SINGLE_LANE {
            // One lane copies whole tasks (decided at compile time: a GPU kernel has no such
            // branch).
            let words = core::mem::size_of::<T>() / 8;
            for task in 0..count {
                let (from, to) = (src(task) as *const u64, dst(task) as *mut u64);
                for word in 0..words {
                    // SAFETY: as below.
                    unsafe { to.add(word).write(self.p.load_word(from.add(word))) };
                }
            }
            return;
        }
        // `u32` positions: every copy is bounded by a queue's capacity (at most MAX_FIELD tasks),
        // so its words fit, and on a GPU each 64-bit counter of this loop costs two registers
        // at the peak of the paths that copy (steal, publish).
        let lanes = self.p.lane_count();
        let words = (core::mem::size_of::<T>() / 8) as u32;
        debug_assert!(count * words as u64 <= u32::MAX as u64);
        let total = count as u32 * words;
        let word_at = |i: u32| ((i / words) as u64, (i % words) as usize);
        let mut i = self.p.lane_id();
        while i < total {
            let mut batch = [0u64; BATCH];
            for (k, v) in batch.iter_mut().enumerate() {
                let at = i + k as u32 * lanes;
                if at < total {
                    let (task, word) = word_at(at);
                    // SAFETY: callers pass task addresses that are valid for `count` tasks and
                    // owned by this worker under the queue protocol (claimed, locked, or local).
                    *v = unsafe { self.p.load_word((src(task) as *const u64).add(word)) };
                }
            }
            for (k, v) in batch.iter().enumerate() {
                let at = i + k as u32 * lanes;
                if at < total {
                    let (task, word) = word_at(at);
                    // SAFETY: as above.
                    unsafe { (dst(task) as *mut u64).add(word).write(*v) };
                }
            }
            i += BATCH as u32 * lanes;
        }
    }

    /// Copies initial tasks `index(0..count)`, which this worker alone was assigned (each below
    /// `initial_len`), to `dst(0..count)`: read as [`WorkerCore::copy_tasks_batched`] does, or,
    /// for an indexed set (and, unless `batched`, a listed one), read or made from the template
    /// word by word, each lane writing its words of the tasks.
    #[inline(always)]
    pub(crate) fn copy_initial<const BATCH: usize>(
        &self,
        count: u64,
        index: impl Fn(u64) -> u64,
        dst: impl Fn(u64) -> *mut T,
        batched: bool,
    ) {
        let env = self.env;
        if batched && !env.initial_indexed() {
            // SAFETY: each index is below initial_len, assigned to this worker alone.
            return self.copy_tasks_batched::<BATCH>(
                count,
                |j| unsafe { env.initial.add(index(j) as usize) },
                dst,
            );
        }
        let words = (core::mem::size_of::<T>() / 8) as u32;
        let lanes = if P::SINGLE_LANE {
            1
        } else {
            self.p.lane_count()
        };
        let total = count as u32 * words;
        let mut i = if P::SINGLE_LANE { 0 } else { self.p.lane_id() };
        while i < total {
            let (j, w) = ((i / words) as u64, (i % words) as usize);
            // SAFETY: the index is below initial_len and `w` a word of the task; `dst` is this
            // worker's for `count` tasks (the callers' local slots).
            unsafe {
                (dst(j) as *mut u64)
                    .add(w)
                    .write(env.initial_word(index(j), w))
            };
            i += lanes;
        }
    }

    /// Records `error` (the first one wins) and aborts the run. Called by all lanes.
    ///
    /// Orderings: the error word's compare-exchange is AcqRel/Relaxed (first error wins by RMW
    /// atomicity; the host reads it after the run). The abort store is Release: a stop request
    /// that carries no data, read Relaxed by every worker (`check_abort`, and in the mgws loop
    /// `WorkerCore::tick_and_check`).
    #[inline(always)]
    pub(crate) fn fail(&mut self, error: RunError) {
        if self.p.is_leader() {
            let (err, abort) = self.error_and_abort_words();
            let _ = err.compare_exchange(
                0,
                error.pack(),
                Ordering::AcqRel,
                Ordering::Relaxed,
                self.scope,
            );
            match self.on_full {
                OnFull::Frontier(_) => abort.store(1, Ordering::Release, self.scope),
                // Every device's copy of the flag, not only the one this worker reads.
                // SAFETY: `new`'s contract: the env's pointers are valid for the run.
                OnFull::Publish => unsafe { self.env.raise_abort(self.scope) },
            }
        }
        self.aborted = true;
    }

    /// Lane 0 reads the abort word (Relaxed: a late observation only delays the stop) and hands
    /// the answer to every lane.
    #[inline(always)]
    pub(crate) fn check_abort(&mut self) {
        let flag = self.p.is_leader()
            && self
                .error_and_abort_words()
                .1
                .load(Ordering::Relaxed, self.scope)
                != 0;
        if self.exchange([flag as u64])[0] != 0 {
            self.aborted = true;
        }
    }

    #[inline(always)]
    pub(crate) fn report_progress(&self) {
        if !self.p.is_leader() {
            return;
        }
        // SAFETY: lane 0.
        unsafe { self.write_progress(0) };
    }

    /// Adds `heartbeats` to the leader state's and writes this worker's progress record.
    ///
    /// # Safety
    /// The caller is lane 0 outside a narrow batch, or a lane that holds the narrow lock during
    /// one (lane 0 then touches the leader state only under the lock too).
    #[inline(always)]
    pub(crate) unsafe fn write_progress(&self, heartbeats: u64) {
        let iterations = self.iterations;
        // SAFETY: the caller's guarantee: no other lane touches the leader state meanwhile.
        let l = unsafe { &mut *self.leader_state() };
        l.heartbeats += heartbeats;
        // Reports come at least every progress interval (at most 2^31 iterations), so the
        // wrapping difference is the iterations since the last one.
        l.iterations_total += iterations.wrapping_sub(l.iterations_reported) as u64;
        l.iterations_reported = iterations;
        let (operation, heartbeats, iterations) = (l.operation, l.heartbeats, l.iterations_total);
        let record = WorkerProgress::at(
            iterations,
            self.tasks_run,
            operation,
            self.idle,
            heartbeats,
            || self.p.now_ns(),
        );
        // SAFETY: one lane of this worker at a time (the caller's guarantee).
        unsafe { self.env.write_progress(self.id, record) };
    }

    #[inline(always)]
    pub(crate) fn finish(&mut self) {
        self.set_operation(Operation::Exited);
        self.report_progress();
        if self.p.is_leader() {
            // SAFETY: lane 0 of this worker.
            unsafe { self.env.write_stats(self.id, self.stats()) };
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

    /// Moves every local task to the next frontier of a level run: lane 0 reserves the range with
    /// one fetch-add on the sink's spawn counter (Relaxed: the host reads it after the launch),
    /// all lanes copy the tasks that fit. Tasks beyond the buffer are counted, not written; the
    /// host reports the overflow.
    #[inline(always)]
    pub(crate) fn flush_to(&mut self, sink: LevelSink<P::Word, T>) {
        let count = self.local_len();
        if count == 0 {
            return;
        }
        let mut plan = [0u64; 1];
        if self.p.is_leader() {
            plan[0] = sink.counter(LevelSink::<P::Word, T>::SPAWNED).fetch_add(
                count,
                Ordering::Relaxed,
                self.scope,
            );
        }
        let first = self.exchange(plan)[0];
        let fit = count.min(sink.out_capacity.saturating_sub(first));
        let (tail, out) = (self.local_tail as u64, sink.out);
        // SAFETY: indices first..first+fit were reserved by this worker's fetch-add alone and lie
        // below out_capacity.
        self.copy_tasks(
            fit,
            |j| self.local_slot(tail + j),
            |j| unsafe { out.add((first + j) as usize) },
        );
        self.p.barrier();
        self.local_tail = self.local_tail.wrapping_add(count as u32);
    }
}
