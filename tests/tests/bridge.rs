//! The bridge (`mgws_core::bridge`) on CPU threads alone: a CPU run split into two sides that
//! share no atomics and reach each other only through single-writer mailboxes, the protocol that
//! CPU workers beside GPUs use. Every run checks that each MEMSET task ran exactly once, in both
//! count-based termination modes, with one and several lanes, with the initial tasks on both
//! sides or on side 0 alone (then side 1 works only on what the bridge brings it), with one or
//! two workers per public queue.

use mgws::{Scheduler, TerminationMode};
use mgws_tests::{chaotic_memset, spawned_memset};

fn bridged(workers: u32, side1: u32, lanes: u32, termination: TerminationMode, roots: u64) {
    bridged_sharing(workers, side1, lanes, termination, roots, 1);
}

fn bridged_sharing(
    workers: u32,
    side1: u32,
    lanes: u32,
    termination: TerminationMode,
    roots: u64,
    sharing: u32,
) {
    let sched = Scheduler::builder()
        .workers(workers)
        .lanes(lanes)
        .cpu_bridge(side1)
        .termination(termination)
        .queue_sharing(sharing)
        .build()
        .unwrap();
    let slots = 400_000;
    let label = format!(
        "{workers} workers ({side1} on side 1, {sharing} per queue) x {lanes}, {termination:?}, \
         {roots} roots"
    );
    // With one root, side 1 can only run what crosses the bridge; but on a loaded machine the
    // operating system may not schedule side 1's threads before side 0 has run everything. So
    // such a run is repeated, up to ATTEMPTS times, until something crossed; every run must be
    // exact, and one of them must have crossed.
    const ATTEMPTS: usize = 5;
    for attempt in 1..=ATTEMPTS {
        let (report, check) = spawned_memset(&sched, slots, roots, 4).unwrap();
        assert!(check.ok(), "{label}: {check:?}");
        let moved_in = report.total(|w| w.tasks_bridged_in);
        let moved_out = report.total(|w| w.tasks_bridged_out);
        assert_eq!(moved_in, moved_out, "{label}: every task sent was received");
        if roots != 1 {
            return;
        }
        // The one root task starts on side 0: side 1 ran only what crossed the bridge.
        let side1_ran: u64 = report.per_worker[(workers - side1) as usize..]
            .iter()
            .map(|w| w.tasks_run)
            .sum();
        if moved_in > 0 && side1_ran > 0 {
            return;
        }
        eprintln!("{label}: attempt {attempt}: nothing crossed the bridge");
    }
    panic!("{label}: nothing crossed the bridge in {ATTEMPTS} runs");
}

#[test]
fn two_bridged_sides_run_every_task_exactly_once() {
    for termination in [TerminationMode::IdleCounter, TerminationMode::Hierarchical] {
        bridged(4, 2, 1, termination, 1);
        bridged(5, 1, 1, termination, 64);
        bridged(3, 1, 2, termination, 1);
    }
}

#[test]
fn bridged_sides_with_shared_queues_run_every_task_exactly_once() {
    for termination in [TerminationMode::IdleCounter, TerminationMode::Hierarchical] {
        bridged_sharing(6, 2, 1, termination, 1, 2);
        bridged_sharing(8, 4, 2, termination, 64, 2);
        bridged_sharing(8, 4, 1, termination, 1, 4);
    }
}

/// Initial tasks on both sides, every tag one lane wide, each spawning 3 MEMSET tasks. Indexed,
/// the workers other than the bridge workers run their claims straight from the template, the
/// bridge workers through their local queues; listed, every worker copies its claims (the
/// followers word by word). Every slot is written once and every task ran once, with 2 and 4
/// lanes and in both count-based termination modes.
#[test]
fn bridged_sides_run_an_in_place_registrys_tasks_exactly_once() {
    use mgws_tests::spawn_slots;
    for termination in [TerminationMode::IdleCounter, TerminationMode::Hierarchical] {
        for (workers, side1, lanes, listed) in [
            (4, 2, 2, false),
            (6, 3, 4, false),
            (5, 1, 2, false),
            (4, 2, 2, true),
            (6, 3, 4, true),
        ] {
            let sched = Scheduler::builder()
                .workers(workers)
                .lanes(lanes)
                .cpu_bridge(side1)
                .termination(termination)
                .build()
                .unwrap();
            let label = format!(
                "{workers} workers ({side1} on side 1) x {lanes}, {termination:?}, listed {listed}"
            );
            let (count, per) = (20_000, 3);
            let (report, check) = spawn_slots(&sched, count, per, listed).unwrap();
            assert!(check.ok(), "{label}: {check:?}");
            assert_eq!(report.tasks_run, count + count * per, "{label}");
            let claimed = |w: &mgws::WorkerReport| w.initial_loads > 0;
            let side0 = &report.per_worker[..(workers - side1) as usize];
            let side1 = &report.per_worker[(workers - side1) as usize..];
            assert!(
                side0.iter().any(claimed) && side1.iter().any(claimed),
                "{label}"
            );
        }
    }
}

#[test]
fn a_bridged_run_refuses_the_voting_tree_and_small_local_queues() {
    let refusal = |builder: mgws::SchedulerBuilder| {
        let sched = builder.build().unwrap();
        spawned_memset(&sched, 100, 1, 4).unwrap_err().to_string()
    };
    let bridge = |workers, side1| Scheduler::builder().workers(workers).cpu_bridge(side1);
    let err = refusal(bridge(4, 2).termination(TerminationMode::VotingTree));
    assert!(
        err.contains("--termination counter or hierarchical"),
        "{err}"
    );
    let err = refusal(bridge(4, 2).local_capacity(8));
    assert!(err.contains("local capacity of at least 16"), "{err}");
    let err = refusal(bridge(2, 2));
    assert!(err.contains("workers on both"), "{err}");
    // Sides of 3 and 3 workers cannot fill queues shared by two.
    let err = refusal(bridge(6, 3).queue_sharing(2));
    assert!(err.contains("each side needs a multiple of 2"), "{err}");
}

#[test]
fn bridged_sides_survive_random_delays_at_every_step() {
    for seed in 0..16u64 {
        let termination = if seed % 2 == 0 {
            TerminationMode::IdleCounter
        } else {
            TerminationMode::Hierarchical
        };
        let builder = Scheduler::builder()
            .workers(4)
            .lanes(1 + (seed % 3 == 0) as u32)
            .cpu_bridge(if seed % 4 == 3 { 1 } else { 2 })
            .queue_sharing(if seed % 4 == 1 { 2 } else { 1 })
            .local_capacity(16)
            .public_capacity(18)
            .termination(termination);
        chaotic_memset(builder, seed, 1 + seed % 3);
    }
}

#[test]
fn a_failure_on_one_side_stops_both_and_is_the_runs_error() {
    use mgws::job::u64_bytes_mut;
    use mgws::{AreaBytes, Error, Job};
    use mgws_tasks::workloads::memset::{output_descriptor, MemsetTask};
    use mgws_tests::TestTasks;
    // Side 0 (worker 0) gets the first task and goes idle waiting for side 1, whose task has an
    // unknown tag: side 1 aborts, and nothing but the supervisor can tell side 0 (the sides share
    // no abort word). The run must end with side 1's error long before the watchdog.
    let sched = Scheduler::builder()
        .workers(2)
        .cpu_bridge(1)
        .watchdog(std::time::Duration::from_secs(20))
        .build()
        .unwrap();
    let out = output_descriptor(0, 2);
    let mut tasks: Vec<_> = (0..2)
        .map(|index| TestTasks::task(&MemsetTask { index }).with_data(0, out))
        .collect();
    tasks[1].tag = 77;
    let mut slots = vec![0u64; 2];
    let start = std::time::Instant::now();
    let err = mgws::cpu::run(
        &sched,
        &TestTasks,
        Job::new(&tasks).area(0, AreaBytes::ReadWrite(u64_bytes_mut(&mut slots))),
    )
    .unwrap_err();
    assert!(matches!(err, Error::UnknownTag { tag: 77, .. }), "{err:?}");
    assert!(
        start.elapsed() < std::time::Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
}
