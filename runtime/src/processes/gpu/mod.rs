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
use crate::cuda::{CudaBackend, KernelOptions, Method, PeTransport, Placement};
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
    let per_pe = workers.map(|w| w / processes.max(1));
    let options = KernelOptions {
        workers_per_queue: Some(
            options
                .workers_per_queue
                .unwrap_or_else(|| default_queue_sharing(&pe, per_pe)),
        ),
        ..options
    };
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

/// The workers per public queue of a GPU PE when the run names none: over the mapped transport
/// as one process on one GPU ([`CudaBackend::default_queue_sharing`]: two where the PE's workers
/// pair up), which took one PE from 0.85x one process to its rate on UTS T1L (docs/results.md);
/// one over the device API, where shared queues have not run on a GPU.
fn default_queue_sharing(pe: &CudaBackend, workers_per_pe: Option<u32>) -> u32 {
    match pe.pe_transport {
        PeTransport::Mapped => pe.default_queue_sharing(Method::Mgws, workers_per_pe),
        PeTransport::DeviceApi => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_pes_share_their_queues_by_two_where_their_workers_pair_up() {
        let pe = |pe_transport| CudaBackend {
            devices: vec![0],
            placement: Placement::Symmetric,
            pe_transport,
            ..CudaBackend::default()
        };
        assert_eq!(default_queue_sharing(&pe(PeTransport::Mapped), None), 2);
        assert_eq!(default_queue_sharing(&pe(PeTransport::Mapped), Some(64)), 2);
        assert_eq!(default_queue_sharing(&pe(PeTransport::Mapped), Some(63)), 1);
        assert_eq!(default_queue_sharing(&pe(PeTransport::DeviceApi), None), 1);
    }
}
