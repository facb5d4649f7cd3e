//! MEMSET: `tasks` independent tasks; task `x` marks slot `x`. Verifies exactly-once execution.

use mgws_tasks::workloads::memset::{output_descriptor, verify, MemsetTask};
use mgws_tasks::{MemsetTasks, TaskStruct};

use super::Outcome;
use mgws::backend::Backend;
use mgws::error::{Error, Result};
use mgws::job::{u64_bytes_mut, AreaBytes, Job};
use mgws::scheduler::Scheduler;
use mgws::{AreaLayout, Combine, InitialTasks};

/// The tag `run_with_fault` writes: not a tag of the built-in registry.
pub const UNKNOWN_TAG: u32 = 0xdead;

/// The most MEMSET tasks one run may have (the output descriptor's size is a u32 of bytes).
pub const MAX_TASKS: u64 = (u32::MAX / 8) as u64;

/// Task 0 of a MEMSET run of `n` tasks writing to data area 0: task `x` is its
/// [`TaskStruct::indexed`]`(x)`, the slot index being the task's first parameter word.
pub fn template(n: u64) -> TaskStruct {
    MemsetTasks::task(&MemsetTask { index: 0 }).with_data(0, output_descriptor(0, n))
}

/// Runs MEMSET with `n` tasks on `backend` and checks that every slot was written exactly once.
pub fn run(sched: &Scheduler, backend: &Backend, n: u64) -> Result<Outcome> {
    run_with_fault(sched, backend, n, None)
}

/// [`run`], with the tag of initial task `corrupt_tag_of` (if any) replaced by one the registry
/// does not know: a diagnostic of the unknown-tag path, which must end the run with an error that
/// names the tag.
pub fn run_with_fault(
    sched: &Scheduler,
    backend: &Backend,
    n: u64,
    corrupt_tag_of: Option<u64>,
) -> Result<Outcome> {
    if n == 0 || n > MAX_TASKS {
        return Err(Error::Input(format!(
            "MEMSET needs between 1 and {MAX_TASKS} tasks, not {n}"
        )));
    }
    super::check_host_for_slots(
        format_args!("--tasks {n}"),
        n,
        backend,
        corrupt_tag_of.is_some(),
    )?;
    let mut slots = mgws::memory::try_filled(format_args!("--tasks {n}"), n, 0u64)?;
    let mut listed = Vec::new();
    let job = match corrupt_tag_of {
        None => Job::indexed(template(n), n),
        Some(i) => {
            let indexed = InitialTasks::Indexed {
                template: template(n),
                count: n,
            };
            indexed.listed_in(&mut listed)?;
            let task = listed
                .get_mut(i as usize)
                .ok_or_else(|| Error::Input(format!("no initial task {i} to corrupt (of {n})")))?;
            task.tag = UNKNOWN_TAG;
            Job::new(&listed)
        }
    };
    let mut job = job.area(0, AreaBytes::ReadWrite(u64_bytes_mut(&mut slots)));
    if backend.on_gpu() && backend.layout.processes().is_some() {
        // One address range cannot span the PEs' processes, so a partitioned area would stay in
        // PE 0's part; the slots only ever receive additions, so each PE adds into its own copy.
        job = job.layout(0, AreaLayout::Replicated(Combine::AddU64));
    }
    let report = backend.run(sched, &MemsetTasks, job)?;
    let check = verify(&slots);
    let verified = check.ok() && report.tasks_run == n;
    Ok(Outcome {
        workload: "memset".into(),
        result: serde_json::json!({ "slots": n, "lost": check.lost, "duplicated": check.duplicated }),
        verified,
        check: format!(
            "{n} slots: {} lost, {} written more than once; {} tasks ran",
            check.lost, check.duplicated, report.tasks_run
        ),
        report,
    })
}
