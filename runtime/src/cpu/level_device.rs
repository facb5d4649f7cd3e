//! The **levels** baseline on CPU threads: the level step of [`crate::levels`]. Each level is
//! one broadcast of the scheduler's thread set: worker `w` of `W` (`lanes` threads) runs frontier
//! tasks `w, w + W, ...` with the core's `LevelWorker`, which appends each spawned task to the
//! next frontier (one fetch-add on the shared counter per task). The broadcast's end is the
//! level barrier: a worker that finished its part of a level waits there, and that wait is its
//! idle time ([`crate::WorkerReport::idle_ns`]).
//!
//! Frontier buffers are reserved, not filled: the operating system commits their pages only as
//! they are written.

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::time::{Duration, Instant};

use mgws_core::{
    AtomicWord, Env, HostWord, LevelSink, LevelWorker, Ordering, RunError, Scope, TaskExecutor,
    Topology, WorkerProgress, DATA_AREAS,
};
use mgws_tasks::TaskStruct;

use super::platform::{CpuPlatform, LaneGroup};
use super::threads::Completion;
use crate::device::{Grid, LiveState, Running};
use crate::error::Result;
use crate::job::Job;
use crate::levels::{LevelCounters, LevelDevice, LevelPlan};
use crate::report::WorkerReport;
use crate::scheduler::Scheduler;

/// Virtual memory reserved for both frontier buffers together when no capacity is given.
const DEFAULT_RESERVATION_BYTES: u64 = 1 << 32;

/// Tasks one frontier buffer holds: `capacity`, or by default two fifths of the host memory
/// available (both buffers: four fifths; the pages are touched only as levels fill them), or
/// half a 4 GiB reservation where the system does not say what is available.
pub fn buffer_capacity(capacity: Option<u64>) -> u64 {
    let task = std::mem::size_of::<TaskStruct>() as u64;
    capacity.unwrap_or_else(|| {
        let floor = DEFAULT_RESERVATION_BYTES / 2 / task;
        crate::memory::host_available().map_or(floor, |a| a / 5 * 2 / task)
    })
}

/// The level step on CPU threads, running registry `R`.
pub struct CpuLevels<'a, R> {
    sched: &'a Scheduler,
    registry: &'a R,
    level_capacity: Option<u64>,
    placed: Option<Placed>,
}

/// The memory of a CPU level run.
struct Placed {
    grid: Grid,
    capacity: u64,
    /// The two frontier buffers, `capacity` tasks reserved each (only the written prefix is
    /// ever read).
    buffers: [Vec<TaskStruct>; 2],
    /// `LevelSink`'s four counters.
    counters: [HostWord; 4],
    /// One progress record per worker, written by the workers through the env.
    progress: Box<[WorkerProgress]>,
    /// `Env::task_tags`: one word per worker.
    task_tags: Box<[u64]>,
    groups: Vec<LaneGroup>,
    areas: ([u64; DATA_AREAS], [u64; DATA_AREAS]),
    /// Per worker: tasks run, nanoseconds waited at the level barriers.
    tasks_run: Vec<u64>,
    idle_ns: Vec<u64>,
}

/// What the threads of one level share.
struct LevelShared {
    env: Env<HostWord, TaskStruct>,
    sink: LevelSink<HostWord, TaskStruct>,
}
// SAFETY: the env and the sink point at the frontier buffers, the counters, the progress records
// and the job's data areas, all alive until the level's broadcast returned; the workers read the
// frontier, write distinct progress records, and reserve distinct output slots with fetch-adds.
unsafe impl Sync for LevelShared {}

impl<'a, R> CpuLevels<'a, R> {
    /// The threads of `sched`, running tasks of `registry`; `level_capacity`: tasks per frontier
    /// buffer (see [`buffer_capacity`]).
    pub fn new(sched: &'a Scheduler, registry: &'a R, level_capacity: Option<u64>) -> Self {
        CpuLevels {
            sched,
            registry,
            level_capacity,
            placed: None,
        }
    }

    fn placed(&mut self) -> &mut Placed {
        self.placed.as_mut().expect("placed before it runs")
    }
}

impl<R: TaskExecutor<TaskStruct> + Sync> LevelDevice for CpuLevels<'_, R> {
    fn name(&self) -> &'static str {
        "cpu-levels"
    }

    fn place(&mut self, sched: &Scheduler, job: &mut Job<'_>) -> Result<LevelPlan> {
        let config = sched.config;
        let workers = config.workers;
        let grid = Grid {
            config,
            topology: Topology::single(workers, 1),
            lanes: sched.lanes,
        };
        let capacity = buffer_capacity(self.level_capacity).max(job.initial.len());
        let what = format_args!("--level-capacity {capacity} (two frontier buffers)");
        crate::memory::check_host(what, crate::memory::bytes_of::<TaskStruct>(capacity) * 2)?;
        let mut first = crate::memory::try_with_capacity(what, capacity)?;
        job.initial.append_to(&mut first);
        let second = crate::memory::try_with_capacity(what, capacity)?;
        self.placed = Some(Placed {
            grid,
            capacity,
            buffers: [first, second],
            counters: std::array::from_fn(|_| HostWord::new(0)),
            progress: vec![WorkerProgress::default(); workers as usize].into_boxed_slice(),
            task_tags: vec![0; workers as usize].into_boxed_slice(),
            groups: LaneGroup::for_workers(workers, grid.lanes, config.local_capacity, workers),
            areas: (job.host_area_pointers(), job.area_limits()),
            tasks_run: vec![0; workers as usize],
            idle_ns: vec![0; workers as usize],
        });
        Ok(LevelPlan { grid, capacity })
    }

    fn launch_level<T>(
        &mut self,
        level: u32,
        len: u64,
        supervise: impl FnOnce(&dyn Running) -> T,
    ) -> Result<T> {
        let (sched, registry) = (self.sched, self.registry);
        let pl = self.placed.as_mut().expect("placed before it runs");
        let (workers, lanes) = (pl.grid.config.workers, pl.grid.lanes);
        let threads =
            sched
                .threads
                .get((workers * lanes) as usize, "mgws-levels", sched.pin_threads)?;
        for c in &pl.counters {
            c.store(0, Ordering::Relaxed, Scope::System);
        }
        pl.progress.fill(WorkerProgress::default());
        let parity = (level % 2) as usize;
        let frontier = pl.buffers[parity].as_ptr();
        let out = pl.buffers[1 - parity].as_mut_ptr();
        let mut env = Env::bare(pl.grid.config, workers, frontier, len, pl.areas.0)
            .with_area_limits(pl.areas.1);
        env.progress = pl.progress.as_mut_ptr();
        pl.task_tags.fill(0);
        env.task_tags = pl.task_tags.as_mut_ptr();
        let shared = LevelShared {
            env,
            sink: LevelSink {
                out,
                out_capacity: pl.capacity,
                counters: pl.counters.as_ptr(),
            },
        };
        let finished: Vec<AtomicU64> = (0..workers).map(|_| AtomicU64::new(0)).collect();
        let (shared, groups, finished_ref) = (&shared, &pl.groups, &finished);
        let start = Instant::now();
        let panicked = super::panics::FirstPanic::default();
        let (_, out) = threads.broadcast_while(
            |i| {
                let (w, lane) = (i as u32 / lanes, i as u32 % lanes);
                let group = &groups[w as usize];
                // Release: pairs with the level workers' Acquire loads of the abort counter.
                let abort = || {
                    shared
                        .sink
                        .counter(LevelSink::<HostWord, TaskStruct>::ABORT)
                        .store(1, Ordering::Release, Scope::System)
                };
                panicked.contain(w, group, abort, || {
                    // SAFETY: the env's frontier holds `len` tasks of this level, its areas are the
                    // job's, the lane group's scratch holds the layout for `workers` queues, the sink
                    // points at the other frontier buffer of `capacity` tasks and the four counters,
                    // and every lane of worker w makes this same call.
                    unsafe {
                        if lanes == 1 {
                            let p = CpuPlatform::<true>::new(0, 1, group, start, None, w);
                            LevelWorker::<_, _, _, mgws_core::FromConfig>::new(
                                p,
                                &shared.env,
                                registry,
                                w,
                                shared.sink,
                            )
                            .run(w as u64, workers as u64);
                        } else {
                            let p = CpuPlatform::<false>::new(lane, lanes, group, start, None, w);
                            LevelWorker::<_, _, _, mgws_core::FromConfig>::new(
                                p,
                                &shared.env,
                                registry,
                                w,
                                shared.sink,
                            )
                            .run(w as u64, workers as u64);
                        }
                    }
                });
                if lane == 0 {
                    // Relaxed: read after the broadcast joined every thread.
                    finished_ref[w as usize]
                        .store(start.elapsed().as_nanos() as u64, AtomicOrdering::Relaxed);
                }
            },
            |done| {
                supervise(&CpuLevelRunning {
                    progress: shared.env.progress,
                    task_tags: shared.env.task_tags,
                    workers: workers as usize,
                    abort: shared
                        .sink
                        .counter(LevelSink::<HostWord, TaskStruct>::ABORT),
                    done,
                })
            },
        );
        // The level ends when its last worker finished; the others waited for it.
        let finished: Vec<u64> = finished.into_iter().map(AtomicU64::into_inner).collect();
        let end = finished.iter().copied().max().unwrap_or(0);
        for (w, f) in finished.iter().enumerate() {
            pl.idle_ns[w] += end - f;
            pl.tasks_run[w] += pl.progress[w].tasks_run;
        }
        panicked.into_result()?;
        Ok(out)
    }

    fn counters(&mut self) -> Result<LevelCounters> {
        let pl = self.placed();
        let c = |i: usize| pl.counters[i].load(Ordering::Relaxed, Scope::System);
        Ok(LevelCounters {
            spawned: c(LevelSink::<HostWord, TaskStruct>::SPAWNED),
            tasks_run: c(LevelSink::<HostWord, TaskStruct>::TASKS_RUN),
            error: RunError::unpack(c(LevelSink::<HostWord, TaskStruct>::ERROR)),
        })
    }

    fn read_back(&mut self, _job: &mut Job<'_>) -> Result<Vec<WorkerReport>> {
        // The workers wrote the job's read-write areas in place.
        let pl = self.placed();
        Ok((0..pl.grid.config.workers as usize)
            .map(|w| WorkerReport {
                worker: w as u32,
                tasks_run: pl.tasks_run[w],
                idle_ns: Some(pl.idle_ns[w]),
                ..WorkerReport::default()
            })
            .collect())
    }

    fn leak(&mut self) {
        // CPU threads are always waited for (`exit_grace` is `None`): nothing can still run.
    }
}

/// A CPU level in progress.
struct CpuLevelRunning<'a> {
    progress: *mut WorkerProgress,
    task_tags: *mut u64,
    workers: usize,
    abort: &'a HostWord,
    done: &'a Completion<'a>,
}

impl Running for CpuLevelRunning<'_> {
    fn wait(&self, timeout: Duration) -> Result<bool> {
        Ok(self.done.wait(timeout))
    }

    fn progress(&self) -> Vec<WorkerProgress> {
        (0..self.workers)
            // SAFETY: one record per worker, alive for the level; workers write them with
            // volatile stores, and a torn or stale read only delays the watchdog by one poll.
            .map(|w| unsafe { self.progress.add(w).read_volatile() })
            .collect()
    }

    fn live_state(&self) -> LiveState {
        // No queues and no termination counters: the hang report shows the workers' records and
        // the tasks they are in.
        LiveState {
            task_tags: (0..self.workers)
                // SAFETY: one word per worker, alive for the level; a torn or stale read only
                // misnames the task in a diagnostic.
                .map(|w| unsafe { self.task_tags.add(w).read_volatile() })
                .collect(),
            ..LiveState::default()
        }
    }

    fn abort(&self) {
        // Release: keeps the hang report's reads before it; the workers read the flag at their
        // progress checks (relaxed: a late observation only delays the stop).
        self.abort.store(1, Ordering::Release, Scope::System);
    }

    fn exit_grace(&self, _watchdog: Duration) -> Option<Duration> {
        // The threads borrow the job and the buffers: they are always waited for.
        None
    }
}
