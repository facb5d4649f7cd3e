//! Test tasks: a user-defined registry run through the public CPU-backend API, as a user would.
//!
//! - [`SplitRange`] turns one root task into `hi - lo` MEMSET tasks by recursive halving, so every
//!   MEMSET task is spawned at run time and most of them move between workers: the stress tests
//!   verify exactly-once execution under constant stealing.
//! - [`Stall`] sleeps, to starve the watchdog.

use std::time::Duration;

use mgws::job::u64_bytes_mut;
use mgws::{AreaBytes, Job, RunReport, Scheduler};
use mgws_core::{Platform, TaskError};
use mgws_tasks::workloads::memset::{output_descriptor, verify, MemsetCheck, MemsetTask};
use mgws_tasks::{Ctx, TaskFunctor, TaskStruct};

/// Spawns MEMSET tasks for slots `lo..hi`: halves the range until it has at most `leaf` slots.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct SplitRange {
    pub lo: u64,
    pub hi: u64,
    pub leaf: u64,
}

impl TaskFunctor for SplitRange {
    fn run<P: Platform>(
        &self,
        task: &TaskStruct,
        ctx: &mut Ctx<'_, '_, P>,
    ) -> Result<(), TaskError> {
        if self.hi - self.lo <= self.leaf {
            for index in self.lo..self.hi {
                ctx.spawn(&TestTasks::task(&MemsetTask { index }).with_data(0, task.data[0]));
            }
        } else {
            let mid = self.lo + (self.hi - self.lo) / 2;
            ctx.spawn(&task.with_params(&SplitRange {
                lo: self.lo,
                hi: mid,
                leaf: self.leaf,
            }));
            ctx.spawn(&task.with_params(&SplitRange {
                lo: mid,
                hi: self.hi,
                leaf: self.leaf,
            }));
        }
        Ok(())
    }
}

/// Sleeps for `micros` on every lane.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Stall {
    pub micros: u64,
}

impl TaskFunctor for Stall {
    fn run<P: Platform>(&self, _: &TaskStruct, _: &mut Ctx<'_, '_, P>) -> Result<(), TaskError> {
        std::thread::sleep(Duration::from_micros(self.micros));
        Ok(())
    }
}

/// The registry of the test tasks.
#[mgws_tasks::registry]
pub enum TestTasks {
    Memset(MemsetTask),
    Split(SplitRange),
    Stall(Stall),
}

/// Runs `slots` MEMSET tasks, all spawned at run time from `roots` root tasks, and returns the
/// report with the exactly-once check.
pub fn spawned_memset(
    sched: &Scheduler,
    slots: u64,
    roots: u64,
    leaf: u64,
) -> mgws::Result<(RunReport, MemsetCheck)> {
    let out = output_descriptor(0, slots);
    let per_root = slots.div_ceil(roots);
    let tasks: Vec<TaskStruct> = (0..roots)
        .map(|r| (r * per_root, ((r + 1) * per_root).min(slots)))
        .filter(|(lo, hi)| lo < hi)
        .map(|(lo, hi)| TestTasks::task(&SplitRange { lo, hi, leaf }).with_data(0, out))
        .collect();
    let mut memory = vec![0u64; slots as usize];
    let report = mgws::cpu::run(
        sched,
        &TestTasks,
        Job::new(&tasks).area(0, AreaBytes::ReadWrite(u64_bytes_mut(&mut memory))),
    )?;
    Ok((report, verify(&memory)))
}
