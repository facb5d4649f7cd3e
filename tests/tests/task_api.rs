//! The task API with several lanes: user tasks written with the context's safe helpers (checked
//! data views, `lane_range`, `leader`, `accumulate`) give the same results with 1, 2 and 4 lanes,
//! and misuse of data is reported as an error that names the task's tag and what failed.

use mgws::job::u64_bytes_mut;
use mgws::{AreaBytes, Backend, Error, Job, Method, PerWorker, Scheduler};
use mgws_tasks::{Access, DataDescriptor, TaskStruct};
use mgws_tests::{Fan, Probe, Queens, TestTasks, TreeNode, TreeSum};

fn sched(workers: u32, lanes: u32) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .lanes(lanes)
        .build()
        .unwrap()
}

fn queens(n: u32, workers: u32, lanes: u32) -> u64 {
    let s = sched(workers, lanes);
    let mut counts = PerWorker::of(TestTasks::SOLUTIONS, &s);
    let tasks = [Queens::root(n)];
    mgws::cpu::run(&s, &TestTasks, Job::new(&tasks).results(&mut counts)).unwrap();
    counts.sum()
}

#[test]
fn n_queens_counts_92_solutions_of_8_with_1_2_and_4_lanes() {
    for lanes in [1, 2, 4] {
        assert_eq!(queens(8, 2, lanes), 92, "{lanes} lanes");
    }
    assert_eq!(queens(6, 1, 4), 4);
}

/// Worker-wide tasks that spawn more children than half the local queue holds (local queues of
/// 2 and 4): `spawn_many`'s 7 go one at a time, and `spawn_each_like`'s rounds of 4 lanes in
/// parts of 1 or 2 tasks. On the mgws loop and both baselines every node runs exactly once.
#[test]
fn worker_wide_spawns_wider_than_half_the_local_queue_go_in_parts() {
    let (fan, depth) = (7, 4);
    let want = Fan::nodes(fan as u64, depth);
    assert_eq!(want, 2801);
    for capacity in [2, 4] {
        let s = Scheduler::builder()
            .workers(2)
            .lanes(4)
            .local_capacity(capacity)
            .spill_capacity(16384)
            .build()
            .unwrap();
        for backend in [
            Backend::cpu(),
            Backend::cpu().method(Method::Static),
            Backend::cpu().method(Method::LEVELS),
        ] {
            let mut counts = PerWorker::of(TestTasks::NODES, &s);
            let tasks = [TestTasks::task(&Fan { fan, depth })];
            let report = backend
                .run(&s, &TestTasks, Job::new(&tasks).results(&mut counts))
                .unwrap();
            let label = format!("{backend:?}, local capacity {capacity}");
            assert_eq!(counts.sum(), want, "{label}");
            assert_eq!(report.tasks_run, want, "{label}");
        }
    }
}

/// A tree of `levels` levels where node `i` has `i % 5` children; returns the nodes and the sum of
/// their values.
fn tree(nodes_wanted: usize) -> (Vec<TreeNode>, u64) {
    let mut nodes = vec![TreeNode {
        value: 1,
        first: 0,
        count: 0,
    }];
    let mut i = 0;
    while i < nodes.len() && nodes.len() < nodes_wanted {
        let count = (i % 5 + 1).min(nodes_wanted - nodes.len()) as u32;
        nodes[i].first = nodes.len() as u32;
        nodes[i].count = count;
        for c in 0..count {
            let n = nodes.len() as u64;
            nodes.push(TreeNode {
                value: n * 7 + c as u64,
                first: 0,
                count: 0,
            });
        }
        i += 1;
    }
    let sum = nodes.iter().map(|n| n.value).sum();
    (nodes, sum)
}

#[test]
fn tree_sum_is_exact_with_1_2_and_4_lanes() {
    let (nodes, expected) = tree(5000);
    let bytes: &[u8] = bytemuck::cast_slice(&nodes);
    for lanes in [1, 2, 4] {
        let s = sched(2, lanes);
        let mut sums = PerWorker::of(TestTasks::SUMS, &s);
        let root = TestTasks::task(&TreeSum { node: 0, root: 1 }).with_data(
            0,
            DataDescriptor::new(0, 0, bytes.len() as u32, Access::Read),
        );
        let tasks = [root];
        let report = mgws::cpu::run(
            &s,
            &TestTasks,
            Job::new(&tasks)
                .area(0, AreaBytes::Read(bytes))
                .results(&mut sums),
        )
        .unwrap();
        assert_eq!(sums.sum(), expected, "{lanes} lanes");
        assert_eq!(report.tasks_run, nodes.len() as u64, "{lanes} lanes");
    }
}

fn probe(mode: u64, access: Access, lanes: u32) -> (mgws::Result<mgws::RunReport>, Vec<u64>) {
    let s = sched(1, lanes);
    let mut memory = vec![0u64; 4];
    let task: TaskStruct = TestTasks::task(&Probe {
        mode,
        index: 2,
        value: 99,
    })
    .with_data(0, DataDescriptor::new(0, 0, 32, access));
    let tasks = [task];
    let r = mgws::cpu::run(
        &s,
        &TestTasks,
        Job::new(&tasks).area(0, AreaBytes::ReadWrite(u64_bytes_mut(&mut memory))),
    );
    (r, memory)
}

#[test]
fn checked_views_report_what_failed_with_the_tasks_tag() {
    let tag = TestTasks::TAGS
        .iter()
        .find(|(_, name)| *name == "Probe")
        .unwrap()
        .0;
    for (mode, access, code) in [
        (0, Access::Read, mgws_core::TaskError::OutOfBounds.code()),
        (1, Access::Read, mgws_core::TaskError::WrongAccess.code()),
        (2, Access::Read, mgws_core::TaskError::Misaligned.code()),
        (4, Access::Read, mgws_core::TaskError::WrongAccess.code()),
    ] {
        let err = probe(mode, access, 2).0.unwrap_err();
        match err {
            Error::TaskFailed {
                tag: t, code: c, ..
            } => {
                assert_eq!((t, c), (tag, code), "mode {mode}");
                let text = err.to_string();
                assert!(text.contains(&format!("tag {tag}")), "{text}");
                assert!(!text.contains("its own error code"), "{text}");
            }
            other => panic!("mode {mode}: {other:?}"),
        }
    }
    for lanes in [1, 4] {
        let (r, memory) = probe(3, Access::ReadWrite, lanes);
        r.unwrap();
        assert_eq!(memory, [0, 0, 99, 0], "{lanes} lanes");
    }
}

#[test]
fn a_result_table_left_off_the_job_fails_the_task_and_says_how_to_attach_it() {
    let s = sched(2, 1);
    let tasks = [Queens::root(6)];
    let e = mgws::cpu::run(&s, &TestTasks, Job::new(&tasks)).unwrap_err();
    let message = e.to_string();
    assert!(matches!(e, Error::TaskFailed { .. }), "{e:?}");
    assert!(message.contains("Job::results"), "{message}");
    // A table sized for fewer workers than run has no slot for some of them (which workers reach
    // it depends on the run, so the message is checked where the error is made).
    let reason = mgws_core::TaskError::reason(mgws_core::TaskError::NoSlot.code()).unwrap();
    assert!(reason.contains("PerWorker::of(handle, &sched)"), "{reason}");
}

#[test]
fn result_tables_reduce_like_iterators() {
    // N-Queens 8 on 3 workers: the sum is the count; min and max bound every worker's share.
    let s = sched(3, 1);
    let tasks = [Queens::root(8)];
    let mut counts = PerWorker::of(TestTasks::SOLUTIONS, &s);
    mgws::cpu::run(&s, &TestTasks, Job::new(&tasks).results(&mut counts)).unwrap();
    let slots: Vec<u64> = counts.iter().collect();
    assert_eq!(slots.len(), 3);
    assert_eq!(counts.sum(), 92);
    assert_eq!(counts.min(), *slots.iter().min().unwrap());
    assert_eq!(counts.max(), *slots.iter().max().unwrap());
    assert_eq!(counts.merge(0, |a, b| a + b), 92);
    // `starting_at` gives every slot the combine's identity before the run.
    let table = PerWorker::of(TestTasks::SOLUTIONS, &s).starting_at(u64::MAX);
    assert_eq!((table.min(), table.max()), (u64::MAX, u64::MAX));
}
