//! Orchestration words of other processes, reached through one-sided operations instead of loads
//! and stores: the core's side of GPU PEs over NVSHMEM's device API.
//!
//! A run of several PEs (processes) keeps each PE's public queues and termination words in its
//! part of a symmetric heap. Where a PE cannot map another PE's memory (another node), it reaches
//! it only through calls (NVSHMEM's `nvshmem_uint64_atomic_fetch_add(addr, value, pe)`, ...) that
//! take an address valid *on the caller* and the PE whose copy they act on. The core addresses
//! every word by a plain pointer, so the PE must be in the pointer. A [`PeWindow`] does that
//! without invalid pointers: every PE allocates `pes` parts of `1 << shift` bytes at the same
//! symmetric address `base` and keeps its own data in the part of its own index; the address
//! `base + (e << shift) + offset` names word `offset` of PE `e` (its part `e`, where PE `e` keeps
//! its data). The other parts of a PE's window are never read or written locally: they exist so
//! that every address of the window is one the caller owns, which the one-sided calls require.
//!
//! [`WindowWord`] is the atomic word of such a run: an operation on an address in another PE's
//! part becomes the [`Remote`] call for that PE; an address in the caller's own part
//! ([`PeWindow::me`]) or outside the window (scratch, the PE's own buffers) takes the platform's
//! plain word. The own part takes the plain word only where the host allows it (every PE of the
//! run is mapped, one node): there NVSHMEM's own calls perform those same GPU atomics on the
//! caller's memory. Where some PE is not mapped (another node, whose NIC may update the caller's
//! words), `me` names no part and the own words go through the calls too, since NVSHMEM's
//! atomics are atomic with respect to each other. [`WindowPlatform`] wraps a platform with that
//! word, and routes the core's plain reads of other workers' memory (the task copies of a steal,
//! [`Platform::load_word`]) the same way. The algorithm is unchanged: it is written once against
//! [`Platform`].
//!
//! Every remote operation is complete when it returns: the fetching calls block for their
//! value, and the two that do not (`set`, `add`) are followed by [`Remote::release`]. So a
//! release-side operation on a plain word (the own part) orders every earlier remote operation
//! too, with the platform's own fence.

use core::marker::PhantomData;

use crate::platform::{AtomicWord, Ordering, Platform, ProtocolStep, Scope};

/// The window of a multi-PE run, as each PE's kernel sees it: `pes` parts of `1 << shift` bytes
/// from `base`, of which part `me` is the calling PE's own memory. All zero (no PE) routes
/// nothing.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PeWindow {
    /// The symmetric address of part 0.
    pub base: u64,
    /// log2 of a part's size in bytes.
    pub shift: u32,
    /// Parts (PEs) in the window.
    pub pes: u32,
    /// The calling PE, whose part the platform's own operations reach: NVSHMEM's device calls
    /// perform exactly those on the calling PE's memory (they need no mapping for it), so they
    /// are the call's own operations without the call. [`PeWindow::NO_PE`] sends the own part
    /// through the calls too.
    pub me: u32,
    /// Zero (keeps the struct free of padding).
    pub reserved: u32,
}

impl PeWindow {
    /// A `me` that names no part.
    pub const NO_PE: u32 = u32::MAX;

    /// The smallest window of `pes` parts of at least `part_bytes` bytes each, from `base`, all
    /// of them reached through the calls.
    pub const fn new(base: u64, part_bytes: u64, pes: u32) -> PeWindow {
        let shift = if part_bytes <= 1 {
            0
        } else {
            64 - (part_bytes - 1).leading_zeros()
        };
        PeWindow {
            base,
            shift,
            pes,
            me: Self::NO_PE,
            reserved: 0,
        }
    }

    /// Bytes of the whole window.
    pub const fn bytes(&self) -> u64 {
        (self.pes as u64) << self.shift
    }

    /// The address of PE `pe`'s part.
    pub const fn part(&self, pe: u32) -> u64 {
        self.base + ((pe as u64) << self.shift)
    }

    /// The PE whose memory `address` names, or `None` for an address outside the window.
    #[inline(always)]
    pub fn route(&self, address: u64) -> Option<u32> {
        // One subtraction and one shift: an address below `base` wraps to a huge offset, which
        // is past the last part too.
        let part = address.wrapping_sub(self.base) >> self.shift;
        (part < self.pes as u64).then_some(part as u32)
    }

    /// The PE whose memory `address` names if only the calls reach it, or `None` for an address
    /// the platform's own operations reach (outside the window, or in part `me`).
    ///
    /// Plain loads, which the compiler may keep in registers across the worker loop (the window
    /// never changes during a run). Volatile loads at each operation went to L2 on a GPU (a
    /// volatile global load is not cached in L1), four per operation, task atomics included,
    /// and made every run far slower (docs/results.md).
    #[inline(always)]
    pub fn remote_pe(window: &PeWindow, address: u64) -> Option<u32> {
        window.route(address).filter(|&pe| pe != window.me)
    }
}

/// One-sided operations on the 64-bit word at `word` (an address of the caller's window) in PE
/// `pe`'s memory: NVSHMEM's device API on a GPU, a software stand-in in tests.
///
/// # Safety
/// Implementations must make every operation atomic with respect to every other operation of
/// this trait on the same word and PE, and [`Remote::release`] / [`Remote::acquire`] must order
/// the caller's memory operations as documented.
pub unsafe trait Remote {
    /// The window the calling process's kernel runs with. A reference, so that an operation
    /// reads only the fields it needs (a by-value copy of an earlier, larger window, indexed by
    /// PE, went to local memory on a GPU).
    fn window() -> &'static PeWindow;
    /// Atomically adds `value` and returns the previous value.
    ///
    /// # Safety
    /// For this and every operation below: `word` lies in [`Remote::window`], 8-byte aligned,
    /// `pe` is the PE it names, and the memory stays allocated on every PE for the call.
    unsafe fn fetch_add(word: *mut u64, value: u64, pe: u32) -> u64;
    /// Atomically adds `value`, without waiting for the previous value.
    ///
    /// # Safety
    /// As for [`Remote::fetch_add`].
    unsafe fn add(word: *mut u64, value: u64, pe: u32);
    /// Atomically reads the word.
    ///
    /// # Safety
    /// As for [`Remote::fetch_add`].
    unsafe fn fetch(word: *const u64, pe: u32) -> u64;
    /// Atomically writes the word.
    ///
    /// # Safety
    /// As for [`Remote::fetch_add`].
    unsafe fn set(word: *mut u64, value: u64, pe: u32);
    /// Atomically ORs `value` in and returns the previous value.
    ///
    /// # Safety
    /// As for [`Remote::fetch_add`].
    unsafe fn fetch_or(word: *mut u64, value: u64, pe: u32) -> u64;
    /// Atomically ANDs `value` in and returns the previous value.
    ///
    /// # Safety
    /// As for [`Remote::fetch_add`].
    unsafe fn fetch_and(word: *mut u64, value: u64, pe: u32) -> u64;
    /// Atomically writes `new` if the word holds `current`; returns the previous value.
    ///
    /// # Safety
    /// As for [`Remote::fetch_add`].
    unsafe fn compare_swap(word: *mut u64, current: u64, new: u64, pe: u32) -> u64;
    /// Reads a word that no one writes concurrently (a task in a claimed queue slot).
    ///
    /// # Safety
    /// As for [`Remote::fetch_add`].
    unsafe fn get(word: *const u64, pe: u32) -> u64;
    /// Every memory operation of the caller before it (loads, stores, remote operations to any
    /// PE) is complete and visible to every PE before any operation after it.
    fn release();
    /// No memory operation of the caller after it is performed before the remote operations
    /// before it returned (they are blocking: this is a fence for the caller's later loads).
    fn acquire();
}

/// An ordering's "needs a release before" and "needs an acquire after".
#[inline(always)]
fn sides(order: Ordering) -> (bool, bool) {
    match order {
        Ordering::Relaxed => (false, false),
        Ordering::Acquire => (false, true),
        Ordering::Release => (true, false),
        _ => (true, true),
    }
}

/// The atomic word of a multi-PE run: [`Remote`] calls inside the window, the platform word `W`
/// elsewhere (see the module documentation).
#[repr(transparent)]
pub struct WindowWord<W, R> {
    local: W,
    _remote: PhantomData<fn() -> R>,
}

// SAFETY: a `WindowWord` is only ever used through atomic operations (its own, `Remote`'s or
// `W`'s), like `W`, which is `Sync` (the `AtomicWord` bound).
unsafe impl<W: AtomicWord, R> Sync for WindowWord<W, R> {}

/// Where an operation on a [`WindowWord`] goes.
enum Target<'a, W> {
    /// A word the platform's own operations reach: outside the window, or in the calling PE's
    /// part ([`PeWindow::me`]).
    Plain(&'a W),
    /// A word of PE `.0` that only the [`Remote`] calls reach.
    Remote(u32),
}

impl<W: AtomicWord, R: Remote> WindowWord<W, R> {
    /// Where this word's operations go.
    #[inline(always)]
    fn target(&self) -> Target<'_, W> {
        match PeWindow::remote_pe(R::window(), self as *const Self as u64) {
            None => Target::Plain(&self.local),
            Some(pe) => Target::Remote(pe),
        }
    }

    #[inline(always)]
    fn ptr(&self) -> *mut u64 {
        self as *const Self as *mut u64
    }

    /// A read-modify-write `op` on PE `pe` with `order`'s fences around it.
    #[inline(always)]
    fn remote_rmw(&self, order: Ordering, op: impl FnOnce(*mut u64) -> u64) -> u64 {
        let (release, acquire) = sides(order);
        if release {
            R::release();
        }
        let old = op(self.ptr());
        if acquire {
            R::acquire();
        }
        old
    }
}

impl<W: AtomicWord, R: Remote> AtomicWord for WindowWord<W, R> {
    #[inline(always)]
    fn new(value: u64) -> Self {
        WindowWord {
            local: W::new(value),
            _remote: PhantomData,
        }
    }

    #[inline(always)]
    fn load(&self, order: Ordering, scope: Scope) -> u64 {
        match self.target() {
            // SAFETY: (every `Remote` call below) the word lies in the window (routed), is
            // aligned (a `u64`'s place) and lives as long as the run's heap.
            Target::Remote(pe) => self.remote_rmw(order, |p| unsafe { R::fetch(p, pe) }),
            Target::Plain(w) => w.load(order, scope),
        }
    }

    #[inline(always)]
    fn store(&self, value: u64, order: Ordering, scope: Scope) {
        match self.target() {
            Target::Remote(pe) => {
                if sides(order).0 {
                    R::release();
                }
                // SAFETY: as in `load`.
                unsafe { R::set(self.ptr(), value, pe) };
                // Complete before anything after it (see the module documentation); for a
                // sequentially consistent store, also ordered before later loads.
                R::release();
            }
            Target::Plain(w) => w.store(value, order, scope),
        }
    }

    #[inline(always)]
    fn fetch_add(&self, value: u64, order: Ordering, scope: Scope) -> u64 {
        match self.target() {
            // SAFETY: as in `load`.
            Target::Remote(pe) => self.remote_rmw(order, |p| unsafe { R::fetch_add(p, value, pe) }),
            Target::Plain(w) => w.fetch_add(value, order, scope),
        }
    }

    #[inline(always)]
    fn fetch_sub(&self, value: u64, order: Ordering, scope: Scope) -> u64 {
        match self.target() {
            // SAFETY: as in `load`; subtraction is the wrapping addition of the negation.
            Target::Remote(pe) => self.remote_rmw(order, |p| unsafe {
                R::fetch_add(p, value.wrapping_neg(), pe)
            }),
            Target::Plain(w) => w.fetch_sub(value, order, scope),
        }
    }

    #[inline(always)]
    fn fetch_or(&self, value: u64, order: Ordering, scope: Scope) -> u64 {
        match self.target() {
            // SAFETY: as in `load`.
            Target::Remote(pe) => self.remote_rmw(order, |p| unsafe { R::fetch_or(p, value, pe) }),
            Target::Plain(w) => w.fetch_or(value, order, scope),
        }
    }

    #[inline(always)]
    fn fetch_and(&self, value: u64, order: Ordering, scope: Scope) -> u64 {
        match self.target() {
            // SAFETY: as in `load`.
            Target::Remote(pe) => self.remote_rmw(order, |p| unsafe { R::fetch_and(p, value, pe) }),
            Target::Plain(w) => w.fetch_and(value, order, scope),
        }
    }

    #[inline(always)]
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
        scope: Scope,
    ) -> Result<u64, u64> {
        match self.target() {
            Target::Remote(pe) => {
                // The union of both orderings, as the GPU word does: the operation is one call.
                let ((r1, a1), (r2, a2)) = (sides(success), sides(failure));
                let order = match (r1 || r2, a1 || a2) {
                    (false, false) => Ordering::Relaxed,
                    (false, true) => Ordering::Acquire,
                    (true, false) => Ordering::Release,
                    (true, true) => Ordering::AcqRel,
                };
                // SAFETY: as in `load`.
                let old =
                    self.remote_rmw(order, |p| unsafe { R::compare_swap(p, current, new, pe) });
                if old == current {
                    Ok(old)
                } else {
                    Err(old)
                }
            }
            Target::Plain(w) => w.compare_exchange(current, new, success, failure, scope),
        }
    }

    #[inline(always)]
    fn add_single_writer(&self, value: u64, scope: Scope) {
        match self.target() {
            Target::Remote(pe) => {
                // SAFETY: as in `load`.
                unsafe { R::add(self.ptr(), value, pe) };
                // Complete before anything after it (see the module documentation).
                R::release();
            }
            Target::Plain(w) => w.add_single_writer(value, scope),
        }
    }

    #[inline(always)]
    fn max_single_writer(&self, value: u64, scope: Scope) {
        match self.target() {
            // SAFETY: as in `load`; only the caller writes the word, so the read and the write
            // need not be one operation.
            Target::Remote(pe) => unsafe {
                if value > R::fetch(self.ptr(), pe) {
                    R::set(self.ptr(), value, pe);
                    // Complete before anything after it (see the module documentation).
                    R::release();
                }
            },
            Target::Plain(w) => w.max_single_writer(value, scope),
        }
    }
}

/// A platform whose orchestration words may live in other PEs' memory, reached through `R`
/// (see the module documentation). Everything else is `P`'s.
pub struct WindowPlatform<P, R> {
    inner: P,
    _remote: PhantomData<fn() -> R>,
}

impl<P, R> WindowPlatform<P, R> {
    /// `inner` with its orchestration words routed through `R`.
    #[inline(always)]
    pub fn new(inner: P) -> Self {
        WindowPlatform {
            inner,
            _remote: PhantomData,
        }
    }

    /// The wrapped platform.
    #[inline(always)]
    pub fn inner(&self) -> &P {
        &self.inner
    }
}

// SAFETY: lanes, barriers, broadcast and scratch are `P`'s, which guarantees them.
unsafe impl<P: Platform, R: Remote> Platform for WindowPlatform<P, R> {
    type Word = WindowWord<P::Word, R>;
    const SINGLE_LANE: bool = P::SINGLE_LANE;
    const MIN_LANES: u32 = P::MIN_LANES;
    const RELEASE_CHECK_INTERVAL_MAX: u32 = P::RELEASE_CHECK_INTERVAL_MAX;

    #[inline(always)]
    fn lane_id(&self) -> u32 {
        self.inner.lane_id()
    }
    #[inline(always)]
    fn lane_count(&self) -> u32 {
        self.inner.lane_count()
    }
    #[inline(always)]
    fn barrier(&self) {
        self.inner.barrier()
    }
    #[inline(always)]
    fn barrier_any(&self, value: bool) -> Option<bool> {
        self.inner.barrier_any(value)
    }
    #[inline(always)]
    fn broadcast(&self, value: u64) -> u64 {
        self.inner.broadcast(value)
    }
    #[inline(always)]
    fn scratch(&self) -> *mut u8 {
        self.inner.scratch()
    }
    #[inline(always)]
    fn scratch_len(&self) -> usize {
        self.inner.scratch_len()
    }
    #[inline(always)]
    fn fence(&self, order: Ordering, scope: Scope) {
        self.inner.fence(order, scope);
        if order != Ordering::Relaxed {
            // A fence of the core orders its remote operations too (the termination checks
            // order an idle announcement before reading the others' words).
            R::release();
        }
    }
    #[inline(always)]
    fn relax(&self) {
        self.inner.relax()
    }
    #[inline(always)]
    fn idle_pause(&self, ns: u32) {
        self.inner.idle_pause(ns)
    }
    #[inline(always)]
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
    #[inline(always)]
    fn prefetch(&self, address: *const u8, bytes: usize) {
        self.inner.prefetch(address, bytes)
    }
    #[inline(always)]
    fn protocol_step(&self, step: ProtocolStep) {
        self.inner.protocol_step(step)
    }
    #[inline(always)]
    fn is_leader(&self) -> bool {
        self.inner.is_leader()
    }
    #[inline(always)]
    fn group_barrier(&self, width: u32) {
        self.inner.group_barrier(width)
    }
    #[inline(always)]
    unsafe fn lanes_fetch_add(&self, word: *mut u32, value: u32) -> u32 {
        // SAFETY: the caller's guarantee; the scratch is `P`'s.
        unsafe { self.inner.lanes_fetch_add(word, value) }
    }
    #[inline(always)]
    unsafe fn lanes_lock(&self, word: *mut u32) {
        // SAFETY: as above.
        unsafe { self.inner.lanes_lock(word) }
    }
    #[inline(always)]
    unsafe fn lanes_unlock(&self, word: *mut u32) {
        // SAFETY: as above.
        unsafe { self.inner.lanes_unlock(word) }
    }
    #[inline(always)]
    unsafe fn load_word(&self, word: *const u64) -> u64 {
        match PeWindow::remote_pe(R::window(), word as u64) {
            // SAFETY: the caller's guarantee.
            None => unsafe { self.inner.load_word(word) },
            // SAFETY: in the window (routed); the caller guarantees the rest.
            Some(pe) => unsafe { R::get(word, pe) },
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::host_word::HostWord;
    use crate::one_lane::OneLane;
    use core::sync::atomic::{AtomicU32, AtomicU64, Ordering as O};

    /// Two PEs' windows of two parts of four words each (32-byte parts), in one process: the
    /// stand-in for NVSHMEM's symmetric heap.
    static MEM: [[AtomicU64; 8]; 2] = [const { [const { AtomicU64::new(0) }; 8] }; 2];
    /// The PE the test is, and the fences the word issued.
    static ME: AtomicU32 = AtomicU32::new(0);
    static RELEASES: AtomicU32 = AtomicU32::new(0);
    static ACQUIRES: AtomicU32 = AtomicU32::new(0);
    /// Calls made, and whether the window reaches the own part without calls (`me` set).
    static CALLS: AtomicU32 = AtomicU32::new(0);
    static OWN: AtomicU32 = AtomicU32::new(0);

    /// The window `Sim::window` last returned.
    struct Windows(core::cell::UnsafeCell<PeWindow>);
    // SAFETY: written and read only under `serial()`.
    unsafe impl Sync for Windows {}
    static WINDOWS: Windows = Windows(core::cell::UnsafeCell::new(PeWindow::new(0, 0, 0)));

    /// The tests share `ME` and `OWN`: each holds this lock while it runs, and leaves both 0.
    static LOCK: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
    struct Serial;
    fn serial() -> Serial {
        while LOCK
            .compare_exchange(false, true, O::Acquire, O::Relaxed)
            .is_err()
        {
            core::hint::spin_loop();
        }
        Serial
    }
    impl Drop for Serial {
        fn drop(&mut self) {
            // Also after a failed assertion, so that the next test starts as PE 0 without `me`.
            ME.store(0, O::Relaxed);
            OWN.store(0, O::Relaxed);
            LOCK.store(false, O::Release);
        }
    }

    /// One-sided operations on `MEM`: an address of the caller's window acts on PE `pe`'s copy
    /// at the same offset.
    struct Sim;

    impl Sim {
        fn target(word: *const u64, pe: u32) -> &'static AtomicU64 {
            CALLS.fetch_add(1, O::Relaxed);
            let offset = word as u64 - Sim::window().base;
            &MEM[pe as usize][(offset / 8) as usize]
        }
    }

    // SAFETY: every operation is one atomic operation on `MEM`.
    unsafe impl Remote for Sim {
        fn window() -> &'static PeWindow {
            let me = ME.load(O::Relaxed) as usize;
            let mut window = PeWindow::new(MEM[me].as_ptr() as u64, 32, 2);
            if OWN.load(O::Relaxed) != 0 {
                window.me = me as u32;
            }
            // SAFETY: the tests hold `serial()` while they run, so no other thread writes the
            // cell, and no reference returned earlier is used after this write (each operation
            // asks for the window anew).
            unsafe {
                *WINDOWS.0.get() = window;
                &*WINDOWS.0.get()
            }
        }
        unsafe fn fetch_add(word: *mut u64, value: u64, pe: u32) -> u64 {
            Sim::target(word, pe).fetch_add(value, O::SeqCst)
        }
        unsafe fn add(word: *mut u64, value: u64, pe: u32) {
            Sim::target(word, pe).fetch_add(value, O::SeqCst);
        }
        unsafe fn fetch(word: *const u64, pe: u32) -> u64 {
            Sim::target(word, pe).load(O::SeqCst)
        }
        unsafe fn set(word: *mut u64, value: u64, pe: u32) {
            Sim::target(word, pe).store(value, O::SeqCst)
        }
        unsafe fn fetch_or(word: *mut u64, value: u64, pe: u32) -> u64 {
            Sim::target(word, pe).fetch_or(value, O::SeqCst)
        }
        unsafe fn fetch_and(word: *mut u64, value: u64, pe: u32) -> u64 {
            Sim::target(word, pe).fetch_and(value, O::SeqCst)
        }
        unsafe fn compare_swap(word: *mut u64, current: u64, new: u64, pe: u32) -> u64 {
            match Sim::target(word, pe).compare_exchange(current, new, O::SeqCst, O::SeqCst) {
                Ok(v) | Err(v) => v,
            }
        }
        unsafe fn get(word: *const u64, pe: u32) -> u64 {
            Sim::target(word, pe).load(O::SeqCst)
        }
        fn release() {
            RELEASES.fetch_add(1, O::Relaxed);
        }
        fn acquire() {
            ACQUIRES.fetch_add(1, O::Relaxed);
        }
    }

    type Word = WindowWord<HostWord, Sim>;

    /// The word at index `i` of this PE's window, as the core sees it.
    fn word(i: usize) -> &'static Word {
        let me = ME.load(O::Relaxed) as usize;
        // SAFETY: `WindowWord` and `HostWord` are transparent over a `u64`, as is `AtomicU64`;
        // the static lives for ever.
        unsafe { &*(MEM[me][i].as_ptr() as *const Word) }
    }

    #[test]
    fn window_words_act_on_the_pe_their_part_names_with_the_orderings_fences() {
        let _serial = serial();
        let fences = || (RELEASES.load(O::Relaxed), ACQUIRES.load(O::Relaxed));
        ME.store(0, O::Relaxed);
        // Part 1 of PE 0's window is PE 1's memory; part 0 its own.
        assert_eq!(word(5).fetch_add(7, Ordering::Relaxed, Scope::System), 0);
        assert_eq!(MEM[1][5].load(O::SeqCst), 7);
        assert_eq!(MEM[0][5].load(O::SeqCst), 0, "never the caller's copy");
        word(1).store(3, Ordering::Relaxed, Scope::System);
        assert_eq!(MEM[0][1].load(O::SeqCst), 3);
        // Each ordering's fences: release before, acquire after.
        let f0 = fences();
        word(5).fetch_add(1, Ordering::AcqRel, Scope::System);
        assert_eq!(fences(), (f0.0 + 1, f0.1 + 1));
        word(5).load(Ordering::Acquire, Scope::System);
        assert_eq!(fences(), (f0.0 + 1, f0.1 + 2));
        // A release store: a release before, and one after (remote stores complete).
        word(5).store(9, Ordering::Release, Scope::System);
        assert_eq!(fences(), (f0.0 + 3, f0.1 + 2));
        assert_eq!(
            word(5).compare_exchange(9, 10, Ordering::AcqRel, Ordering::Relaxed, Scope::System),
            Ok(9)
        );
        assert_eq!(
            word(5).compare_exchange(9, 11, Ordering::Relaxed, Ordering::Relaxed, Scope::System),
            Err(10)
        );
        assert_eq!(word(5).fetch_sub(4, Ordering::Relaxed, Scope::System), 10);
        assert_eq!(
            word(5).fetch_or(0b1000, Ordering::Relaxed, Scope::System),
            6
        );
        assert_eq!(
            word(5).fetch_and(0b0110, Ordering::Relaxed, Scope::System),
            14
        );
        word(5).add_single_writer(2, Scope::System);
        word(5).max_single_writer(5, Scope::System);
        assert_eq!(MEM[1][5].load(O::SeqCst), 8);
        word(5).max_single_writer(3, Scope::System);
        assert_eq!(MEM[1][5].load(O::SeqCst), 8);
        // PE 1 reaches the same words by the same offsets: part 1 its own, part 0 PE 0's.
        ME.store(1, O::Relaxed);
        assert_eq!(word(5).load(Ordering::Relaxed, Scope::System), 8);
        assert_eq!(word(1).load(Ordering::Relaxed, Scope::System), 3);
        word(1).fetch_add(1, Ordering::Relaxed, Scope::System);
        assert_eq!(MEM[0][1].load(O::SeqCst), 4);
        assert_eq!(MEM[1][1].load(O::SeqCst), 0, "never the caller's copy");
        // A word outside the window is the platform's own.
        let local = Word::new(4);
        assert_eq!(local.fetch_add(1, Ordering::AcqRel, Scope::Device), 4);
        assert_eq!(local.load(Ordering::Relaxed, Scope::Device), 5);
        ME.store(0, O::Relaxed);
    }

    #[test]
    fn remote_stores_and_adds_complete_and_fences_and_exchanges_take_both_sides() {
        let _serial = serial();
        let fences = || (RELEASES.load(O::Relaxed), ACQUIRES.load(O::Relaxed));
        let f = fences();
        // A relaxed store and a single-writer add are complete when they return: a release
        // after each.
        word(4).store(1, Ordering::Relaxed, Scope::System);
        assert_eq!(fences(), (f.0 + 1, f.1));
        word(4).add_single_writer(1, Scope::System);
        assert_eq!(fences(), (f.0 + 2, f.1));
        // A sequentially consistent store: a release before and after.
        word(4).store(7, Ordering::SeqCst, Scope::System);
        assert_eq!(fences(), (f.0 + 4, f.1));
        // A compare-exchange takes the union of its orderings.
        let _ = word(4).compare_exchange(7, 8, Ordering::Release, Ordering::Acquire, Scope::System);
        assert_eq!(fences(), (f.0 + 5, f.1 + 1));
        // A core fence orders the remote operations too.
        let mut scratch = [0u128; 64];
        let p = WindowPlatform::<_, Sim>::new(OneLane::with_scratch(&mut scratch));
        p.fence(Ordering::SeqCst, Scope::System);
        assert_eq!(fences(), (f.0 + 6, f.1 + 1));
        assert_eq!(MEM[1][4].load(O::SeqCst), 8);
    }

    #[test]
    fn the_own_part_is_reached_without_calls_when_the_window_names_it() {
        let _serial = serial();
        OWN.store(1, O::Relaxed);
        ME.store(1, O::Relaxed);
        let calls = CALLS.load(O::Relaxed);
        // PE 1's own words (its part 1): the platform's operations, no call.
        let w6 = word(6);
        w6.store(5, Ordering::Release, Scope::System);
        assert_eq!(w6.fetch_add(2, Ordering::AcqRel, Scope::System), 5);
        assert_eq!(MEM[1][6].load(O::SeqCst), 7);
        let mut scratch = [0u128; 64];
        let p = WindowPlatform::<_, Sim>::new(OneLane::with_scratch(&mut scratch));
        // SAFETY: the address of a live word.
        assert_eq!(unsafe { p.load_word(MEM[1][6].as_ptr()) }, 7);
        assert_eq!(CALLS.load(O::Relaxed), calls, "no call for the own part");
        // PE 0's words (part 0) still through the calls.
        assert_eq!(word(2).fetch_add(1, Ordering::Relaxed, Scope::System), 0);
        assert_eq!(MEM[0][2].load(O::SeqCst), 1);
        assert_eq!(CALLS.load(O::Relaxed), calls + 1);
    }

    #[test]
    fn a_window_platform_reads_other_pes_tasks_through_the_remote() {
        let _serial = serial();
        let mut scratch = [0u128; 64];
        let p = WindowPlatform::<_, Sim>::new(OneLane::with_scratch(&mut scratch));
        MEM[1][6].store(42, O::SeqCst);
        let local = 17u64;
        // SAFETY: addresses of live words.
        unsafe {
            assert_eq!(p.load_word(MEM[0][6].as_ptr()), 42, "part 1: PE 1's memory");
            assert_eq!(p.load_word(&local), 17, "outside the window: a load");
        }
    }

    #[test]
    fn a_window_routes_each_part_to_its_pe_and_nothing_else() {
        let w = PeWindow::new(0x1000_0000, 3000, 3);
        assert_eq!(w.shift, 12);
        assert_eq!(w.bytes(), 3 * 4096);
        assert_eq!(w.route(0x1000_0000), Some(0));
        assert_eq!(w.route(0x1000_0fff), Some(0));
        assert_eq!(w.route(0x1000_1000), Some(1));
        assert_eq!(w.route(w.part(2) + 4095), Some(2));
        assert_eq!(w.route(w.part(2) + 4096), None);
        assert_eq!(w.route(0x0fff_ffff), None);
        assert_eq!(w.route(0), None);
        assert_eq!(w.route(u64::MAX), None);
        assert_eq!(PeWindow::default().route(0), None);
        assert_eq!(PeWindow::new(0, 4096, 1).shift, 12);
        assert_eq!(PeWindow::new(0, 4097, 1).shift, 13);
    }
}
