//! STALL: `tasks` tasks that each busy-wait `nanos` without reporting progress. With a watchdog
//! shorter than `nanos`, the run must end in `Error::Hang` with every worker's state; with a longer
//! one it completes. A diagnostic of the never-hang guarantee on each backend.

use mgws_tasks::workloads::stall::StallTask;
use mgws_tasks::{StallTasks, TaskStruct};

use super::Outcome;
use mgws::backend::Backend;
use mgws::error::{Error, Result};
use mgws::job::Job;
use mgws::scheduler::Scheduler;

/// Runs `tasks` STALL tasks of `nanos` each.
pub fn run(sched: &Scheduler, backend: &Backend, tasks: u64, nanos: u64) -> Result<Outcome> {
    if tasks == 0 || tasks > 1 << 20 {
        return Err(Error::Input(format!(
            "STALL needs between 1 and {} tasks, not {tasks}",
            1 << 20
        )));
    }
    let initial: Vec<TaskStruct> = (0..tasks)
        .map(|_| StallTasks::task(&StallTask { nanos }))
        .collect();
    let report = backend.run(sched, &StallTasks, Job::new(&initial))?;
    let verified = report.tasks_run == tasks;
    Ok(Outcome {
        workload: "stall".into(),
        result: serde_json::json!({ "tasks": tasks, "nanos": nanos }),
        verified,
        check: format!("{} of {tasks} stall tasks ran", report.tasks_run),
        report,
    })
}
