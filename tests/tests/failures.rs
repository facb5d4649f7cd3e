//! Bad input and failing runs: every one ends in a typed error that names the cause, and none
//! loses work silently or hangs.

use std::time::{Duration, Instant};

use mgws::job::u64_bytes_mut;
use mgws::{AreaBytes, Error, Job, Method, Scheduler};
use mgws_tasks::workloads::memset::{output_descriptor, MemsetTask};
use mgws_tasks::TaskStruct;
use mgws_tasks::{Access, DataDescriptor};
use mgws_tests::{spawned_memset, Panic, SplitRange, Stall, TestTasks};

fn sched(workers: u32) -> Scheduler {
    Scheduler::builder().workers(workers).build().unwrap()
}

#[test]
fn an_unknown_tag_stops_the_run_and_names_the_tag() {
    let out = output_descriptor(0, 4);
    let mut tasks: Vec<TaskStruct> = (0..4)
        .map(|index| TestTasks::task(&MemsetTask { index }).with_data(0, out))
        .collect();
    tasks[2].tag = 77;
    let mut slots = vec![0u64; 4];
    let err = mgws::cpu::run(
        &sched(2),
        &TestTasks,
        Job::new(&tasks).area(0, AreaBytes::ReadWrite(u64_bytes_mut(&mut slots))),
    )
    .unwrap_err();
    assert!(matches!(err, Error::UnknownTag { tag: 77, .. }), "{err:?}");
    assert!(err.to_string().contains("tag 77"), "{err}");
}

#[test]
fn a_descriptor_outside_its_area_is_refused_before_the_run() {
    let tasks = [TestTasks::task(&MemsetTask { index: 0 }).with_data(0, output_descriptor(0, 100))];
    let mut slots = vec![0u64; 4];
    let err = mgws::cpu::run(
        &sched(1),
        &TestTasks,
        Job::new(&tasks).area(0, AreaBytes::ReadWrite(u64_bytes_mut(&mut slots))),
    )
    .unwrap_err();
    assert!(err.to_string().contains("exceeds data area 0"), "{err}");
    // An offset whose end overflows u64 is refused, not wrapped into the area.
    let wrap = DataDescriptor::new(0, u64::MAX - 3, 8, Access::ReadWrite);
    let wrapping = [TestTasks::task(&MemsetTask { index: 0 }).with_data(0, wrap)];
    let err = mgws::cpu::run(
        &sched(1),
        &TestTasks,
        Job::new(&wrapping).area(0, AreaBytes::ReadWrite(u64_bytes_mut(&mut slots))),
    )
    .unwrap_err();
    assert!(err.to_string().contains("exceeds data area 0"), "{err}");
    let err = mgws::cpu::run(&sched(1), &TestTasks, Job::new(&tasks)).unwrap_err();
    assert!(err.to_string().contains("does not have"), "{err}");
    assert_eq!(slots, [0; 4], "nothing ran");
}

#[test]
fn full_queues_and_overflow_stack_end_in_a_clear_error() {
    let sched = Scheduler::builder()
        .workers(1)
        .local_capacity(2)
        .public_capacity(2)
        .spill_capacity(2)
        .initial_chunk(1)
        .build()
        .unwrap();
    // One worker that spawns 64 MEMSET tasks from one leaf: far more than 2 + 2 + 2 slots.
    let err = spawned_memset(&sched, 64, 1, 64).unwrap_err();
    assert!(
        matches!(
            err,
            Error::SpillOverflow {
                worker: 0,
                capacity: 2
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_stalled_run_is_aborted_by_the_watchdog_with_every_workers_state() {
    let sched = Scheduler::builder()
        .workers(3)
        .watchdog(Duration::from_millis(300))
        .build()
        .unwrap();
    let tasks = [TestTasks::task(&Stall {
        micros: 1_500_000,
        heartbeat_micros: 0,
    })];
    let start = Instant::now();
    let err = mgws::cpu::run(&sched, &TestTasks, Job::new(&tasks)).unwrap_err();
    let Error::Hang { report } = err else {
        panic!("expected a hang, got {err:?}")
    };
    assert_eq!(report.workers.len(), 3);
    assert!(report.stalled_for >= Duration::from_millis(300));
    let text = report.to_string();
    assert!(
        text.contains("worker    0") && text.contains("op="),
        "{text}"
    );
    // The stalled task itself cannot be preempted on a CPU, but nothing waits beyond it.
    assert!(start.elapsed() < Duration::from_secs(5));
}

/// A correct task that runs far longer than the watchdog's timeout passes when it sends
/// heartbeats; its twin without heartbeats is stopped as a hang.
#[test]
fn heartbeats_keep_a_long_task_alive_under_a_short_watchdog() {
    let sched = Scheduler::builder()
        .workers(2)
        .watchdog(Duration::from_millis(150))
        .build()
        .unwrap();
    let long = |heartbeat_micros| {
        let tasks = [TestTasks::task(&Stall {
            micros: 900_000,
            heartbeat_micros,
        })];
        mgws::cpu::run(&sched, &TestTasks, Job::new(&tasks))
    };
    let report = long(10_000).expect("a task with heartbeats is not a hang");
    assert_eq!(report.tasks_run, 1);
    let err = long(0).unwrap_err();
    assert!(matches!(err, Error::Hang { .. }), "{err:?}");
    assert!(err.to_string().contains("ctx.heartbeat()"), "{err}");
}

#[test]
fn the_split_workload_counts_every_task_it_spawns() {
    let (report, check) = spawned_memset(&sched(2), 1000, 2, 10).unwrap();
    assert!(check.ok());
    assert_eq!(report.total(|w| w.tasks_run), report.tasks_run);
    // 1000 MEMSET tasks, plus the split tasks of two trees over 500 slots with leaves of <= 10.
    let splits = report.tasks_run - 1000;
    assert!((2 * 63..=2 * 127).contains(&splits), "{splits} split tasks");
    let _ = SplitRange {
        lo: 0,
        hi: 0,
        leaf: 1,
    };
}

#[test]
fn the_built_in_diagnostics_end_in_the_errors_they_provoke() {
    use mgws::Backend;
    use mgws_cli::workload::{memset, stall};
    let err = memset::run_with_fault(&sched(2), &Backend::cpu(), 1000, Some(500)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::UnknownTag {
                tag: memset::UNKNOWN_TAG,
                ..
            }
        ),
        "{err:?}"
    );
    let quick = Scheduler::builder()
        .workers(2)
        .watchdog(Duration::from_millis(200))
        .build()
        .unwrap();
    let err = stall::run(&quick, &Backend::cpu(), 1, 1_000_000_000).unwrap_err();
    assert!(matches!(err, Error::Hang { .. }), "{err:?}");
    let outcome = stall::run(&sched(2), &Backend::cpu(), 3, 1_000_000).unwrap();
    assert!(outcome.verified, "{}", outcome.check);
}

/// A task that panics, on every lane or on lane 0 only, ends the run with an error naming the
/// panic on every CPU backend, long before the watchdog (the worker's other lanes would wait at
/// its barrier forever, the other workers until the watchdog).
#[test]
fn a_panicking_task_ends_the_run_with_an_error_not_a_hang() {
    for backend in [
        mgws::Backend::cpu(),
        mgws::Backend::cpu().method(Method::Static),
        mgws::Backend::cpu().method(Method::LEVELS),
    ] {
        for (lanes, on_leader) in [(1, 0), (2, 1), (4, 0)] {
            let sched = Scheduler::builder()
                .workers(2)
                .lanes(lanes)
                .watchdog(Duration::from_secs(30))
                .build()
                .unwrap();
            let mut slots = vec![0u64; 1000];
            let mut tasks: Vec<TaskStruct> = (0..1000)
                .map(|index| {
                    TestTasks::task(&MemsetTask { index }).with_data(0, output_descriptor(0, 1000))
                })
                .collect();
            tasks.insert(500, TestTasks::task(&Panic { on_leader }));
            let start = Instant::now();
            let job = Job::new(&tasks).area(0, AreaBytes::ReadWrite(u64_bytes_mut(&mut slots)));
            let err = backend.run(&sched, &TestTasks, job).unwrap_err();
            let what = format!("{} with {lanes} lanes", backend.name());
            assert!(
                matches!(&err, Error::TaskPanicked { message, .. } if message.contains("panics")),
                "{what}: {err:?}"
            );
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{what}: took {:?}",
                start.elapsed()
            );
        }
    }
}
