//! The operation a worker is in, published for the watchdog's per-worker report.

/// What a worker was doing when it last reported progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Operation {
    Start = 0,
    RunTask = 1,
    Release = 2,
    Acquire = 3,
    LoadInitial = 4,
    Steal = 5,
    Idle = 6,
    Spill = 7,
    Exited = 8,
}

impl Operation {
    pub fn from_u64(v: u64) -> Option<Operation> {
        use Operation::*;
        [
            Start,
            RunTask,
            Release,
            Acquire,
            LoadInitial,
            Steal,
            Idle,
            Spill,
            Exited,
        ]
        .get(v as usize)
        .copied()
    }
    pub fn name(self) -> &'static str {
        match self {
            Operation::Start => "start",
            Operation::RunTask => "run-task",
            Operation::Release => "release",
            Operation::Acquire => "acquire",
            Operation::LoadInitial => "load-initial",
            Operation::Steal => "steal",
            Operation::Idle => "idle",
            Operation::Spill => "spill",
            Operation::Exited => "exited",
        }
    }
}
