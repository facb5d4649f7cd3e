//! The GPU platform (`nvptx64-nvidia-cuda`): one worker is one thread block.
//!
//! - [`NvptxWord`]: a `u64` whose atomics are written as inline PTX with an explicit ordering *and*
//!   scope. LLVM's NVPTX backend drops the ordering of atomic read-modify-writes (every `fetch_add`
//!   becomes a relaxed `.gpu` atom) and gives loads, stores and fences `.sys` scope only
//!   (docs/background.md section 4), so none of the core's atomics go through `core::sync::atomic` here.
//! - [`GpuBlockPlatform`]: lanes are the threads of a one-dimensional block, the barrier is
//!   `bar.sync 0`, scratch memory is the block's dynamic shared memory.
//!
//! Mapping of orderings (the C++-to-PTX mapping of Lustig et al., ASPLOS 2019, made a bit stronger
//! for `SeqCst` stores and RMWs):
//!
//! | Rust       | load                | store               | read-modify-write        | fence             |
//! |------------|---------------------|---------------------|--------------------------|-------------------|
//! | `Relaxed`  | `ld.relaxed.S`      | `st.relaxed.S`      | `atom.relaxed.S`         | nothing           |
//! | `Acquire`  | `ld.acquire.S`      | (`st.release.S`)    | `atom.acquire.S`         | `fence.acq_rel.S` |
//! | `Release`  | (`ld.acquire.S`)    | `st.release.S`      | `atom.release.S`         | `fence.acq_rel.S` |
//! | `AcqRel`   | (`ld.acquire.S`)    | (`st.release.S`)    | `atom.acq_rel.S`         | `fence.acq_rel.S` |
//! | `SeqCst`   | `fence.sc.S; ld.acquire.S` | `fence.sc.S; st.release.S` | `fence.sc.S; atom.acq_rel.S` | `fence.sc.S` |
//!
//! with `S` = `gpu` for [`Scope::Device`] (and [`Scope::Block`], widened: see `by_scope!`) and
//! `sys` for [`Scope::System`]. Orderings in parentheses are not valid Rust for that operation;
//! they are mapped to the nearest stronger one instead of panicking on the GPU.
//!
//! Every word lives in the global state space (device memory, mapped host memory, or a peer
//! GPU's memory), so the instructions name `.global` on an address converted with
//! `cvta.to.global`: on a generic address, ptxas must also emit a test for a shared-memory address
//! and a compare-and-swap emulation loop at every atomic site, which made the persistent kernel
//! larger, and its size is what limits it (docs/results.md).

use core::arch::asm;
use core::arch::nvptx;
use core::cell::UnsafeCell;

use crate::platform::{AtomicWord, Ordering, Platform, Scope};

/// The PTX memory-ordering qualifier of one instruction.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sem {
    Relaxed,
    Acquire,
    Release,
    AcqRel,
}

/// Splits a Rust ordering into "needs a leading `fence.sc`" and the instruction's own semantics.
#[inline(always)]
fn rmw_sem(order: Ordering) -> (bool, Sem) {
    match order {
        Ordering::Relaxed => (false, Sem::Relaxed),
        Ordering::Acquire => (false, Sem::Acquire),
        Ordering::Release => (false, Sem::Release),
        Ordering::AcqRel => (false, Sem::AcqRel),
        _ => (true, Sem::AcqRel),
    }
}

/// The semantics of a compare-exchange: the union of its success and failure orderings.
#[inline(always)]
fn cas_sem(success: Ordering, failure: Ordering) -> (bool, Sem) {
    let (sc_s, s) = rmw_sem(success);
    let (sc_f, f) = rmw_sem(failure);
    let sem = match (s, f) {
        (Sem::Relaxed, other) | (other, Sem::Relaxed) => other,
        (a, b) if a == b => a,
        _ => Sem::AcqRel,
    };
    (sc_s || sc_f, sem)
}

/// Expands `$m!(scope_literal, args...)` for the PTX scope of `$scope`.
///
/// [`Scope::Block`] is widened to `gpu`: every word these instructions touch lives in global
/// memory and is shared between workers, i.e. between blocks, so a `cta`-scoped access would not
/// be enough for any of them; and every atomic site is emitted once per scope that can occur, so a
/// third variant would only enlarge the kernel (its instruction-cache footprint is what limits
/// it, docs/results.md).
macro_rules! by_scope {
    ($scope:expr, $m:ident!($($arg:tt)*)) => {
        match $scope {
            Scope::Block | Scope::Device => $m!("gpu", $($arg)*),
            Scope::System => $m!("sys", $($arg)*),
        }
    };
}

/// `fence.sc.<scope>`.
macro_rules! fence_sc {
    ($sc:literal,) => {
        // SAFETY: a fence has no operands and no effect other than ordering memory operations.
        unsafe { asm!(concat!("fence.sc.", $sc, ";"), options(nostack)) }
    };
}

/// `fence.acq_rel.<scope>`.
macro_rules! fence_acq_rel {
    ($sc:literal,) => {
        // SAFETY: as for `fence_sc`.
        unsafe { asm!(concat!("fence.acq_rel.", $sc, ";"), options(nostack)) }
    };
}

#[inline(always)]
fn fence_sc(scope: Scope) {
    by_scope!(scope, fence_sc!())
}

/// A memory fence of this thread with the given ordering and scope (`Platform::fence` of a block:
/// nothing for `Relaxed`, `fence.sc` for `SeqCst`, else `fence.acq_rel`).
#[inline(always)]
pub fn fence(order: Ordering, scope: Scope) {
    match order {
        Ordering::Relaxed => {}
        Ordering::SeqCst => fence_sc(scope),
        _ => by_scope!(scope, fence_acq_rel!()),
    }
}

/// The opening of every word access below: a scoped register `g` holding the global-space
/// address of the operand `{p}` (the access itself then reads `[g]` and closes the scope).
macro_rules! global_address {
    () => {
        "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; "
    };
}

/// `ld.<sem>.<scope>.global.u64` (address converted by `cvta.to.global`).
macro_rules! ld {
    ($sc:literal, $sem:literal, $p:expr) => {{
        let v: u64;
        // SAFETY: `$p` points to a live, 8-byte aligned word (it comes from `&NvptxWord`) in the
        // global state space: no `NvptxWord` is ever placed in shared or local memory.
        unsafe {
            asm!(concat!(global_address!(), "ld.", $sem, ".", $sc, ".global.u64 {v}, [g]; }}"),
                 v = out(reg64) v, p = in(reg64) $p, options(nostack))
        };
        v
    }};
}

/// `st.<sem>.<scope>.global.u64`.
macro_rules! st {
    ($sc:literal, $sem:literal, $p:expr, $v:expr) => {
        // SAFETY: as for `ld`; the word is an `UnsafeCell`, so writing through `&self` is allowed.
        unsafe {
            asm!(concat!(global_address!(), "st.", $sem, ".", $sc, ".global.u64 [g], {v}; }}"),
                 p = in(reg64) $p, v = in(reg64) $v, options(nostack))
        }
    };
}

/// `atom.<sem>.<scope>.global.<op> d, [p], v;`.
macro_rules! atom {
    ($sc:literal, $sem:literal, $op:literal, $p:expr, $v:expr) => {{
        let r: u64;
        // SAFETY: as for `st`.
        unsafe {
            asm!(concat!(global_address!(), "atom.", $sem, ".", $sc, ".global.", $op, " {r}, [g], {v}; }}"),
                 r = out(reg64) r, p = in(reg64) $p, v = in(reg64) $v, options(nostack))
        };
        r
    }};
}

/// `atom.<sem>.<scope>.global.cas.b64 d, [p], current, new;`.
macro_rules! cas {
    ($sc:literal, $sem:literal, $p:expr, $current:expr, $new:expr) => {{
        let r: u64;
        // SAFETY: as for `st`.
        unsafe {
            asm!(concat!(global_address!(), "atom.", $sem, ".", $sc, ".global.cas.b64 {r}, [g], {c}, {n}; }}"),
                 r = out(reg64) r, p = in(reg64) $p, c = in(reg64) $current, n = in(reg64) $new,
                 options(nostack))
        };
        r
    }};
}

/// `red.relaxed.<scope>.global.<op> [p], v;`: a reduction that returns nothing.
macro_rules! red {
    ($sc:literal, $op:literal, $p:expr, $v:expr) => {
        // SAFETY: as for `st`.
        unsafe {
            asm!(concat!(global_address!(), "red.relaxed.", $sc, ".global.", $op, " [g], {v}; }}"),
                 p = in(reg64) $p, v = in(reg64) $v, options(nostack))
        }
    };
}

/// A read-modify-write `$op` with the semantics and scope asked for.
macro_rules! rmw {
    ($self:ident, $op:literal, $value:expr, $order:expr, $scope:expr) => {{
        let (p, v, scope): (*mut u64, u64, Scope) = ($self.0.get(), $value, $scope);
        let (sc, sem) = rmw_sem($order);
        if sc {
            fence_sc(scope);
        }
        match sem {
            Sem::Relaxed => by_scope!(scope, atom!("relaxed", $op, p, v)),
            Sem::Acquire => by_scope!(scope, atom!("acquire", $op, p, v)),
            Sem::Release => by_scope!(scope, atom!("release", $op, p, v)),
            Sem::AcqRel => by_scope!(scope, atom!("acq_rel", $op, p, v)),
        }
    }};
}

/// A 64-bit word whose atomics are PTX instructions with explicit ordering and scope.
///
/// `#[repr(transparent)]` over a `u64`: host-zeroed memory is a valid word holding 0, and a
/// `*mut u64` into orchestration memory can be viewed as `&NvptxWord`. It must lie in global memory
/// (device, mapped host or peer memory; see the module documentation).
#[repr(transparent)]
pub struct NvptxWord(UnsafeCell<u64>);

// SAFETY: every access to the inner value goes through an atomic PTX instruction.
unsafe impl Sync for NvptxWord {}

impl AtomicWord for NvptxWord {
    #[inline(always)]
    fn new(value: u64) -> Self {
        NvptxWord(UnsafeCell::new(value))
    }

    #[inline(always)]
    fn load(&self, order: Ordering, scope: Scope) -> u64 {
        let p = self.0.get();
        match order {
            Ordering::Relaxed => by_scope!(scope, ld!("relaxed", p)),
            Ordering::SeqCst => {
                fence_sc(scope);
                by_scope!(scope, ld!("acquire", p))
            }
            _ => by_scope!(scope, ld!("acquire", p)),
        }
    }

    #[inline(always)]
    fn store(&self, value: u64, order: Ordering, scope: Scope) {
        let p = self.0.get();
        match order {
            Ordering::Relaxed => by_scope!(scope, st!("relaxed", p, value)),
            Ordering::SeqCst => {
                fence_sc(scope);
                by_scope!(scope, st!("release", p, value))
            }
            _ => by_scope!(scope, st!("release", p, value)),
        }
    }

    #[inline(always)]
    fn fetch_add(&self, value: u64, order: Ordering, scope: Scope) -> u64 {
        rmw!(self, "add.u64", value, order, scope)
    }

    #[inline(always)]
    fn fetch_sub(&self, value: u64, order: Ordering, scope: Scope) -> u64 {
        rmw!(self, "add.u64", value.wrapping_neg(), order, scope)
    }

    #[inline(always)]
    fn fetch_or(&self, value: u64, order: Ordering, scope: Scope) -> u64 {
        rmw!(self, "or.b64", value, order, scope)
    }

    #[inline(always)]
    fn fetch_and(&self, value: u64, order: Ordering, scope: Scope) -> u64 {
        rmw!(self, "and.b64", value, order, scope)
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
        let p = self.0.get();
        let (sc, sem) = cas_sem(success, failure);
        if sc {
            fence_sc(scope);
        }
        let old = match sem {
            Sem::Relaxed => by_scope!(scope, cas!("relaxed", p, current, new)),
            Sem::Acquire => by_scope!(scope, cas!("acquire", p, current, new)),
            Sem::Release => by_scope!(scope, cas!("release", p, current, new)),
            Sem::AcqRel => by_scope!(scope, cas!("acq_rel", p, current, new)),
        };
        if old == current {
            Ok(old)
        } else {
            Err(old)
        }
    }

    /// `red.relaxed.add`: the warp does not wait for it (a load, add and store on the UTS
    /// result row waited for the load's round trip to memory at every node, docs/results.md).
    #[inline(always)]
    fn add_single_writer(&self, value: u64, scope: Scope) {
        let p = self.0.get();
        by_scope!(scope, red!("add.u64", p, value))
    }

    /// `red.relaxed.max`, as [`NvptxWord::add_single_writer`].
    #[inline(always)]
    fn max_single_writer(&self, value: u64, scope: Scope) {
        let p = self.0.get();
        by_scope!(scope, red!("max.u64", p, value))
    }

    /// The same reduction: it is atomic whoever else writes the word.
    #[inline(always)]
    fn add_relaxed(&self, value: u64, scope: Scope) {
        self.add_single_writer(value, scope)
    }

    /// The same reduction, as [`NvptxWord::add_relaxed`].
    #[inline(always)]
    fn max_relaxed(&self, value: u64, scope: Scope) {
        self.max_single_writer(value, scope)
    }
}

impl NvptxWord {
    /// Swaps in `value` and returns the previous value (`atom.exch.b64`).
    #[inline(always)]
    pub fn swap(&self, value: u64, order: Ordering, scope: Scope) -> u64 {
        rmw!(self, "exch.b64", value, order, scope)
    }
}

// The broadcast slot: one word of static shared memory per block, apart from the dynamic shared
// memory that holds the worker's scratch. `.weak` so that two PTX modules that both contain it can
// still be linked into one program.
core::arch::global_asm!(".weak .shared .align 8 .b8 mgws_broadcast_slot[8];");

/// The broadcast slot's generic address.
#[inline(always)]
fn broadcast_slot() -> *mut u64 {
    let p: u64;
    // SAFETY: only converts the address of the shared variable declared above.
    unsafe {
        asm!("cvta.shared.u64 {p}, mgws_broadcast_slot;", p = out(reg64) p, options(pure, nomem, nostack))
    };
    p as *mut u64
}

/// A worker made of the threads of one one-dimensional thread block.
///
/// Lane `i` is `threadIdx.x == i`; the block must be launched with `blockDim.y == blockDim.z == 1`.
/// Scratch memory is the block's dynamic shared memory, whose size the launch sets and the
/// constructor is told.
#[derive(Clone, Copy)]
pub struct GpuBlockPlatform {
    lane: u32,
    lanes: u32,
    scratch: *mut u8,
    scratch_len: usize,
}

impl GpuBlockPlatform {
    /// The platform of the calling thread's block.
    ///
    /// # Safety
    /// Must be called on the GPU by every thread of a one-dimensional block that was launched with
    /// at least `scratch_len` bytes of dynamic shared memory.
    #[inline(always)]
    pub unsafe fn new(scratch_len: usize) -> GpuBlockPlatform {
        // SAFETY: reading special registers has no preconditions beyond running on the GPU.
        let (lane, lanes) = unsafe { (nvptx::_thread_idx_x(), nvptx::_block_dim_x()) };
        GpuBlockPlatform {
            lane,
            lanes,
            scratch: core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<u128>() as *mut u8,
            scratch_len,
        }
    }

    /// The index of this worker's block in the grid.
    #[inline(always)]
    pub fn block_index(&self) -> u32 {
        // SAFETY: a special-register read.
        unsafe { nvptx::_block_idx_x() }
    }

    /// The number of blocks in the grid.
    #[inline(always)]
    pub fn block_count(&self) -> u32 {
        // SAFETY: a special-register read.
        unsafe { nvptx::_grid_dim_x() }
    }
}

// SAFETY: `bar.sync 0` waits for every thread of the block and orders their memory operations
// (PTX ISA: barrier has `membar.cta` semantics); `broadcast` hands lane 0's value over a shared
// slot between two barriers; the dynamic shared memory is private to the block, 16-byte aligned
// (the `u128` in `new`) and lives as long as the block, and the caller of `new` vouched for its size.
unsafe impl Platform for GpuBlockPlatform {
    type Word = NvptxWord;
    /// A block is at least a warp: `mgws-kernel-support`'s entries trap on fewer threads.
    const MIN_LANES: u32 = 32;
    /// A GPU block's check is a load from L2 and a broadcast through two barriers, which the
    /// back-off takes off most loop iterations: UTS ran faster with it, and no workload slower
    /// (docs/results.md).
    const RELEASE_CHECK_INTERVAL_MAX: u32 = 32;

    /// `cp.async` (sm_80+): each lane's copies of a queue's tasks into shared memory are in
    /// flight together, where loads and stores one word at a time waited out one memory latency
    /// per word (docs/results.md).
    const ASYNC_COPY_TO_SCRATCH: bool = true;

    #[inline(always)]
    unsafe fn copy16_to_scratch(&self, dst: *mut u8, src: *const u8) {
        // SAFETY: the caller's guarantees: `dst` is a 16-byte aligned generic address of shared
        // memory and `src` of global memory. `.cg` reads from L2, where other SMs' and other
        // GPUs' writes are, not from this SM's L1. A `cp.async` is a weak memory operation of
        // this thread (PTX ISA, cp.async): the acquire before it (a claim, a lock) and the
        // barrier that handed the claim to every lane order it, as they order plain loads.
        unsafe {
            asm!(
                "{{ .reg .u64 s; cvta.to.global.u64 s, {s}; cp.async.cg.shared.global [{d}], [s], 16; }}",
                d = in(reg64) shared_address(dst.cast()),
                s = in(reg64) src,
                options(nostack)
            )
        }
    }

    #[inline(always)]
    fn wait_copies(&self) {
        // SAFETY: waits for this thread's own `cp.async` copies; with none in flight it returns.
        unsafe { asm!("cp.async.wait_all;", options(nostack)) }
    }

    #[inline(always)]
    fn lane_id(&self) -> u32 {
        self.lane
    }

    #[inline(always)]
    fn lane_count(&self) -> u32 {
        self.lanes
    }

    #[inline(always)]
    fn barrier(&self) {
        // SAFETY: every lane of the worker calls `barrier` (the core's control flow is uniform).
        unsafe { nvptx::_syncthreads() }
    }

    #[inline(always)]
    fn barrier_any(&self, value: bool) -> Option<bool> {
        let any: u32;
        // SAFETY: every lane of the worker calls it (the core's control flow is uniform), as
        // `bar.red` on barrier 0 with every thread of the block requires; like `bar.sync 0` it
        // orders the lanes' memory operations (PTX ISA: `membar.cta` semantics).
        unsafe {
            asm!(
                "{{ .reg .pred p, q; setp.ne.u32 p, {v}, 0; bar.red.or.pred q, 0, p; selp.u32 {a}, 1, 0, q; }}",
                v = in(reg32) value as u32,
                a = out(reg32) any,
                options(nostack)
            )
        };
        Some(any != 0)
    }

    #[inline]
    fn broadcast(&self, value: u64) -> u64 {
        if self.lanes == 1 {
            return value;
        }
        let slot = broadcast_slot();
        if self.lane == 0 {
            // SAFETY: the slot is this block's; the barrier that ended the previous broadcast
            // ordered every lane's read of it before this write.
            unsafe { slot.write_volatile(value) };
        }
        self.barrier();
        // SAFETY: written by lane 0 before the barrier.
        let v = unsafe { slot.read_volatile() };
        self.barrier();
        v
    }

    #[inline(always)]
    fn scratch(&self) -> *mut u8 {
        self.scratch
    }

    #[inline(always)]
    fn scratch_len(&self) -> usize {
        self.scratch_len
    }

    #[inline(always)]
    fn fence(&self, order: Ordering, scope: Scope) {
        fence(order, scope)
    }

    #[inline(always)]
    fn relax(&self) {
        // SAFETY: `nanosleep` (sm_70+) only suspends the thread for up to the given nanoseconds.
        unsafe { asm!("nanosleep.u32 64;", options(nomem, nostack)) }
    }

    #[inline(always)]
    fn idle_pause(&self, ns: u32) {
        // SAFETY: as in `relax`.
        unsafe { asm!("nanosleep.u32 {t};", t = in(reg32) ns, options(nomem, nostack)) }
    }

    /// Each lane hints a share of the range's 128-byte lines into L2 (`prefetch.L2`, generic
    /// address), lane `i` the lines `i, i + lanes, ...`: a range of one line costs one lane one
    /// instruction, and nothing waits for it.
    #[inline(always)]
    fn prefetch(&self, address: *const u8, bytes: usize) {
        const LINE: usize = 128;
        if bytes == 0 {
            return;
        }
        let first = address as usize / LINE;
        let lines = (address as usize + bytes - 1) / LINE + 1 - first;
        let mut line = self.lane as usize;
        while line < lines {
            let at = (first + line) * LINE;
            // SAFETY: a prefetch is a hint: it never faults and changes no value the program
            // reads (PTX ISA, `prefetch`); the line lies within the caller's range.
            unsafe { asm!("prefetch.L2 [{a}];", a = in(reg64) at, options(nostack, readonly)) };
            line += self.lanes as usize;
        }
    }

    #[inline(always)]
    fn now_ns(&self) -> u64 {
        let t: u64;
        // SAFETY: reads the global nanosecond timer.
        unsafe { asm!("mov.u64 {t}, %globaltimer;", t = out(reg64) t, options(nomem, nostack)) };
        t
    }

    #[inline(always)]
    fn group_barrier(&self, width: u32) {
        let mask = group_mask(self.lane, width);
        // SAFETY: every lane of the group calls it (the caller's contract); `bar.warp.sync`
        // waits for the lanes of `mask` and orders their memory operations (PTX ISA).
        unsafe { asm!("bar.warp.sync {m};", m = in(reg32) mask, options(nostack)) };
    }

    /// The lanes that call together form a coalesced group (`activemask`): they add their
    /// values with one shared-memory atomic of the group's lowest lane, and each gets its
    /// exclusive prefix over the group in lane order. Values below 2^[`SLICED_BITS`] (spawn
    /// counts) take [`sliced_fetch_add`]; a group with a larger one takes the general scan
    /// ([`scanned_fetch_add`]), whose `fns` ptxas expands into a loop of some 50 instructions.
    #[inline(always)]
    unsafe fn lanes_fetch_add(&self, word: *mut u32, value: u32) -> u32 {
        let large: u32;
        // SAFETY: straight-line code; `vote.sync` names the lanes that execute it (`activemask`).
        unsafe {
            asm!(
                "{{",
                ".reg .pred p, q;",
                ".reg .b32 mask;",
                "activemask.b32 mask;",
                "setp.ge.u32 p, {v}, {limit};",
                "vote.sync.any.pred q, p, mask;",
                "selp.u32 {l}, 1, 0, q;",
                "}}",
                v = in(reg32) value,
                limit = const 1u32 << SLICED_BITS,
                l = out(reg32) large,
                options(nomem, nostack)
            )
        };
        // Either call forms its group anew from `activemask`, so each stays exact even where
        // the lanes did not stay together.
        if large == 0 {
            // SAFETY: the caller's guarantee; every value is below 2^SLICED_BITS here.
            unsafe { sliced_fetch_add(word, value) }
        } else {
            // SAFETY: the caller's guarantee.
            unsafe { scanned_fetch_add(word, value) }
        }
    }

    #[inline(always)]
    unsafe fn lanes_lock(&self, word: *mut u32) {
        let at = shared_address(word);
        loop {
            let old: u32;
            // SAFETY: the caller guarantees a scratch word used only by these lane atomics.
            unsafe {
                asm!(
                    "atom.acquire.cta.shared.cas.b32 {o}, [{w}], 0, 1;",
                    o = out(reg32) old,
                    w = in(reg64) at,
                    options(nostack)
                )
            };
            if old == 0 {
                return;
            }
            // Lanes of one warp spin here under independent thread scheduling (sm_70+).
            // SAFETY: as in `relax`.
            unsafe { asm!("nanosleep.u32 32;", options(nomem, nostack)) }
        }
    }

    #[inline(always)]
    unsafe fn lanes_unlock(&self, word: *mut u32) {
        // SAFETY: the caller holds the lock on this scratch word.
        unsafe {
            asm!(
                "st.release.cta.shared.u32 [{w}], 0;",
                w = in(reg64) shared_address(word),
                options(nostack)
            )
        };
    }
}

/// Bits of the values [`sliced_fetch_add`] takes: spawn counts of one task (FIB's 2, a board's
/// up to 15 queens, nearly every UTS node's children) are below 2^5.
const SLICED_BITS: u32 = 5;

/// [`Platform::lanes_fetch_add`] for values below 2^[`SLICED_BITS`]: one ballot per bit, and a
/// lane's prefix is the sum over bits of `2^b` times the lanes before it with bit `b` set.
///
/// # Safety
/// As for [`Platform::lanes_fetch_add`].
#[inline(always)]
unsafe fn sliced_fetch_add(word: *mut u32, value: u32) -> u32 {
    let base: u32;
    // SAFETY: straight-line code (predicated, no branch), so each `.sync` instruction names only
    // lanes that execute it (`activemask`); the caller guarantees that `word` is a scratch
    // (shared memory) word used only by these atomics.
    unsafe {
        asm!(
            "{{",
            ".reg .pred p;",
            ".reg .b32 mask, lt, m, t, x, total, old, first;",
            "activemask.b32 mask;",
            "mov.u32 lt, %lanemask_lt;",
            "and.b32 lt, lt, mask;",
            // Bit b: the lanes with it set (m), those of them before this lane (m & lt).
            "and.b32 t, {v}, 1;",
            "setp.ne.u32 p, t, 0;",
            "vote.sync.ballot.b32 m, p, mask;",
            "popc.b32 total, m;",
            "and.b32 t, m, lt;",
            "popc.b32 x, t;",
            "and.b32 t, {v}, 2;",
            "setp.ne.u32 p, t, 0;",
            "vote.sync.ballot.b32 m, p, mask;",
            "popc.b32 t, m;",
            "mad.lo.u32 total, t, 2, total;",
            "and.b32 t, m, lt;",
            "popc.b32 t, t;",
            "mad.lo.u32 x, t, 2, x;",
            "and.b32 t, {v}, 4;",
            "setp.ne.u32 p, t, 0;",
            "vote.sync.ballot.b32 m, p, mask;",
            "popc.b32 t, m;",
            "mad.lo.u32 total, t, 4, total;",
            "and.b32 t, m, lt;",
            "popc.b32 t, t;",
            "mad.lo.u32 x, t, 4, x;",
            "and.b32 t, {v}, 8;",
            "setp.ne.u32 p, t, 0;",
            "vote.sync.ballot.b32 m, p, mask;",
            "popc.b32 t, m;",
            "mad.lo.u32 total, t, 8, total;",
            "and.b32 t, m, lt;",
            "popc.b32 t, t;",
            "mad.lo.u32 x, t, 8, x;",
            "and.b32 t, {v}, 16;",
            "setp.ne.u32 p, t, 0;",
            "vote.sync.ballot.b32 m, p, mask;",
            "popc.b32 t, m;",
            "mad.lo.u32 total, t, 16, total;",
            "and.b32 t, m, lt;",
            "popc.b32 t, t;",
            "mad.lo.u32 x, t, 16, x;",
            // The group's first lane (none before it) adds the total and hands back the old
            // value: its lane is the lowest set bit of the mask.
            "setp.eq.u32 p, lt, 0;",
            "@p atom.relaxed.cta.shared.add.u32 old, [{w}], total;",
            "brev.b32 first, mask;",
            "bfind.shiftamt.u32 first, first;",
            "shfl.sync.idx.b32 old, old, first, 31, mask;",
            "add.u32 {b}, old, x;",
            "}}",
            v = in(reg32) value,
            w = in(reg64) shared_address(word),
            b = out(reg32) base,
            options(nostack)
        )
    };
    base
}

/// [`Platform::lanes_fetch_add`] for any values: an inclusive scan of `shfl.sync` steps by rank
/// in the group.
///
/// # Safety
/// As for [`Platform::lanes_fetch_add`].
#[inline(always)]
unsafe fn scanned_fetch_add(word: *mut u32, value: u32) -> u32 {
    let base: u32;
    // SAFETY: the lanes of `mask` are the ones executing this block of straight-line code
    // (predicated, no branch), so each `shfl.sync` names only lanes that execute it; the
    // caller guarantees that `word` is a scratch (shared memory) word used only by these
    // atomics.
    unsafe {
        asm!(
            "{{",
            ".reg .pred p;",
            ".reg .b32 mask, lt, rank, n, x, y, src, leader, last, total, old;",
            "activemask.b32 mask;",
            "mov.u32 lt, %lanemask_lt;",
            "and.b32 lt, lt, mask;",
            "popc.b32 rank, lt;",
            "popc.b32 n, mask;",
            "mov.u32 x, {v};",
            // Inclusive scan over the group's ranks, unrolled (labels would repeat where the
            // block is inlined twice): step d adds the sum of rank - d, whose lane fns finds.
            "setp.ge.u32 p, rank, 1;",
            "sub.u32 src, rank, 0;",
            "selp.u32 src, src, 1, p;",
            "fns.b32 src, mask, 0, src;",
            "shfl.sync.idx.b32 y, x, src, 31, mask;",
            "@p add.u32 x, x, y;",
            "setp.ge.u32 p, rank, 2;",
            "sub.u32 src, rank, 1;",
            "selp.u32 src, src, 1, p;",
            "fns.b32 src, mask, 0, src;",
            "shfl.sync.idx.b32 y, x, src, 31, mask;",
            "@p add.u32 x, x, y;",
            "setp.ge.u32 p, rank, 4;",
            "sub.u32 src, rank, 3;",
            "selp.u32 src, src, 1, p;",
            "fns.b32 src, mask, 0, src;",
            "shfl.sync.idx.b32 y, x, src, 31, mask;",
            "@p add.u32 x, x, y;",
            "setp.ge.u32 p, rank, 8;",
            "sub.u32 src, rank, 7;",
            "selp.u32 src, src, 1, p;",
            "fns.b32 src, mask, 0, src;",
            "shfl.sync.idx.b32 y, x, src, 31, mask;",
            "@p add.u32 x, x, y;",
            "setp.ge.u32 p, rank, 16;",
            "sub.u32 src, rank, 15;",
            "selp.u32 src, src, 1, p;",
            "fns.b32 src, mask, 0, src;",
            "shfl.sync.idx.b32 y, x, src, 31, mask;",
            "@p add.u32 x, x, y;",
            // The group's total is its last lane's inclusive sum; its first lane adds it.
            "fns.b32 leader, mask, 0, 1;",
            "fns.b32 last, mask, 0, n;",
            "shfl.sync.idx.b32 total, x, last, 31, mask;",
            "setp.eq.u32 p, rank, 0;",
            "@p atom.relaxed.cta.shared.add.u32 old, [{w}], total;",
            "shfl.sync.idx.b32 old, old, leader, 31, mask;",
            "sub.u32 x, x, {v};",
            "add.u32 {b}, old, x;",
            "}}",
            v = in(reg32) value,
            w = in(reg64) shared_address(word),
            b = out(reg32) base,
            options(nostack)
        )
    };
    base
}

/// The lanes of `lane`'s group of `width` lanes (a power of two up to 32) in its warp.
#[inline(always)]
fn group_mask(lane: u32, width: u32) -> u32 {
    if width >= 32 {
        u32::MAX
    } else {
        ((1u32 << width) - 1) << (lane & 31 & !(width - 1))
    }
}

/// The shared-window address of a generic pointer into shared memory.
#[inline(always)]
fn shared_address(p: *mut u32) -> u64 {
    let a: u64;
    // SAFETY: only converts an address; the callers pass pointers into the block's scratch.
    unsafe {
        asm!("cvta.to.shared.u64 {a}, {p};", a = out(reg64) a, p = in(reg64) p as u64, options(pure, nomem, nostack))
    };
    a
}
