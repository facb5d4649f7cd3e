//! Backend selection: where a job's workers run.

use mgws_tasks::Builtin;

use crate::error::Result;
use crate::job::Job;
use crate::report::RunReport;
use crate::scheduler::Scheduler;

/// Where to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Host threads.
    Cpu,
    /// Baseline: static assignment on host threads, level by level, with the same task execution
    /// (see [`crate::cpu::static_levels`]). `level_capacity`: tasks per frontier buffer.
    CpuStatic { level_capacity: Option<u64> },
    /// NVIDIA GPUs: one persistent kernel per GPU (or a GPU baseline kernel).
    Cuda(crate::cuda::CudaBackend),
}

impl Backend {
    /// Runs `job` with the built-in task registry.
    pub fn run(&self, sched: &Scheduler, job: Job<'_>) -> Result<RunReport> {
        match self {
            Backend::Cpu => crate::cpu::run(sched, &Builtin, job),
            Backend::CpuStatic { level_capacity } => {
                crate::cpu::static_levels::run(sched, &Builtin, job, *level_capacity)
            }
            // The built-in registry is compiled into the PTX (`device/kernel`).
            Backend::Cuda(cuda) => cuda.run(sched, job),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::CpuStatic { .. } => "cpu-static",
            Backend::Cuda(cuda) => cuda.kernel.backend_name(),
        }
    }
}
