//! A one-lane host platform: the worker is the calling thread. For protocol tests, benchmarks and
//! host emulation of single GPU blocks; the CPU backend's multi-lane platform is in `mgws`.

use crate::host_word::HostWord;
use crate::platform::{Ordering, Platform, Scope};

/// One lane on the calling thread, over a caller-provided scratch buffer (possibly empty).
pub struct OneLane {
    scratch: *mut u8,
    scratch_len: usize,
}

impl OneLane {
    /// A platform without scratch memory (enough for the public-queue protocol alone).
    pub const fn without_scratch() -> Self {
        OneLane {
            scratch: core::ptr::null_mut(),
            scratch_len: 0,
        }
    }

    /// A platform whose scratch is `scratch` (16-byte aligned: `u128` elements). The buffer must
    /// outlive the platform and be used by nothing else while it lives.
    pub fn with_scratch(scratch: &mut [u128]) -> Self {
        OneLane {
            scratch: scratch.as_mut_ptr() as *mut u8,
            scratch_len: scratch.len() * 16,
        }
    }
}

// SAFETY: one lane, so the barrier and broadcast obligations hold trivially; the scratch buffer is
// 16-byte aligned, exclusively borrowed for the platform's use and outlives it (see
// `with_scratch`).
unsafe impl Platform for OneLane {
    const SINGLE_LANE: bool = true;
    type Word = HostWord;
    fn lane_id(&self) -> u32 {
        0
    }
    fn lane_count(&self) -> u32 {
        1
    }
    fn barrier(&self) {}
    fn broadcast(&self, value: u64) -> u64 {
        value
    }
    fn scratch(&self) -> *mut u8 {
        self.scratch
    }
    fn scratch_len(&self) -> usize {
        self.scratch_len
    }
    fn fence(&self, order: Ordering, _: Scope) {
        #[cfg(not(loom))]
        core::sync::atomic::fence(order);
        #[cfg(loom)]
        loom::sync::atomic::fence(order);
    }
    fn relax(&self) {
        #[cfg(loom)]
        loom::thread::yield_now();
        #[cfg(not(loom))]
        core::hint::spin_loop();
    }
    fn group_barrier(&self, _width: u32) {}
    unsafe fn lanes_fetch_add(&self, word: *mut u32, value: u32) -> u32 {
        // SAFETY: the caller guarantees a valid scratch word; one lane, so nothing races.
        unsafe {
            let old = word.read();
            word.write(old.wrapping_add(value));
            old
        }
    }
    unsafe fn lanes_lock(&self, word: *mut u32) {
        // SAFETY: as above.
        unsafe { word.write(1) };
    }
    unsafe fn lanes_unlock(&self, word: *mut u32) {
        // SAFETY: as above.
        unsafe { word.write(0) };
    }
}
