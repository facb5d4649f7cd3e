//! STALL: a diagnostic task that occupies its worker for a given time without making progress,
//! to check that a run which stops progressing is detected and reported by the watchdog, on every
//! backend (`mgws run stall`).

use mgws_core::TaskError;

use crate::task::{TaskFunctor, TaskStruct};
use crate::Ctx;

/// Error code of a STALL task on a platform without a clock.
pub const STALL_NO_CLOCK: u32 = 0x5354_0001;

/// Busy-waits `nanos` nanoseconds on every lane.
#[mgws_tasks::task]
#[derive(Debug, PartialEq, Eq)]
pub struct StallTask {
    pub nanos: u64,
}

impl TaskFunctor for StallTask {
    #[inline(always)]
    fn run(&self, _: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        let start = ctx.now_ns();
        if start == 0 && ctx.now_ns() == 0 {
            return Err(TaskError::Failed(STALL_NO_CLOCK));
        }
        while ctx.now_ns().wrapping_sub(start) < self.nanos {
            core::hint::spin_loop();
        }
        Ok(())
    }
}
