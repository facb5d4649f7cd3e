//! FIB: the call tree of naive recursive Fibonacci, one task per call. Verified in closed form:
//! the leaves sum to fib(n) and the tree has 2 fib(n+1) - 1 nodes.

use mgws_tasks::workloads::fib::{self, rows_descriptor, FibTask, COL_NODES, COL_SUM, MAX_N};
use mgws_tasks::workloads::rows::column_sum;
use mgws_tasks::FibTasks;

use super::Outcome;
use mgws::backend::Backend;
use mgws::error::{Error, Result};
use mgws::job::Job;
use mgws::report::RunReport;
use mgws::scheduler::Scheduler;

/// The largest `n` the CLI accepts: fib(60) already has 3 * 10^12 calls.
pub const MAX_CLI_N: u64 = 60;

/// Checks `n`.
pub fn check_n(n: u64) -> Result<()> {
    if n > MAX_CLI_N.min(MAX_N) {
        return Err(Error::Input(format!(
            "fib n must be at most {MAX_CLI_N} (fib({n}) has {:.1e} calls), not {n}",
            2.0 * 1.618f64.powf(n as f64)
        )));
    }
    Ok(())
}

/// One run of fib(`n`): (sum of leaves, nodes counted by tasks) and the run report.
pub fn run_once(sched: &Scheduler, backend: &Backend, n: u64) -> Result<((u64, u64), RunReport)> {
    check_n(n)?;
    let workers = super::result_rows(sched, backend);
    let mut rows = super::ResultRows::new(workers);
    let root = [FibTasks::task(&FibTask { n }).with_data(0, rows_descriptor(0, workers))];
    let report = backend.run(sched, &FibTasks, Job::new(&root).area(0, rows.area()))?;
    Ok((
        (
            column_sum(rows.words(), COL_SUM),
            column_sum(rows.words(), COL_NODES),
        ),
        report,
    ))
}

/// The JSON result of a FIB run.
pub fn result_json(n: u64, sum: u64, nodes: u64) -> serde_json::Value {
    serde_json::json!({ "n": n, "fib": sum, "nodes": nodes })
}

/// Runs fib(`n`) on `backend` and verifies it.
pub fn run(sched: &Scheduler, backend: &Backend, n: u64) -> Result<Outcome> {
    let ((sum, nodes), report) = run_once(sched, backend, n)?;
    let (want_sum, want_nodes) = (fib::fib(n), fib::tree_nodes(n));
    Ok(Outcome {
        workload: "fib".into(),
        result: result_json(n, sum, nodes),
        verified: sum == want_sum && nodes == want_nodes && report.tasks_run == want_nodes,
        check: format!(
            "fib({n}) = {sum} in {nodes} calls; expected {want_sum} in {want_nodes}; {} tasks ran",
            report.tasks_run
        ),
        report,
    })
}
