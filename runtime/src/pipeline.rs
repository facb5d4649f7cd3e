//! One run, for every device: validate the job, let the device size the grid and place the
//! memory, launch, supervise (watchdog, hang report, faults), read back and report. The steps
//! that differ per device are the [`Device`] trait's; everything here is written once.

use std::time::{Duration, Instant};

use crate::device::{Device, Grid, Running, Supervised};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::report::{HangReport, RunReport, SetupTimes, WorkerHangState, WorkerReport};
use crate::scheduler::{RunProgress, Scheduler, STUCK_GRACE};
use crate::watchdog::Watchdog;

/// Runs `job` on `device` with the scheduler's settings; `opened` is when the caller began
/// opening the device (the report's `setup_s` counts from it to the launch).
pub fn run<D: Device>(
    device: &mut D,
    sched: &Scheduler,
    mut job: Job<'_>,
    opened: Instant,
) -> Result<RunReport> {
    job.validate()?;
    let placing = Instant::now();
    let grid = tracing::debug_span!("mgws.size_grid").in_scope(|| device.size_grid(sched))?;
    grid.config.validate()?;
    let placed = tracing::debug_span!("mgws.place").in_scope(|| device.place(&grid, &mut job))?;
    let span = tracing::info_span!(
        "mgws.run",
        backend = device.name(),
        workers = grid.config.workers,
        lanes = grid.lanes,
        tasks = job.initial.len()
    );
    let _enter = span.enter();
    let placed_at = Instant::now();
    match device.launch(&grid, &placed, |live| supervise(live, sched, &grid))? {
        Supervised::Done => {}
        Supervised::Failed(e) => return Err(e),
        Supervised::Leak(e) => {
            // A worker still runs: freeing its memory would fault it (or block). Leave the
            // memory to process exit.
            std::mem::forget(placed);
            return Err(e);
        }
    }
    let finishing = Instant::now();
    let back = tracing::debug_span!("mgws.read_back")
        .in_scope(|| device.read_back(&grid, &placed, &mut job))?;
    tracing::debug_span!("mgws.free").in_scope(|| drop(placed));
    let finish_s = finishing.elapsed().as_secs_f64();
    if let Some(e) = back.error {
        return Err(e.into());
    }
    let workers = grid.config.workers;
    if let Some(exited) = back.exited_workers.filter(|&n| n != u64::from(workers)) {
        return Err(Error::WorkersLost { exited, workers });
    }
    let per_worker: Vec<WorkerReport> = back
        .stats
        .iter()
        .flatten()
        .enumerate()
        .map(|(w, s)| WorkerReport {
            idle_ns: back.idle_ns.as_ref().and_then(|i| i.get(w).copied()),
            ..WorkerReport::from_stats(w as u32, s)
        })
        .collect();
    let tasks_run = back.tasks_run.unwrap_or_else(|| {
        if per_worker.is_empty() {
            back.progress.iter().map(|p| p.tasks_run).sum()
        } else {
            per_worker.iter().map(|w| w.tasks_run).sum()
        }
    });
    let module_s = device.module_load_s();
    let setup = SetupTimes {
        open_s: (placing.duration_since(opened).as_secs_f64() - module_s).max(0.0),
        module_s,
        memory_s: placed_at.duration_since(placing).as_secs_f64(),
        launch_s: back.launch_s,
    };
    tracing::info!(elapsed_s = back.elapsed_s, tasks_run, "run finished");
    Ok(RunReport {
        backend: device.name().into(),
        workers,
        lanes: grid.lanes,
        setup_s: setup.total(),
        setup,
        elapsed_s: back.elapsed_s,
        finish_s,
        wall_s: opened.elapsed().as_secs_f64(),
        tasks_run,
        per_worker,
        cpu_workers_left_out: None,
    })
}

/// Waits for the workers, aborting the run when the watchdog sees no progress or the device
/// fails.
///
/// It sleeps in [`Running::wait`] and looks at the workers' progress once per [`watchdog_poll`]:
/// a run shorter than that is never interrupted by its supervisor (on a machine with as many
/// CPUs as workers, every wake-up of this thread takes one from a worker). A device that reports
/// no progress records is not watched: only its faults end it early.
pub(crate) fn supervise(live: &dyn Running, sched: &Scheduler, grid: &Grid) -> Supervised {
    let workers = grid.config.workers as usize;
    let mut watchdog = Watchdog::new(sched.watchdog, workers);
    let poll = watchdog_poll(sched.watchdog);
    let start = Instant::now();
    let report = |snapshot: &[mgws_core::WorkerProgress], finished: bool| {
        if let Some(hook) = &sched.on_progress {
            (hook.0)(RunProgress {
                tasks_run: snapshot.iter().map(|p| p.tasks_run).sum(),
                elapsed: start.elapsed(),
                finished,
            });
        }
    };
    let done = |live: &dyn Running| {
        report(&live.progress(), true);
        Supervised::Done
    };
    loop {
        match live.wait(poll) {
            Ok(true) => return done(live),
            Ok(false) => {}
            Err(e) => {
                live.abort();
                return wait_after_abort(live, sched, e);
            }
        }
        let snapshot = live.progress();
        if snapshot.is_empty() {
            continue;
        }
        report(&snapshot, false);
        if let Some(stalled_for) = watchdog.observe(&snapshot) {
            let state = live.live_state();
            let report = HangReport {
                stalled_for,
                idle_counter: state.idle_counter,
                initial_ranges_done: state.initial_ranges_done,
                initial_ranges: state.initial_ranges,
                workers: snapshot
                    .iter()
                    .enumerate()
                    .map(|(w, p)| {
                        let word = state.queue_words.get(w).copied().unwrap_or(u64::MAX);
                        let tag = state.task_tags.get(w).copied().unwrap_or(0);
                        WorkerHangState::new(w as u32, p, word, tag, watchdog.since_progress(w))
                    })
                    .collect(),
            };
            tracing::error!("watchdog: no progress for {stalled_for:?}; aborting the run");
            live.abort();
            let e = Error::Hang {
                report: Box::new(report),
            };
            return wait_after_abort(live, sched, e);
        }
    }
}

/// After [`Running::abort`]: waits for the workers, at most the device's grace period.
fn wait_after_abort(live: &dyn Running, sched: &Scheduler, e: Error) -> Supervised {
    let poll = watchdog_poll(sched.watchdog);
    let Some(grace) = live.exit_grace(sched.watchdog) else {
        // The device cannot give its workers up: wait for them (a failed wait ends it too).
        let start = Instant::now();
        let mut hook = sched.on_stuck_workers;
        while !live.wait(poll).unwrap_or(true) {
            if start.elapsed() >= STUCK_GRACE {
                if let Some(hook) = hook.take() {
                    tracing::error!(
                        "the workers did not exit within {STUCK_GRACE:?} of the abort (a task \
                         that never returns?)"
                    );
                    hook(&e);
                }
            }
        }
        return Supervised::Failed(e);
    };
    let start = Instant::now();
    loop {
        // A second device failure while waiting changes nothing: the first error is reported
        // (but it must not turn this loop into a busy one).
        match live.wait(poll.min(grace)) {
            Ok(true) => return Supervised::Failed(e),
            Ok(false) => {}
            Err(_) => std::thread::sleep(poll.min(grace)),
        }
        if start.elapsed() > grace {
            if live.give_up() {
                tracing::error!(
                    "the workers did not exit within {grace:?} of the abort; they were ended"
                );
                return Supervised::Failed(e);
            }
            tracing::error!(
                "the workers did not exit within {grace:?} of the abort (a task that never \
                 returns?); their memory stays allocated, and the process must exit to free the \
                 device"
            );
            return Supervised::Leak(e);
        }
    }
}

/// How often the supervisor looks at progress: an eighth of the watchdog timeout, so a hang is
/// reported at most 12.5% late, between 1 ms and 50 ms.
pub fn watchdog_poll(timeout: Duration) -> Duration {
    (timeout / 8).clamp(Duration::from_millis(1), Duration::from_millis(50))
}
