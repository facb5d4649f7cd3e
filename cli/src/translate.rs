//! The translation of the scheduler and backend flags ([`SchedArgs`]) into a [`Scheduler`] and
//! a [`Backend`], with the refusals of flags that do not apply.

use std::time::Duration;

use mgws::backend::Backend;
use mgws::error::{Error, Result};
use mgws::scheduler::{Scheduler, VictimPolicy};
use mgws::{OverflowMode, TerminationMode};
use mgws_tasks::Registry;

use crate::args::{
    AreaLayoutArg, BackendArg, BaselineArg, GpuKernelArg, OverflowArg, PeTransportArg,
    PlacementArg, SchedArgs, TasksInArg, TerminationArg, DEFAULT_SPILL_CAPACITY,
};
use crate::output;

/// The victim bias of a run across nodes when no victim flag is given: 90% of steals from the
/// own PE, 9% from the own node's other PEs, 1% from other nodes (docs/design.md 5.9).
pub const ACROSS_NODES_BIAS: f64 = 0.9;

impl SchedArgs {
    /// The scheduler these flags describe, for a run of registry `R` (on a GPU, the defaults
    /// left open are those of `R`'s kernel).
    pub fn scheduler<R: Registry>(&self) -> Result<Scheduler> {
        let chosen = [
            self.same_device_only.then_some("--same-device-only"),
            self.same_device_bias.map(|_| "--same-device-bias"),
            self.local_first.map(|_| "--local-first"),
        ];
        if let [Some(a), Some(b), ..] | [Some(a), _, Some(b)] | [_, Some(a), Some(b)] = chosen {
            return Err(Error::Config(format!("{a} and {b} exclude each other")));
        }
        let victims = match (
            self.same_device_only,
            self.same_device_bias,
            self.local_first,
        ) {
            (true, ..) => VictimPolicy::SameDeviceOnly,
            (_, Some(p), _) => VictimPolicy::SameDeviceBias(p),
            (_, _, Some(tries)) => VictimPolicy::LocalFirst(tries),
            // Across nodes a steal off the node crosses the network: the own PE first, then the
            // own node (docs/design.md 5.9); --same-device-bias 0 makes them uniform.
            _ if self.nodes.is_some_and(|n| n > 1) => {
                VictimPolicy::SameDeviceBias(ACROSS_NODES_BIAS)
            }
            _ => VictimPolicy::LocalFirst(mgws::DEFAULT_LOCAL_FIRST_TRIES),
        };
        let backend = self.backend::<R>()?;
        let default_termination = if self.processes.is_some() {
            TerminationArg::Hierarchical
        } else {
            TerminationArg::Counter
        };
        let termination = match self.termination.unwrap_or(default_termination) {
            TerminationArg::Counter => TerminationMode::IdleCounter,
            TerminationArg::Tree => TerminationMode::VotingTree,
            TerminationArg::Hierarchical => TerminationMode::Hierarchical,
        };
        let overflow = match self.overflow {
            OverflowArg::TwoAtomics => OverflowMode::TwoAtomics,
            OverflowArg::Damping => OverflowMode::Damping,
        };
        let mut builder = Scheduler::builder();
        if self.show_progress {
            if let Some(bar) = output::progress_bar(self.json) {
                builder = builder.on_progress(bar);
            }
        }
        // The backend fills in what is left open (one JIT compile of the kernel on a GPU,
        // cached for the run that follows).
        if let Some(n) = self.workers {
            builder = builder.workers(n);
        }
        if let Some(n) = self.lanes {
            builder = builder.lanes(n);
        }
        if let Some(n) = self.local_capacity {
            builder = builder.local_capacity(n);
        }
        if let Some(n) = self.queue_sharing {
            builder = builder.queue_sharing(n);
        }
        if let Some(n) = self.initial_chunk {
            builder = builder.initial_chunk(n);
        }
        let sched = builder
            .public_capacity(self.public_capacity)
            .spill_capacity(self.spill_capacity.unwrap_or(DEFAULT_SPILL_CAPACITY))
            .termination(termination)
            .overflow(overflow)
            .victims(victims)
            .seed(self.seed)
            .watchdog(Duration::from_millis(self.watchdog_ms))
            .start_timeout(Duration::from_millis(self.start_timeout_ms))
            .pin_threads(!self.no_pin_threads)
            .cpu_domains(self.cpu_domains)
            .on_stuck_workers(output::exit_on_stuck_workers)
            .build_for::<R>(&backend)?;
        let lanes = sched.lanes();
        if lanes > 1 && !backend.on_gpu() {
            tracing::warn!(lanes, "--lanes above 1 on the CPU");
            eprintln!(
                "mgws: warning: --lanes {lanes} on the CPU runs about 40x slower: the lanes of a \
                 worker meet at barriers around every task. It exists to test the lane protocol \
                 GPU blocks run; leave it at 1 for speed"
            );
        }
        Ok(sched)
    }

    /// Refuses flags that the selected backend and baselines would ignore silently.
    pub fn reject_inapplicable(&self) -> Result<()> {
        let cpu = matches!(
            self.backend,
            BackendArg::Cpu | BackendArg::CpuStatic | BackendArg::CpuLevels
        );
        if cpu
            && (self.placement != PlacementArg::Global
                || self.tasks_in != TasksInArg::Device
                || self.area_layout != AreaLayoutArg::Auto)
        {
            return Err(Error::Config(
                "--placement, --tasks-in and --area-layout place GPU memory; they need --backend \
                 cuda"
                    .into(),
            ));
        }
        if matches!(self.backend, BackendArg::Cuda | BackendArg::CpuLevels) && self.cpu_domains != 1
        {
            return Err(Error::Config(
                "--cpu-domains splits the workers of a CPU run; it needs --backend cpu, cpu-static \
                 or auto (GPU runs split their workers by --devices)"
                    .into(),
            ));
        }
        if (self.node_rank.is_some() || self.coordinator.is_some()) && self.nodes.is_none() {
            return Err(Error::Config(
                "--node-rank and --coordinator belong to a run across nodes: add --nodes".into(),
            ));
        }
        if self.nodes.is_some() && (self.processes.is_none() || self.backend != BackendArg::Cuda) {
            return Err(Error::Config(
                "--nodes runs GPU PEs on several nodes: it needs --backend cuda --processes N \
                 --pe-transport device-api"
                    .into(),
            ));
        }
        if self.processes.is_none() && self.pe_transport != PeTransportArg::Mapped {
            return Err(Error::Config(
                "--pe-transport says how GPU PEs reach each other; it needs --backend cuda \
                 --processes N"
                    .into(),
            ));
        }
        if self.processes.is_some() {
            if !matches!(
                self.backend,
                BackendArg::Cpu | BackendArg::Auto | BackendArg::Cuda
            ) {
                return Err(Error::Config(
                    "--processes runs the mgws loop in PE processes; it needs --backend cpu (or \
                     auto, which it makes cpu) or --backend cuda"
                        .into(),
                ));
            }
            if self.cpu_domains != 1 {
                return Err(Error::Config(
                    "--processes and --cpu-domains exclude each other: each process is a domain"
                        .into(),
                ));
            }
            if self.backend != BackendArg::Cuda && self.pe_transport != PeTransportArg::Mapped {
                return Err(Error::Config(
                    "--pe-transport device-api is how GPU PEs reach each other; it needs \
                     --backend cuda"
                        .into(),
                ));
            }
            if self.backend == BackendArg::Cuda
                && (self.placement != PlacementArg::Global || self.tasks_in != TasksInArg::Device)
            {
                return Err(Error::Config(
                    "--processes keeps each PE's queues in NVSHMEM's symmetric heap and its \
                     tasks on its GPU: --placement and --tasks-in do not apply"
                        .into(),
                ));
            }
        }
        let levels = self.backend == BackendArg::CpuLevels
            || self.gpu_kernel == GpuKernelArg::Levels
            || self.baselines.contains(&BaselineArg::Levels);
        if self.level_capacity.is_some() && !levels {
            return Err(Error::Config(
                "--level-capacity sizes the level-by-level baseline's frontier buffers; it needs \
                 --backend cpu-levels, --gpu-kernel levels or --baselines levels"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The CUDA backend these flags describe (whether or not it is selected).
    pub fn cuda(&self) -> Result<mgws::cuda::CudaBackend> {
        let devices = match (&self.devices, self.device) {
            (Some(list), _) => mgws::cuda::parse_devices(list)?,
            (None, Some(d)) => vec![d],
            (None, None) => vec![0],
        };
        Ok(mgws::cuda::CudaBackend {
            devices,
            placement: match self.placement {
                PlacementArg::Global => mgws::cuda::Placement::Global,
                PlacementArg::Host => mgws::cuda::Placement::Host,
                PlacementArg::Remote => mgws::cuda::Placement::Remote,
            },
            tasks_in: match self.tasks_in {
                TasksInArg::Device => mgws::cuda::TasksIn::Device,
                TasksInArg::Host => mgws::cuda::TasksIn::Host,
            },
            ptx: self.ptx.clone(),
            kernel: self.gpu_kernel.into(),
            level_capacity: self.level_capacity,
            max_registers: self.max_registers,
            cpu_workers: self.cpu_workers,
            pe_transport: match self.pe_transport {
                PeTransportArg::Mapped => mgws::cuda::PeTransport::Mapped,
                PeTransportArg::DeviceApi => mgws::cuda::PeTransport::DeviceApi,
            },
            area_layout: match self.area_layout {
                AreaLayoutArg::Auto => None,
                AreaLayoutArg::SingleHome => Some(mgws::AreaLayout::SingleHome),
                AreaLayoutArg::Partitioned => Some(mgws::AreaLayout::Partitioned),
                AreaLayoutArg::ReplicatedAdd => {
                    Some(mgws::AreaLayout::Replicated(mgws::Combine::AddU64))
                }
            },
        })
    }

    /// The nodes of a run across nodes (`--nodes`), the rank and address from the flags or the
    /// environment (`None`: one node).
    pub fn nodes(&self) -> Result<Option<mgws::processes::Nodes>> {
        use mgws::processes::nodes::COORDINATOR_VAR;
        let Some(count) = self.nodes else {
            return Ok(None);
        };
        let rank = match self.node_rank {
            Some(r) => r,
            None => match mgws::processes::Nodes::rank_from_env()? {
                Some((_, r)) => r,
                None if count == 1 => 0,
                None => {
                    return Err(Error::Config(format!(
                        "--nodes {count} needs this launcher's node: --node-rank R, or a \
                         launcher that sets one of {}",
                        mgws::processes::nodes::RANK_VARS.join(", ")
                    )))
                }
            },
        };
        let coordinator = match &self.coordinator {
            Some(c) => c.clone(),
            None => std::env::var(COORDINATOR_VAR).unwrap_or_default(),
        };
        mgws::processes::Nodes::new(count, rank, coordinator).map(Some)
    }

    /// The CPU backend of the mgws loop these flags select: over PE processes with
    /// `--processes`, else in this process.
    pub fn cpu_mgws_backend(&self) -> Backend {
        match self.processes {
            Some(processes) => Backend::CpuProcesses { processes },
            None => Backend::Cpu,
        }
    }

    /// The backend these flags select. `auto` takes the GPU when libcuda loads, the GPU exists
    /// and the kernel PTX is found, else the CPU, and says which on stderr (once).
    pub fn backend<R: Registry>(&self) -> Result<Backend> {
        let gpu_only = self.device.is_some()
            || self.devices.is_some()
            || self.ptx.is_some()
            || self.max_registers.is_some()
            || self.cpu_workers > 0
            || self.gpu_kernel != GpuKernelArg::Mgws;
        // Several processes run the CPU loop (`auto` included: GPU runs are one process).
        let backend = match (self.backend, self.processes) {
            (BackendArg::Auto, Some(_)) => BackendArg::Cpu,
            (b, _) => b,
        };
        match backend {
            BackendArg::Cpu | BackendArg::CpuStatic | BackendArg::CpuLevels if gpu_only => {
                Err(Error::Config(
                    "--device, --devices, --ptx, --gpu-kernel, --max-registers and --cpu-workers \
                     need --backend cuda"
                        .into(),
                ))
            }
            BackendArg::Cpu => Ok(self.cpu_mgws_backend()),
            BackendArg::CpuStatic => Ok(Backend::CpuStatic),
            BackendArg::CpuLevels => Ok(Backend::CpuLevels {
                level_capacity: self.level_capacity,
            }),
            BackendArg::Cuda => {
                let cuda = self.cuda()?;
                match self.processes {
                    Some(processes) => Ok(Backend::CudaProcesses {
                        processes,
                        nodes: self.nodes()?,
                        // PEs take the visible GPUs in turn unless --device(s) name them.
                        cuda: mgws::cuda::CudaBackend {
                            devices: if self.device.is_none() && self.devices.is_none() {
                                Vec::new()
                            } else {
                                cuda.devices.clone()
                            },
                            placement: mgws::cuda::Placement::Symmetric,
                            ..cuda
                        },
                    }),
                    None => {
                        cuda.probe::<R>()?;
                        Ok(Backend::Cuda(cuda))
                    }
                }
            }
            BackendArg::Auto => {
                let cuda = self.cuda()?;
                let use_cuda = *self.auto_cuda.get_or_init(|| match cuda.probe::<R>() {
                    Ok(what) => {
                        eprintln!("mgws: --backend auto: running on CUDA, {what}");
                        true
                    }
                    Err(e) => {
                        eprintln!("mgws: --backend auto: running on the CPU ({e})");
                        false
                    }
                });
                Ok(if use_cuda {
                    Backend::Cuda(cuda)
                } else {
                    Backend::Cpu
                })
            }
        }
    }
}
