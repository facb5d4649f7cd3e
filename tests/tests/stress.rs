//! Stress: many workers, 1 and 4 lanes, tiny queues that force wrap-around, epoch turnover and
//! constant stealing, in every termination and overflow mode, on one CPU domain and on several
//! (the multi-device topology of a GPU run, one of them with the slots replicated per domain);
//! each run verifies that every MEMSET task (10^6, or a tenth of that with four lanes) ran
//! exactly once; initial tasks claimed from home ranges that co-owners of a shared queue
//! split; and MEMSET's atomic add from every worker at once.

use mgws::job::u64_bytes_mut;
use mgws::{
    AreaBytes, AreaLayout, Combine, Job, OverflowMode, RunReport, Scheduler, TerminationMode,
};
use mgws_tasks::workloads::memset::MemsetTask;
use mgws_tests::{spawned_memset_laid_out, IndexedSpawnTasks, TestTasks};

/// Termination, overflow prevention, and the CPU domains (devices) asked for.
const MODES: [(TerminationMode, OverflowMode, u32); 6] = [
    (TerminationMode::IdleCounter, OverflowMode::TwoAtomics, 1),
    (TerminationMode::IdleCounter, OverflowMode::Damping, 2),
    (TerminationMode::VotingTree, OverflowMode::TwoAtomics, 3),
    (TerminationMode::VotingTree, OverflowMode::Damping, 1),
    (TerminationMode::Hierarchical, OverflowMode::TwoAtomics, 3),
    (TerminationMode::Hierarchical, OverflowMode::Damping, 2),
];

fn stress(workers: u32, lanes: u32, sharing: u32, slots: u64) {
    for (i, (termination, overflow, domains)) in MODES.into_iter().enumerate() {
        // Local queues are powers of two; public rings of other sizes take the division path.
        let capacity = [4, 2, 8, 4, 2, 8][i];
        let public = [6, 7, 10, 5, 4, 9][i];
        // Every domain needs a public queue of its own.
        let domains = domains.min(workers / sharing);
        let sched = Scheduler::builder()
            .workers(workers)
            .lanes(lanes)
            .queue_sharing(sharing)
            .local_capacity(capacity)
            .public_capacity(public)
            .termination(termination)
            .overflow(overflow)
            .seed(i as u64)
            .cpu_domains(domains)
            .build()
            .unwrap();
        // On several domains the slots are also a copy per domain, added up after the run.
        let layout = [
            None,
            Some(AreaLayout::Replicated(Combine::AddU64)),
            None,
            None,
        ][i % 4];
        let (report, check) = spawned_memset_laid_out(&sched, slots, 1, 4, layout).unwrap();
        let label = format!(
            "{workers}x{lanes} sharing {sharing}, {domains} domain(s), {termination:?}/{overflow:?}, \
             {layout:?}"
        );
        assert!(check.ok(), "{label}: {check:?}");
        let splits = slots.div_ceil(4).next_power_of_two() * 2; // upper bound on split tasks
        assert!(
            report.tasks_run > slots && report.tasks_run < slots + splits,
            "{label}: {} tasks",
            report.tasks_run
        );
        if sharing == 1 {
            // With shared queues, co-owners spread work through their common queue instead.
            assert!(report.total(|w| w.steals) > 0, "{label}: no steal happened");
        }
        assert_several_workers_ran(&report, &label);
    }
}

/// Fails unless more than one worker of `report`'s run ran tasks.
fn assert_several_workers_ran(report: &RunReport, label: &str) {
    assert!(several_workers_ran(report), "{label}: one worker did all");
}

/// Whether more than one worker of `report`'s run ran tasks.
fn several_workers_ran(report: &RunReport) -> bool {
    report.per_worker.iter().filter(|w| w.tasks_run > 0).count() > 1
}

#[test]
fn one_lane_workers_run_a_million_spawned_tasks_exactly_once() {
    stress(8, 1, 1, 1_000_000);
}

#[test]
fn four_lane_workers_run_half_a_million_spawned_tasks_exactly_once() {
    // A tenth of the one-lane test's tasks: four lanes meet at barriers around every task, and a
    // million took 47 s per mode on a 2-CPU machine (CI's budget).
    stress(4, 4, 1, 100_000);
}

#[test]
fn shared_public_queues_run_spawned_tasks_exactly_once() {
    // 10^6 tasks, not fewer: this test runs next to the other two on a 2-CPU machine (about 30
    // threads), and a 200,000-task run was so short that it sometimes ended before the operating
    // system had given any thief a time slice, so that one worker did all.
    stress(8, 1, 2, 1_000_000);
    stress(8, 1, 4, 1_000_000);
    stress(4, 2, 4, 50_000);
}

#[test]
fn initial_tasks_in_shared_home_ranges_run_exactly_once() {
    // Every root is an initial task of one slot (it spawns that slot's MEMSET task), so every
    // root is claimed from a home range; with shared queues a claim takes at most one
    // co-owner's share of its range. The counts put range lengths below, at and above the chunk
    // and its shares, and leave some ranges empty.
    for sharing in [1, 2, 4] {
        for n in [1, 3, 17, 37, 150, 1001, 4099] {
            let sched = Scheduler::builder()
                .workers(8)
                .queue_sharing(sharing)
                .initial_chunk(16)
                .build()
                .unwrap();
            let (report, check) = spawned_memset_laid_out(&sched, n, n, 1, None).unwrap();
            assert!(check.ok(), "sharing {sharing}, {n} roots: {check:?}");
            assert_eq!(report.tasks_run, 2 * n, "sharing {sharing}, {n} roots");
        }
    }
}

/// MEMSET's add to its slot (`Context::reduce_add`) is atomic: tasks that all add to one slot,
/// run by several worker threads at once, worker-wide and (`IndexedSpawnTasks`, one lane each)
/// side by side on a worker's lanes, leave the exact sum. A load and a store, as a single
/// writer's add is, lose some of the adds here. Every run must be exact; on a loaded machine
/// the first worker thread may run all the tasks before the others start, so each setting runs
/// up to [`ADD_RUNS`] times until several workers have run at once (once in local CI, one
/// worker did all).
#[test]
fn adds_of_every_worker_to_one_slot_lose_nothing() {
    let n = 200_000u64;
    let out = mgws_tasks::workloads::memset::output_descriptor(0, 1);
    let wide = TestTasks::task(&MemsetTask { index: 0 }).with_data(0, out);
    let narrow = IndexedSpawnTasks::task(&MemsetTask { index: 0 }).with_data(0, out);
    for (workers, lanes, is_narrow) in [(4, 1, false), (4, 4, true)] {
        let sched = Scheduler::builder()
            .workers(workers)
            .lanes(lanes)
            .build()
            .unwrap();
        let tasks = vec![if is_narrow { narrow } else { wide }; n as usize];
        let label = format!("{workers} workers x {lanes} lanes");
        let concurrent = (0..ADD_RUNS).any(|_| {
            let mut slot = [0u64];
            let job = Job::new(&tasks).area(0, AreaBytes::ReadWrite(u64_bytes_mut(&mut slot)));
            let report = if is_narrow {
                mgws::cpu::run(&sched, &IndexedSpawnTasks, job)
            } else {
                mgws::cpu::run(&sched, &TestTasks, job)
            }
            .unwrap();
            assert_eq!(report.tasks_run, n);
            if is_narrow {
                let batches = report.total(|w| w.narrow_batches);
                assert!(n > batches, "{label}: the tasks did not run side by side");
            }
            // Task 0 adds 0 + 1.
            assert_eq!(slot[0], n, "{label}");
            several_workers_ran(&report)
        });
        assert!(
            concurrent,
            "{label}: one worker did all in each of {ADD_RUNS} runs"
        );
    }
}

/// The most runs of each setting of `adds_of_every_worker_to_one_slot_lose_nothing`.
const ADD_RUNS: usize = 5;
