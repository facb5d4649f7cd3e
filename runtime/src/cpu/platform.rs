//! The CPU platform: a worker is a group of `lanes` threads sharing a scratch buffer and a barrier.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use mgws_core::{HostWord, Platform, ProtocolStep, Scope};

use super::barrier::LaneBarrier;
use crate::scheduler::Chaos;

/// What the lanes of one CPU worker share.
pub struct LaneGroup {
    barrier: LaneBarrier,
    /// The barriers of narrow tasks' lane groups: entry `k - 1` holds the `lanes >> k` groups of
    /// `1 << k` lanes, for every width from 2 lanes to half the worker.
    group_barriers: Vec<Vec<LaneBarrier>>,
    broadcast: AtomicU64,
    scratch: Box<[u128]>,
}

impl LaneGroup {
    pub fn new(lanes: u32, scratch_bytes: usize) -> Self {
        let group_barriers = (1..lanes.max(1).ilog2())
            .map(|k| (0..lanes >> k).map(|_| LaneBarrier::new(1 << k)).collect())
            .collect();
        LaneGroup {
            barrier: LaneBarrier::new(lanes),
            group_barriers,
            broadcast: AtomicU64::new(0),
            scratch: vec![0u128; scratch_bytes.div_ceil(16)].into_boxed_slice(),
        }
    }

    /// Marks the worker's lanes as broken (a lane panicked): every lane waiting at one of its
    /// barriers, and every later wait, unwinds (see [`LaneBarrier::poison`]).
    pub fn poison(&self) {
        self.barrier.poison();
        for barrier in self.group_barriers.iter().flatten() {
            barrier.poison();
        }
    }

    /// One group for each of `workers` workers of `lanes` lanes, each with the scratch a local
    /// queue of `local_capacity` tasks and at most `device_queues` public queues on a worker's
    /// domain need.
    pub fn for_workers(
        workers: u32,
        lanes: u32,
        local_capacity: u32,
        device_queues: u32,
    ) -> Vec<Self> {
        let scratch = mgws_core::ScratchLayout::new(
            local_capacity,
            std::mem::size_of::<mgws_tasks::TaskStruct>(),
            lanes,
            device_queues,
        );
        (0..workers)
            .map(|_| LaneGroup::new(lanes, scratch.total))
            .collect()
    }
}

/// One lane of a CPU worker. `SINGLE_LANE` is the one-lane case, fixed at compile time: the lane
/// id, the lane count and the barrier become constants, so the core's cooperative code (copies
/// split over lanes, barriers, exchanges) compiles down to the plain one-thread loop. It is the
/// same algorithm; only the platform answers differ (and must agree with `lanes`).
pub struct CpuPlatform<'g, const SINGLE_LANE: bool> {
    lane: u32,
    lanes: u32,
    group: &'g LaneGroup,
    scratch: *mut u8,
    start: Instant,
    chaos: Option<(Chaos, Cell<u64>)>,
}

impl<'g, const SINGLE_LANE: bool> CpuPlatform<'g, SINGLE_LANE> {
    /// Lane `lane` of `lanes` of worker `worker`, sharing the lane group `group`.
    pub fn new(
        lane: u32,
        lanes: u32,
        group: &'g LaneGroup,
        start: Instant,
        chaos: Option<Chaos>,
        worker: u32,
    ) -> Self {
        debug_assert!(!SINGLE_LANE || lanes == 1);
        CpuPlatform {
            lane,
            lanes,
            group,
            // The scratch buffer is written by several lanes through this pointer; the worker
            // protocol separates their accesses with barriers.
            scratch: group.scratch.as_ptr() as *mut u8,
            start,
            chaos: chaos.map(|c| {
                (
                    c,
                    Cell::new(c.seed ^ ((worker as u64) << 32 | lane as u64) | 1),
                )
            }),
        }
    }
}

// SAFETY: `barrier` is LaneBarrier::wait (a full happens-before barrier over the worker's lanes),
// `broadcast` returns lane 0's value to every lane (write, barrier, read, barrier), and the scratch
// buffer is owned by the lane group, 16-byte aligned (u128 elements), used only by its lanes and
// alive for the whole run.
// With SINGLE_LANE there is one lane, which is its own barrier and broadcast.
unsafe impl<const SINGLE_LANE: bool> Platform for CpuPlatform<'_, SINGLE_LANE> {
    const SINGLE_LANE: bool = SINGLE_LANE;
    type Word = HostWord;

    #[inline(always)]
    fn lane_id(&self) -> u32 {
        if SINGLE_LANE {
            0
        } else {
            self.lane
        }
    }
    #[inline(always)]
    fn lane_count(&self) -> u32 {
        if SINGLE_LANE {
            1
        } else {
            self.lanes
        }
    }
    #[inline(always)]
    fn barrier(&self) {
        if !SINGLE_LANE {
            self.group.barrier.wait()
        }
    }
    fn broadcast(&self, value: u64) -> u64 {
        if self.lane_count() == 1 {
            return value;
        }
        if self.lane == 0 {
            self.group.broadcast.store(value, Ordering::Relaxed);
        }
        self.barrier();
        let v = self.group.broadcast.load(Ordering::Relaxed);
        self.barrier();
        v
    }
    #[inline(always)]
    fn scratch(&self) -> *mut u8 {
        self.scratch
    }
    fn scratch_len(&self) -> usize {
        self.group.scratch.len() * 16
    }
    fn fence(&self, order: mgws_core::Ordering, _scope: Scope) {
        std::sync::atomic::fence(order)
    }
    fn relax(&self) {
        std::thread::yield_now();
    }
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
    fn group_barrier(&self, width: u32) {
        if SINGLE_LANE || width <= 1 {
            return;
        }
        if width >= self.lanes {
            return self.barrier();
        }
        let k = width.ilog2() as usize;
        self.group.group_barriers[k - 1][(self.lane >> k) as usize].wait();
    }
    #[inline(always)]
    unsafe fn lanes_fetch_add(&self, word: *mut u32, value: u32) -> u32 {
        // SAFETY: the caller guarantees an aligned scratch word that only these atomics touch.
        unsafe { AtomicU32::from_ptr(word) }.fetch_add(value, Ordering::Relaxed)
    }
    unsafe fn lanes_lock(&self, word: *mut u32) {
        // SAFETY: as in `lanes_fetch_add`.
        let lock = unsafe { AtomicU32::from_ptr(word) };
        // Acquire: the holder sees what the last holder wrote before its Release unlock.
        while lock
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
    }
    unsafe fn lanes_unlock(&self, word: *mut u32) {
        // SAFETY: as in `lanes_fetch_add`.
        unsafe { AtomicU32::from_ptr(word) }.store(0, Ordering::Release);
    }
    #[inline(always)]
    fn prefetch(&self, address: *const u8, bytes: usize) {
        #[cfg(target_arch = "x86_64")]
        for line in (0..bytes).step_by(64) {
            // SAFETY: a prefetch never faults and has no effect on the program's semantics; the
            // address is only a hint (the core passes a range of the initial task array).
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                    address.wrapping_add(line) as *const i8,
                )
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (address, bytes);
    }
    #[inline(always)]
    fn protocol_step(&self, _step: ProtocolStep) {
        if let Some((chaos, state)) = &self.chaos {
            // xorshift64: cheap, per-lane, reproducible from the chaos seed.
            let mut x = state.get();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            state.set(x);
            let r = (x % 1024) as u32;
            if r < chaos.sleep_per_1024 {
                let us = (x >> 10) % (chaos.max_sleep_us.max(1) as u64);
                std::thread::sleep(std::time::Duration::from_micros(us));
            } else if r < chaos.sleep_per_1024 + chaos.yield_per_1024 {
                std::thread::yield_now();
            }
        }
    }
}
