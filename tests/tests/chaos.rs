//! Chaos: random yields and sleeps at every protocol step, over many seeds, in every mode, on one
//! CPU domain and on two. Any lost, duplicated or hung task fails the run.

use mgws::{OverflowMode, Scheduler, TerminationMode};
use mgws_tests::chaotic_memset;

#[test]
fn protocols_survive_random_delays_at_every_step() {
    for seed in 0..48u64 {
        let termination = [
            TerminationMode::IdleCounter,
            TerminationMode::VotingTree,
            TerminationMode::Hierarchical,
        ][(seed / 2 % 3) as usize];
        let overflow = if seed % 4 < 2 {
            OverflowMode::TwoAtomics
        } else {
            OverflowMode::Damping
        };
        let lanes = if seed % 3 == 0 { 2 } else { 1 };
        let sharing = [1, 1, 2][(seed % 3) as usize];
        // Two domains (devices) for every other seed: 4 workers have at least 2 public queues.
        let domains = 1 + (seed / 6 % 2) as u32;
        let builder = Scheduler::builder()
            .workers(4)
            .lanes(lanes)
            .queue_sharing(sharing)
            .local_capacity(4)
            .public_capacity(6)
            .termination(termination)
            .overflow(overflow)
            .cpu_domains(domains);
        chaotic_memset(builder, seed, 3);
    }
}
