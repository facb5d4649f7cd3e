//! A spinning barrier for the static-assignment baseline's level steps.

use std::sync::atomic::{AtomicU32, Ordering};

/// A sense-reversing barrier that spins, then yields (like the CPU backend's lane barrier), so
/// the static baseline ([`mgws::cpu::static_levels`]) does not pay futex wake-ups between levels.
pub struct SpinBarrier {
    threads: u32,
    arrived: AtomicU32,
    generation: AtomicU32,
}

impl SpinBarrier {
    pub fn new(threads: u32) -> Self {
        SpinBarrier {
            threads,
            arrived: AtomicU32::new(0),
            generation: AtomicU32::new(0),
        }
    }

    pub fn wait(&self) {
        if self.threads == 1 {
            return;
        }
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.threads {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            spins += 1;
            if spins < 256 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}
