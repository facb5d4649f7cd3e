//! The launcher's side of GPU PEs: each PE's GPU, the checks before any PE starts (GPUs, PTX,
//! NVSHMEM and, for the device-API transport, NVRTC and NVSHMEM's device code), and what the
//! launcher tells the PEs.

use std::ffi::OsString;
use std::path::PathBuf;

use mgws_core::{Topology, MAX_DEVICES};
use mgws_tasks::Registry;

use crate::cuda::{CudaBackend, PeTransport, Placement, TasksIn};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::scheduler::Scheduler;

/// The GPU PEs of a multi-process run, as their launcher prepares them.
pub(crate) struct GpuPes {
    /// The CUDA settings (each PE runs the mgws kernel on one GPU).
    backend: CudaBackend,
    /// The GPU ordinal of each PE (set by [`GpuPes::prepare`]).
    pe_gpus: [u32; MAX_DEVICES],
    /// NVSHMEM's host library, as the launcher found it (passed on to the PEs).
    nvshmem_library: Option<PathBuf>,
}

impl GpuPes {
    /// GPU PEs with `backend`'s settings.
    pub(crate) fn new(backend: CudaBackend) -> Self {
        GpuPes {
            backend,
            pe_gpus: [0; MAX_DEVICES],
            nvshmem_library: None,
        }
    }

    /// How the PEs reach each other's memory.
    pub(crate) fn transport(&self) -> PeTransport {
        self.backend.pe_transport
    }

    /// Whether the PEs reach each other through NVSHMEM's device API (which reaches other
    /// nodes).
    pub(crate) fn device_api(&self) -> bool {
        self.transport() == PeTransport::DeviceApi
    }

    /// The transport as the launcher's header word ([`PeTransport::to_word`]).
    pub(crate) fn transport_word(&self) -> u32 {
        self.transport().to_word()
    }

    /// The GPU ordinal of each PE (set by [`GpuPes::prepare`]).
    pub(crate) fn pe_gpus(&self) -> [u32; MAX_DEVICES] {
        self.pe_gpus
    }

    /// The register cap the PEs compile their kernel with (0: the registry's own).
    pub(crate) fn max_registers(&self) -> u32 {
        self.backend.max_registers.unwrap_or(0)
    }

    /// The PTX file the PEs load: the backend's, or for the device-API transport the kernel of
    /// `cargo xtask ptx --nvshmem` (`None`: the PEs search as a single-process run does).
    pub(crate) fn ptx(&self) -> Result<Option<PathBuf>> {
        let explicit = self.backend.ptx.clone();
        match self.transport() {
            PeTransport::Mapped => Ok(explicit),
            PeTransport::DeviceApi => {
                crate::cuda::ptx::resolve_nvshmem(explicit.as_deref()).map(Some)
            }
        }
    }

    /// Refuses a job whose data areas the device-API transport cannot lay out.
    pub(crate) fn check_job(&self, job: &Job<'_>) -> Result<()> {
        if self.transport() == PeTransport::DeviceApi {
            super::symmetric::check_device_api_layouts(job, self.backend.area_layout)?;
        }
        Ok(())
    }

    /// The copies of the job's data areas the PEs keep (see [`super::symmetric::area_copies`]).
    pub(crate) fn area_copies(&self, job: &Job<'_>) -> u64 {
        super::symmetric::area_copies(job, self.backend.area_layout)
    }

    /// The environment the launcher gives each PE: NVSHMEM's settings ([`nvshmem_env`]) and
    /// the library it found.
    pub(crate) fn pe_env(
        &self,
        config: &mgws_core::SchedConfig,
        topology: &Topology,
        area_limits: &[u64; mgws_core::DATA_AREAS],
        area_copies: u64,
        across_nodes: bool,
    ) -> Vec<(OsString, OsString)> {
        let mut env = nvshmem_env(
            config,
            topology,
            area_limits,
            area_copies,
            self.transport(),
            across_nodes,
        );
        if let Some(library) = &self.nvshmem_library {
            env.push((super::nvshmem::LIBRARY_VAR.into(), library.into()));
        }
        env
    }

    /// Checks the settings of a run of `processes` PEs (`per_node` of them on this node), that
    /// the GPUs, the PTX and NVSHMEM are there, and assigns each PE its GPU (the backend's GPUs
    /// in turn; all visible ones when it names none).
    pub(crate) fn prepare<R: Registry>(
        &mut self,
        sched: &Scheduler,
        processes: u32,
        per_node: usize,
    ) -> Result<()> {
        let b = &self.backend;
        if b.cpu_workers > 0 || sched.cpu_domains > 1 || sched.cpu_bridge > 0 {
            return Err(Error::Config(
                "runs over GPU PE processes have no CPU workers beside the GPUs".into(),
            ));
        }
        if !matches!(b.placement, Placement::Global | Placement::Symmetric)
            || b.tasks_in != TasksIn::Device
        {
            return Err(Error::Config(
                "runs over GPU PE processes keep their queues in NVSHMEM's symmetric heap and \
                 their tasks in each GPU's memory: --placement and --tasks-in do not apply"
                    .into(),
            ));
        }
        let visible = b.visible_gpus()?;
        let list = if b.devices.is_empty() {
            (0..visible).collect()
        } else {
            b.devices.clone()
        };
        // Each node's PEs take its GPUs the same way (one node: all PEs).
        let per_node = per_node.max(1);
        for pe in 0..processes as usize {
            self.pe_gpus[pe] = list[(pe % per_node) % list.len()];
        }
        let pe_gpus = &self.pe_gpus[..per_node];
        let mut distinct = pe_gpus.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let on = |gpu: u32| pe_gpus.iter().filter(|&&g| g == gpu).count();
        if distinct.iter().any(|&g| on(g) != on(distinct[0])) {
            let shares: Vec<String> = distinct
                .iter()
                .map(|&g| format!("GPU {g}: {}", on(g)))
                .collect();
            return Err(Error::Config(format!(
                "{} PEs on {} GPUs share them unevenly (PEs per GPU: {}); NVSHMEM joins PEs \
                 that share GPUs only when every GPU has as many as the others: run a multiple \
                 of {} PEs, or name each PE's GPU with --devices",
                per_node,
                distinct.len(),
                shares.join(", "),
                distinct.len()
            )));
        }
        let ptx = self.ptx()?;
        for &ordinal in &distinct {
            CudaBackend {
                devices: vec![ordinal],
                ptx: ptx.clone(),
                ..b.clone()
            }
            .probe::<R>()?;
        }
        if distinct.len() < per_node {
            tracing::warn!(
                pes = per_node,
                gpus = distinct.len(),
                "PEs that share a GPU take turns on it (time slices), which checks the protocol \
                 but is no measure of speed"
            );
        }
        let nvshmem = super::nvshmem::Nvshmem::load()?;
        tracing::debug!(library = %nvshmem.path().display(), "NVSHMEM found");
        if b.pe_transport == PeTransport::DeviceApi {
            // The PTX must be the device-API build, and NVRTC, NVSHMEM's headers and device
            // library must be there: checked here, before any PE starts. The wrappers compiled
            // now are cached, so the PEs load them instead of compiling them again.
            let path = ptx
                .as_deref()
                .expect("the device-API transport names its PTX");
            let text = crate::cuda::ptx::read(path)?;
            super::nvshmem_link::check_transport(&text, &path.display().to_string(), true)?;
            let mut ccs: Vec<(u32, u32)> = Vec::new();
            for &ordinal in &distinct {
                let cc = crate::cuda::gpu_cc(ordinal)?;
                if !ccs.contains(&cc) {
                    ccs.push(cc);
                    super::nvshmem_link::device_code(nvshmem.path(), cc)?;
                }
            }
        }
        self.nvshmem_library = Some(nvshmem.path().to_path_buf());
        Ok(())
    }
}

/// NVSHMEM's settings for the GPU PEs of a node: NVLink multicast off always (these are
/// shared machines), and, where the caller's environment does not say otherwise, no NCCL, a
/// symmetric heap that holds the run (its queues, with room to spare) and, for a run on one
/// node, the unique-ID bootstrap over the loopback interface and no transport to other nodes.
/// A run across nodes leaves the bootstrap's interface and the remote transport to NVSHMEM's
/// defaults or the caller's environment (docs/design.md 5.9).
fn nvshmem_env(
    config: &mgws_core::SchedConfig,
    topology: &Topology,
    area_limits: &[u64; mgws_core::DATA_AREAS],
    area_copies: u64,
    transport: PeTransport,
    across_nodes: bool,
) -> Vec<(OsString, OsString)> {
    let (_, need) = super::symmetric::symmetric_of(
        transport,
        topology,
        config.public_capacity,
        area_limits,
        area_copies,
    );
    // NVSHMEM reserves some of the heap for itself: half again and 64 MiB, at least its
    // default 1 GiB.
    let heap = (need + need / 2 + (64 << 20)).max(1 << 30);
    let defaults = [
        ("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME", "lo".to_string()),
        ("NVSHMEM_REMOTE_TRANSPORT", "none".to_string()),
        ("NVSHMEM_DISABLE_NCCL", "1".to_string()),
        ("NVSHMEM_SYMMETRIC_SIZE", heap.to_string()),
    ];
    let one_node_only = [
        "NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME",
        "NVSHMEM_REMOTE_TRANSPORT",
    ];
    let mut env: Vec<(OsString, OsString)> = defaults
        .into_iter()
        .filter(|(k, _)| std::env::var_os(k).is_none())
        .filter(|(k, _)| !(across_nodes && one_node_only.contains(k)))
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    env.push(("NVSHMEM_DISABLE_NVLS".into(), "1".into()));
    env
}
