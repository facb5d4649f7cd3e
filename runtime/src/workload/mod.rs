//! Host-side drivers of the built-in workloads: build the initial tasks and data, run them on a
//! backend, and verify the result on every run.

pub mod args;
pub mod contains;
pub mod fib;
pub mod memset;
pub mod uts;

use serde::Serialize;

use crate::report::RunReport;

/// A verified run of a workload.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub workload: String,
    pub report: RunReport,
    /// The workload's result, as JSON (e.g. `{"nodes": .., "leaves": .., "depth": ..}`).
    pub result: serde_json::Value,
    /// True when the result matched the workload's independent check.
    pub verified: bool,
    /// What the check compared, for humans.
    pub check: String,
}
