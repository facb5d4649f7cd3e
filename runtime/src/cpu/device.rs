//! The CPU as a [`Device`]: every worker is `lanes` threads of the scheduler's thread set, the
//! orchestration memory is an [`Arena`] on the heap, and the calling thread supervises.

use std::time::Duration;

use mgws_core::{
    AtomicWord, Env, HostWord, Ordering, RunError, Scope, ScratchLayout, TaskExecutor, Topology,
    Worker, WorkerProgress,
};
use mgws_tasks::TaskStruct;

use super::arena::Arena;
use super::platform::{CpuPlatform, LaneGroup};
use super::threads::{Completion, RunClock};
use crate::device::{Device, Grid, LiveState, ReadBack, Running};
use crate::error::Result;
use crate::job::Job;
use crate::scheduler::Scheduler;

/// A pointer-bundle that may cross into the worker threads.
struct SendEnv(Env<HostWord, TaskStruct>);
// SAFETY: the env's pointers refer to the arena and the job, which outlive the run (the
// pipeline keeps both until `read_back`, after every thread finished); concurrent access to
// them follows the scheduler's protocols.
unsafe impl Sync for SendEnv {}

/// CPU threads running registry `R`.
pub struct CpuDevice<'a, R> {
    sched: &'a Scheduler,
    registry: &'a R,
    elapsed_s: f64,
}

impl<'a, R> CpuDevice<'a, R> {
    /// The CPU threads of `sched` (created on its first run), running tasks of `registry`.
    pub fn new(sched: &'a Scheduler, registry: &'a R) -> Self {
        CpuDevice {
            sched,
            registry,
            elapsed_s: 0.0,
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
        "cpu"
    }

    fn size_grid(&mut self, sched: &Scheduler) -> Result<Grid> {
        // Exactly the workers asked for; host atomics are coherent system-wide (the scope is
        // ignored by `HostWord`).
        Ok(Grid {
            config: sched.config,
            topology: Topology::single(sched.config.workers, sched.config.workers_per_queue),
            lanes: sched.lanes,
        })
    }

    fn place(&mut self, grid: &Grid, job: &mut Job<'_>) -> Result<CpuPlaced> {
        let areas = job.host_area_pointers();
        let mut arena = Arena::new(&grid.config, &grid.topology);
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
        let (env, registry) = (&placed.env, self.registry);
        let (_, out) = threads.broadcast_while(
            |i| {
                let (w, lane) = (i as u32 / lanes, i as u32 % lanes);
                let group = &placed.groups[w as usize];
                // SAFETY: the env describes the arena sized for this configuration, the lane
                // group's scratch holds the scratch layout's bytes, and every lane of worker w
                // makes this same call (the broadcast runs every thread of the set at once).
                unsafe {
                    if lanes == 1 {
                        let p = CpuPlatform::<true>::new(0, 1, group, start, chaos, w);
                        Worker::new(p, &env.0, registry, w).run();
                    } else {
                        let p = CpuPlatform::<false>::new(lane, lanes, group, start, chaos, w);
                        Worker::new(p, &env.0, registry, w).run();
                    }
                }
                clock.finished();
            },
            |done| supervise(&CpuRunning { env: &env.0, done }),
        );
        self.elapsed_s = clock.elapsed().as_secs_f64();
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
        Ok(ReadBack {
            elapsed_s: self.elapsed_s,
            error,
            exited_workers: None,
            stats: Some(placed.arena.stats.clone()),
            progress: placed.arena.progress.clone(),
            tasks_run: None,
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
        LiveState {
            // Acquire: a diagnostic read; pairs with the workers' releases so the counters are
            // no older than the progress records read before.
            idle_counter: shared.idle_workers.load(Ordering::Acquire, Scope::System),
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
