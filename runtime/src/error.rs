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
    #[error("a task failed with code {code:#x} on worker {worker}; the run stopped")]
    TaskFailed { worker: u32, code: u32 },
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
            RunError::TaskFailed { worker, code } => Error::TaskFailed { worker, code },
            RunError::SpillOverflow { worker, capacity } => {
                Error::SpillOverflow { worker, capacity }
            }
            RunError::Aborted => Error::Aborted,
        }
    }
}

/// The runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
