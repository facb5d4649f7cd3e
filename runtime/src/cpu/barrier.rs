//! A sense-reversing barrier for the lanes of one CPU worker. It spins briefly, then yields, so
//! that groups of lanes stay responsive when threads outnumber cores.

use std::sync::atomic::{AtomicU32, Ordering};

pub struct LaneBarrier {
    lanes: u32,
    arrived: AtomicU32,
    generation: AtomicU32,
}

impl LaneBarrier {
    pub fn new(lanes: u32) -> Self {
        LaneBarrier {
            lanes,
            arrived: AtomicU32::new(0),
            generation: AtomicU32::new(0),
        }
    }

    /// Waits for all lanes. Every memory operation of every lane before the call happens-before
    /// every operation after it: arrivals are AcqRel RMWs, and the last arrival's Release bump of
    /// the generation is read with Acquire by every waiter.
    pub fn wait(&self) {
        if self.lanes == 1 {
            return;
        }
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.lanes {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}
