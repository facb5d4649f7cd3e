//! What `mgws` writes to stdout, and its exit codes.
//!
//! Every byte of stdout goes through [`emit`], which never panics: a reader that closed the pipe
//! early (`mgws ... | head -c 1`) ends the output quietly, as other command-line tools do, and any
//! other write failure (a full disk, `> /dev/full`) is an [`Error::Io`] on `stdout`, exit 1.
//! Under `--json` stdout holds exactly one JSON object: the result, or [`json_error`]'s
//! `{"error": ..., "kind": ...}`.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use mgws::error::Error;
use mgws::scheduler::Scheduler;

use crate::workload::Outcome;

/// The run finished and, where it verifies its result, verified it.
pub const EXIT_OK: i32 = 0;
/// The run could not start or stopped with an error (bad input, a hang, a task failure, an
/// unwritable output, ...).
pub const EXIT_ERROR: i32 = 1;
/// The run finished but its result did not verify.
pub const EXIT_NOT_VERIFIED: i32 = 2;
/// The command line itself is wrong: an unknown flag or subcommand, or a value that does not
/// parse (`EX_USAGE` of sysexits.h).
pub const EXIT_USAGE: i32 = 64;

/// Whether the command line asked for `--json` (set once by `main`).
static JSON_MODE: AtomicBool = AtomicBool::new(false);

/// Set once a write found the pipe closed: later output is dropped.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stdout and flushes it. A closed pipe drops this and all later output and is
/// not an error; any other failure is.
pub fn emit(text: &str) -> Result<(), Error> {
    // Relaxed: only this process's main thread writes stdout; the flag orders nothing else.
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(Error::Io {
            path: "stdout".into(),
            source: e,
        }),
    }
}

/// Writes one line (`text` and a newline) to stdout, as [`emit`].
pub fn line(text: impl std::fmt::Display) -> Result<(), Error> {
    emit(&format!("{text}\n"))
}

/// Writes `value` as one line of JSON, as [`emit`].
pub fn json(value: &serde_json::Value) -> Result<(), Error> {
    line(value)
}

/// The JSON object an error becomes under `--json`.
pub fn json_error(message: &str, kind: &str) -> serde_json::Value {
    serde_json::json!({ "error": message, "kind": kind })
}

/// Records whether stdout is JSON (`--json`), for reports made outside the normal flow.
pub fn set_json(json: bool) {
    // Relaxed: set before any run starts; threads started later see it.
    JSON_MODE.store(json, Ordering::Relaxed);
}

/// Reports `e` as the command's error: on stderr, and under `--json` as the one JSON object on
/// stdout.
pub fn report_error(e: &Error) {
    eprintln!("mgws: error: {e}");
    if JSON_MODE.load(Ordering::Relaxed) {
        // A failure to write here leaves nothing else to report it with.
        let _ = json(&json_error(&e.to_string(), e.kind()));
    }
}

/// The scheduler's hook for workers that cannot be stopped (a CPU task that never returns):
/// reports the run's error and ends the process with [`EXIT_ERROR`], since waiting would never
/// end. See `mgws::SchedulerBuilder::on_stuck_workers`.
pub fn exit_on_stuck_workers(e: &Error) {
    report_error(e);
    eprintln!(
        "mgws: the stalled workers cannot be stopped (CPU threads are never killed); exiting"
    );
    std::process::exit(EXIT_ERROR);
}

/// A progress hook for `mgws run` (see `mgws::SchedulerBuilder::on_progress`): on a terminal,
/// and not under `--json`, a line with the tasks done and tasks/s, shown once a run has taken a
/// second and cleared when it ends. `None` where nothing may be drawn.
pub fn progress_bar(json: bool) -> Option<impl Fn(mgws::scheduler::RunProgress) + Send + Sync> {
    use std::io::IsTerminal;
    if json || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = std::sync::Mutex::new(None::<indicatif::ProgressBar>);
    Some(move |p: mgws::scheduler::RunProgress| {
        // A poisoned lock only means an earlier call panicked while drawing: draw on.
        let mut bar = bar.lock().unwrap_or_else(|e| e.into_inner());
        if p.finished {
            if let Some(b) = bar.take() {
                b.finish_and_clear();
            }
            return;
        }
        if p.elapsed < std::time::Duration::from_secs(1) {
            return;
        }
        let b = bar.get_or_insert_with(|| {
            let style = indicatif::ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner());
            indicatif::ProgressBar::new_spinner()
                .with_style(style)
                .with_finish(indicatif::ProgressFinish::AndClear)
        });
        let rate = p.tasks_run as f64 / p.elapsed.as_secs_f64().max(1e-9);
        b.set_message(format!(
            "{:.1} s: {} tasks, {rate:.3e} tasks/s",
            p.elapsed.as_secs_f64(),
            p.tasks_run
        ));
        b.tick();
    })
}

/// Whether stdout reached a reader that closed it (the rest of the output was dropped).
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// An outcome as one JSON object.
pub fn outcome_json(outcome: &Outcome, sched: &Scheduler) -> serde_json::Value {
    let r = &outcome.report;
    serde_json::json!({
        "workload": outcome.workload,
        "backend": r.backend,
        "workers": r.workers,
        "lanes": r.lanes,
        "tasks": r.tasks_run,
        "setup_s": r.setup_s,
        "setup": {
            "open_s": r.setup.open_s,
            "module_s": r.setup.module_s,
            "memory_s": r.setup.memory_s,
            "launch_s": r.setup.launch_s,
        },
        "elapsed_s": r.elapsed_s,
        "finish_s": r.finish_s,
        "wall_s": r.wall_s,
        "tasks_per_s": r.tasks_per_s(),
        "cpu_workers_left_out": r.cpu_workers_left_out,
        "verified": outcome.verified,
        "check": outcome.check,
        "result": outcome.result,
        "config": {
            "public_capacity": sched.config().public_capacity,
            "local_capacity": sched.config().local_capacity,
            "initial_chunk": sched.config().initial_chunk,
            "queue_sharing": sched.config().workers_per_queue,
            "termination": format!("{:?}", sched.config().termination_mode()),
            "overflow": format!("{:?}", sched.config().overflow_mode()),
            "same_device_bias": f64::from(sched.config().same_device_bias_permille) / 1000.0,
            "local_first": sched.config().local_first_tries,
        },
        "stats": {
            "steal_attempts": r.total(|w| w.steal_attempts),
            "steals": r.total(|w| w.steals),
            "tasks_stolen": r.total(|w| w.tasks_stolen),
            "acquires": r.total(|w| w.acquires),
            "releases": r.total(|w| w.releases),
            "spills": r.total(|w| w.spills),
        },
        "per_worker": r.per_worker,
    })
}

/// An outcome as text, one line per fact.
pub fn outcome_text(outcome: &Outcome) -> String {
    use std::fmt::Write as _;
    let r = &outcome.report;
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(
        s,
        "{} on {} backend: {} workers x {} lanes, {} tasks in {:.4} s = {:.3e} tasks/s \
         (set-up before it {:.4} s, finish after it {:.4} s, {:.4} s in all)",
        outcome.workload,
        r.backend,
        r.workers,
        r.lanes,
        r.tasks_run,
        r.elapsed_s,
        r.tasks_per_s(),
        r.setup_s,
        r.finish_s,
        r.wall_s
    );
    let t = &r.setup;
    let _ = writeln!(
        s,
        "set-up: open {:.4} s, kernel module {:.4} s, memory {:.4} s, launch {:.4} s",
        t.open_s, t.module_s, t.memory_s, t.launch_s
    );
    let _ = writeln!(s, "result: {}", outcome.result);
    if let Some(why) = &r.cpu_workers_left_out {
        let _ = writeln!(s, "{why}");
    }
    if let Some(idle) = r.idle_share().filter(|_| r.workers > 1) {
        let _ = writeln!(
            s,
            "balance: the workers waited for each other {} for {:.1}% of the run on average",
            if r.backend.ends_with("static") {
                "after their share"
            } else {
                "at the level barriers"
            },
            100.0 * idle
        );
    }
    let _ = writeln!(
        s,
        "steals: {} of {} attempts ({} tasks), acquires {}, releases {}",
        r.total(|w| w.steals),
        r.total(|w| w.steal_attempts),
        r.total(|w| w.tasks_stolen),
        r.total(|w| w.acquires),
        r.total(|w| w.releases)
    );
    let batches = r.total(|w| w.narrow_batches);
    if batches > 0 {
        let _ = writeln!(
            s,
            "narrow tasks: {batches} batches side by side, {:.1} tasks each on average",
            r.tasks_run as f64 / batches as f64
        );
    }
    let _ = writeln!(
        s,
        "verified: {} ({})",
        if outcome.verified { "yes" } else { "NO" },
        outcome.check
    );
    s
}

/// The exit code of an outcome.
pub fn outcome_code(outcome: &Outcome) -> i32 {
    if outcome.verified {
        EXIT_OK
    } else {
        EXIT_NOT_VERIFIED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_distinct() {
        let codes = [EXIT_OK, EXIT_ERROR, EXIT_NOT_VERIFIED, EXIT_USAGE];
        for (i, a) in codes.iter().enumerate() {
            for b in &codes[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn json_errors_carry_message_and_kind() {
        let v = json_error("bad --tasks", "usage");
        assert_eq!(v["error"], "bad --tasks");
        assert_eq!(v["kind"], "usage");
    }
}
