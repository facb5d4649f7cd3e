//! What differs per platform: scoped atomics, the worker's lanes, their barrier and broadcast, and
//! the worker's scratch memory. Everything else in the core is written once against this module.
//!
//! A *worker* is a group of `lane_count()` lanes that execute the scheduler in lockstep: on a GPU the
//! threads of one block, on the CPU a group of threads joined by a barrier. Control flow in the core
//! is uniform across a worker's lanes: a value that decides a branch is either read after a barrier
//! from scratch memory or broadcast from lane 0.

pub use core::sync::atomic::Ordering;

/// The set of agents an atomic operation or fence must be coherent with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Scope {
    /// The lanes of one worker (a GPU thread block).
    Block = 0,
    /// Every worker on one device (one GPU, or all CPU threads of a process).
    Device = 1,
    /// Every agent in the system: other GPUs over NVLink and the host.
    System = 2,
}

impl Scope {
    /// Decodes a scope stored as a `u32` in a launch environment; unknown values widen to `System`.
    pub const fn from_u32(raw: u32) -> Scope {
        match raw {
            0 => Scope::Block,
            1 => Scope::Device,
            _ => Scope::System,
        }
    }
}

/// A 64-bit word that supports atomic operations with an explicit ordering and scope.
///
/// Implementations must be `#[repr(transparent)]` over a `u64` where the word is shared with another
/// platform (host-initialised memory that a GPU kernel reads), so that all-zero bytes are a valid word
/// holding 0. The loom implementation is the only one that is not, and it is never shared.
pub trait AtomicWord: Sync {
    /// A word holding `value`.
    fn new(value: u64) -> Self;
    fn load(&self, order: Ordering, scope: Scope) -> u64;
    fn store(&self, value: u64, order: Ordering, scope: Scope);
    fn fetch_add(&self, value: u64, order: Ordering, scope: Scope) -> u64;
    fn fetch_sub(&self, value: u64, order: Ordering, scope: Scope) -> u64;
    fn fetch_or(&self, value: u64, order: Ordering, scope: Scope) -> u64;
    fn fetch_and(&self, value: u64, order: Ordering, scope: Scope) -> u64;
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
        scope: Scope,
    ) -> Result<u64, u64>;

    /// Adds `value` to a word that only the caller writes during the run (others may read it
    /// only after the run), returning nothing, so that the caller never waits for the word.
    ///
    /// The default is a relaxed load and a relaxed store: with a single writer no update can be
    /// lost, and on a CPU both are plain moves. The GPU word overrides it with a
    /// fire-and-forget reduction (`red`), which a warp issues without waiting for the round
    /// trip to L2 that a load would cost.
    #[inline(always)]
    fn add_single_writer(&self, value: u64, scope: Scope) {
        let old = self.load(Ordering::Relaxed, scope);
        self.store(old.wrapping_add(value), Ordering::Relaxed, scope);
    }

    /// Raises a word that only the caller writes during the run to at least `value` (see
    /// [`AtomicWord::add_single_writer`]).
    #[inline(always)]
    fn max_single_writer(&self, value: u64, scope: Scope) {
        if value > self.load(Ordering::Relaxed, scope) {
            self.store(value, Ordering::Relaxed, scope);
        }
    }

    /// Adds `value` atomically (relaxed), returning nothing: [`AtomicWord::add_single_writer`]
    /// for a word that others write at once (several lanes of one worker running narrow tasks
    /// side by side, or any worker: `Context::reduce_add`). The default is a `fetch_add`; the
    /// GPU word's reduction is atomic already.
    #[inline(always)]
    fn add_relaxed(&self, value: u64, scope: Scope) {
        self.fetch_add(value, Ordering::Relaxed, scope);
    }

    /// Raises the word to at least `value` atomically (relaxed), as [`AtomicWord::add_relaxed`].
    #[inline(always)]
    fn max_relaxed(&self, value: u64, scope: Scope) {
        let mut seen = self.load(Ordering::Relaxed, scope);
        while value > seen {
            match self.compare_exchange(seen, value, Ordering::Relaxed, Ordering::Relaxed, scope) {
                Ok(_) => return,
                Err(now) => seen = now,
            }
        }
    }
}

/// A step of the scheduling protocols, reported to [`Platform::protocol_step`] so that a test
/// platform can inject delays and yields exactly where the protocols can race.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolStep {
    StealLoad,
    StealClaim,
    StealCopy,
    StealComplete,
    Lock,
    Unlock,
    Release,
    Acquire,
    IdleEnter,
    IdleLeave,
    Vote,
    LoadInitial,
    /// A narrow task reserved its spawns' slots and is about to write them.
    NarrowSpawn,
}

/// The per-platform services the scheduler core needs.
///
/// # Safety
/// Implementations must guarantee that `barrier` synchronises every lane of the worker (all memory
/// operations of every lane before the barrier happen-before every operation after it, like
/// `bar.sync` or a `std::sync::Barrier`), that `broadcast` returns lane 0's value to every lane, and
/// that `scratch` points to `scratch_len` bytes, 16-byte aligned, that only this worker's lanes use
/// and that stay valid for the worker's whole run.
pub unsafe trait Platform {
    /// The atomic word type of this platform.
    type Word: AtomicWord;

    /// True where a worker has exactly one lane, known at compile time: the core then drops its
    /// lane-cooperative code paths (copies split over lanes, exchanges) instead of testing
    /// `lane_count() == 1` at run time. A platform with several lanes leaves it false.
    const SINGLE_LANE: bool = false;

    /// The fewest lanes a worker of this platform has, known at compile time (a GPU block: the
    /// 32 threads of a warp, which the kernel entries check). Loops that hand one item to each
    /// lane drop their fallback for fewer lanes when this suffices.
    const MIN_LANES: u32 = 1;

    /// The longest interval, in loop iterations, between two of a worker's checks of whether its
    /// public queue ran empty (a power of two, at least
    /// [`RELEASE_CHECK_INTERVAL`](crate::config::RELEASE_CHECK_INTERVAL)): the interval doubles
    /// up to this while each check finds the queue still holding the tasks released before
    /// ([`crate::worker`]). The default keeps it at the minimum: on a CPU the check is a load
    /// from the worker's own cache, which leaves the back-off little to save, and UTS ran slower
    /// with it on one and two workers (docs/results.md). A GPU block, whose check is a load from
    /// L2 and a broadcast through two barriers, backs off to 32.
    const RELEASE_CHECK_INTERVAL_MAX: u32 = crate::config::RELEASE_CHECK_INTERVAL as u32;

    /// This lane's index within the worker, `0..lane_count()`.
    fn lane_id(&self) -> u32;
    /// The number of lanes of the worker.
    fn lane_count(&self) -> u32;
    /// Blocks until every lane of the worker reached the barrier.
    fn barrier(&self);
    /// A barrier that also tells every lane whether any lane passed `true`, where the platform
    /// has one instruction for it (a GPU block's `bar.red.or`); `None` (the default) where it
    /// has not, and [`Context::any`](crate::Context::any) reduces through the scratch instead.
    /// Every lane calls it, as [`Platform::barrier`].
    #[inline(always)]
    fn barrier_any(&self, _value: bool) -> Option<bool> {
        None
    }
    /// Returns lane 0's `value` on every lane. Every lane must call it (it contains barriers).
    fn broadcast(&self, value: u64) -> u64;
    /// Start of the worker's scratch memory (shared memory on a GPU).
    fn scratch(&self) -> *mut u8;
    /// Size of the scratch memory in bytes.
    fn scratch_len(&self) -> usize;
    /// A memory fence with the given ordering and scope.
    fn fence(&self, order: Ordering, scope: Scope);
    /// Called in spin loops; may sleep briefly (`nanosleep`, `thread::yield_now`).
    fn relax(&self) {
        core::hint::spin_loop();
    }
    /// An idle worker's pause of about `ns` nanoseconds between two rounds of looking for work
    /// (the worker doubles it while it stays idle: [`crate::worker`]). The default is one
    /// [`Platform::relax`]; a GPU block sleeps (`nanosleep`), so that idle workers take fewer
    /// issue slots and memory requests from the busy ones on their SM.
    #[inline(always)]
    fn idle_pause(&self, _ns: u32) {
        self.relax();
    }
    /// A monotonic clock in nanoseconds, or 0 where none is available.
    fn now_ns(&self) -> u64 {
        0
    }
    /// A hint that `bytes` bytes from `address` will be read soon (a no-op by default). The core
    /// calls it for the initial tasks it expects to claim next (a CPU copies a claimed chunk in
    /// one burst, too soon after the previous one for the hardware prefetcher, and stalls on
    /// every cache line of it), and the kernel-per-level baseline for its next frontier task
    /// (its UTS ran faster on a GPU; mgws's MEMSET, whose claims now hint on the GPU too, barely
    /// moved, docs/results.md).
    #[inline(always)]
    fn prefetch(&self, _address: *const u8, _bytes: usize) {}
    /// Reads the 8-byte word at `word` that another worker wrote before a synchronising atomic
    /// (a task in a public queue slot the caller claimed, or its own). The core's copies of
    /// other workers' tasks read through it, so that a platform whose memory of other processes
    /// is reached by calls rather than loads ([`crate::window::WindowPlatform`]) can route them.
    ///
    /// # Safety
    /// `word` is 8-byte aligned and valid for reads, and no one writes it during the call.
    #[inline(always)]
    unsafe fn load_word(&self, word: *const u64) -> u64 {
        // SAFETY: the caller's guarantee.
        unsafe { word.read() }
    }
    /// True where [`Platform::copy16_to_scratch`] starts copies that run in the background, so
    /// that a lane's copies into its scratch are all in flight at once (a GPU block's
    /// `cp.async`). A platform that leaves it false never has it called, and the core copies
    /// through [`Platform::load_word`] instead.
    const ASYNC_COPY_TO_SCRATCH: bool = false;
    /// Starts copying the 16 bytes at `src`, in global memory (of any device), to `dst`, in this
    /// worker's scratch; they are there for every lane after this lane's
    /// [`Platform::wait_copies`] and a barrier.
    ///
    /// # Safety
    /// Both are 16-byte aligned and valid for 16 bytes, `src` lies in global memory, `dst` in the
    /// scratch, and no one writes `src` or touches `dst` until the copy is waited for.
    #[inline(always)]
    unsafe fn copy16_to_scratch(&self, _dst: *mut u8, _src: *const u8) {
        unreachable!("only called where ASYNC_COPY_TO_SCRATCH is true")
    }
    /// Waits until every copy this lane started with [`Platform::copy16_to_scratch`] is done.
    #[inline(always)]
    fn wait_copies(&self) {}
    /// A hook at each protocol step; a no-op except on test platforms that inject chaos.
    #[inline(always)]
    fn protocol_step(&self, _step: ProtocolStep) {}

    /// True on lane 0, the lane that performs the worker's atomic operations.
    #[inline(always)]
    fn is_leader(&self) -> bool {
        self.lane_id() == 0
    }

    // ----- Narrow tasks: lanes that run tasks of their own (`exec/narrow.rs`). -----

    /// Waits for the lanes of this lane's group of `width` lanes (`width` a power of two that
    /// divides `lane_count()` and is at most 32; the group of lane `l` is lanes
    /// `l & !(width - 1) .. + width`), with [`Platform::barrier`]'s ordering among them. Only
    /// those lanes call it; other groups may be elsewhere.
    fn group_barrier(&self, width: u32);
    /// Atomically adds `value` to the `u32` at `word` in this worker's scratch and returns the
    /// previous value: relaxed, atomic among the worker's lanes, callable by any subset of them
    /// at any time. A GPU block adds the calling warp's values with one shared-memory atomic.
    ///
    /// # Safety
    /// `word` is 4-byte aligned, in this worker's scratch, and only accessed through these lane
    /// atomics while lanes may use it.
    unsafe fn lanes_fetch_add(&self, word: *mut u32, value: u32) -> u32;
    /// Takes the lock word at `word` in this worker's scratch (0: free, 1: held), spinning until
    /// it is free; acquire ordering among the worker's lanes. Any lane may call it at any time;
    /// one lane holds it at a time.
    ///
    /// # Safety
    /// As for [`Platform::lanes_fetch_add`].
    unsafe fn lanes_lock(&self, word: *mut u32);
    /// Frees the lock word taken by [`Platform::lanes_lock`] on this lane; release ordering.
    ///
    /// # Safety
    /// As for [`Platform::lanes_fetch_add`]; this lane holds the lock.
    unsafe fn lanes_unlock(&self, word: *mut u32);
}
