//! The orchestration data every worker reads: where it lives is the host's choice (the GPU's own
//! memory, mapped host memory or a peer GPU), its layout is fixed here. Every structure is
//! `#[repr(C)]` over 64-bit words, and all-zero bytes are its initial state, so a host can allocate
//! and zero it without knowing more.

use crate::config::{SchedConfig, MAX_DEVICES};
use crate::platform::{AtomicWord, Ordering, Scope};

/// Run-wide state shared by all workers.
#[repr(C)]
pub struct SharedState<W> {
    /// Home ranges of initial tasks that have been claimed to their end (see
    /// [`QueueHeader::initial_claimed`]); all are once it reaches [`Env::initial_ranges`].
    pub initial_ranges_done: W,
    /// Workers that currently count themselves idle ([`crate::TerminationMode::IdleCounter`]).
    pub idle_workers: W,
    /// Nonzero once the run must stop (an error, or the host's watchdog).
    pub abort: W,
    /// The first error of the run, packed by [`crate::RunError::pack`]; 0 when none.
    pub error: W,
    /// Voting-tree decision of the global root: `round << 1 | terminate`.
    pub decision: W,
    /// Workers that have left the worker loop.
    pub exited_workers: W,
    /// Devices whose workers all count themselves idle
    /// ([`crate::TerminationMode::Hierarchical`]; each device's own count is its
    /// [`Env::device_idle`] word).
    pub idle_devices: W,
    _pad: W,
}

/// A device's words of hierarchical termination and of the initial set's end, in that device's
/// memory.
#[repr(C)]
pub struct DeviceIdle<W> {
    /// Workers of the device that count themselves idle.
    pub count: W,
    /// Nonzero once the device's watcher saw every device all idle ([`crate::termination::EndWatch`]).
    pub over: W,
    /// The device's home ranges claimed to their end, by workers of any device
    /// ([`crate::initial_end::InitialSetEnd`]; runs over several devices).
    pub ranges_done: W,
    /// Nonzero while one of the device's workers reads the run-wide count of claimed ranges.
    pub initial_reader: W,
    /// Nonzero once one of the device's workers saw every range of the run claimed.
    pub initial_over: W,
}

impl<W: AtomicWord> DeviceIdle<W> {
    /// The initial state (all zero), for hosts that build it from values rather than bytes.
    pub fn new() -> Self {
        DeviceIdle {
            count: W::new(0),
            over: W::new(0),
            ranges_done: W::new(0),
            initial_reader: W::new(0),
            initial_over: W::new(0),
        }
    }
}

impl<W: AtomicWord> Default for DeviceIdle<W> {
    fn default() -> Self {
        Self::new()
    }
}

/// Metadata of one public queue. Thieves touch `word` and `completed`; the rest is the owners'
/// bookkeeping, changed only while the owner holds the lock bit of `word`.
#[repr(C)]
pub struct QueueHeader<W> {
    /// The packed [`crate::QueueWord`].
    pub word: W,
    /// Tasks that thieves finished copying, per epoch index.
    pub completed: [W; 2],
    /// Tasks that thieves claimed, per epoch index; written by the owner when the epoch ends.
    pub claimed: [W; 2],
    /// Ring position (monotonic, not reduced) of the tail each epoch opened with.
    pub epoch_tail: [W; 2],
    /// Ring position one past the newest public task.
    pub head: W,
    /// Tasks ever claimed by thieves from this queue (the voting tree's "was I targeted").
    pub total_claimed: W,
    /// Tasks claimed so far from this queue's home range of initial tasks (an offset into the
    /// range, advanced by fetch-add; it may run past the range's end).
    pub initial_claimed: W,
    _pad: [W; 6],
}

impl<W: AtomicWord> SharedState<W> {
    /// The initial state (all zero), for hosts that build it from values rather than bytes.
    #[inline(always)]
    pub fn new() -> Self {
        SharedState {
            initial_ranges_done: W::new(0),
            idle_workers: W::new(0),
            abort: W::new(0),
            error: W::new(0),
            decision: W::new(0),
            exited_workers: W::new(0),
            idle_devices: W::new(0),
            _pad: W::new(0),
        }
    }
}

impl<W: AtomicWord> Default for SharedState<W> {
    #[inline(always)]
    fn default() -> Self {
        Self::new()
    }
}

impl<W: AtomicWord> QueueHeader<W> {
    /// An empty queue in epoch 0 (all zero).
    #[inline(always)]
    pub fn new() -> Self {
        let z = || W::new(0);
        QueueHeader {
            word: z(),
            completed: [z(), z()],
            claimed: [z(), z()],
            epoch_tail: [z(), z()],
            head: z(),
            total_claimed: z(),
            initial_claimed: z(),
            _pad: [z(), z(), z(), z(), z(), z()],
        }
    }
}

impl<W: AtomicWord> Default for QueueHeader<W> {
    #[inline(always)]
    fn default() -> Self {
        Self::new()
    }
}

/// Which workers and queues live on which device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Topology {
    /// Number of devices, 1..=[`MAX_DEVICES`].
    pub devices: u32,
    /// Devices of one node, the victim picker's second tier: a run across nodes sets it to the
    /// PEs of a node (node `n` has devices `n * devices_per_node ..`); 0 means one node.
    pub devices_per_node: u32,
    /// `first_worker[d]..first_worker[d + 1]` are the workers of device `d`.
    pub first_worker: [u32; MAX_DEVICES + 1],
    /// `first_queue[d]..first_queue[d + 1]` are the public queues of device `d`.
    pub first_queue: [u32; MAX_DEVICES + 1],
}

impl Topology {
    /// One device with `workers` workers sharing queues `workers_per_queue` at a time.
    #[inline(always)]
    pub fn single(workers: u32, workers_per_queue: u32) -> Topology {
        Topology::split(&[workers], workers_per_queue)
    }

    /// Devices with the given worker counts (each a multiple of `workers_per_queue`).
    #[inline(always)]
    pub fn split(workers_per_device: &[u32], workers_per_queue: u32) -> Topology {
        assert!(!workers_per_device.is_empty() && workers_per_device.len() <= MAX_DEVICES);
        let mut t = Topology {
            devices: workers_per_device.len() as u32,
            devices_per_node: 0,
            first_worker: [0; MAX_DEVICES + 1],
            first_queue: [0; MAX_DEVICES + 1],
        };
        for (d, &w) in workers_per_device.iter().enumerate() {
            t.first_worker[d + 1] = t.first_worker[d] + w;
            t.first_queue[d + 1] = t.first_queue[d] + w.div_ceil(workers_per_queue);
        }
        for d in workers_per_device.len() + 1..=MAX_DEVICES {
            t.first_worker[d] = t.first_worker[workers_per_device.len()];
            t.first_queue[d] = t.first_queue[workers_per_device.len()];
        }
        t
    }

    #[inline(always)]
    pub fn workers(&self) -> u32 {
        self.first_worker[self.devices as usize]
    }
    /// Workers of device `d`.
    #[inline(always)]
    pub fn workers_on(&self, d: usize) -> u32 {
        self.first_worker[d + 1] - self.first_worker[d]
    }
    #[inline(always)]
    pub fn queues(&self) -> u32 {
        self.first_queue[self.devices as usize]
    }
    /// The device of worker `w`.
    #[inline(always)]
    pub fn device_of_worker(&self, w: u32) -> u32 {
        let mut d = 0;
        while d + 1 < self.devices && w >= self.first_worker[d as usize + 1] {
            d += 1;
        }
        d
    }
    /// The device of queue `q`.
    #[inline(always)]
    pub fn device_of_queue(&self, q: u32) -> u32 {
        let mut d = 0;
        while d + 1 < self.devices && q >= self.first_queue[d as usize + 1] {
            d += 1;
        }
        d
    }
    /// Public queues of device `d`.
    #[inline(always)]
    pub fn queues_on(&self, d: usize) -> u32 {
        self.first_queue[d + 1] - self.first_queue[d]
    }
    /// The most public queues of one device: the steal-damping bits a worker keeps in its
    /// scratch ([`crate::ScratchLayout`]).
    #[inline(always)]
    pub fn device_queues_max(&self) -> u32 {
        let mut most = 0;
        let mut d = 0;
        while d < self.devices as usize {
            most = most.max(self.queues_on(d));
            d += 1;
        }
        most
    }
    /// Words of one worker's row of [`Env::remote_damping`]: a bit for each queue, indexed by
    /// queue (only other devices' are used; a bit per queue spares the steal path a
    /// renumbering), or 0 with one device.
    #[inline(always)]
    pub fn remote_damping_words(&self) -> usize {
        if self.devices > 1 {
            (self.queues() as usize).div_ceil(64)
        } else {
            0
        }
    }
    /// The public queue of worker `w`.
    #[inline(always)]
    pub fn queue_of_worker(&self, w: u32, workers_per_queue: u32) -> u32 {
        let d = self.device_of_worker(w) as usize;
        self.first_queue[d] + (w - self.first_worker[d]) / workers_per_queue
    }
}

/// What the host last heard of a worker: written by the worker's lane 0 with plain volatile stores
/// every `progress_interval` loop iterations and at every idle transition; read by the watchdog.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct WorkerProgress {
    /// Loop iterations so far.
    pub iterations: u64,
    /// Tasks executed so far.
    pub tasks_run: u64,
    /// The last [`crate::Operation`] the worker started.
    pub last_operation: u64,
    /// 1 while the worker counts itself idle, 2 once it left the loop.
    pub state: u64,
    /// Heartbeats its tasks sent (`Context::heartbeat`): progress inside a long task. Kept
    /// apart from `iterations`, which idle workers also advance and so cannot count as progress.
    pub heartbeats: u64,
    /// The platform clock (`Platform::now_ns`) when the worker left its loop, 0 before (and
    /// where the platform has no clock): the host derives each worker's idle time at the end of
    /// a run from it.
    pub finish_ns: u64,
}

impl WorkerProgress {
    /// The record of a worker that ran `tasks_run` tasks in `iterations` loop rounds and is now
    /// in `operation` (idle if `idle`); `now_ns` is asked for the finish time when it exited.
    #[inline(always)]
    pub fn at(
        iterations: u64,
        tasks_run: u64,
        operation: crate::Operation,
        idle: bool,
        heartbeats: u64,
        now_ns: impl FnOnce() -> u64,
    ) -> WorkerProgress {
        let exited = operation == crate::Operation::Exited;
        WorkerProgress {
            iterations,
            tasks_run,
            last_operation: operation as u64,
            state: if exited { 2 } else { idle as u64 },
            heartbeats,
            finish_ns: if exited { now_ns() } else { 0 },
        }
    }
}

/// Per-worker statistics, collected when [`crate::RunFlags::STATS`] is set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct WorkerStats {
    pub tasks_run: u64,
    pub tasks_spawned: u64,
    pub steal_attempts: u64,
    pub steals: u64,
    pub tasks_stolen: u64,
    pub acquires: u64,
    pub releases: u64,
    pub idle_rounds: u64,
    pub initial_loads: u64,
    pub spills: u64,
    /// Tasks this (bridge) worker received from the other side of a bridged run.
    pub tasks_bridged_in: u64,
    /// Tasks this (bridge) worker sent to the other side of a bridged run.
    pub tasks_bridged_out: u64,
    /// Batches of narrow tasks it ran side by side (`tasks_run / narrow_batches` tasks each
    /// where every task is narrow).
    pub narrow_batches: u64,
}

/// Number of data areas a task's descriptors can refer to (thesis 5.3's memory areas).
pub const DATA_AREAS: usize = 8;

/// [`Env::initial_counted_word`] of a listed set of initial tasks.
pub const INITIAL_LISTED: u64 = u64::MAX;

/// Everything a worker needs, passed by value to each worker (a GPU kernel parameter).
///
/// Pointers are in the address space of the device that runs the worker. Per-device arrays let a
/// thief reach queues on other devices (peer memory over NVLink, or one shared host allocation).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Env<W, T> {
    pub config: SchedConfig,
    pub topology: Topology,
    pub shared: *const SharedState<W>,
    /// Public-queue headers of device `d`, indexed by `q - first_queue[d]`.
    pub queue_headers: [*const QueueHeader<W>; MAX_DEVICES],
    /// Public-queue rings of device `d`: `public_capacity` tasks per queue.
    pub queue_slots: [*mut T; MAX_DEVICES],
    /// Voting tree: one word per worker, then one per device for the global tree, then one per
    /// device for the device-local copy of the decision.
    pub tree: *const W,
    /// Device `d`'s idle counter and relay ([`crate::TerminationMode::Hierarchical`]), in that
    /// device's own memory, updated at device scope by its workers only; null for devices the
    /// topology does not have, and for runs of another termination mode.
    pub device_idle: [*const DeviceIdle<W>; MAX_DEVICES],
    /// The abort flag this env's workers read: [`SharedState::abort`], or a copy of it in the
    /// memory of the device this env is for. The shared state lives on one device: a copy on
    /// each spares the workers of the others a remote load at every progress check.
    pub abort: *const W,
    /// Every copy of the abort flag (null past the last), which raising the flag sets besides
    /// the shared word ([`Env::raise_abort`]).
    pub device_abort: [*const W; MAX_DEVICES],
    /// The bridge to the other side of a bridged run ([`crate::bridge`]), in memory both sides
    /// reach (mapped host memory); null in other runs.
    pub bridge: *const crate::bridge::BridgeState<W>,
    /// `bridge_slots[s]`: the [`crate::bridge::BRIDGE_CAPACITY`] task slots of the mailbox into
    /// side `s`.
    pub bridge_slots: [*mut T; 2],
    /// This side of the bridge (0 decides termination) and its bridge worker.
    pub bridge_side: u32,
    pub bridge_worker: u32,
    /// Added to a worker's id where tasks see it (`Context::worker_id`, the per-worker
    /// accumulator slots): the workers of a bridged run's side 1 come after side 0's. (A `u64`
    /// only so that the struct has no padding.)
    pub worker_base: u64,
    /// Overflow stacks, `spill_capacity` tasks per worker.
    pub spill: *mut T,
    /// Initial tasks: `initial_len` of them, or, for an indexed set, its template alone.
    pub initial: *const T,
    pub initial_len: u64,
    /// [`INITIAL_LISTED`] where `initial` holds every initial task. Otherwise the set is indexed:
    /// `initial` holds only task 0, the template, and task `k` is the template with `k` added
    /// (wrapping) to its 8-byte word at this index, so no memory holds the set and a worker reads
    /// none of it.
    pub initial_counted_word: u64,
    /// One [`WorkerProgress`] per worker.
    pub progress: *mut WorkerProgress,
    /// One [`WorkerStats`] per worker, or null.
    pub stats: *mut WorkerStats,
    /// Base addresses of the data areas that descriptors' offsets are relative to.
    pub areas: [u64; DATA_AREAS],
    /// Each data area's length in bytes, with [`AREA_WRITABLE`] set if tasks may write it; 0 for
    /// an area the run does not have. The task context's checked views test descriptors
    /// against it.
    pub area_limits: [u64; DATA_AREAS],
    /// One word per worker, or null: the tag of the task it started last, plus one (0: none
    /// yet), written by lane 0 as a task of another tag than the last starts
    /// ([`Env::note_task`]), so that a hang report names the task a worker stalled in (where its
    /// record's operation says it runs tasks). Kept in the workers' own memory (a GPU's, not
    /// mapped host memory, where every store crosses PCIe). A store per task, and more so a
    /// clear after each task, slowed MEMSET (docs/results.md); storing only changes costs a run
    /// of one task kind one store.
    pub task_tags: *mut u64,
    /// The steal-damping bits of other devices' queues ([`Topology::remote_damping_words`] words
    /// per worker, indexed by worker id; null with one device), in the memory of the worker's
    /// device; only lane 0 of the row's worker reads and writes it, with plain accesses. The
    /// bits of the own device's queues are in each worker's scratch: kept there for every
    /// queue, the bitmap grew with each device added and the scratch with it, and MEMSET's
    /// workers per SM fell from 23 on one GPU to 22 on two (docs/results.md). A steal from
    /// another device pays a round trip over NVLink, beside which a bit in memory is cheap.
    pub remote_damping: *mut u64,
}

/// Tasks one claim takes from a home range with `remaining` unclaimed tasks, shared by `k`
/// workers: the configured initial chunk, or less as the range empties,
/// `min(chunk, max(ceil(remaining / (GUIDE k)), floor))` with [`INITIAL_CLAIM_GUIDE`] as
/// `GUIDE`. `floor` is the tasks a worker runs in one step (one per group of lanes for narrow
/// tasks, else 1): a smaller claim would leave lanes idle for the same round trips. The
/// configuration allows 1, 2 or 4 workers per queue, so the division is a shift (a 64-bit
/// division is a software routine on a GPU).
#[inline(always)]
pub fn claim_size(chunk: u64, remaining: u64, workers_per_queue: u32, floor: u64) -> u64 {
    debug_assert!(workers_per_queue.is_power_of_two());
    let shift = workers_per_queue.trailing_zeros() + INITIAL_CLAIM_GUIDE.trailing_zeros();
    let share = (remaining + (1 << shift) - 1) >> shift;
    chunk.min(share.max(floor))
}

/// Whether `remaining`, a lower bound's view of what a home range holds, leaves so wide a margin
/// that the guided share is the full `chunk` even if the co-owners claimed up to half of it since
/// (about one chunk each per task batch, far less): the claimer then need not read the range's
/// count first. A wrong guess only sizes one claim as a stale count would.
#[inline(always)]
pub fn claim_is_full_chunk(chunk: u64, remaining: u64, workers_per_queue: u32) -> bool {
    let shift = workers_per_queue.trailing_zeros() + INITIAL_CLAIM_GUIDE.trailing_zeros() + 1;
    remaining >= chunk << shift
}

/// A claim takes at most `1 / (INITIAL_CLAIM_GUIDE k)` of what remains of a home range shared by
/// `k` workers (guided self-scheduling, as factoring sizes its chunks): the co-owners' claims
/// leave most of each remainder to claim later, by them or by workers whose own ranges ran out,
/// and the claims shrink towards one task as the range empties. A claim of a fixed share,
/// `ceil(range / k)`, took whole ranges in one or two claims whenever a range was shorter than
/// two chunks: on a corpus sorted longest first, the workers of the first ranges ran their long
/// documents alone, as static assignment does, while the others waited for the end. Guided
/// claims spread those documents and ran CONTAINS on that corpus far faster, whether the guide
/// was 2, 4 or 8, and cost MEMSET's even ranges nothing measurable (docs/results.md).
pub const INITIAL_CLAIM_GUIDE: u32 = 4;
const _: () = assert!(INITIAL_CLAIM_GUIDE.is_power_of_two());

/// The bit of an [`Env::area_limits`] entry that marks a writable (read-write) area.
pub const AREA_WRITABLE: u64 = 1 << 63;

// SAFETY: an `Env` is a bundle of addresses into memory whose concurrent use follows the queue and
// termination protocols; the pointers themselves are plain values that any lane may copy.
unsafe impl<W, T> Send for Env<W, T> {}
// SAFETY: as above; sharing an `Env` only shares the addresses.
unsafe impl<W, T> Sync for Env<W, T> {}

impl<W: AtomicWord, T> Env<W, T> {
    /// Queue `q`'s home range of initial tasks: `[q * n / Q, (q + 1) * n / Q)` for `n` initial
    /// tasks and `Q` queues, contiguous and of equal size within one task.
    #[inline(always)]
    pub fn initial_range(&self, q: u32) -> (u64, u64) {
        let (n, queues) = (self.initial_len, self.topology.queues() as u64);
        (q as u64 * n / queues, (q as u64 + 1) * n / queues)
    }

    /// Whether the initial tasks are made from a template ([`Env::initial_counted_word`]).
    #[inline(always)]
    pub fn initial_indexed(&self) -> bool {
        self.initial_counted_word != INITIAL_LISTED
    }

    /// Word `w` of initial task `k`, read or made from the template.
    ///
    /// # Safety
    /// `k < initial_len`, `w` is below the words of a task, and `initial` is valid as the env's
    /// fields say, in this worker's own memory (plain loads, not `Platform::load_word`), and
    /// unchanged during the run.
    #[inline(always)]
    pub unsafe fn initial_word(&self, k: u64, w: usize) -> u64 {
        const { assert!(core::mem::size_of::<T>().is_multiple_of(8) && core::mem::align_of::<T>() >= 8) };
        let words = core::mem::size_of::<T>() / 8;
        let at = self.initial as *const u64;
        if !self.initial_indexed() {
            // SAFETY: task `k` of the listed set, by the caller's guarantee.
            return unsafe { at.add(k as usize * words + w).read() };
        }
        // SAFETY: word `w` of the template, by the caller's guarantee.
        let word = unsafe { at.add(w).read() };
        let counted = w as u64 == self.initial_counted_word;
        word.wrapping_add(if counted { k } else { 0 })
    }

    /// Initial task `k`, read or made from the template.
    ///
    /// # Safety
    /// As for [`Env::initial_word`]; `T` is plain data of 8-byte words (as every task is).
    #[inline(always)]
    pub unsafe fn initial_task(&self, k: u64) -> T
    where
        T: Copy,
    {
        if !self.initial_indexed() {
            // SAFETY: task `k` of the listed set, by the caller's guarantee.
            return unsafe { self.initial.add(k as usize).read() };
        }
        let mut task = core::mem::MaybeUninit::<T>::uninit();
        for w in 0..core::mem::size_of::<T>() / 8 {
            // SAFETY: `w` is a word of the task, which is made of 8-byte words.
            unsafe {
                (task.as_mut_ptr() as *mut u64)
                    .add(w)
                    .write(self.initial_word(k, w))
            };
        }
        // SAFETY: every word was written, and any bits are a valid task (plain data).
        unsafe { task.assume_init() }
    }

    /// Home ranges that hold at least one task: `min(n, Q)`.
    #[inline(always)]
    pub fn initial_ranges(&self) -> u64 {
        self.initial_len.min(self.topology.queues() as u64)
    }

    /// Home ranges of device `d`'s queues `[a, b)` that hold at least one task: all `b - a` where
    /// `n >= Q` (every range then holds at least one), else the tasks in them,
    /// `b n / Q - a n / Q` (each range then holds at most one). Over all devices they add up to
    /// [`Env::initial_ranges`].
    #[inline(always)]
    pub fn device_initial_ranges(&self, d: u32) -> u64 {
        let (n, queues) = (self.initial_len, self.topology.queues() as u64);
        let (a, b) = (
            self.topology.first_queue[d as usize] as u64,
            self.topology.first_queue[d as usize + 1] as u64,
        );
        if n >= queues {
            b - a
        } else {
            b * n / queues - a * n / queues
        }
    }

    /// The header of public queue `q`.
    ///
    /// # Safety
    /// `q < topology.queues()` and the env's pointers are valid.
    #[inline(always)]
    pub unsafe fn header(&self, q: u32) -> &QueueHeader<W> {
        let d = self.topology.device_of_queue(q) as usize;
        // SAFETY: the caller guarantees that q is a queue of device d, whose headers start here.
        unsafe { &*self.queue_headers[d].add((q - self.topology.first_queue[d]) as usize) }
    }

    /// Slot `index` (already reduced modulo the capacity) of public queue `q`.
    ///
    /// # Safety
    /// As for [`Env::header`], and `index < public_capacity`.
    #[inline(always)]
    pub unsafe fn slot(&self, q: u32, index: u64) -> *mut T {
        let d = self.topology.device_of_queue(q) as usize;
        let local = (q - self.topology.first_queue[d]) as usize;
        // SAFETY: the caller guarantees the queue and index are in range of device d's rings.
        unsafe {
            self.queue_slots[d].add(local * self.config.public_capacity as usize + index as usize)
        }
    }

    /// The run-wide shared state.
    ///
    /// # Safety
    /// The env's pointers are valid.
    #[inline(always)]
    pub unsafe fn shared(&self) -> &SharedState<W> {
        // SAFETY: guaranteed by the caller.
        unsafe { &*self.shared }
    }

    /// The abort flag this env's workers read ([`Env::abort`]).
    ///
    /// # Safety
    /// The env's pointers are valid.
    #[inline(always)]
    pub unsafe fn abort_flag(&self) -> &W {
        // SAFETY: guaranteed by the caller.
        unsafe { &*self.abort }
    }

    /// Raises the abort flag: the shared word, which the host reads, and every device's copy.
    ///
    /// Release, like any stop request that carries no data: readers load it Relaxed, and a late
    /// observation only delays the stop. `scope` must reach every device that has a copy (the
    /// system scope in a run over several GPUs).
    ///
    /// # Safety
    /// The env's pointers are valid.
    #[inline(always)]
    pub unsafe fn raise_abort(&self, scope: Scope) {
        // SAFETY: guaranteed by the caller.
        unsafe { self.shared() }
            .abort
            .store(1, Ordering::Release, scope);
        for copy in &self.device_abort {
            if copy.is_null() {
                break;
            }
            // SAFETY: a non-null copy is valid for the run (the caller's guarantee).
            unsafe { &**copy }.store(1, Ordering::Release, scope);
        }
    }

    /// Number of words the voting tree needs.
    #[inline(always)]
    pub fn tree_words(workers: u32, devices: u32) -> usize {
        workers as usize + 2 * devices as usize
    }
}

/// The argument block of one launch of the kernel-per-level baseline (`mgws_<kernel>_level`), in
/// device memory. Addresses are device addresses.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct LevelArgs {
    /// The scheduler configuration (local capacity and lanes size the scratch; the scope of
    /// `ctx.atomic_add` and `ctx.reduce_add` is `queue_scope`).
    pub config: SchedConfig,
    /// `*const TaskStruct`: the tasks of this level.
    pub frontier: u64,
    pub frontier_len: u64,
    /// `*mut TaskStruct`: where spawned tasks go.
    pub out: u64,
    pub out_capacity: u64,
    /// `*mut [u64; 4]`, zeroed before each launch: `[0]` tasks spawned (also those that did not
    /// fit), `[1]` the first error (`RunError::pack`), `[2]` tasks run, `[3]` the abort flag (the host sets it to stop a level).
    pub counters: u64,
    /// Base addresses of the data areas.
    pub areas: [u64; DATA_AREAS],
    /// The data areas' limits (see [`Env::area_limits`]).
    pub area_limits: [u64; DATA_AREAS],
}

/// Writes `value` to `dst` as volatile 8-byte stores, one per word. `write_volatile` of a whole
/// record becomes a volatile byte copy on `nvptx64`: one store per byte, which for the
/// statistics in mapped host memory (where they were first) meant a PCIe crossing per byte,
/// with every worker's release fence at exit waiting for them (a large share of a short MEMSET
/// run's stalls, ncu).
///
/// # Safety
/// `dst` is valid for a write of `U` and aligned to 8 bytes.
#[inline(always)]
unsafe fn write_words_volatile<U: Copy>(dst: *mut U, value: U) {
    const { assert!(core::mem::size_of::<U>().is_multiple_of(8) && core::mem::align_of::<U>() == 8) };
    let src = &value as *const U as *const u64;
    for i in 0..core::mem::size_of::<U>() / 8 {
        // SAFETY: `i` indexes a word of `value` and of `*dst` (the caller's guarantee; the size
        // is a whole number of words).
        unsafe { (dst as *mut u64).add(i).write_volatile(src.add(i).read()) };
    }
}

/// Entry `index` of a per-area table, 0 past [`DATA_AREAS`]: a load at the masked index and a
/// select, no branch.
#[inline(always)]
fn area_entry(table: &[u64; DATA_AREAS], index: usize) -> u64 {
    const { assert!(DATA_AREAS.is_power_of_two()) };
    let entry = table[index & (DATA_AREAS - 1)];
    if index < DATA_AREAS {
        entry
    } else {
        0
    }
}

impl<W, T> Env<W, T> {
    /// Data area `index`'s base address, 0 past [`DATA_AREAS`]. Branch-free (a load at the
    /// masked index and a select), so that a task may compute its data's addresses before it
    /// checks anything, and the loads of several areas issue together.
    #[inline(always)]
    pub fn area(&self, index: usize) -> u64 {
        area_entry(&self.areas, index)
    }

    /// Data area `index`'s limit ([`Env::area_limits`]), 0 past [`DATA_AREAS`]; branch-free
    /// like [`Env::area`].
    #[inline(always)]
    pub fn area_limit(&self, index: usize) -> u64 {
        area_entry(&self.area_limits, index)
    }

    /// Writes worker `id`'s progress record for the watchdog (nothing where the run keeps no
    /// records). Volatile, so that the host, reading concurrently, sees the stores.
    ///
    /// # Safety
    /// `id` is a worker of this env, and only one lane of that worker writes its record at a
    /// time (lane 0, or the lane that holds its narrow lock).
    #[inline(always)]
    pub unsafe fn write_progress(&self, id: u32, record: WorkerProgress) {
        if !self.progress.is_null() {
            // SAFETY: one record per worker (the host allocates them), written by its lane 0
            // alone (the caller's guarantee).
            unsafe { write_words_volatile(self.progress.add(id as usize), record) };
        }
    }

    /// Writes worker `id`'s statistics at the end of its run (nothing where the run collects
    /// none).
    ///
    /// # Safety
    /// As for [`Env::write_progress`].
    #[inline(always)]
    pub unsafe fn write_stats(&self, id: u32, stats: WorkerStats) {
        if !self.stats.is_null() {
            // SAFETY: one record per worker (the host allocates them), written by its lane 0
            // alone (the caller's guarantee).
            unsafe { write_words_volatile(self.stats.add(id as usize), stats) };
        }
    }

    /// Records in [`Env::task_tags`] that worker `id` starts a task of `tag`.
    ///
    /// # Safety
    /// As for [`Env::write_progress`].
    #[inline(always)]
    pub unsafe fn note_task(&self, id: u32, tag: u32) {
        if !self.task_tags.is_null() {
            let value = tag as u64 + 1;
            // SAFETY: one word per worker (the host allocates them), written by its lane 0
            // alone (the caller's guarantee).
            unsafe { self.task_tags.add(id as usize).write_volatile(value) };
        }
    }

    /// An environment with only a configuration, initial tasks and data areas: what the
    /// baselines that use no orchestration data (kernel-per-level) need.
    #[inline(always)]
    pub fn bare(
        config: SchedConfig,
        workers: u32,
        initial: *const T,
        initial_len: u64,
        areas: [u64; DATA_AREAS],
    ) -> Self {
        Env {
            config,
            topology: Topology::single(workers, 1),
            shared: core::ptr::null(),
            queue_headers: [core::ptr::null(); MAX_DEVICES],
            queue_slots: [core::ptr::null_mut(); MAX_DEVICES],
            tree: core::ptr::null(),
            device_idle: [core::ptr::null(); MAX_DEVICES],
            abort: core::ptr::null(),
            device_abort: [core::ptr::null(); MAX_DEVICES],
            bridge: core::ptr::null(),
            bridge_slots: [core::ptr::null_mut(); 2],
            bridge_side: 0,
            bridge_worker: 0,
            worker_base: 0,
            spill: core::ptr::null_mut(),
            initial,
            initial_len,
            initial_counted_word: INITIAL_LISTED,
            progress: core::ptr::null_mut(),
            task_tags: core::ptr::null_mut(),
            stats: core::ptr::null_mut(),
            areas,
            area_limits: [0; DATA_AREAS],
            remote_damping: core::ptr::null_mut(),
        }
    }

    /// The same env with data-area limits (see [`Env::area_limits`]).
    #[inline(always)]
    pub fn with_area_limits(mut self, area_limits: [u64; DATA_AREAS]) -> Self {
        self.area_limits = area_limits;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::{claim_is_full_chunk, claim_size, Env, SharedState, Topology, INITIAL_CLAIM_GUIDE};
    use crate::config::SchedConfig;
    use crate::platform::{AtomicWord, Ordering, Scope};
    use crate::HostWord;

    #[test]
    fn indexed_initial_tasks_are_the_template_counted_up_in_one_word() {
        let template = [7u64, u64::MAX - 2, 9, 11];
        let listed = [[1u64, 2, 3, 4], [5, 6, 7, 8]];
        let mut env = Env::<HostWord, [u64; 4]>::bare(
            SchedConfig::new(1),
            1,
            &template,
            5,
            [0; super::DATA_AREAS],
        );
        env.initial_counted_word = 1;
        assert!(env.initial_indexed());
        for k in 0..5u64 {
            // SAFETY: k < initial_len and the template is valid.
            let task = unsafe { env.initial_task(k) };
            assert_eq!(task, [7, (u64::MAX - 2).wrapping_add(k), 9, 11], "task {k}");
            // SAFETY: as above, word 1 of 4.
            assert_eq!(unsafe { env.initial_word(k, 1) }, task[1]);
        }
        let env = Env::<HostWord, [u64; 4]>::bare(
            SchedConfig::new(1),
            1,
            listed.as_ptr(),
            2,
            [0; super::DATA_AREAS],
        );
        assert!(!env.initial_indexed());
        // SAFETY: both tasks are listed.
        let read = unsafe { (env.initial_task(1), env.initial_word(1, 2)) };
        assert_eq!(read, (listed[1], 7));
    }

    #[test]
    fn raising_the_abort_flag_sets_the_shared_word_and_every_copy() {
        let shared = SharedState::<HostWord>::new();
        let copies = [HostWord::new(0), HostWord::new(0), HostWord::new(0)];
        let mut env = Env::<HostWord, u64>::bare(
            SchedConfig::new(6),
            6,
            core::ptr::null(),
            0,
            [0; super::DATA_AREAS],
        );
        env.topology = Topology::split(&[2, 2, 2], 1);
        env.shared = &shared;
        // The env of device 1, of a run that gives devices 0 and 1 copies; copies[2] is no
        // copy of this run.
        env.abort = &copies[1];
        env.device_abort[0] = &copies[0];
        env.device_abort[1] = &copies[1];
        let words = || {
            copies
                .each_ref()
                .map(|c| c.load(Ordering::Relaxed, Scope::System))
        };
        // SAFETY: every pointer of the env is valid in this test.
        let flag = || unsafe { env.abort_flag() }.load(Ordering::Relaxed, Scope::System);
        assert_eq!((flag(), words()), (0, [0, 0, 0]));
        // The workers read their device's copy, not the shared word.
        shared.abort.store(1, Ordering::Relaxed, Scope::System);
        assert_eq!(flag(), 0);
        copies[1].store(1, Ordering::Relaxed, Scope::System);
        assert_eq!(flag(), 1);
        copies[1].store(0, Ordering::Relaxed, Scope::System);
        shared.abort.store(0, Ordering::Relaxed, Scope::System);
        // SAFETY: as above.
        unsafe { env.raise_abort(Scope::System) };
        assert_eq!((flag(), words()), (1, [1, 1, 0]));
        assert_eq!(shared.abort.load(Ordering::Relaxed, Scope::System), 1);
    }

    #[test]
    fn each_device_counts_its_home_ranges_that_hold_tasks() {
        for split in [&[3u32, 5, 2][..], &[4, 4], &[1, 7, 2, 6], &[6]] {
            let workers: u32 = split.iter().sum();
            let mut env = Env::<HostWord, u64>::bare(
                SchedConfig::new(workers),
                workers,
                core::ptr::null(),
                0,
                [0; super::DATA_AREAS],
            );
            env.topology = Topology::split(split, 1);
            for n in [0, 1, 2, 3, 5, 9, 15, 16, 17, 33, 1000] {
                env.initial_len = n;
                let t = &env.topology;
                let mut sum = 0;
                for d in 0..t.devices {
                    let holding = (t.first_queue[d as usize]..t.first_queue[d as usize + 1])
                        .filter(|&q| {
                            let (lo, hi) = env.initial_range(q);
                            hi > lo
                        })
                        .count() as u64;
                    assert_eq!(
                        env.device_initial_ranges(d),
                        holding,
                        "{split:?} n={n} d={d}"
                    );
                    sum += holding;
                }
                assert_eq!(sum, env.initial_ranges(), "{split:?} n={n}");
            }
        }
    }

    #[test]
    fn the_scratch_holds_the_own_device_bits_and_memory_the_others() {
        // Devices of 3, 5 and 2 queues: a worker's scratch needs 5 bits at most, and its row in
        // memory a bit for each of the 10 queues, one word.
        let t = Topology::split(&[3, 5, 2], 1);
        assert_eq!((t.device_queues_max(), t.remote_damping_words()), (5, 1));
        assert_eq!(Topology::single(200, 2).remote_damping_words(), 0);
        assert_eq!(Topology::split(&[100, 100], 1).remote_damping_words(), 4);
        // The scratch of a worker on one of two equal devices is that of one device alone.
        let one = crate::ScratchLayout::new(128, 64, 32, Topology::single(2904, 2).queues());
        let two = Topology::split(&[2904, 2904], 2);
        assert_eq!(
            crate::ScratchLayout::new(128, 64, 32, two.device_queues_max()),
            one
        );
    }

    #[test]
    fn a_claim_skips_the_count_only_where_half_the_remainder_still_gives_a_full_chunk() {
        for k in [1u32, 2, 4] {
            for remaining in 0..3000u64 {
                let full = claim_is_full_chunk(32, remaining, k);
                // Whenever it says so, even half the remainder is worth a full guided claim...
                if full {
                    assert_eq!(claim_size(32, remaining / 2, k, 1), 32, "{remaining} {k}");
                }
                // ...and it says so from twice the smallest such remainder on.
                let smallest = 32 * (k * INITIAL_CLAIM_GUIDE) as u64;
                assert_eq!(full, remaining >= 2 * smallest, "{remaining} {k}");
            }
        }
    }

    #[test]
    fn a_claim_takes_at_most_a_guided_share_of_what_remains() {
        // Unshared: a quarter of what remains, at most the chunk.
        assert_eq!(claim_size(32, 19, 1, 1), 5);
        assert_eq!(claim_size(32, 1000, 1, 1), 32);
        assert_eq!(claim_size(32, 1, 1, 1), 1);
        // Two co-owners of 38 tasks: an eighth each, not 32 and 6.
        assert_eq!(claim_size(32, 38, 2, 1), 5);
        assert_eq!(claim_size(32, 39, 2, 1), 5);
        assert_eq!(claim_size(32, 15, 4, 1), 1);
        assert_eq!(claim_size(32, 1, 4, 1), 1);
        assert_eq!(claim_size(32, 31_776, 2, 1), 32);
        // Every share rounds up: a claim takes at least one task while any remain, never more
        // than remain, and claims in turn empty any range.
        for k in [1, 2, 4] {
            for len in 1..300 {
                let c = claim_size(32, len, k, 1);
                assert!((1..=32.min(len)).contains(&c), "{len} {k} {c}");
                assert!(
                    c * (k * INITIAL_CLAIM_GUIDE) as u64
                        >= len.min(32 * (k * INITIAL_CLAIM_GUIDE) as u64),
                    "{len} {k} {c}"
                );
            }
        }
    }

    #[test]
    fn a_claim_takes_at_least_a_step_of_tasks_and_at_most_the_chunk() {
        // Narrow tasks, 32 per step: the guided share stops shrinking at 32...
        assert_eq!(claim_size(64, 100, 2, 32), 32);
        assert_eq!(claim_size(64, 3, 2, 32), 32);
        assert_eq!(claim_size(64, 10_000, 2, 32), 64);
        // ...but never passes the chunk.
        assert_eq!(claim_size(16, 3, 2, 32), 16);
        // Two co-owners claiming in turn empty a range of 100 in 4 claims (a floor of 1 takes 24).
        let claims = |floor| {
            let (mut remaining, mut n) = (100u64, 0);
            while remaining > 0 {
                remaining -= claim_size(64, remaining, 2, floor).min(remaining);
                n += 1;
            }
            n
        };
        assert_eq!((claims(32), claims(1)), (4, 24));
    }

    #[test]
    fn claims_shrink_as_a_range_empties() {
        // Two co-owners of 19 tasks claiming in turn.
        let mut remaining = 19u64;
        for expected in [3, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1] {
            let c = claim_size(32, remaining, 2, 1);
            assert_eq!(c, expected, "{remaining} remaining");
            remaining -= c;
        }
        assert_eq!(remaining, 0);
    }
}
