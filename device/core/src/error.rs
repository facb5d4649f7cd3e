//! Errors that stop a run from inside the worker loop, packed into one word of shared state.

/// Why a run stopped before all work was done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunError {
    /// A task struct carried a tag the registry does not know.
    UnknownTag { worker: u32, tag: u32 },
    /// A task reported a failure (`code` is the task's own).
    TaskFailed { worker: u32, code: u32 },
    /// A worker's local queue, public queue and overflow stack were all full.
    SpillOverflow { worker: u32, capacity: u32 },
    /// The host aborted the run (watchdog or user).
    Aborted,
}

/// An error a task returns to the worker loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskError {
    UnknownTag(u32),
    Failed(u32),
}

impl RunError {
    /// Packs the error as `kind << 56 | worker << 32 | detail`; never 0.
    pub const fn pack(self) -> u64 {
        let (kind, worker, detail) = match self {
            RunError::UnknownTag { worker, tag } => (1u64, worker, tag),
            RunError::TaskFailed { worker, code } => (2, worker, code),
            RunError::SpillOverflow { worker, capacity } => (3, worker, capacity),
            RunError::Aborted => (4, 0, 0),
        };
        kind << 56 | ((worker as u64) & 0xff_ffff) << 32 | detail as u64
    }

    /// Unpacks a word written by [`RunError::pack`]; `None` for 0 (no error).
    pub const fn unpack(word: u64) -> Option<RunError> {
        let worker = ((word >> 32) & 0xff_ffff) as u32;
        let detail = word as u32;
        match word >> 56 {
            0 => None,
            1 => Some(RunError::UnknownTag {
                worker,
                tag: detail,
            }),
            2 => Some(RunError::TaskFailed {
                worker,
                code: detail,
            }),
            3 => Some(RunError::SpillOverflow {
                worker,
                capacity: detail,
            }),
            _ => Some(RunError::Aborted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_round_trip_through_their_word() {
        for e in [
            RunError::UnknownTag {
                worker: 7,
                tag: 0xdead,
            },
            RunError::TaskFailed {
                worker: 0xff_ffff,
                code: u32::MAX,
            },
            RunError::SpillOverflow {
                worker: 3,
                capacity: 4096,
            },
            RunError::Aborted,
        ] {
            assert_ne!(e.pack(), 0);
            assert_eq!(RunError::unpack(e.pack()), Some(e));
        }
        assert_eq!(RunError::unpack(0), None);
    }
}
