//! The runtime's typed errors. Nothing in the runtime panics on bad input: every failure a user
//! can cause ends up here, with a message that names what to change.

use mgws_core::{ConfigError, RunError};

use crate::report::HangReport;

/// Everything that can go wrong in a run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("invalid input: {0}")]
    Input(String),
    #[error("a task has tag {tag}, which the task registry does not know (worker {worker}); the run stopped")]
    UnknownTag { worker: u32, tag: u32 },
    /// A task returned an error. `tag` is the failing task's tag (0 if above
    /// `mgws_core::error::MAX_PACKED_TAG`; `Registry::name_of` names it), `code` the task's own
    /// code or one of the core's (`TaskError::reason` explains those).
    #[error("a task with tag {tag} failed on worker {worker}: {} (code {code:#x}); the run stopped", task_failure_reason(*code))]
    TaskFailed { worker: u32, tag: u32, code: u32 },
    #[error("worker {worker}'s local queue, public queue and overflow stack ({capacity} tasks) are all full; raise --spill-capacity or --public-capacity")]
    SpillOverflow { worker: u32, capacity: u32 },
    #[error("the run was aborted")]
    Aborted,
    #[error("the run stopped making progress for {}ms; the watchdog aborted it\n{report}", report.stalled_for.as_millis())]
    Hang { report: Box<HangReport> },
    #[error("verification failed: {0}")]
    Verification(String),
    #[error("backend unavailable: {0}")]
    BackendUnavailable(String),
    #[error("CUDA error: {0}")]
    Cuda(String),
    #[error("I/O error on {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e.to_string())
    }
}

impl From<RunError> for Error {
    fn from(e: RunError) -> Self {
        match e {
            RunError::UnknownTag { worker, tag } => Error::UnknownTag { worker, tag },
            RunError::TaskFailed { worker, tag, code } => Error::TaskFailed { worker, tag, code },
            RunError::SpillOverflow { worker, capacity } => {
                Error::SpillOverflow { worker, capacity }
            }
            RunError::Aborted => Error::Aborted,
        }
    }
}

/// A readable reason for a task failure code: the core's own codes (out of bounds, wrong access,
/// ...) are explained, a task's own code is reported as such.
pub fn task_failure_reason(code: u32) -> &'static str {
    mgws_core::TaskError::reason(code).unwrap_or("the task returned its own error code")
}

/// The runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
