//! Chaos: random yields and sleeps at every protocol step, over many seeds, in every mode, on one
//! CPU domain and on two. Any lost, duplicated or hung task fails the run.

use mgws::{OverflowMode, Scheduler, TerminationMode};
use mgws_tests::{chaotic_memset, chaotic_memset_with, MixedWidthTasks};

/// Every termination detector, in the order the seeds cycle through them.
const TERMINATIONS: [TerminationMode; 3] = [
    TerminationMode::IdleCounter,
    TerminationMode::VotingTree,
    TerminationMode::Hierarchical,
];

#[test]
fn protocols_survive_random_delays_at_every_step() {
    for seed in 0..48u64 {
        let termination = TERMINATIONS[(seed / 2 % 3) as usize];
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

/// Narrow tasks side by side under the same chaos: a worker of 2 or 4 lanes runs MEMSET tasks
/// one per lane and splitters two lanes each, with a local queue so small that a batch's spawns
/// overflow onto the overflow stack, on one domain and on two.
#[test]
fn narrow_tasks_survive_random_delays_at_every_step() {
    let mut side_by_side = 0;
    for seed in 0..24u64 {
        let termination = TERMINATIONS[(seed % 3) as usize];
        let lanes = [2, 4][(seed / 3 % 2) as usize];
        let local_capacity = [4, 8][(seed / 6 % 2) as usize];
        let domains = 1 + (seed / 12 % 2) as u32;
        let builder = Scheduler::builder()
            .workers(4)
            .lanes(lanes)
            .local_capacity(local_capacity)
            .public_capacity(6)
            .termination(termination)
            .cpu_domains(domains);
        let report = chaotic_memset_with(&MixedWidthTasks, builder, seed, 3);
        let batches: u64 = report.per_worker.iter().map(|w| w.narrow_batches).sum();
        assert!(batches > 0, "seed {seed}: no narrow batch ran");
        side_by_side += (report.tasks_run > batches) as u32;
    }
    // Batches of more than one task: the tasks did run side by side.
    assert!(
        side_by_side >= 20,
        "{side_by_side} of 24 runs had batches of several tasks"
    );
}

/// Indexed initial tasks run straight from the template by narrow batches (every tag one lane
/// wide), each spawning 3 MEMSET tasks into the local queue while claimed tasks still wait, under
/// the same chaos, with 2 and 4 lanes, on one domain and on two: every slot is written once and
/// every task ran once.
#[test]
fn indexed_tasks_run_from_the_template_survive_random_delays() {
    use mgws_tests::{chaotic, spawn_slots};
    for seed in 0..12u64 {
        let lanes = [2, 4][(seed % 2) as usize];
        let domains = 1 + (seed / 2 % 2) as u32;
        let builder = Scheduler::builder()
            .workers(4)
            .lanes(lanes)
            .local_capacity(8)
            .public_capacity(6)
            .termination(TERMINATIONS[(seed / 4 % 3) as usize])
            .cpu_domains(domains);
        let sched = chaotic(builder, seed);
        let (count, per) = (700, 3);
        let (report, check) = spawn_slots(&sched, count, per, false).unwrap();
        assert!(check.ok(), "seed {seed}: {check:?}");
        assert_eq!(report.tasks_run, count + count * per, "seed {seed}");
        let loads: u64 = report.per_worker.iter().map(|w| w.initial_loads).sum();
        assert!(loads > 0, "seed {seed}: no initial claim");
    }
}

/// Initial sets of every size against the home ranges, from one task to more than the queues,
/// listed and indexed, on 2 and 3 domains of uneven queues: each domain counts its own ranges
/// and relays the end of the set to its workers (`initial_end.rs`). A domain that counted its
/// ranges wrong would never see the set claimed, and the run would hang; every slot must be
/// written once and every task run once.
#[test]
fn initial_sets_of_every_size_end_on_several_domains() {
    use mgws_tests::{chaotic, spawn_slots};
    let mut seed = 0u64;
    for domains in [2, 3] {
        for count in [1, 2, 3, 5, 7, 8, 13, 40] {
            for listed in [false, true] {
                seed += 1;
                let builder = Scheduler::builder()
                    .workers(7)
                    .local_capacity(8)
                    .public_capacity(6)
                    .termination(TERMINATIONS[(seed % 3) as usize])
                    .cpu_domains(domains);
                let sched = chaotic(builder, seed);
                let label = format!("{domains} domains, {count} tasks, listed {listed}");
                let (report, check) = spawn_slots(&sched, count, 2, listed).unwrap();
                assert!(check.ok(), "{label}: {check:?}");
                assert_eq!(report.tasks_run, count * 3, "{label}");
            }
        }
    }
}
