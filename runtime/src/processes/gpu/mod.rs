//! GPU PEs: a PE's GPU and its part of NVSHMEM's symmetric heap ([`pe`]), NVSHMEM's host
//! library ([`nvshmem`]), and for the device-API transport the wrappers NVRTC compiles and the
//! device code they link with ([`nvshmem_link`], [`nvrtc`]). The CUDA backend of one process
//! ([`crate::cuda`]) knows nothing of them.

pub(crate) mod dylib;
mod launch;
mod mirror;
pub(crate) mod nvrtc;
pub(crate) mod nvshmem;
pub(crate) mod nvshmem_link;
pub(crate) mod pe;
mod replica;
mod session;
mod symmetric;

pub(crate) use launch::GpuPes;

use mgws_tasks::Registry;

use crate::cuda::session::Session;
use crate::cuda::{CudaBackend, KernelOptions, Placement};
use crate::device::Defaults;
use crate::error::Result;

/// The settings a run of registry `R` over `processes` GPU PEs uses for those left open
/// (`(lanes, local_capacity, workers)`, each `None` when open): one PE's GPU sizes each PE's
/// share, as many workers as fit on it with the scratch of the whole run's queues, its kernel
/// loaded as the PEs' transport loads it.
pub(crate) fn defaults<R: Registry>(
    cuda: &CudaBackend,
    processes: u32,
    (lanes, local_capacity, workers): (Option<u32>, Option<u32>, Option<u32>),
    options: KernelOptions,
) -> Result<Defaults> {
    let pe = CudaBackend {
        devices: vec![cuda.devices.first().copied().unwrap_or(0)],
        placement: Placement::Symmetric,
        cpu_workers: 0,
        ..cuda.clone()
    };
    let options = KernelOptions {
        // Unshared unless asked: shared queues have not run over processes.
        workers_per_queue: Some(options.workers_per_queue.unwrap_or(1)),
        ..options
    };
    let per_pe = workers.map(|w| w / processes.max(1));
    let open = |b: &CudaBackend, lanes: u32, entry: &str| {
        Session::open_for_transport::<R>(b, lanes, entry)
    };
    let d = pe.defaults_of::<R>(
        crate::Method::Mgws,
        lanes,
        local_capacity,
        per_pe,
        options,
        processes,
        &open,
    )?;
    Ok(Defaults {
        workers: workers.unwrap_or(d.workers * processes),
        ..d
    })
}
