//! A sense-reversing barrier for the lanes of one CPU worker. It spins briefly, then sleeps on a
//! futex (`atomic-wait`), so that lane groups stay cheap when threads outnumber cores.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// The barrier of one CPU worker's lanes.
pub struct LaneBarrier {
    lanes: u32,
    arrived: AtomicU32,
    generation: AtomicU32,
    /// Set when a lane of the worker panicked: the other lanes would wait for it forever.
    poisoned: AtomicBool,
}

/// What a lane of a poisoned worker unwinds with (the panicking lane's own payload is the one
/// reported).
pub struct LanePoisoned;

/// Spins before a waiting lane sleeps: long enough to cover a barrier whose lanes all run.
const SPINS: u32 = 200;

impl LaneBarrier {
    pub fn new(lanes: u32) -> Self {
        LaneBarrier {
            lanes,
            arrived: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            poisoned: AtomicBool::new(false),
        }
    }

    /// Marks the worker's lanes as broken (a lane panicked) and wakes every waiter: each one,
    /// and every later `wait`, unwinds with [`LanePoisoned`].
    pub fn poison(&self) {
        // Release/Acquire: a lane that sees the bumped generation also sees the flag.
        self.poisoned.store(true, Ordering::Release);
        self.generation.fetch_add(1, Ordering::Release);
        atomic_wait::wake_all(&self.generation);
    }

    fn check_poison(&self) {
        if self.poisoned.load(Ordering::Acquire) {
            std::panic::resume_unwind(Box::new(LanePoisoned));
        }
    }

    /// Waits for all lanes. Every memory operation of every lane before the call happens-before
    /// every operation after it: arrivals are AcqRel RMWs, and the last arrival's Release bump of
    /// the generation is read with Acquire by every waiter.
    pub fn wait(&self) {
        if self.lanes == 1 {
            return;
        }
        self.check_poison();
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.lanes {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            atomic_wait::wake_all(&self.generation);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if spins < SPINS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                // Sleeps only while the generation is unchanged; a wake or a change returns.
                atomic_wait::wait(&self.generation, generation);
            }
        }
        self.check_poison();
    }
}
