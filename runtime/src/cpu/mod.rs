//! The CPU backend: each worker is `lanes` threads running the scheduler core's worker loop, the
//! same code the GPU kernels run.

mod arena;
mod barrier;
mod platform;
mod spin_barrier;
pub mod static_levels;
pub mod threads;

use mgws_core::{
    AtomicWord, Env, HostWord, Ordering, RunError, Scope, ScratchLayout, TaskExecutor, Topology,
    Worker,
};
use mgws_tasks::TaskStruct;

pub use platform::CpuPlatform;

use crate::error::{Error, Result};
use crate::job::Job;
use crate::report::{HangReport, RunReport, WorkerHangState, WorkerReport};
use crate::scheduler::Scheduler;
use crate::watchdog::Watchdog;
use arena::Arena;
use platform::LaneGroup;
use threads::{Completion, RunClock};

/// A pointer-bundle that may cross into the worker threads.
struct SendEnv(Env<HostWord, TaskStruct>);
// SAFETY: the env's pointers refer to the arena and the job, which outlive the scoped threads;
// concurrent access to them follows the scheduler's protocols.
unsafe impl Sync for SendEnv {}

/// Runs `job` on CPU threads with the task registry `registry`.
pub fn run<R: TaskExecutor<TaskStruct>>(
    sched: &Scheduler,
    registry: &R,
    mut job: Job<'_>,
) -> Result<RunReport> {
    job.validate()?;
    let config = sched.config;
    let lanes = sched.lanes;
    let topology = Topology::single(config.workers, config.workers_per_queue);
    let areas = job.host_area_pointers();
    let mut arena = Arena::new(&config, &topology);
    let env = SendEnv(arena.env(config, topology, job.tasks, (areas, job.area_limits())));
    let layout = ScratchLayout::new(
        config.local_capacity,
        std::mem::size_of::<TaskStruct>(),
        lanes,
        topology.queues(),
    );
    let groups: Vec<LaneGroup> = (0..config.workers)
        .map(|_| LaneGroup::new(lanes, layout.total))
        .collect();
    let span = tracing::info_span!(
        "mgws.run",
        backend = "cpu",
        workers = config.workers,
        lanes,
        tasks = job.tasks.len()
    );
    let _enter = span.enter();
    // Every lane of every worker; the calling thread supervises them.
    let threads = sched.threads.get(
        (config.workers * lanes) as usize,
        "mgws-cpu",
        sched.pin_threads,
    )?;
    // Until the last worker left its loop (the supervisor wakes only once per watchdog poll).
    let clock = RunClock::start();
    let start = clock.started_at();
    let chaos = sched.chaos;
    let (_, hang) = threads.broadcast_while(
        |i| {
            let (w, lane) = (i as u32 / lanes, i as u32 % lanes);
            let group = &groups[w as usize];
            // SAFETY: the env describes the arena sized for this configuration, the lane
            // group's scratch holds `layout.total` bytes, and every lane of worker w makes this
            // same call (the broadcast runs every thread of the set at once).
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
        |done| supervise(sched, &env.0, done),
    );
    let elapsed = clock.elapsed();
    // SAFETY: all worker threads have joined; the shared state is ours again.
    let shared = unsafe { env.0.shared() };
    if let Some(report) = hang {
        return Err(Error::Hang {
            report: Box::new(report),
        });
    }
    if let Some(e) = RunError::unpack(shared.error.load(Ordering::Acquire, Scope::System)) {
        return Err(e.into());
    }
    let per_worker: Vec<WorkerReport> = arena
        .stats
        .iter()
        .enumerate()
        .map(|(w, s)| WorkerReport::from_stats(w as u32, s))
        .collect();
    let tasks_run = per_worker.iter().map(|w| w.tasks_run).sum();
    tracing::info!(elapsed_s = elapsed.as_secs_f64(), tasks_run, "run finished");
    Ok(RunReport {
        backend: "cpu".into(),
        workers: config.workers,
        lanes,
        elapsed_s: elapsed.as_secs_f64(),
        tasks_run,
        per_worker,
    })
}

/// Waits for the workers, and aborts the run if the watchdog sees no progress. Returns the hang
/// report of an aborted run.
///
/// It sleeps on the threads' completion and looks at the workers' progress once per
/// [`watchdog_poll`]: a run shorter than that is never interrupted by its supervisor (on a machine
/// with as many CPUs as workers, every wake-up of this thread takes one from a worker).
fn supervise(
    sched: &Scheduler,
    env: &Env<HostWord, TaskStruct>,
    done: &Completion<'_>,
) -> Option<HangReport> {
    // SAFETY: the shared state lives in the arena for the whole run.
    let shared = unsafe { env.shared() };
    let workers = env.config.workers as usize;
    let mut watchdog = Watchdog::new(sched.watchdog, workers);
    let mut hang = None;
    let poll = watchdog_poll(sched.watchdog);
    while !done.wait(poll) {
        if hang.is_some() {
            continue;
        }
        let snapshot = progress_snapshot(env);
        if let Some(stalled_for) = watchdog.observe(&snapshot) {
            shared.abort.store(1, Ordering::Release, Scope::System);
            hang = Some(HangReport {
                stalled_for,
                idle_counter: shared.idle_workers.load(Ordering::Acquire, Scope::System),
                initial_ranges_done: shared
                    .initial_ranges_done
                    .load(Ordering::Acquire, Scope::System),
                initial_ranges: env.initial_ranges(),
                workers: snapshot
                    .iter()
                    .enumerate()
                    .map(|(w, p)| {
                        let q = env
                            .topology
                            .queue_of_worker(w as u32, env.config.workers_per_queue);
                        // SAFETY: q is a valid queue of this env.
                        let word = unsafe { env.header(q) }
                            .word
                            .load(Ordering::Relaxed, Scope::System);
                        WorkerHangState::new(w as u32, p, word)
                    })
                    .collect(),
            });
            tracing::error!("watchdog: no progress for {stalled_for:?}; aborting the run");
        }
    }
    hang
}

/// How often the supervisor looks at progress: an eighth of the watchdog timeout, so a hang is
/// reported at most 12.5% late, between 1 ms and 50 ms.
fn watchdog_poll(timeout: std::time::Duration) -> std::time::Duration {
    (timeout / 8).clamp(
        std::time::Duration::from_millis(1),
        std::time::Duration::from_millis(50),
    )
}

fn progress_snapshot(env: &Env<HostWord, TaskStruct>) -> Vec<mgws_core::WorkerProgress> {
    (0..env.config.workers as usize)
        // SAFETY: one record per worker; workers write them with volatile stores, and a torn or
        // stale read only delays the watchdog by one poll.
        .map(|w| unsafe { env.progress.add(w).read_volatile() })
        .collect()
}
