//! The CPU as a [`Device`]: every worker is `lanes` threads of the scheduler's thread set, the
//! orchestration memory is an [`Arena`] on the heap, and the calling thread supervises. The
//! workers run the mgws loop ([`CpuMethod::Mgws`]) or the static-assignment baseline
//! ([`CpuMethod::Static`]); everything else of the run is the same.

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::time::Duration;

use mgws_core::{
    AtomicWord, Env, HostWord, LeanStatic, Ordering, RunError, Scope, ScratchLayout, TaskExecutor,
    TerminationMode, Topology, Worker, WorkerProgress,
};
use mgws_tasks::TaskStruct;

use super::arena::Arena;
use super::platform::{CpuPlatform, LaneGroup};
use super::threads::{Completion, RunClock};
use crate::device::{split_workers, Device, Grid, LiveState, ReadBack, Running};
use crate::error::Result;
use crate::job::Job;
use crate::scheduler::Scheduler;

/// A pointer-bundle that may cross into the worker threads.
struct SendEnv(Env<HostWord, TaskStruct>);
// SAFETY: the env's pointers refer to the arena and the job, which outlive the run (the
// pipeline keeps both until `read_back`, after every thread finished); concurrent access to
// them follows the scheduler's protocols.
unsafe impl Sync for SendEnv {}

/// Runs worker `w`'s loop of `method` on this lane.
///
/// # Safety
/// As for [`Worker::new`]: `env` describes live orchestration memory for this configuration,
/// the platform's scratch holds its layout, and every lane of worker `w` makes this same call.
#[inline(always)]
unsafe fn run_worker<P: mgws_core::Platform<Word = HostWord>, R: TaskExecutor<TaskStruct>>(
    method: CpuMethod,
    p: P,
    env: &Env<HostWord, TaskStruct>,
    registry: &R,
    w: u32,
) {
    // SAFETY: the caller's guarantees, which both loops require.
    unsafe {
        match method {
            CpuMethod::Mgws => {
                Worker::<_, _, _, mgws_core::FromConfig>::new(p, env, registry, w).run()
            }
            CpuMethod::Static => {
                LeanStatic::<_, _, mgws_core::FromConfig>::new(p, env, w).run(registry)
            }
        }
    }
}

/// The loop the CPU workers run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CpuMethod {
    /// The mgws worker loop (`mgws_core::Worker`).
    #[default]
    Mgws,
    /// The static-assignment baseline (`mgws_core::LeanStatic`): each worker runs its
    /// contiguous share of the initial tasks and everything they spawn, depth-first, alone.
    Static,
}

/// CPU threads running registry `R`.
pub struct CpuDevice<'a, R> {
    sched: &'a Scheduler,
    registry: &'a R,
    method: CpuMethod,
    elapsed_s: f64,
    /// Static baseline: per worker, nanoseconds from the launch until it finished its share.
    finished_ns: Vec<u64>,
}

impl<'a, R> CpuDevice<'a, R> {
    /// The CPU threads of `sched` (created on its first run), running tasks of `registry` with
    /// the mgws loop.
    pub fn new(sched: &'a Scheduler, registry: &'a R) -> Self {
        Self::with_method(sched, registry, CpuMethod::Mgws)
    }

    /// The same threads running `method`.
    pub fn with_method(sched: &'a Scheduler, registry: &'a R, method: CpuMethod) -> Self {
        CpuDevice {
            sched,
            registry,
            method,
            elapsed_s: 0.0,
            finished_ns: Vec::new(),
        }
    }
}

/// A CPU run's memory: the arena, the env pointing into it and one lane group (barrier,
/// broadcast slot, scratch) per worker.
pub struct CpuPlaced {
    arena: Arena,
    env: SendEnv,
    groups: Vec<LaneGroup>,
}

impl<R: TaskExecutor<TaskStruct> + Sync> Device for CpuDevice<'_, R> {
    type Placed = CpuPlaced;

    fn name(&self) -> &'static str {
        match self.method {
            CpuMethod::Mgws => "cpu",
            CpuMethod::Static => "cpu-static",
        }
    }

    fn size_grid(&mut self, sched: &Scheduler) -> Result<Grid> {
        // Exactly the workers asked for, in the domains asked for; host atomics are coherent
        // system-wide (the scope is ignored by `HostWord`).
        let cfg = &sched.config;
        let split = split_workers(
            cfg.workers,
            sched.cpu_domains as usize,
            cfg.workers_per_queue,
        )?;
        Ok(Grid {
            config: sched.config,
            topology: Topology::split(&split, cfg.workers_per_queue),
            lanes: sched.lanes,
        })
    }

    fn place(&mut self, grid: &Grid, job: &mut Job<'_>) -> Result<CpuPlaced> {
        let areas = job.host_area_pointers();
        let mut arena = Arena::new(&grid.config, &grid.topology)?;
        let env = SendEnv(arena.env(
            grid.config,
            grid.topology,
            job.tasks,
            (areas, job.area_limits()),
        ));
        let layout = ScratchLayout::new(
            grid.config.local_capacity,
            std::mem::size_of::<TaskStruct>(),
            grid.lanes,
            grid.topology.queues(),
        );
        let groups = (0..grid.config.workers)
            .map(|_| LaneGroup::new(grid.lanes, layout.total))
            .collect();
        Ok(CpuPlaced { arena, env, groups })
    }

    fn launch<T>(
        &mut self,
        grid: &Grid,
        placed: &CpuPlaced,
        supervise: impl FnOnce(&dyn Running) -> T,
    ) -> Result<T> {
        let lanes = grid.lanes;
        // Every lane of every worker; the calling thread supervises them.
        let threads = self.sched.threads.get(
            (grid.config.workers * lanes) as usize,
            "mgws-cpu",
            self.sched.pin_threads,
        )?;
        // Until the last worker left its loop (the supervisor wakes only once per watchdog poll).
        let clock = RunClock::start();
        let start = clock.started_at();
        let chaos = self.sched.chaos;
        let (env, registry, method) = (&placed.env, self.registry, self.method);
        let finished: Vec<AtomicU64> = (0..grid.config.workers)
            .map(|_| AtomicU64::new(0))
            .collect();
        let panicked = super::panics::FirstPanic::default();
        let (_, out) = threads.broadcast_while(
            |i| {
                let (w, lane) = (i as u32 / lanes, i as u32 % lanes);
                let group = &placed.groups[w as usize];
                // Release: pairs with the workers' Acquire loads of the abort flag.
                let abort = || {
                    // SAFETY: the shared state lives in the arena for the whole run.
                    unsafe { env.0.shared() }
                        .abort
                        .store(1, Ordering::Release, Scope::System)
                };
                panicked.contain(w, &group.barrier, abort, || {
                    // SAFETY: the env describes the arena sized for this configuration, the lane
                    // group's scratch holds the scratch layout's bytes, and every lane of worker w
                    // makes this same call (the broadcast runs every thread of the set at once).
                    unsafe {
                        if lanes == 1 {
                            let p = CpuPlatform::<true>::new(0, 1, group, start, chaos, w);
                            run_worker(method, p, &env.0, registry, w);
                        } else {
                            let p = CpuPlatform::<false>::new(lane, lanes, group, start, chaos, w);
                            run_worker(method, p, &env.0, registry, w);
                        }
                    }
                });
                if lane == 0 {
                    // Relaxed: read after the broadcast joined every thread.
                    finished[w as usize]
                        .store(start.elapsed().as_nanos() as u64, AtomicOrdering::Relaxed);
                }
                clock.finished();
            },
            |done| supervise(&CpuRunning { env: &env.0, done }),
        );
        self.elapsed_s = clock.elapsed().as_secs_f64();
        self.finished_ns = finished.into_iter().map(AtomicU64::into_inner).collect();
        panicked.into_result()?;
        Ok(out)
    }

    fn read_back(
        &mut self,
        _grid: &Grid,
        placed: &CpuPlaced,
        _job: &mut Job<'_>,
    ) -> Result<ReadBack> {
        // SAFETY: every worker thread has finished; the shared state is ours again.
        let shared = unsafe { placed.env.0.shared() };
        // Acquire: pairs with the workers' release of the error word (the set's join already
        // orders it; the ordering documents the pairing).
        let error = RunError::unpack(shared.error.load(Ordering::Acquire, Scope::System));
        // The static baseline's workers wait from the end of their share until the last one
        // finished (the run's end); an mgws worker's waiting is stealing, counted in its stats.
        let idle_ns = (self.method == CpuMethod::Static).then(|| {
            let end = self.finished_ns.iter().copied().max().unwrap_or(0);
            self.finished_ns.iter().map(|&f| end - f).collect()
        });
        Ok(ReadBack {
            elapsed_s: self.elapsed_s,
            error,
            exited_workers: None,
            stats: Some(placed.arena.stats.clone()),
            progress: placed.arena.progress.clone(),
            tasks_run: None,
            idle_ns,
        })
    }
}

/// A CPU run in progress: the env and the thread set's completion.
struct CpuRunning<'a> {
    env: &'a Env<HostWord, TaskStruct>,
    done: &'a Completion<'a>,
}

impl Running for CpuRunning<'_> {
    fn wait(&self, timeout: Duration) -> Result<bool> {
        Ok(self.done.wait(timeout))
    }

    fn progress(&self) -> Vec<WorkerProgress> {
        (0..self.env.config.workers as usize)
            // SAFETY: one record per worker; workers write them with volatile stores, and a
            // torn or stale read only delays the watchdog by one poll.
            .map(|w| unsafe { self.env.progress.add(w).read_volatile() })
            .collect()
    }

    fn live_state(&self) -> LiveState {
        let env = self.env;
        // SAFETY: the shared state lives in the arena for the whole run.
        let shared = unsafe { env.shared() };
        let workers = env.config.workers as usize;
        LiveState {
            task_tags: (0..workers)
                // SAFETY: one word per worker in the arena; a torn or stale read only
                // misnames the task in a diagnostic.
                .map(|w| unsafe { env.task_tags.add(w).read_volatile() })
                .collect(),
            // Acquire: a diagnostic read; pairs with the workers' releases so the counters are
            // no older than the progress records read before.
            idle_counter: if env.config.termination_mode() == TerminationMode::Hierarchical {
                (0..env.topology.devices as usize)
                    // SAFETY: the arena holds one counter per device for the whole run.
                    .map(|d| unsafe { &*env.device_idle[d] }.load(Ordering::Acquire, Scope::System))
                    .sum()
            } else {
                shared.idle_workers.load(Ordering::Acquire, Scope::System)
            },
            initial_ranges_done: shared
                .initial_ranges_done
                .load(Ordering::Acquire, Scope::System),
            initial_ranges: env.initial_ranges(),
            queue_words: (0..env.config.workers)
                .map(|w| {
                    let q = env
                        .topology
                        .queue_of_worker(w, env.config.workers_per_queue);
                    // SAFETY: q is a valid queue of this env.
                    let header = unsafe { env.header(q) };
                    // Relaxed: the word is only printed; nothing is read through it.
                    header.word.load(Ordering::Relaxed, Scope::System)
                })
                .collect(),
        }
    }

    fn abort(&self) {
        // SAFETY: the shared state lives in the arena for the whole run.
        let shared = unsafe { self.env.shared() };
        // Release: the workers poll the flag with acquire loads; nothing else is published by
        // it, so release only keeps the hang report's reads before it.
        shared.abort.store(1, Ordering::Release, Scope::System);
    }

    fn exit_grace(&self, _watchdog: Duration) -> Option<Duration> {
        // The threads borrow the job and the arena: they are always waited for.
        None
    }
}
