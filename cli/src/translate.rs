//! The translation of the scheduler and backend flags ([`SchedArgs`]) into a [`Scheduler`] and
//! a [`Backend`], with the refusals of flags that do not apply.

use std::time::Duration;

use mgws::backend::{Backend, Method, ProcessLayout};
use mgws::error::{Error, Result};
use mgws::scheduler::{Scheduler, VictimPolicy};
use mgws::{OverflowMode, TerminationMode};
use mgws_tasks::Registry;

use crate::args::{
    AreaLayoutArg, BaselineArg, BridgePolicyArg, DeviceArg, MethodArg, OverflowArg, PeTransportArg,
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
        if let Some(n) = self.public_capacity {
            builder = builder.public_capacity(n);
        }
        let sched = builder
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

    /// Refuses flags that the selected device, method and baselines would ignore silently.
    pub fn reject_inapplicable(&self) -> Result<()> {
        let cuda = self.device == DeviceArg::Cuda;
        if self.device == DeviceArg::Cpu
            && (self.placement != PlacementArg::Global
                || self.tasks_in != TasksInArg::Device
                || self.area_layout != AreaLayoutArg::Auto)
        {
            return Err(Error::Config(
                "--placement, --tasks-in and --area-layout place GPU memory; they need --device \
                 cuda"
                    .into(),
            ));
        }
        if (cuda || self.method == MethodArg::Levels) && self.cpu_domains != 1 {
            return Err(Error::Config(
                "--cpu-domains splits the workers of a CPU run; it needs --device cpu or auto \
                 with --method mgws or static (GPU runs split their workers by --devices)"
                    .into(),
            ));
        }
        if (self.node_rank.is_some() || self.coordinator.is_some()) && self.nodes.is_none() {
            return Err(Error::Config(
                "--node-rank and --coordinator belong to a run across nodes: add --nodes".into(),
            ));
        }
        if self.nodes.is_some() && (self.processes.is_none() || !cuda) {
            return Err(Error::Config(
                "--nodes runs GPU PEs on several nodes: it needs --device cuda --processes N \
                 --pe-transport device-api"
                    .into(),
            ));
        }
        if self.processes.is_none() && self.pe_transport != PeTransportArg::Mapped {
            return Err(Error::Config(
                "--pe-transport says how GPU PEs reach each other; it needs --device cuda \
                 --processes N"
                    .into(),
            ));
        }
        if self.cpu_workers == 0 && self.bridge_policy != BridgePolicyArg::Measured {
            return Err(Error::Config(
                "--bridge-policy says when the CPU workers of --cpu-workers run beside the GPUs; \
                 it needs --cpu-workers N"
                    .into(),
            ));
        }
        if self.processes.is_some() {
            if self.method != MethodArg::Mgws {
                return Err(Error::Config(format!(
                    "--processes runs the mgws method in PE processes; --method {} runs in one \
                     process: drop --processes or --method",
                    self.method().name()
                )));
            }
            if self.cpu_domains != 1 {
                return Err(Error::Config(
                    "--processes and --cpu-domains exclude each other: each process is a domain"
                        .into(),
                ));
            }
            if !cuda && self.pe_transport != PeTransportArg::Mapped {
                return Err(Error::Config(
                    "--pe-transport device-api is how GPU PEs reach each other; it needs \
                     --device cuda"
                        .into(),
                ));
            }
            if cuda
                && (self.placement != PlacementArg::Global || self.tasks_in != TasksInArg::Device)
            {
                return Err(Error::Config(
                    "--processes keeps each PE's queues in NVSHMEM's symmetric heap and its \
                     tasks on its GPU: --placement and --tasks-in do not apply"
                        .into(),
                ));
            }
        }
        let levels =
            self.method == MethodArg::Levels || self.baselines.contains(&BaselineArg::Levels);
        if self.level_capacity.is_some() && !levels {
            return Err(Error::Config(
                "--level-capacity sizes the levels method's frontier buffers; it needs --method \
                 levels or --baselines levels"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The method `--method` names (with `--level-capacity` for levels).
    pub fn method(&self) -> Method {
        match self.method {
            MethodArg::Mgws => Method::Mgws,
            MethodArg::Static => Method::Static,
            MethodArg::Levels => Method::Levels {
                level_capacity: self.level_capacity,
            },
        }
    }

    /// The CUDA backend these flags describe (whether or not it is selected).
    pub fn cuda(&self) -> Result<mgws::cuda::CudaBackend> {
        let devices = match &self.devices {
            Some(list) => mgws::cuda::parse_devices(list)?,
            None => vec![0],
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
            max_registers: self.max_registers,
            cpu_workers: self.cpu_workers,
            bridge_policy: match self.bridge_policy {
                BridgePolicyArg::Measured => mgws::cuda::BridgePolicy::Measured,
                BridgePolicyArg::Always => mgws::cuda::BridgePolicy::Always,
            },
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
            Some(processes) => Backend::cpu().processes(processes),
            None => Backend::cpu(),
        }
    }

    /// The backend these flags select: `--device` (with `auto` resolved), `--method`, and the
    /// layout of `--processes` and `--nodes`. `auto` takes the GPU when libcuda loads, the GPU
    /// exists and the kernel PTX is found, else the CPU, and says which on stderr (once).
    pub fn backend<R: Registry>(&self) -> Result<Backend> {
        let gpu_only = self.devices.is_some()
            || self.ptx.is_some()
            || self.max_registers.is_some()
            || self.cpu_workers > 0;
        // Several processes run the CPU loop (`auto` included: GPU runs are one process).
        let device = match (self.device, self.processes) {
            (DeviceArg::Auto, Some(_)) => DeviceArg::Cpu,
            (d, _) => d,
        };
        let method = self.method();
        match device {
            DeviceArg::Cpu if gpu_only => Err(Error::Config(
                "--devices, --ptx, --max-registers and --cpu-workers need --device cuda".into(),
            )),
            DeviceArg::Cpu => Ok(self.cpu_mgws_backend().method(method)),
            DeviceArg::Cuda => {
                let cuda = self.cuda()?;
                let Some(processes) = self.processes else {
                    cuda.probe::<R>()?;
                    return Ok(Backend::cuda(cuda).method(method));
                };
                let layout = match self.nodes()? {
                    Some(nodes) => ProcessLayout::Nodes { processes, nodes },
                    None => ProcessLayout::Pes { processes },
                };
                // PEs take the visible GPUs in turn unless --devices names them.
                let cuda = mgws::cuda::CudaBackend {
                    devices: if self.devices.is_none() {
                        Vec::new()
                    } else {
                        cuda.devices.clone()
                    },
                    placement: mgws::cuda::Placement::Symmetric,
                    ..cuda
                };
                Ok(Backend::cuda(cuda).method(method).layout(layout))
            }
            DeviceArg::Auto => {
                let cuda = self.cuda()?;
                let use_cuda = *self.auto_cuda.get_or_init(|| match cuda.probe::<R>() {
                    Ok(what) => {
                        eprintln!("mgws: --device auto: running on CUDA, {what}");
                        true
                    }
                    Err(e) => {
                        eprintln!("mgws: --device auto: running on the CPU ({e})");
                        false
                    }
                });
                Ok(if use_cuda {
                    Backend::cuda(cuda).method(method)
                } else {
                    Backend::cpu().method(method)
                })
            }
        }
    }
}
