//! Host emulation of what the GPU baseline kernels do with the environments the CUDA backend
//! builds: the core's `run_level` and `run_static` on a one-lane platform, blocks one after
//! another. It checks the host's side of the contract (argument blocks, counters, env fields)
//! without a GPU; the kernel entries in `mgws-kernel-support` make the same calls per block.

use mgws_core::one_lane::OneLane;
use mgws_core::{
    AtomicWord, Env, HostWord, LeanStatic, LevelArgs, LevelSink, LevelWorker, Ordering,
    QueueHeader, Scope, SharedState, Topology, WorkerProgress, WorkerStats, DATA_AREAS,
    MAX_DEVICES,
};
use mgws_tasks::workloads::fib::{self, rows_descriptor, FibTask, COL_NODES, COL_SUM};
use mgws_tasks::workloads::rows::column_sum;
use mgws_tasks::{FibTasks, TaskStruct};

use crate::rows::ResultRows;
use crate::scheduler::Scheduler;

fn sched(workers: u32) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .lanes(32)
        .build()
        .unwrap()
}

/// The level loop of `levels::run` with the kernel replaced by `run_level` per block.
/// With `patch_shared`, the bare env gets a shared state (which `mgws_kernel_support::run_level`
/// does not give it), to check the rest of the level path apart from the null `shared` pointer.
fn levels_on_host(
    sched: &Scheduler,
    initial: &[TaskStruct],
    areas: [u64; DATA_AREAS],
    patch_shared: bool,
) -> u64 {
    let dummy = SharedState::<HostWord>::new();
    let blocks = sched.workers();
    let capacity = 1 << 16;
    let mut bufs = [initial.to_vec(), Vec::new()];
    let mut frontier_len = initial.len() as u64;
    let mut total = 0;
    while frontier_len > 0 {
        bufs[1] = vec![bufs[0][0]; capacity];
        let counters: Vec<HostWord> = (0..4).map(|_| HostWord::new(0)).collect();
        let args = LevelArgs {
            config: sched.config,
            frontier: bufs[0].as_ptr() as u64,
            frontier_len,
            out: bufs[1].as_mut_ptr() as u64,
            out_capacity: capacity as u64,
            counters: counters.as_ptr() as u64,
            areas,
            area_limits: [0; DATA_AREAS],
        };
        let scratch = super::plan::scratch_bytes(args.config.local_capacity, 1, blocks);
        for block in 0..blocks.min(frontier_len as u32) {
            // What `mgws_kernel_support::run_level` does for block `block` of the grid.
            let mut env = Env::<HostWord, TaskStruct>::bare(
                args.config,
                blocks,
                args.frontier as *const TaskStruct,
                args.frontier_len,
                args.areas,
            );
            if patch_shared {
                env.shared = &dummy;
            }
            let sink = LevelSink {
                out: args.out as *mut TaskStruct,
                out_capacity: args.out_capacity,
                counters: args.counters as *const HostWord,
            };
            let mut buffer = vec![0u128; scratch.div_ceil(16)];
            let p = OneLane::with_scratch(&mut buffer);
            let grid = blocks.min(frontier_len as u32) as u64;
            // SAFETY: the bare env has the frontier and areas; the scratch fits the layout.
            unsafe {
                LevelWorker::<_, _, _, mgws_core::FromConfig>::new(p, &env, &FibTasks, block, sink)
            }
            .run(block as u64, grid);
        }
        let c: Vec<u64> = counters
            .iter()
            .map(|w| w.load(Ordering::Relaxed, Scope::System))
            .collect();
        assert_eq!(c[1], 0, "a task failed");
        assert_eq!(c[2], frontier_len, "every frontier task ran");
        assert!(c[0] <= capacity as u64);
        total += frontier_len;
        frontier_len = c[0];
        bufs[0] = bufs[1][..frontier_len as usize].to_vec();
    }
    total
}

#[test]
fn kernel_per_level_runs_fib_level_by_level() {
    level_fib(false);
}

#[test]
fn kernel_per_level_runs_fib_level_by_level_given_a_shared_state() {
    level_fib(true);
}

fn level_fib(patch_shared: bool) {
    let n = 12;
    let s = sched(8);
    let mut rows = ResultRows::new(s.workers());
    let root = [FibTasks::task(&FibTask { n }).with_data(0, rows_descriptor(0, s.workers()))];
    let mut areas = [0u64; DATA_AREAS];
    areas[0] = rows.bytes_mut().as_mut_ptr() as u64;
    let tasks = levels_on_host(&s, &root, areas, patch_shared);
    assert_eq!(tasks, fib::tree_nodes(n));
    assert_eq!(column_sum(rows.words(), COL_SUM), fib::fib(n));
    assert_eq!(column_sum(rows.words(), COL_NODES), fib::tree_nodes(n));
}

#[test]
fn static_assignment_runs_every_task_once_from_the_backends_env() {
    // The env the CUDA backend gives the static entry: full orchestration memory (zeroed), worker
    // w running its contiguous share of the initial tasks.
    let n = 12;
    let s = sched(4);
    let workers = s.workers();
    let topology = Topology::single(workers, 1);
    let cfg = s.config;
    let mut rows = ResultRows::new(workers);
    let root = [FibTasks::task(&FibTask { n }).with_data(0, rows_descriptor(0, workers))];
    let shared = SharedState::<HostWord>::new();
    let headers: Vec<QueueHeader<HostWord>> = (0..workers).map(|_| QueueHeader::new()).collect();
    let mut slots = vec![root[0]; (workers * cfg.public_capacity) as usize];
    let mut spill = vec![root[0]; (workers * cfg.spill_capacity) as usize];
    let mut progress = vec![WorkerProgress::default(); workers as usize];
    let mut stats = vec![WorkerStats::default(); workers as usize];
    let tree: Vec<HostWord> = (0..workers + 2).map(|_| HostWord::new(0)).collect();
    let mut areas = [0u64; DATA_AREAS];
    areas[0] = rows.bytes_mut().as_mut_ptr() as u64;
    let mut queue_headers = [std::ptr::null(); MAX_DEVICES];
    let mut queue_slots = [std::ptr::null_mut(); MAX_DEVICES];
    queue_headers[0] = headers.as_ptr();
    queue_slots[0] = slots.as_mut_ptr();
    let env = Env {
        config: cfg,
        topology,
        shared: &shared,
        queue_headers,
        queue_slots,
        tree: tree.as_ptr(),
        device_idle: [std::ptr::null(); MAX_DEVICES],
        // One device, which reads the shared word.
        abort: &shared.abort,
        device_abort: [std::ptr::null(); MAX_DEVICES],
        bridge: std::ptr::null(),
        bridge_slots: [std::ptr::null_mut(); 2],
        bridge_side: 0,
        bridge_worker: 0,
        worker_base: 0,
        spill: spill.as_mut_ptr(),
        initial: root.as_ptr(),
        initial_len: root.len() as u64,
        initial_counted_word: mgws_core::INITIAL_LISTED,
        progress: progress.as_mut_ptr(),
        stats: stats.as_mut_ptr(),
        task_tags: std::ptr::null_mut(),
        areas,
        area_limits: [0; DATA_AREAS],
        // One device: no other device's queues.
        remote_damping: std::ptr::null_mut(),
    };
    let scratch = super::plan::scratch_bytes(cfg.local_capacity, 1, topology.device_queues_max());
    for w in 0..workers {
        let mut buffer = vec![0u128; scratch.div_ceil(16)];
        let p = OneLane::with_scratch(&mut buffer);
        // SAFETY: the env describes live memory sized for this configuration.
        unsafe { LeanStatic::<_, _, mgws_core::FromConfig>::new(p, &env, w) }.run(&FibTasks);
    }
    let error = shared.error.load(Ordering::Relaxed, Scope::System);
    assert_eq!(error, 0, "{:?}", mgws_core::RunError::unpack(error));
    assert_eq!(column_sum(rows.words(), COL_SUM), fib::fib(n));
    let ran: u64 = stats.iter().map(|s| s.tasks_run).sum();
    assert_eq!(ran, fib::tree_nodes(n));
    // The lean static loop keeps no orchestration state: it reports through its progress record.
    assert_eq!(
        shared.exited_workers.load(Ordering::Relaxed, Scope::System),
        0
    );
    assert!(progress.iter().all(|p| p.state == 2));
}
