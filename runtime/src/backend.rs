//! Backend selection: where a job's workers run.

use mgws_tasks::Registry;

pub use crate::device::{Defaults, KernelOptions};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::report::RunReport;
use crate::scheduler::Scheduler;

/// Where to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Host threads running the mgws worker loop.
    Cpu,
    /// Baseline **static** on host threads: each worker runs its contiguous share of the initial
    /// tasks and everything they spawn, depth-first, without stealing (`mgws_core::LeanStatic`,
    /// the algorithm of [`crate::cuda::GpuKernel::Static`]).
    CpuStatic,
    /// Baseline **levels** on host threads: level by level, each frontier split evenly over the
    /// workers, a barrier between levels (`mgws_core::LevelWorker` in [`crate::levels`], the
    /// algorithm of [`crate::cuda::GpuKernel::Levels`]).
    CpuLevels {
        /// Tasks one frontier buffer holds; `None`: four fifths of the available host memory for both buffers.
        level_capacity: Option<u64>,
    },
    /// Host threads in `processes` processes on this machine, one PE each (the CPU twin of one
    /// process per GPU, see [`crate::processes`]): copies of the running program, which must
    /// serve their PE first thing in `main` ([`crate::processes::Pe`]).
    #[cfg(feature = "processes")]
    CpuProcesses {
        /// PE processes, 1 to `mgws_core::MAX_DEVICES`; the workers are split over them.
        processes: u32,
    },
    /// NVIDIA GPUs: one persistent kernel per GPU (or a GPU baseline kernel).
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::CudaBackend),
    /// NVIDIA GPUs in `processes` processes on this machine, one PE and one GPU each, joined by
    /// NVSHMEM (see [`crate::processes`]): copies of the running program,
    /// which must serve their PE first thing in `main` ([`crate::processes::Pe`]). PE `p` runs
    /// on `cuda.devices[p % len]`, or GPU `p % visible` when `cuda.devices` is empty; the mgws
    /// kernel only, with its queues in the symmetric heap.
    #[cfg(all(feature = "cuda", feature = "processes"))]
    CudaProcesses {
        /// PE processes, 1 to `mgws_core::MAX_DEVICES`; the workers are split over them.
        processes: u32,
        /// The kernel's settings (GPUs, PTX, register cap).
        cuda: crate::cuda::CudaBackend,
        /// A run across nodes: this launcher's node, the node count and node 0's address
        /// ([`crate::processes::nodes`]); `processes` then counts every node's PEs, and this
        /// launcher starts its node's share (`None`: one node).
        nodes: Option<crate::processes::Nodes>,
    },
}

impl Backend {
    /// Runs `job` with the task registry `registry`: the tags of the job's tasks name functors of
    /// `R`. A GPU backend runs the kernel built for `R` and refuses one built for another
    /// registry (see [`crate::cuda::ptx::check_fingerprint`]).
    pub fn run<R: Registry>(
        &self,
        sched: &Scheduler,
        registry: &R,
        job: Job<'_>,
    ) -> Result<RunReport> {
        let result = match self {
            Backend::Cpu => crate::cpu::run(sched, registry, job),
            Backend::CpuStatic => crate::cpu::run_static(sched, registry, job),
            Backend::CpuLevels { level_capacity } => {
                crate::cpu::run_levels(sched, registry, job, *level_capacity)
            }
            #[cfg(feature = "processes")]
            Backend::CpuProcesses { processes } => {
                crate::processes::run::<R>(sched, job, *processes, None, None)
            }
            #[cfg(all(feature = "cuda", feature = "processes"))]
            Backend::CudaProcesses {
                processes,
                cuda,
                nodes,
            } => crate::processes::run::<R>(sched, job, *processes, Some(cuda), nodes.as_ref()),
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => cuda.run(sched, registry, job),
        };
        result.map_err(Error::naming::<R>)
    }

    /// The settings this backend uses for those the caller leaves open (`None`), given the ones
    /// it sets. A GPU backend loads the entry of `R`'s kernel that `options` pick to ask the
    /// occupancy API how many workers fit (the module stays cached for the run that follows).
    #[cfg_attr(not(feature = "cuda"), allow(clippy::extra_unused_type_parameters))]
    pub(crate) fn defaults<R: Registry>(
        &self,
        lanes: Option<u32>,
        local_capacity: Option<u32>,
        workers: Option<u32>,
        options: KernelOptions,
    ) -> Result<Defaults> {
        let on_cpu =
            || crate::cpu::defaults(lanes, local_capacity, workers, options.workers_per_queue);
        match self {
            Backend::Cpu | Backend::CpuStatic | Backend::CpuLevels { .. } => Ok(on_cpu()),
            #[cfg(feature = "processes")]
            Backend::CpuProcesses { .. } => Ok(on_cpu()),
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => cuda.defaults::<R>(lanes, local_capacity, workers, options),
            #[cfg(all(feature = "cuda", feature = "processes"))]
            Backend::CudaProcesses {
                processes, cuda, ..
            } => crate::processes::gpu::defaults::<R>(
                cuda,
                *processes,
                (lanes, local_capacity, workers),
                options,
            ),
        }
    }

    /// Whether the workers run on GPUs (in this process or in PE processes).
    pub fn on_gpu(&self) -> bool {
        match self {
            #[cfg(feature = "cuda")]
            Backend::Cuda(_) => true,
            #[cfg(all(feature = "cuda", feature = "processes"))]
            Backend::CudaProcesses { .. } => true,
            _ => false,
        }
    }

    /// The name runs on this backend report.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::CpuStatic => "cpu-static",
            Backend::CpuLevels { .. } => "cpu-levels",
            #[cfg(feature = "processes")]
            Backend::CpuProcesses { .. } => "cpu-processes",
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => cuda.kernel.backend_name(),
            #[cfg(all(feature = "cuda", feature = "processes"))]
            Backend::CudaProcesses { .. } => "cuda-processes",
        }
    }
}
