//! Errors that stop a run from inside the worker loop, packed into one word of shared state.

/// Why a run stopped before all work was done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunError {
    /// A task struct carried a tag the registry does not know.
    UnknownTag {
        /// The worker that popped the task.
        worker: u32,
        /// The unknown tag.
        tag: u32,
    },
    /// A task reported a failure.
    TaskFailed {
        /// The worker that ran the task.
        worker: u32,
        /// The failing task's tag (the registry names it), or 0 if it exceeds [`MAX_PACKED_TAG`].
        tag: u32,
        /// The task's own code, or one of the core's codes ([`TaskError::code`]); see
        /// [`TaskError::reason`].
        code: u32,
    },
    /// A worker's local queue, public queue and overflow stack were all full.
    SpillOverflow {
        /// The worker whose overflow stack overflowed.
        worker: u32,
        /// Its capacity in tasks.
        capacity: u32,
    },
    /// The host aborted the run (watchdog or user).
    Aborted,
    /// The kernel entry was compiled for other hot-loop options than the run's configuration
    /// names (`spec::Spec::matches`): the host launched the wrong entry.
    WrongEntry {
        /// The first worker that noticed.
        worker: u32,
    },
}

/// An error a task returns to the worker loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskError {
    /// The registry has no functor for this tag.
    UnknownTag(u32),
    /// The task's own failure code (codes at or above [`CORE_CODES`] are the core's).
    Failed(u32),
    /// A data view reached past its descriptor or the descriptor past its data area.
    OutOfBounds,
    /// The descriptor's access does not allow the operation (a write through a `Read`
    /// descriptor, a view of an unused descriptor, a write to a read-only area).
    WrongAccess,
    /// The data is not aligned for the element type, or its size is not a multiple of it.
    Misaligned,
    /// The descriptor or result table names a data area that the run does not have.
    NoArea,
    /// A result table has no slot for this worker.
    NoSlot,
}

/// The first of the task-failure codes the core reserves for its own [`TaskError`]s.
pub const CORE_CODES: u32 = 0xffff_ff00;

/// The largest tag [`RunError::pack`] keeps; larger tags are packed as 0 ("not recorded").
pub const MAX_PACKED_TAG: u32 = (1 << TAG_BITS) - 1;

const WORKER_BITS: u32 = 18;
const TAG_BITS: u32 = 10;

impl TaskError {
    /// The code a failed task is reported with: the task's own for [`TaskError::Failed`], one of
    /// the reserved `CORE_CODES + n` for the core's own errors (`UnknownTag` has its own
    /// [`RunError`] variant and is reported as its tag).
    pub const fn code(self) -> u32 {
        match self {
            TaskError::UnknownTag(tag) => tag,
            TaskError::Failed(code) => code,
            TaskError::OutOfBounds => CORE_CODES + 1,
            TaskError::WrongAccess => CORE_CODES + 2,
            TaskError::Misaligned => CORE_CODES + 3,
            TaskError::NoArea => CORE_CODES + 4,
            TaskError::NoSlot => CORE_CODES + 5,
        }
    }

    /// A readable reason for one of the core's codes; `None` for a task's own code.
    pub const fn reason(code: u32) -> Option<&'static str> {
        Some(match code.wrapping_sub(CORE_CODES) {
            1 => "a data view is out of bounds of its descriptor or data area",
            2 => "the descriptor's access does not allow this use (write through a read-only descriptor or area, or an unused descriptor)",
            3 => "the data is misaligned for its element type, or its size is not a multiple of it",
            4 => "the descriptor or result table names a data area the run does not have (attach a result table with Job::results)",
            5 => "the result table has no slot for this worker (size it for the run's scheduler: PerWorker::of(handle, &sched))",
            _ => return None,
        })
    }

    /// The run error of a task with tag `tag` that failed with `self` on `worker`.
    pub const fn into_run_error(self, worker: u32, tag: u32) -> RunError {
        match self {
            TaskError::UnknownTag(tag) => RunError::UnknownTag { worker, tag },
            e => RunError::TaskFailed {
                worker,
                tag,
                code: e.code(),
            },
        }
    }
}

impl RunError {
    /// Packs the error into one nonzero word: `kind << 60 | worker << 42 | tag << 32 | detail`
    /// (worker: 18 bits, reduced modulo 2^18; tag: 10 bits, for `TaskFailed` only, 0 when larger
    /// than [`MAX_PACKED_TAG`]; detail: the code, unknown tag or capacity).
    pub const fn pack(self) -> u64 {
        let (kind, worker, tag, detail) = match self {
            RunError::UnknownTag { worker, tag } => (1u64, worker, 0, tag),
            RunError::TaskFailed { worker, tag, code } => (2, worker, tag, code),
            RunError::SpillOverflow { worker, capacity } => (3, worker, 0, capacity),
            RunError::Aborted => (4, 0, 0, 0),
            RunError::WrongEntry { worker } => (5, worker, 0, 0),
        };
        let tag = if tag > MAX_PACKED_TAG { 0 } else { tag };
        kind << 60
            | ((worker as u64) & ((1 << WORKER_BITS) - 1)) << 42
            | (tag as u64) << 32
            | detail as u64
    }

    /// Unpacks a word written by [`RunError::pack`]; `None` for 0 (no error).
    pub const fn unpack(word: u64) -> Option<RunError> {
        let worker = ((word >> 42) & ((1 << WORKER_BITS) - 1)) as u32;
        let tag = ((word >> 32) & ((1 << TAG_BITS) - 1)) as u32;
        let detail = word as u32;
        match word >> 60 {
            0 => None,
            1 => Some(RunError::UnknownTag {
                worker,
                tag: detail,
            }),
            2 => Some(RunError::TaskFailed {
                worker,
                tag,
                code: detail,
            }),
            3 => Some(RunError::SpillOverflow {
                worker,
                capacity: detail,
            }),
            5 => Some(RunError::WrongEntry { worker }),
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
                worker: (1 << 18) - 1,
                tag: MAX_PACKED_TAG,
                code: u32::MAX,
            },
            RunError::TaskFailed {
                worker: 3,
                tag: 2,
                code: TaskError::OutOfBounds.code(),
            },
            RunError::SpillOverflow {
                worker: 3,
                capacity: 4096,
            },
            RunError::Aborted,
            RunError::WrongEntry { worker: 12 },
        ] {
            assert_ne!(e.pack(), 0);
            assert_eq!(RunError::unpack(e.pack()), Some(e));
        }
        assert_eq!(RunError::unpack(0), None);
    }

    #[test]
    fn core_codes_have_reasons_and_task_codes_do_not() {
        for e in [
            TaskError::OutOfBounds,
            TaskError::WrongAccess,
            TaskError::Misaligned,
            TaskError::NoArea,
            TaskError::NoSlot,
        ] {
            assert!(TaskError::reason(e.code()).is_some(), "{e:?}");
        }
        assert_eq!(TaskError::reason(0x5257_0001), None);
        assert_eq!(
            TaskError::Failed(9).into_run_error(1, 70_000),
            RunError::TaskFailed {
                worker: 1,
                tag: 70_000,
                code: 9
            }
        );
        let packed = TaskError::Failed(9).into_run_error(1, 70_000).pack();
        assert!(matches!(
            RunError::unpack(packed),
            Some(RunError::TaskFailed {
                tag: 0,
                code: 9,
                ..
            })
        ));
    }
}
