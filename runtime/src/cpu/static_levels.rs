//! The CPU's static-assignment baseline (thesis 6.8): the same task structs, run by the same
//! worker code and task registry as an mgws run, split evenly and in advance over the same number
//! of workers; only the stealing is missing.
//!
//! It runs level by level. Level 0 is the job's initial tasks; each level's tasks are split into
//! contiguous, equal shares of the level (worker `w` of `W` takes `[w * n / W, (w + 1) * n / W)`),
//! every worker runs its share with the core's `Worker::run_level`, which appends each spawned
//! task to the worker's own next-level buffer (one uncontended counter per worker), and a barrier
//! separates the levels. A workload that spawns nothing is a single level: exactly a contiguous
//! static split of the initial tasks.
//!
//! Frontier buffers are reserved, not filled: the operating system commits their pages only as
//! they are written. A level that outgrows a buffer ends the run with an error that names the
//! level and the capacity to raise; no task is dropped silently.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering as AtomicOrdering};
use std::time::Instant;

use mgws_core::{
    AtomicWord, Env, HostWord, LevelSink, LevelWorker, Ordering, RunError, Scope, ScratchLayout,
    TaskExecutor, DATA_AREAS,
};
use mgws_tasks::TaskStruct;

use super::platform::{CpuPlatform, LaneGroup};
use super::spin_barrier::SpinBarrier;
use super::threads::RunClock;
use crate::error::{Error, Result};
use crate::job::Job;
use crate::report::{RunReport, WorkerReport};
use crate::scheduler::Scheduler;

/// Virtual memory reserved for all frontier buffers together when no capacity is given.
const DEFAULT_RESERVATION_BYTES: u64 = 1 << 32;

/// Tasks one frontier buffer holds: `capacity`, or the default reservation shared by the
/// `2 * workers` buffers, within [2^16, 2^24].
pub fn buffer_capacity(workers: u32, capacity: Option<u64>) -> u64 {
    capacity.unwrap_or_else(|| {
        let task = std::mem::size_of::<TaskStruct>() as u64;
        (DEFAULT_RESERVATION_BYTES / (2 * workers.max(1) as u64) / task).clamp(1 << 16, 1 << 24)
    })
}

/// One worker's frontier buffers (one per level parity) and its counters (`LevelSink`'s layout).
struct WorkerLevel {
    /// `capacity` tasks each, allocated (not initialised) by `Shared::storage`.
    buffers: [*mut TaskStruct; 2],
    counters: [HostWord; 4],
    /// Tasks the worker appended in the last level of each parity.
    spawned: [AtomicU64; 2],
}

/// Pointers the worker threads share.
struct Shared<'a> {
    levels: Vec<WorkerLevel>,
    /// Owns the buffers `levels` point into.
    _storage: Vec<Vec<TaskStruct>>,
    initial: &'a [TaskStruct],
    /// The first level at which some worker failed (`u32::MAX`: none). A level number, not a
    /// flag: a worker already past the barrier may fail in the next level before a slower one
    /// has read this, which must not stop the slower one short of that next level's barrier.
    failed_level: AtomicU32,
}
// SAFETY: each worker writes only its own buffer of the current parity and its own counters;
// every other access is a read of the previous level's buffers, ordered after their writes by
// the level barrier (see `run_worker`).
unsafe impl Sync for Shared<'_> {}

/// What a worker found wrong at the end of a level.
enum LevelFailure {
    Task(RunError),
    Overflow {
        level: u32,
        worker: u32,
        spawned: u64,
    },
    Incomplete {
        level: u32,
        worker: u32,
        ran: u64,
        share: u64,
    },
}

/// Runs `job` level by level on `sched.workers()` threads (one lane each), with the registry
/// `registry`. `capacity`: tasks per frontier buffer (see [`buffer_capacity`]).
pub fn run<R: TaskExecutor<TaskStruct>>(
    sched: &Scheduler,
    registry: &R,
    mut job: Job<'_>,
    capacity: Option<u64>,
) -> Result<RunReport> {
    job.validate()?;
    if sched.lanes() != 1 {
        return Err(Error::Config(format!(
            "the CPU static-assignment baseline runs one thread per worker, not {} lanes",
            sched.lanes()
        )));
    }
    let config = sched.config;
    let workers = config.workers;
    let capacity = buffer_capacity(workers, capacity);
    let areas = job.host_area_pointers();
    let area_limits = job.area_limits();
    let mut storage: Vec<Vec<TaskStruct>> = (0..2 * workers)
        .map(|_| Vec::with_capacity(capacity as usize))
        .collect();
    let levels = storage
        .chunks_mut(2)
        .map(|pair| WorkerLevel {
            buffers: [pair[0].as_mut_ptr(), pair[1].as_mut_ptr()],
            counters: std::array::from_fn(|_| HostWord::new(0)),
            spawned: [AtomicU64::new(0), AtomicU64::new(0)],
        })
        .collect();
    let shared = Shared {
        levels,
        _storage: storage,
        initial: job.tasks,
        failed_level: AtomicU32::new(u32::MAX),
    };
    let layout = ScratchLayout::new(
        config.local_capacity,
        std::mem::size_of::<TaskStruct>(),
        1,
        workers,
    );
    let barrier = SpinBarrier::new(workers);
    let span = tracing::info_span!("mgws.static", backend = "cpu-static", workers);
    let _enter = span.enter();
    let threads = sched
        .threads
        .get(workers as usize, "mgws-static", sched.pin_threads)?;
    // Timed as an mgws run is (`cpu::run`).
    let clock = RunClock::start();
    let start = clock.started_at();
    let (shared, barrier) = (&shared, &barrier);
    let outcomes: Vec<WorkerOutcome> = threads.broadcast(|i| {
        let w = i as u32;
        let group = LaneGroup::new(1, layout.total);
        let outcome = run_worker(
            shared,
            barrier,
            &group,
            registry,
            config,
            (areas, area_limits),
            capacity,
            w,
            start,
        );
        clock.finished();
        outcome
    });
    let elapsed_s = clock.elapsed().as_secs_f64();
    let tasks_run = outcomes.iter().map(|o| o.tasks_run).sum();
    let per_worker = outcomes
        .iter()
        .enumerate()
        .map(|(w, o)| WorkerReport {
            worker: w as u32,
            tasks_run: o.tasks_run,
            idle_ns: Some(o.waited_ns),
            ..WorkerReport::default()
        })
        .collect();
    let levels = outcomes.iter().map(|o| o.levels).max().unwrap_or(0);
    if let Some(failure) = outcomes.into_iter().find_map(|o| o.failure) {
        return Err(match failure {
            LevelFailure::Task(e) => e.into(),
            LevelFailure::Overflow {
                level,
                worker,
                spawned,
            } => Error::Config(format!(
                "level {} of the static-assignment baseline: worker {worker} spawned {spawned} \
                 tasks, more than its frontier buffer holds ({capacity}); pass a larger \
                 --level-capacity",
                level + 1
            )),
            LevelFailure::Incomplete {
                level,
                worker,
                ran,
                share,
            } => Error::Config(format!(
                "level {level} of the static-assignment baseline: worker {worker} ran {ran} of \
                 its {share} tasks"
            )),
        });
    }
    tracing::info!(
        levels,
        tasks_run,
        elapsed_s,
        "static-assignment run finished"
    );
    Ok(RunReport {
        backend: "cpu-static".into(),
        workers,
        lanes: 1,
        elapsed_s,
        tasks_run,
        per_worker,
    })
}

/// What one worker of the static baseline did.
struct WorkerOutcome {
    tasks_run: u64,
    /// Levels it saw.
    levels: u32,
    /// What went wrong, if anything did (on any worker: all of them stop after the same level).
    failure: Option<LevelFailure>,
    /// Nanoseconds it waited at the level barriers, the last one included.
    waited_ns: u64,
}

/// Worker `w`'s loop over the levels.
#[allow(clippy::too_many_arguments)]
fn run_worker<R: TaskExecutor<TaskStruct>>(
    shared: &Shared<'_>,
    barrier: &SpinBarrier,
    group: &LaneGroup,
    registry: &R,
    config: mgws_core::SchedConfig,
    (areas, area_limits): ([u64; DATA_AREAS], [u64; DATA_AREAS]),
    capacity: u64,
    w: u32,
    start: Instant,
) -> WorkerOutcome {
    let workers = config.workers;
    let me = &shared.levels[w as usize];
    let mut tasks_run = 0u64;
    let mut waited_ns = 0u64;
    let mut level = 0u32;
    loop {
        // The frontier: the initial tasks, then every worker's output of the previous level, in
        // worker order. Their lengths were published before the previous level's barrier.
        let parity = (level % 2) as usize;
        let segments: Vec<(*const TaskStruct, u64)> = if level == 0 {
            vec![(shared.initial.as_ptr(), shared.initial.len() as u64)]
        } else {
            shared
                .levels
                .iter()
                .map(|l| {
                    (
                        l.buffers[parity] as *const TaskStruct,
                        l.spawned[parity].load(AtomicOrdering::Relaxed),
                    )
                })
                .collect()
        };
        let total: u64 = segments.iter().map(|s| s.1).sum();
        if total == 0 {
            return WorkerOutcome {
                tasks_run,
                levels: level,
                failure: None,
                waited_ns,
            };
        }
        let (lo, hi) = (
            w as u64 * total / workers as u64,
            (w as u64 + 1) * total / workers as u64,
        );
        for c in &me.counters {
            c.store(0, Ordering::Relaxed, Scope::Device);
        }
        // This worker's output of this level goes to its buffer of the other parity, which
        // nobody reads until the barrier below.
        let sink = LevelSink {
            out: me.buffers[1 - parity],
            out_capacity: capacity,
            counters: me.counters.as_ptr(),
        };
        let mut first = 0u64;
        for &(base, len) in &segments {
            let (from, to) = (lo.max(first), hi.min(first + len));
            if from < to {
                let env =
                    Env::<HostWord, TaskStruct>::bare(config, workers, base, to - first, areas)
                        .with_area_limits(area_limits);
                let p = CpuPlatform::<true>::new(0, 1, group, start, None, w);
                // SAFETY: the bare env's initial tasks are `len` live tasks of this level, its
                // areas are the job's, the lane group's scratch holds the layout for `workers`
                // queues, and `sink` points at this worker's own buffer of `capacity` tasks and
                // its four counters.
                unsafe { LevelWorker::new(p, &env, registry, w, sink) }.run(from - first, 1);
            }
            first += len;
        }
        let counter = |i: usize| me.counters[i].load(Ordering::Relaxed, Scope::Device);
        let (spawned, ran) = (
            counter(LevelSink::<HostWord, TaskStruct>::SPAWNED),
            counter(LevelSink::<HostWord, TaskStruct>::TASKS_RUN),
        );
        tasks_run += ran;
        let failure =
            if let Some(e) = RunError::unpack(counter(LevelSink::<HostWord, TaskStruct>::ERROR)) {
                Some(LevelFailure::Task(e))
            } else if spawned > capacity {
                Some(LevelFailure::Overflow {
                    level,
                    worker: w,
                    spawned,
                })
            } else if ran != hi - lo {
                Some(LevelFailure::Incomplete {
                    level,
                    worker: w,
                    ran,
                    share: hi - lo,
                })
            } else {
                None
            };
        if failure.is_some() {
            shared
                .failed_level
                .fetch_min(level, AtomicOrdering::Relaxed);
        }
        me.spawned[1 - parity].store(spawned.min(capacity), AtomicOrdering::Relaxed);
        // Orders every worker's writes of this level (tasks, lengths, the failure flag) before
        // every read of the next (SpinBarrier: AcqRel arrival, Acquire wait).
        let arrived = Instant::now();
        barrier.wait();
        waited_ns += arrived.elapsed().as_nanos() as u64;
        if shared.failed_level.load(AtomicOrdering::Relaxed) <= level {
            return WorkerOutcome {
                tasks_run,
                levels: level + 1,
                failure,
                waited_ns,
            };
        }
        level += 1;
    }
}
