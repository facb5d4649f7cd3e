//! The `mgws` command line.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::output;
use crate::workload::Outcome;
use mgws::backend::Backend;
use mgws::error::{Error, Result};
use mgws::scheduler::{Scheduler, VictimPolicy};
use mgws::{OverflowMode, TerminationMode};
use mgws_tasks::{ContainsTasks, FibTasks, MemsetTasks, Registry, SkewTasks, StallTasks, UtsTasks};

#[derive(Parser, Debug)]
#[command(
    name = "mgws",
    version,
    about = "MGWS: work stealing in which GPUs schedule their own work"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one workload and verify its result.
    Run {
        #[command(subcommand)]
        workload: WorkloadCmd,
    },
    /// Run a workload with mgws, static assignment, rayon and sequentially for several worker
    /// counts; print tasks/s (min/median/max over repetitions) and write CSV and an SVG plot.
    Bench {
        #[command(subcommand)]
        workload: crate::bench::BenchCmd,
    },
}

#[derive(Subcommand, Debug)]
pub enum WorkloadCmd {
    /// MEMSET: N independent tasks, task x marks slot x; verifies exactly-once execution.
    Memset {
        /// Number of tasks.
        #[arg(long, default_value_t = 1 << 20, help_heading = "Workload")]
        tasks: u64,
        /// Diagnostic: give initial task N a tag the registry does not know (the run must stop
        /// with an error naming the tag).
        #[arg(long, value_name = "N", hide = true)]
        corrupt_tag_of: Option<u64>,
        #[command(flatten)]
        sched: SchedArgs,
    },
    /// CONTAINS: count the articles of a corpus that contain a word; verified by a sequential scan.
    Contains {
        #[command(flatten)]
        args: crate::workload::args::ContainsArgs,
        #[command(flatten)]
        sched: SchedArgs,
    },
    /// UTS: expand an unbalanced tree search tree, one task per node; verified by the published
    /// counts or a parallel traversal on the host.
    Uts {
        #[command(flatten)]
        args: crate::workload::args::UtsArgs,
        #[command(flatten)]
        sched: SchedArgs,
    },
    /// FIB: naive recursive Fibonacci, one task per call; verified in closed form.
    Fib {
        #[command(flatten)]
        args: crate::workload::args::FibArgs,
        #[command(flatten)]
        sched: SchedArgs,
    },
    /// SKEW: independent tasks whose costs are the AND of k+1 random BITS-bit words (k = 0:
    /// uniform; each AND halves the mean and skews the shares of static assignment); every slot
    /// verified against a sequential computation.
    Skew {
        /// Number of tasks.
        #[arg(long, default_value_t = 1 << 16, help_heading = "Workload")]
        tasks: u64,
        /// ANDs per cost (0..=32).
        #[arg(long, default_value_t = 0, help_heading = "Workload")]
        k: u32,
        /// Bits of a cost word (1..=24): a task costs up to 2^BITS - 1 units of hashing.
        #[arg(long, default_value_t = 12, help_heading = "Workload")]
        bits: u32,
        /// Seed of the cost hashes.
        #[arg(long, default_value_t = 1, help_heading = "Workload")]
        cost_seed: u64,
        #[command(flatten)]
        sched: SchedArgs,
    },
    /// STALL (diagnostic): tasks that busy-wait without progress. With --watchdog-ms below
    /// --nanos / 1e6 the run must end in a hang error that lists every worker's state.
    Stall {
        /// Number of tasks.
        #[arg(long, default_value_t = 1, help_heading = "Workload")]
        tasks: u64,
        /// Nanoseconds each task waits.
        #[arg(long, default_value_t = 2_000_000_000, help_heading = "Workload")]
        nanos: u64,
        #[command(flatten)]
        sched: SchedArgs,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// The GPU when one is usable, else the CPU.
    Auto,
    /// CPU threads running the mgws worker loop.
    Cpu,
    /// Baseline static on CPU threads: contiguous shares of the initial tasks, each run
    /// depth-first with everything it spawns, no stealing.
    CpuStatic,
    /// Baseline levels on CPU threads: level by level, each frontier split evenly over the
    /// workers.
    CpuLevels,
    /// NVIDIA GPUs (`--gpu-kernel` picks mgws or a baseline kernel).
    Cuda,
}

/// A baseline run after the main run (`--baselines`), on the same kind of device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BaselineArg {
    /// Static assignment, depth-first, no stealing (CPU: cpu-static; CUDA: `mgws_static`).
    Static,
    /// Level by level (CPU: cpu-levels; CUDA: one `mgws_level` launch per level).
    Levels,
}

impl BaselineArg {
    /// The name the baseline has on every backend.
    pub fn name(self) -> &'static str {
        match self {
            BaselineArg::Static => "static",
            BaselineArg::Levels => "levels",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TerminationArg {
    /// One counter of idle workers.
    Counter,
    /// Voting trees: one per device, and one over the devices.
    Tree,
    /// An idle counter per device, and a count of all-idle devices.
    Hierarchical,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OverflowArg {
    /// A thief reads a queue's word before every fetch-add on it (two atomics per steal).
    TwoAtomics,
    /// Steal damping: a thief reads a queue's word before a fetch-add only after its last
    /// attempt there failed.
    Damping,
}

/// Where a GPU run keeps its orchestration data (public queues, termination state).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PlacementArg {
    /// Each GPU's own memory.
    Global,
    /// Mapped pinned host memory (one GPU only on GPUs without native host atomics).
    Host,
    /// Another GPU's memory over NVLink (needs two GPUs).
    Remote,
}

/// How GPU PEs (`--backend cuda --processes N`) reach each other's queues and termination words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PeTransportArg {
    /// Loads, stores and atomics through NVSHMEM's mappings of the other PEs (one node, GPUs
    /// with peer access).
    Mapped,
    /// NVSHMEM's device API, which also reaches PEs it cannot map (other nodes): the kernel of
    /// `cargo xtask ptx --nvshmem`, linked at start-up (needs NVRTC and NVSHMEM's device files).
    DeviceApi,
}

/// Where a GPU run keeps the initial tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TasksInArg {
    Device,
    Host,
}

/// How the read-write data areas of a run over several GPUs are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AreaLayoutArg {
    /// Each area as its workload chose: result rows per worker, other outputs partitioned.
    Auto,
    /// Every area once, on the first GPU (the others reach it over NVLink).
    SingleHome,
    /// Every area split into one slice per GPU under one address range.
    Partitioned,
    /// A copy per GPU, added up after the run (exact for areas that tasks only add to).
    ReplicatedAdd,
}

/// Which GPU kernel runs the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GpuKernelArg {
    /// MGWS: the persistent work-stealing kernel.
    Mgws,
    /// Baseline: static assignment, the initial tasks split evenly over the blocks.
    Static,
    /// Baseline: one kernel launch per level of spawned tasks, orchestrated by the CPU.
    Levels,
}

impl From<GpuKernelArg> for mgws::cuda::GpuKernel {
    fn from(k: GpuKernelArg) -> Self {
        match k {
            GpuKernelArg::Mgws => mgws::cuda::GpuKernel::Mgws,
            GpuKernelArg::Static => mgws::cuda::GpuKernel::Static,
            GpuKernelArg::Levels => mgws::cuda::GpuKernel::Levels,
        }
    }
}

/// `--spill-capacity` when neither the user nor the workload chose one.
pub const DEFAULT_SPILL_CAPACITY: u32 = 16384;

/// Backend, worker and queue flags shared by every workload.
#[derive(Args, Debug, Clone)]
pub struct SchedArgs {
    #[arg(long, value_enum, default_value_t = BackendArg::Auto, help_heading = "Scheduler")]
    pub backend: BackendArg,
    /// Workers (CPU: thread groups, default one per core; CUDA: thread blocks over all GPUs,
    /// default as many as are co-resident, which is also the most accepted).
    #[arg(long, help_heading = "Scheduler")]
    pub workers: Option<u32>,
    /// Lanes per worker (CPU: threads per worker, default 1; 2 or more run about 40x slower,
    /// for tests of the lane protocol; CUDA: threads per block, 32..=1024, default 32).
    #[arg(long, help_heading = "Scheduler")]
    pub lanes: Option<u32>,
    /// Tasks each public queue holds (a power of two).
    #[arg(long, default_value_t = 256, help_heading = "Scheduler")]
    pub public_capacity: u32,
    /// Local-queue capacity in tasks (default: 32, the thesis's, on the CPU; 64 with `--backend
    /// cuda`, measured faster on deep trees there).
    #[arg(long, help_heading = "Scheduler")]
    pub local_capacity: Option<u32>,
    /// The most initial tasks a worker claims at once, 1 to half the local queue (default: half
    /// the local queue, at most 32: 16 on the CPU, 32 with `--backend cuda`); claims shrink
    /// towards one task as a home range empties.
    #[arg(long, help_heading = "Scheduler")]
    pub initial_chunk: Option<u32>,
    /// Overflow-stack tasks per worker, used when both queues are full (default: 16384; UTS
    /// T3L, whose path holds about 90,000 pending nodes, 131072).
    #[arg(long, help_heading = "Scheduler")]
    pub spill_capacity: Option<u32>,
    /// Workers sharing one public queue, 1, 2 or 4 (default: 1; 2 with `--backend cuda` when
    /// the workers pair up on every GPU and no `--cpu-workers` run beside them).
    #[arg(long, help_heading = "Scheduler")]
    pub queue_sharing: Option<u32>,
    /// Termination detection (default: counter; hierarchical with --processes).
    #[arg(long, value_enum, help_heading = "Scheduler")]
    pub termination: Option<TerminationArg>,
    /// How thieves keep a queue's steal counter from overflowing (docs/design.md 3.6).
    #[arg(long, value_enum, default_value_t = OverflowArg::Damping, help_heading = "Scheduler")]
    pub overflow: OverflowArg,
    /// Probability of stealing from the own device first (multi-device runs); across nodes
    /// also the probability of the own node's other PEs before other nodes' (default 0.9 with
    /// --nodes above 1, else --local-first).
    #[arg(long, help_heading = "Scheduler")]
    pub same_device_bias: Option<f64>,
    /// Steal from the own device until this many attempts in a row found nothing, then once
    /// from another device (the default policy, with 1 attempt; initial tasks wait for 64;
    /// multi-device runs).
    #[arg(long, help_heading = "Scheduler")]
    pub local_first: Option<u16>,
    /// Steal only from workers of the own device.
    #[arg(long, help_heading = "Scheduler")]
    pub same_device_only: bool,
    /// Seed of the victim-selection generators.
    #[arg(long, default_value_t = 0x6d67_7773, help_heading = "Scheduler")]
    pub seed: u64,
    /// Abort a run that makes no progress for this many milliseconds.
    #[arg(long, default_value_t = 10_000, help_heading = "Scheduler")]
    pub watchdog_ms: u64,
    /// CPU: leave worker threads unbound (by default each is bound to one CPU, round robin).
    #[arg(long, help_heading = "Scheduler")]
    pub no_pin_threads: bool,
    /// CPU: split the workers into this many domains that act as devices (own queues, own idle
    /// counter under --termination hierarchical, seen by the same-device victim policies).
    #[arg(long, default_value_t = 1, help_heading = "Scheduler")]
    pub cpu_domains: u32,
    /// Run the workers in this many processes on this machine, one PE each: each PE is a domain
    /// of its own (own public queues, own idle counter under --termination hierarchical, the
    /// default then). With --backend cpu (or auto) the processes share one memory file (the CPU
    /// twin); with --backend cuda each PE runs the mgws kernel on one GPU (--devices in turn,
    /// else every visible GPU in turn) and the PEs join through NVSHMEM.
    #[arg(long, help_heading = "Scheduler")]
    pub processes: Option<u32>,
    /// With --processes: how long to wait for every PE to be ready (started, GPU opened, NVSHMEM
    /// joined, memory allocated), in milliseconds; at least --watchdog-ms. A late PE ends the
    /// run with an error saying where each late PE was.
    #[arg(long, default_value_t = 30_000, help_heading = "Scheduler")]
    pub start_timeout_ms: u64,
    /// With --backend cuda --processes: how the PEs reach each other's queues and termination
    /// words (docs/design.md 5.7 and 5.8).
    #[arg(long, value_enum, default_value = "mapped", help_heading = "CUDA")]
    pub pe_transport: PeTransportArg,
    /// With --backend cuda --processes N --pe-transport device-api: run over this many nodes,
    /// one launcher (this command, the same on every node) per node, each starting N / nodes
    /// PEs on its own GPUs; node 0's launcher coordinates (docs/design.md 5.9).
    #[arg(long, help_heading = "Nodes")]
    pub nodes: Option<u32>,
    /// With --nodes: this launcher's node, 0 to nodes - 1 (default: from MGWS_NODE_RANK, or the
    /// rank mpirun, PMIx, PMI or srun gives: OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK,
    /// SLURM_PROCID).
    #[arg(long, help_heading = "Nodes")]
    pub node_rank: Option<u32>,
    /// With --nodes: HOST:PORT where node 0's launcher listens and the others connect (default:
    /// MGWS_COORDINATOR); an address of node 0's machine.
    #[arg(long, help_heading = "Nodes")]
    pub coordinator: Option<String>,
    /// Print one JSON object on stdout instead of text.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// Run the workload N times in this process, each run verified and reported (under --json,
    /// runs 2 to N in `repeats`). A GPU's context and loaded kernel are kept for the later runs,
    /// so their set-up shows what a program that reuses its backend pays per run.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..), help_heading = "Output")]
    pub repeat: u32,
    /// CUDA: the GPU to run on (default 0).
    #[arg(long, conflicts_with = "devices", help_heading = "CUDA")]
    pub device: Option<u32>,
    /// CUDA: several GPUs, one persistent kernel each (e.g. 0,1); they need peer access.
    #[arg(long, help_heading = "CUDA")]
    pub devices: Option<String>,
    /// CUDA: CPU worker threads beside the GPUs, stealing from them and they from it through
    /// single-writer mailboxes in pinned host memory (no atomics cross PCIe).
    #[arg(long, default_value_t = 0, help_heading = "CUDA")]
    pub cpu_workers: u32,
    /// CUDA: where the public queues and termination state live.
    #[arg(long, value_enum, default_value_t = PlacementArg::Global, help_heading = "CUDA")]
    pub placement: PlacementArg,
    /// CUDA: where the initial tasks live.
    #[arg(long, value_enum, default_value_t = TasksInArg::Device, help_heading = "CUDA")]
    pub tasks_in: TasksInArg,
    /// CUDA, several GPUs: where the read-write data areas live.
    #[arg(long, value_enum, default_value_t = AreaLayoutArg::Auto, help_heading = "CUDA")]
    pub area_layout: AreaLayoutArg,
    /// CUDA: the kernel PTX (default: $MGWS_PTX, else mgws_kernel.sm_90.ptx next to the binary or
    /// in target/ptx/, as `cargo xtask ptx` writes it).
    #[arg(long, help_heading = "CUDA")]
    pub ptx: Option<std::path::PathBuf>,
    /// CUDA: the kernel that runs the workload.
    #[arg(long, value_enum, default_value_t = GpuKernelArg::Mgws, help_heading = "CUDA")]
    pub gpu_kernel: GpuKernelArg,
    /// After the run, run the same workload with these baselines on the same kind of device, in
    /// the same process (e.g. static,levels), and print each outcome.
    #[arg(long, value_enum, value_delimiter = ',', help_heading = "Baselines")]
    pub baselines: Vec<BaselineArg>,
    /// The levels baselines (cpu-levels, CUDA kernel-per-level): tasks one frontier buffer
    /// holds (default: CUDA from free GPU memory; cpu-levels four fifths of the available host
    /// memory for both buffers).
    #[arg(long, help_heading = "Baselines")]
    pub level_capacity: Option<u64>,
    /// CUDA: registers per thread the PTX is compiled with (fewer: more resident workers, maybe
    /// spills; default: the registry's own cap (MEMSET 64), else 128, lowered so one block of
    /// --lanes threads fits).
    #[arg(long, help_heading = "CUDA")]
    pub max_registers: Option<u32>,
    /// `mgws run` draws a progress line on a terminal (`mgws bench` draws its own).
    #[arg(skip)]
    pub show_progress: bool,
    /// Whether `--backend auto` found a usable GPU (probed once).
    #[arg(skip)]
    pub auto_cuda: std::sync::OnceLock<bool>,
}

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

/// Reports a command line that did not parse: help and version go to stdout (exit 0); anything
/// else is a usage error on stderr (and, under `--json`, a JSON error on stdout), exit
/// [`output::EXIT_USAGE`].
pub fn usage_error(e: &clap::Error, json: bool) -> i32 {
    use clap::error::ErrorKind;
    // Printing can only fail on a closed or full stream; there is nothing left to tell then.
    let _ = e.print();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => output::EXIT_OK,
        _ => {
            if json {
                let rendered = e.render().to_string();
                let first = rendered.lines().next().unwrap_or_default();
                let message = first.strip_prefix("error: ").unwrap_or(first);
                let _ = output::json(&output::json_error(message, "usage"));
            }
            output::EXIT_USAGE
        }
    }
}

/// An outcome as one JSON object.
pub fn outcome_json(outcome: &Outcome, sched: &Scheduler) -> serde_json::Value {
    let r = &outcome.report;
    serde_json::json!({
        "workload": outcome.workload,
        "backend": r.backend,
        "workers": r.workers,
        "lanes": r.lanes,
        "tasks": r.tasks_run,
        "setup_s": r.setup_s,
        "setup": {
            "open_s": r.setup.open_s,
            "module_s": r.setup.module_s,
            "memory_s": r.setup.memory_s,
            "launch_s": r.setup.launch_s,
        },
        "elapsed_s": r.elapsed_s,
        "finish_s": r.finish_s,
        "wall_s": r.wall_s,
        "tasks_per_s": r.tasks_per_s(),
        "verified": outcome.verified,
        "check": outcome.check,
        "result": outcome.result,
        "config": {
            "public_capacity": sched.config().public_capacity,
            "local_capacity": sched.config().local_capacity,
            "initial_chunk": sched.config().initial_chunk,
            "queue_sharing": sched.config().workers_per_queue,
            "termination": format!("{:?}", sched.config().termination_mode()),
            "overflow": format!("{:?}", sched.config().overflow_mode()),
            "same_device_bias": f64::from(sched.config().same_device_bias_permille) / 1000.0,
            "local_first": sched.config().local_first_tries,
        },
        "stats": {
            "steal_attempts": r.total(|w| w.steal_attempts),
            "steals": r.total(|w| w.steals),
            "tasks_stolen": r.total(|w| w.tasks_stolen),
            "acquires": r.total(|w| w.acquires),
            "releases": r.total(|w| w.releases),
            "spills": r.total(|w| w.spills),
        },
        "per_worker": r.per_worker,
    })
}

/// An outcome as text, one line per fact.
pub fn outcome_text(outcome: &Outcome) -> String {
    use std::fmt::Write as _;
    let r = &outcome.report;
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(
        s,
        "{} on {} backend: {} workers x {} lanes, {} tasks in {:.4} s = {:.3e} tasks/s \
         (set-up before it {:.4} s, finish after it {:.4} s, {:.4} s in all)",
        outcome.workload,
        r.backend,
        r.workers,
        r.lanes,
        r.tasks_run,
        r.elapsed_s,
        r.tasks_per_s(),
        r.setup_s,
        r.finish_s,
        r.wall_s
    );
    let t = &r.setup;
    let _ = writeln!(
        s,
        "set-up: open {:.4} s, kernel module {:.4} s, memory {:.4} s, launch {:.4} s",
        t.open_s, t.module_s, t.memory_s, t.launch_s
    );
    let _ = writeln!(s, "result: {}", outcome.result);
    if let Some(idle) = r.idle_share().filter(|_| r.workers > 1) {
        let _ = writeln!(
            s,
            "balance: the workers waited for each other {} for {:.1}% of the run on average",
            if r.backend.ends_with("static") {
                "after their share"
            } else {
                "at the level barriers"
            },
            100.0 * idle
        );
    }
    let _ = writeln!(
        s,
        "steals: {} of {} attempts ({} tasks), acquires {}, releases {}",
        r.total(|w| w.steals),
        r.total(|w| w.steal_attempts),
        r.total(|w| w.tasks_stolen),
        r.total(|w| w.acquires),
        r.total(|w| w.releases)
    );
    let _ = writeln!(
        s,
        "verified: {} ({})",
        if outcome.verified { "yes" } else { "NO" },
        outcome.check
    );
    s
}

/// The exit code of an outcome.
fn outcome_code(outcome: &Outcome) -> i32 {
    if outcome.verified {
        output::EXIT_OK
    } else {
        output::EXIT_NOT_VERIFIED
    }
}

/// Serves `pe`, a PE process that a multi-process run of this program started (`--processes`),
/// with the built-in registry of its run; returns the process's exit code.
pub fn serve_pe(pe: mgws::processes::Pe) -> i32 {
    let name = match pe.registry_name() {
        Ok(name) => name,
        Err(e) => return pe.refuse(&e.to_string()),
    };
    match name.as_str() {
        MemsetTasks::NAME => pe.serve::<MemsetTasks>(),
        ContainsTasks::NAME => pe.serve::<ContainsTasks>(),
        UtsTasks::NAME => pe.serve::<UtsTasks>(),
        FibTasks::NAME => pe.serve::<FibTasks>(),
        SkewTasks::NAME => pe.serve::<SkewTasks>(),
        StallTasks::NAME => pe.serve::<StallTasks>(),
        other => {
            let reason = format!("the run's registry `{other}` is none of this program's");
            pe.refuse(&reason)
        }
    }
}

/// Runs the parsed command line; returns the process exit code ([`output`]'s codes).
pub fn main_with(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Run { mut workload } => {
            workload.sched_mut().reject_inapplicable()?;
            workload.sched_mut().show_progress = true;
            let baselines = std::mem::take(&mut workload.sched_mut().baselines);
            let json = workload.sched_mut().json;
            let repeat = workload.sched_mut().repeat;
            let (outcome, sched) = run_workload(&workload)?;
            let mut code = outcome_code(&outcome);
            let mut main = if json {
                outcome_json(&outcome, &sched)
            } else {
                output::emit(&outcome_text(&outcome))?;
                serde_json::Value::Null
            };
            let mut repeats = Vec::new();
            for _ in 1..repeat {
                let (o, s) = run_workload(&workload)?;
                code = code.max(outcome_code(&o));
                if json {
                    repeats.push(outcome_json(&o, &s));
                } else {
                    output::emit(&outcome_text(&o))?;
                }
            }
            if json && !repeats.is_empty() {
                main["repeats"] = repeats.into();
            }
            // Baselines: the same workload, built and verified the same way, in this process, on
            // the same kind of device (`auto` resolved once, by the main run).
            let on_gpu = !baselines.is_empty() && workload.on_gpu()?;
            let mut extra = Vec::new();
            for baseline in baselines {
                let sched = workload.sched_mut();
                match (on_gpu, baseline) {
                    (true, BaselineArg::Static) => sched.gpu_kernel = GpuKernelArg::Static,
                    (true, BaselineArg::Levels) => sched.gpu_kernel = GpuKernelArg::Levels,
                    (false, BaselineArg::Static) => sched.backend = BackendArg::CpuStatic,
                    (false, BaselineArg::Levels) => sched.backend = BackendArg::CpuLevels,
                }
                // The CPU baselines run in this one process.
                sched.processes = None;
                match run_workload(&workload) {
                    Ok((o, s)) => {
                        code = code.max(outcome_code(&o));
                        if json {
                            let mut v = outcome_json(&o, &s);
                            v["baseline"] = baseline.name().into();
                            extra.push(v);
                        } else {
                            output::emit(&outcome_text(&o))?;
                        }
                    }
                    Err(e) => {
                        // A baseline that fails fails the command: its figures are missing.
                        eprintln!("mgws: baseline {}: error: {e}", baseline.name());
                        code = code.max(output::EXIT_ERROR);
                        if json {
                            let mut v = output::json_error(&e.to_string(), e.kind());
                            v["baseline"] = baseline.name().into();
                            extra.push(v);
                        }
                    }
                }
            }
            if json {
                if !extra.is_empty() {
                    main["baselines"] = extra.into();
                }
                output::json(&main)?;
            }
            Ok(code)
        }
        Command::Bench { workload } => crate::bench::main(workload),
    }
}

impl WorkloadCmd {
    /// The scheduler and backend flags of the command.
    pub fn sched_mut(&mut self) -> &mut SchedArgs {
        match self {
            WorkloadCmd::Memset { sched, .. }
            | WorkloadCmd::Contains { sched, .. }
            | WorkloadCmd::Uts { sched, .. }
            | WorkloadCmd::Fib { sched, .. }
            | WorkloadCmd::Skew { sched, .. }
            | WorkloadCmd::Stall { sched, .. } => sched,
        }
    }

    /// Whether the command's backend (with `auto` resolved for its registry) is a GPU.
    pub fn on_gpu(&self) -> Result<bool> {
        let backend = match self {
            WorkloadCmd::Memset { sched, .. } => sched.backend::<MemsetTasks>()?,
            WorkloadCmd::Contains { sched, .. } => sched.backend::<ContainsTasks>()?,
            WorkloadCmd::Uts { sched, .. } => sched.backend::<UtsTasks>()?,
            WorkloadCmd::Fib { sched, .. } => sched.backend::<FibTasks>()?,
            WorkloadCmd::Skew { sched, .. } => sched.backend::<SkewTasks>()?,
            WorkloadCmd::Stall { sched, .. } => sched.backend::<StallTasks>()?,
        };
        Ok(backend.on_gpu())
    }
}

/// Runs one workload command; returns its outcome and the scheduler it ran with.
fn run_workload(workload: &WorkloadCmd) -> Result<(Outcome, Scheduler)> {
    let (outcome, sched) = match workload {
        WorkloadCmd::Memset {
            tasks,
            corrupt_tag_of,
            sched,
        } => {
            let s = sched.scheduler::<MemsetTasks>()?;
            (
                crate::workload::memset::run_with_fault(
                    &s,
                    &sched.backend::<MemsetTasks>()?,
                    *tasks,
                    *corrupt_tag_of,
                )?,
                s,
            )
        }
        WorkloadCmd::Contains { args, sched } => {
            let corpus = args.load()?;
            let s = sched.scheduler::<ContainsTasks>()?;
            (
                crate::workload::contains::run(
                    &s,
                    &sched.backend::<ContainsTasks>()?,
                    &corpus,
                    args.word.as_bytes(),
                )?,
                s,
            )
        }
        WorkloadCmd::Uts { args, sched } => {
            let cfg = args.config()?;
            let mut sched = sched.clone();
            sched.spill_capacity = sched.spill_capacity.or(cfg.spill_hint());
            let sched = &sched;
            let s = sched.scheduler::<UtsTasks>()?;
            (
                crate::workload::uts::run(&s, &sched.backend::<UtsTasks>()?, &cfg)?,
                s,
            )
        }
        WorkloadCmd::Fib { args, sched } => {
            let s = sched.scheduler::<FibTasks>()?;
            (
                crate::workload::fib::run(&s, &sched.backend::<FibTasks>()?, args.n)?,
                s,
            )
        }
        WorkloadCmd::Skew {
            tasks,
            k,
            bits,
            cost_seed,
            sched,
        } => {
            let cfg = crate::workload::skew::SkewConfig {
                tasks: *tasks,
                k: *k,
                bits: *bits,
                seed: *cost_seed,
            };
            cfg.check()?;
            let s = sched.scheduler::<SkewTasks>()?;
            (
                crate::workload::skew::run(&s, &sched.backend::<SkewTasks>()?, &cfg)?,
                s,
            )
        }
        WorkloadCmd::Stall {
            tasks,
            nanos,
            sched,
        } => {
            let s = sched.scheduler::<StallTasks>()?;
            (
                crate::workload::stall::run(&s, &sched.backend::<StallTasks>()?, *tasks, *nanos)?,
                s,
            )
        }
    };
    Ok((outcome, sched))
}
