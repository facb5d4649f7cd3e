//! Multi-process runs on one machine: the CPU twin of one process per GPU (a PE, as NVSHMEM
//! calls it).
//!
//! A launcher ([`ProcessLayout::Pes`](crate::ProcessLayout::Pes), `mgws run --processes N`)
//! lays the whole run out in a shared heap (an anonymous memory file every process maps: the
//! stand-in for NVSHMEM's symmetric heap on one node) and starts one process per PE, copies of
//! the running program, which serve their PE ([`Pe`]). Each PE is one domain of the run's
//! [`Topology`](mgws_core::Topology): its own public queues and, under
//! [`TerminationMode::Hierarchical`](mgws_core::TerminationMode::Hierarchical), its own idle
//! counter, then the global one; the same-device victim policies bias steals to the own PE. The
//! workers run the scheduler core unchanged: a steal from another PE is the same fetch-add on
//! the victim's queue word, through the shared mapping. The launcher supervises the run (the
//! watchdog reads every worker's progress record in the heap), reads the results back and
//! reports errors; a PE that dies loses its tasks, so the run stops with [`Error::Process`].
//!
//! Data areas live once in the shared heap, readable and writable from every PE (the symmetric
//! allocation; GPU PEs over NVSHMEM's device API write copies of their own, docs/design.md 5.8).
//!
//! GPU PEs of several nodes run with one launcher per node, joined by TCP ([`nodes`]).
//!
//! [`Error::Process`]: crate::Error::Process

mod children;
mod device;
#[cfg(feature = "cuda")]
pub(crate) mod gpu;
#[cfg(not(feature = "cuda"))]
#[path = "no_gpu.rs"]
pub(crate) mod gpu;
pub(crate) mod heap;
pub(crate) mod layout;
pub mod nodes;
mod pe;
mod running;

pub use device::{ProcessDevice, ProcessPlaced};
pub use nodes::Nodes;
pub(crate) use pe::monotonic_ns;
#[cfg(feature = "cuda")]
pub(crate) use pe::wait_for_gate;
pub use pe::{Pe, EXIT_PE_FAILED, HEAP_FD_VAR, PE_VAR};

use mgws_tasks::Registry;

use crate::error::{Error, Result};
use crate::job::Job;
use crate::report::RunReport;
use crate::scheduler::Scheduler;

/// The settings of GPU PEs: the CUDA backend's (a type without values when mgws is built
/// without its `cuda` feature).
#[cfg(feature = "cuda")]
pub type GpuBackend = crate::cuda::CudaBackend;
/// The settings of GPU PEs: a type without values, as mgws is built without its `cuda` feature.
#[cfg(not(feature = "cuda"))]
pub type GpuBackend = std::convert::Infallible;

/// Runs `job` over `processes` PE processes, copies of this program (the pipeline with a
/// [`ProcessDevice`]), on host threads or, with `gpu`, one GPU per PE. The program must serve
/// its PE first thing in `main` (see [`Pe`]).
pub fn run<R: Registry>(
    sched: &Scheduler,
    job: Job<'_>,
    processes: u32,
    gpu: Option<&GpuBackend>,
    nodes: Option<&Nodes>,
) -> Result<RunReport> {
    let opened = std::time::Instant::now();
    let program = std::env::current_exe().map_err(|e| {
        Error::Process(format!(
            "cannot find this program's executable to start its PEs: {e}"
        ))
    })?;
    let mut device = ProcessDevice::<R>::new(sched, processes, program, gpu.cloned());
    if let Some(nodes) = nodes {
        device = device.across(nodes.clone());
    }
    let result = crate::pipeline::run(&mut device, sched, job, opened);
    if let Err(e) = &result {
        // The other nodes' launchers learn why (a run across nodes).
        device.fail_nodes(e);
    }
    result
}
