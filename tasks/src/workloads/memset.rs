//! MEMSET (thesis 6.2): task `x` marks slot `x` of an output array.
//!
//! To tell "written exactly once" apart from "lost" and "written twice" in every run, task `x`
//! atomically adds `x + 1` to slot `x` (lane 0 only). After a run slot `x` must hold exactly
//! `x + 1`; 0 means the task was lost, `2(x + 1)` that it ran twice.

use mgws_core::TaskError;

use crate::data::{Access, DataDescriptor};
use crate::task::{TaskFunctor, TaskStruct};
use crate::Ctx;

/// Parameters of one MEMSET task: the slot index.
#[mgws_tasks::task]
#[derive(Debug, PartialEq, Eq)]
pub struct MemsetTask {
    pub index: u64,
}

/// Error code of a MEMSET task whose slot lies outside its output descriptor.
pub const MEMSET_OUT_OF_BOUNDS: u32 = 0x4d53_0001;

impl TaskFunctor for MemsetTask {
    #[inline(always)]
    fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        let out = task.data[0];
        if (self.index + 1) * 8 > out.size as u64 {
            return Err(TaskError::Failed(MEMSET_OUT_OF_BOUNDS));
        }
        if ctx.lane_id() == 0 {
            let slot = out.resolve(ctx.area(out.area as usize)) as *mut u64;
            // SAFETY: the slot is inside the output descriptor (checked above), which the host
            // allocated as u64s used only atomically during the run.
            unsafe { ctx.reduce_add(slot.add(self.index as usize), self.index + 1) };
        }
        Ok(())
    }
}

/// The output descriptor of a MEMSET run of `tasks` slots in data area `area`.
pub fn output_descriptor(area: u8, tasks: u64) -> DataDescriptor {
    DataDescriptor::new(area, 0, (tasks * 8) as u32, Access::ReadWrite)
}

/// Counts slots that were lost (still 0) and that were written more than once.
pub fn verify(slots: &[u64]) -> MemsetCheck {
    let mut check = MemsetCheck::default();
    for (x, &v) in slots.iter().enumerate() {
        let expected = x as u64 + 1;
        if v == 0 {
            check.lost += 1;
        } else if v != expected {
            check.duplicated += 1;
        }
    }
    check
}

/// The outcome of [`verify`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemsetCheck {
    pub lost: u64,
    pub duplicated: u64,
}

impl MemsetCheck {
    pub fn ok(&self) -> bool {
        self.lost == 0 && self.duplicated == 0
    }
}
