//! The runtime's typed errors. Nothing in the runtime panics on bad input: every failure a user
//! can cause ends up here, with a message that names what to change.

use mgws_core::{ConfigError, RunError};

use crate::report::HangReport;

/// Everything that can go wrong in a run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The scheduler's or a backend's settings are inconsistent or out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A job's tasks or data areas are invalid (a descriptor outside its area, an area given
    /// twice, a PTX built for another registry, ...).
    #[error("invalid input: {0}")]
    Input(String),
    /// A task's tag names no functor of the registry the run was given.
    #[error("a task has tag {tag}, which the task registry{} does not know (worker {worker}); the run stopped", registry.map(|r| format!(" `{r}`")).unwrap_or_default())]
    UnknownTag {
        /// The worker that met the task.
        worker: u32,
        /// The task's tag.
        tag: u32,
        /// The registry's name, where the run knew it.
        registry: Option<&'static str>,
    },
    /// A task returned an error. `tag` is the failing task's tag (0 if above
    /// `mgws_core::error::MAX_PACKED_TAG`; `Registry::name_of` names it), `code` the task's own
    /// code or one of the core's (`TaskError::reason` explains those).
    #[error("a task{} with tag {tag} failed on worker {worker}: {} (code {code:#x}); the run stopped", task.map(|t| format!(" `{t}`")).unwrap_or_default(), task_failure_reason(*code))]
    TaskFailed {
        /// The worker that ran the task.
        worker: u32,
        /// The task's tag.
        tag: u32,
        /// The registry's name for the tag (its variant), where the run knew the registry.
        task: Option<&'static str>,
        /// The error code the task returned.
        code: u32,
    },
    /// A task panicked on a CPU worker; the run was aborted and every thread joined.
    #[error("a task panicked on worker {worker}: {message}; the run stopped")]
    TaskPanicked {
        /// The worker that ran the task.
        worker: u32,
        /// The panic's message.
        message: String,
    },
    /// A worker had nowhere left to put a spawned task.
    #[error("worker {worker}'s local queue, public queue and overflow stack ({capacity} tasks) are all full; raise --spill-capacity or --public-capacity")]
    SpillOverflow {
        /// The worker whose queues were full.
        worker: u32,
        /// Tasks its overflow stack holds.
        capacity: u32,
    },
    /// The run was aborted from outside (the watchdog or the host).
    #[error("the run was aborted")]
    Aborted,
    /// The watchdog saw no progress for its timeout and stopped the run.
    #[error("the run stopped making progress for {}ms; the watchdog aborted it (a correct run of long tasks: workers report progress once per 256 tasks or loop rounds, so raise the timeout with SchedulerBuilder::watchdog or --watchdog-ms, or call ctx.heartbeat() inside the long tasks)\n{report}", report.stalled_for.as_millis())]
    Hang {
        /// Every worker's state when the watchdog fired.
        report: Box<HangReport>,
    },
    /// A run finished but its result did not match an independent check.
    #[error("verification failed: {0}")]
    Verification(String),
    /// Every worker of the device stopped, but not every one reported leaving its loop: the run
    /// is incomplete (a worker ended by a fault the device did not report).
    #[error("the workers finished, but only {exited} of {workers} reported leaving the worker loop; the run is incomplete")]
    WorkersLost {
        /// Workers that reported leaving.
        exited: u64,
        /// Workers of the run.
        workers: u32,
    },
    /// The backend cannot run here (no libcuda, no GPU, no kernel for the registry), with the
    /// reason and what to install.
    #[error("backend unavailable: {0}")]
    BackendUnavailable(String),
    /// The CUDA driver reported an error (a kernel fault, an out-of-memory allocation, ...).
    #[error("CUDA error: {0}")]
    Cuda(String),
    /// A run needs more memory than there is: the setting that sized it, the bytes it needs and
    /// the bytes available, checked before anything is allocated.
    #[error("{what} needs {} ({needed} bytes) of {where_}, more than the {} ({available} bytes) available; lower it", human_bytes(*needed), human_bytes(*available))]
    OutOfMemory {
        /// The flag or setting that sized the allocation, with its value (`--tasks 536870911`).
        what: String,
        /// Where: `host memory` or `GPU 0 memory`.
        where_: String,
        /// Bytes the run needs.
        needed: u64,
        /// Bytes available (as the OS or the driver reports them).
        available: u64,
    },
    /// A PE process of a multi-process run could not start, or died before its workers
    /// finished (its tasks are lost, so the run stopped).
    #[error("multi-process run: {0}")]
    Process(String),
    /// Another node of a run across nodes failed (or ended the run): the node, that error's
    /// kind (as [`Error::kind`] names it) and its message.
    #[error("node {node}: {message}")]
    OnNode {
        /// The node whose part failed.
        node: u32,
        /// The kind of the error there.
        kind: &'static str,
        /// Its message.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// What the operating system said.
        source: std::io::Error,
    },
}

impl Error {
    /// A short stable name of the error's kind (`"config"`, `"hang"`, ...), for machine-readable
    /// output such as the CLI's `{"error": ..., "kind": ...}`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Config(_) => "config",
            Error::Input(_) => "input",
            Error::UnknownTag { .. } => "unknown_tag",
            Error::TaskFailed { .. } => "task_failed",
            Error::TaskPanicked { .. } => "task_panicked",
            Error::SpillOverflow { .. } => "spill_overflow",
            Error::Aborted => "aborted",
            Error::Hang { .. } => "hang",
            Error::Verification(_) => "verification",
            Error::WorkersLost { .. } => "workers_lost",
            Error::BackendUnavailable(_) => "backend_unavailable",
            Error::Cuda(_) => "cuda",
            Error::Process(_) => "process",
            Error::Io { .. } => "io",
            Error::OutOfMemory { .. } => "out_of_memory",
            Error::OnNode { kind, .. } => kind,
        }
    }

    /// The error another node reported, with its kind named as [`Error::kind`] names it there
    /// (a kind this version does not know becomes `process`).
    #[cfg(feature = "processes")]
    pub(crate) fn on_node(node: u32, kind: &str, message: String) -> Error {
        const KINDS: [&str; 15] = [
            "config",
            "input",
            "unknown_tag",
            "task_failed",
            "task_panicked",
            "spill_overflow",
            "aborted",
            "hang",
            "verification",
            "workers_lost",
            "backend_unavailable",
            "cuda",
            "process",
            "io",
            "out_of_memory",
        ];
        Error::OnNode {
            node,
            kind: KINDS.into_iter().find(|&k| k == kind).unwrap_or("process"),
            message,
        }
    }

    /// The same error, with the names registry `R` gives to the failing task's tag.
    pub fn naming<R: mgws_tasks::Registry>(self) -> Self {
        match self {
            Error::TaskFailed {
                worker, tag, code, ..
            } => Error::TaskFailed {
                worker,
                tag,
                task: R::name_of(tag),
                code,
            },
            Error::UnknownTag { worker, tag, .. } => Error::UnknownTag {
                worker,
                tag,
                registry: Some(R::NAME),
            },
            other => other,
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e.to_string())
    }
}

impl From<RunError> for Error {
    fn from(e: RunError) -> Self {
        match e {
            RunError::UnknownTag { worker, tag } => Error::UnknownTag {
                worker,
                tag,
                registry: None,
            },
            RunError::TaskFailed { worker, tag, code } => Error::TaskFailed {
                worker,
                tag,
                task: None,
                code,
            },
            RunError::SpillOverflow { worker, capacity } => {
                Error::SpillOverflow { worker, capacity }
            }
            RunError::Aborted => Error::Aborted,
            RunError::WrongEntry { worker } => Error::BackendUnavailable(format!(
                "worker {worker} runs a kernel entry compiled for other scheduler options than the \
                 run's (termination, overflow, queue sharing, scope); the host picked the wrong \
                 entry"
            )),
        }
    }
}

/// `bytes` as a short human-readable size (`1.5 GiB`).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A readable reason for a task failure code: the core's own codes (out of bounds, wrong access,
/// ...) are explained, a task's own code is reported as such.
pub fn task_failure_reason(code: u32) -> &'static str {
    mgws_core::TaskError::reason(code).unwrap_or("the task returned its own error code")
}

/// The runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(all(test, feature = "processes"))]
mod tests {
    use super::*;

    /// One error of every kind. The match has no wildcard, so a new variant fails to compile
    /// here until it is added, and with it to `Error::on_node`'s list.
    fn one_of_each() -> Vec<Error> {
        let all = vec![
            Error::Config(String::new()),
            Error::Input(String::new()),
            Error::UnknownTag {
                worker: 0,
                tag: 1,
                registry: None,
            },
            Error::TaskFailed {
                worker: 0,
                tag: 1,
                task: None,
                code: 2,
            },
            Error::TaskPanicked {
                worker: 0,
                message: String::new(),
            },
            Error::SpillOverflow {
                worker: 0,
                capacity: 1,
            },
            Error::Aborted,
            Error::Hang {
                report: Box::new(HangReport {
                    stalled_for: std::time::Duration::ZERO,
                    idle_counter: 0,
                    initial_ranges_done: 0,
                    initial_ranges: 0,
                    workers: Vec::new(),
                }),
            },
            Error::Verification(String::new()),
            Error::WorkersLost {
                exited: 1,
                workers: 2,
            },
            Error::BackendUnavailable(String::new()),
            Error::Cuda(String::new()),
            Error::OutOfMemory {
                what: String::new(),
                where_: String::new(),
                needed: 1,
                available: 0,
            },
            Error::Process(String::new()),
            Error::OnNode {
                node: 1,
                kind: "hang",
                message: String::new(),
            },
            Error::Io {
                path: String::new(),
                source: std::io::Error::other("x"),
            },
        ];
        for e in &all {
            match e {
                Error::Config(_)
                | Error::Input(_)
                | Error::UnknownTag { .. }
                | Error::TaskFailed { .. }
                | Error::TaskPanicked { .. }
                | Error::SpillOverflow { .. }
                | Error::Aborted
                | Error::Hang { .. }
                | Error::Verification(_)
                | Error::WorkersLost { .. }
                | Error::BackendUnavailable(_)
                | Error::Cuda(_)
                | Error::OutOfMemory { .. }
                | Error::Process(_)
                | Error::OnNode { .. }
                | Error::Io { .. } => {}
            }
        }
        all
    }

    #[test]
    fn another_nodes_error_keeps_its_kind() {
        for e in one_of_each() {
            let there = Error::on_node(1, e.kind(), e.to_string());
            assert_eq!(there.kind(), e.kind(), "{e}");
        }
        assert_eq!(
            Error::on_node(1, "from a newer mgws", String::new()).kind(),
            "process"
        );
    }
}
