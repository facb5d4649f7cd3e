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
