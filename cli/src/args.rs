//! The flags of `mgws run` (the workload commands and the scheduler and backend options that
//! `mgws bench` shares): their clap types, and which backend a workload command names.

use clap::{Args, Subcommand, ValueEnum};

use mgws::error::Result;
use mgws_tasks::{ContainsTasks, FibTasks, MemsetTasks, SkewTasks, StallTasks, UtsTasks};

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

/// What the workers run on (`--device`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DeviceArg {
    /// The GPU when one is usable, else the CPU.
    Auto,
    /// CPU threads.
    Cpu,
    /// NVIDIA GPUs (`--devices` picks them).
    Cuda,
}

/// The scheduling method (`--method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MethodArg {
    /// Work stealing: the mgws loop on CPU threads, the persistent kernel on GPUs.
    Mgws,
    /// Baseline: contiguous shares of the initial tasks, each run depth-first with everything
    /// it spawns, no stealing.
    Static,
    /// Baseline: level by level, each frontier split evenly over the workers (CUDA: one kernel
    /// launch per level, one GPU).
    Levels,
}

/// A baseline run after the main run (`--baselines`), on the same kind of device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BaselineArg {
    /// Static assignment, depth-first, no stealing (`--method static`).
    Static,
    /// Level by level (`--method levels`).
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

    /// The method that runs the baseline.
    pub fn method(self) -> MethodArg {
        match self {
            BaselineArg::Static => MethodArg::Static,
            BaselineArg::Levels => MethodArg::Levels,
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

/// How GPU PEs (`--device cuda --processes N`) reach each other's queues and termination words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PeTransportArg {
    /// Loads, stores and atomics through NVSHMEM's mappings of the other PEs (one node, GPUs
    /// with peer access).
    Mapped,
    /// NVSHMEM's device API, which also reaches PEs it cannot map (other nodes): the kernel of
    /// `cargo xtask ptx --nvshmem`, linked at start-up (needs NVRTC and NVSHMEM's device files).
    DeviceApi,
}

/// When the CPU workers of `--cpu-workers` run beside the GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BridgePolicyArg {
    /// By measurement, per job (kept in the cache directory for later processes): a job's first
    /// run has one CPU worker; a job whose CPU workers would run under 1% of its tasks, or ran it
    /// slower than the GPUs alone, runs on the GPUs alone from then on.
    Measured,
    /// In every run, whatever they add (for comparisons).
    Always,
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

/// `--spill-capacity` when neither the user nor the workload chose one.
pub const DEFAULT_SPILL_CAPACITY: u32 = 16384;

/// Backend, worker and queue flags shared by every workload.
#[derive(Args, Debug, Clone)]
pub struct SchedArgs {
    /// Where the workers run (auto: the GPU when libcuda loads, a GPU exists and the PTX is
    /// found, else the CPU, said on stderr; with --processes the CPU).
    #[arg(long, value_enum, default_value_t = DeviceArg::Auto, help_heading = "Scheduler")]
    pub device: DeviceArg,
    /// The scheduling method: work stealing, or the static or levels baseline.
    #[arg(long, value_enum, default_value_t = MethodArg::Mgws, help_heading = "Scheduler")]
    pub method: MethodArg,
    /// Workers (CPU: thread groups, default one per core; CUDA: thread blocks over all GPUs,
    /// default as many as are co-resident, which is also the most accepted).
    #[arg(long, help_heading = "Scheduler")]
    pub workers: Option<u32>,
    /// Lanes per worker (CPU: threads per worker, default 1; 2 or more run far slower, the lanes
    /// meeting at barriers around every task, for tests of the lane protocol; CUDA: threads per
    /// block, 32..=1024, default 32).
    #[arg(long, help_heading = "Scheduler")]
    pub lanes: Option<u32>,
    /// Tasks each public queue holds (default: 256; with `--device cuda` the registry's, UTS
    /// 512, where T2L's thieves found more to steal).
    #[arg(long, help_heading = "Scheduler")]
    pub public_capacity: Option<u32>,
    /// Local-queue capacity in tasks (default: 32, the thesis's, on the CPU; with `--device
    /// cuda` the registry's, FIB and UTS 256, room for a batch of narrow tasks' spawns
    /// (FIB's kernel per level 128), MEMSET 128, room for a claim of two batches (its static
    /// baseline 64), else 64, measured faster on deep trees there).
    #[arg(long, help_heading = "Scheduler")]
    pub local_capacity: Option<u32>,
    /// The most initial tasks a worker claims at once, 1 to half the local queue (default: half
    /// the local queue, at most 64: 16 on the CPU; with `--device cuda` 32, MEMSET 64); claims
    /// shrink towards one task as a home range empties.
    #[arg(long, help_heading = "Scheduler")]
    pub initial_chunk: Option<u32>,
    /// Overflow-stack tasks per worker, used when both queues are full (default: 16384; UTS
    /// T3L, whose path holds about 90,000 pending nodes, 131072).
    #[arg(long, help_heading = "Scheduler")]
    pub spill_capacity: Option<u32>,
    /// Workers sharing one public queue, 1, 2 or 4 (default: 1; 2 for the GPUs' workers with
    /// `--device cuda` when they pair up on every GPU, CPU workers beside them or not).
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
    /// from another device (the default policy, with 1 attempt; multi-device runs). Claims of
    /// initial tasks keep their own count: 16 in a row that found nothing on the own device.
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
    /// default then). With --device cpu (or auto) the processes share one memory file (the CPU
    /// twin); with --device cuda each PE runs the mgws kernel on one GPU (--devices in turn,
    /// else every visible GPU in turn) and the PEs join through NVSHMEM.
    #[arg(long, help_heading = "Scheduler")]
    pub processes: Option<u32>,
    /// With --processes: how long to wait for every PE to be ready (started, GPU opened, NVSHMEM
    /// joined, memory allocated), in milliseconds; at least --watchdog-ms. A late PE ends the
    /// run with an error saying where each late PE was.
    #[arg(long, default_value_t = 30_000, help_heading = "Scheduler")]
    pub start_timeout_ms: u64,
    /// With --device cuda --processes: how the PEs reach each other's queues and termination
    /// words (docs/design.md 5.7 and 5.8).
    #[arg(long, value_enum, default_value = "mapped", help_heading = "CUDA")]
    pub pe_transport: PeTransportArg,
    /// With --device cuda --processes N --pe-transport device-api: run over this many nodes,
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
    /// CUDA: the GPUs to run on (default 0; e.g. 1, or 0,1: one persistent kernel each, with
    /// peer access).
    #[arg(long, help_heading = "CUDA")]
    pub devices: Option<String>,
    /// CUDA: CPU worker threads beside the GPUs, stealing from them and they from it through
    /// single-writer mailboxes in pinned host memory (no atomics cross PCIe).
    #[arg(long, default_value_t = 0, help_heading = "CUDA")]
    pub cpu_workers: u32,
    /// CUDA: whether those CPU workers run in every run, or only while they pay for the bridge
    /// (measured per job, in the process and in `bridge-ledger.txt` of the cache directory).
    #[arg(long, value_enum, default_value = "measured", help_heading = "CUDA")]
    pub bridge_policy: BridgePolicyArg,
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
    /// After the run, run the same workload with these baselines on the same kind of device, in
    /// the same process (e.g. static,levels), and print each outcome.
    #[arg(long, value_enum, value_delimiter = ',', help_heading = "Baselines")]
    pub baselines: Vec<BaselineArg>,
    /// The levels method (CPU or CUDA): tasks one frontier buffer holds (default: CUDA from
    /// free GPU memory; CPU four fifths of the available host memory for both buffers).
    #[arg(long, help_heading = "Baselines")]
    pub level_capacity: Option<u64>,
    /// CUDA: registers per thread the PTX is compiled with (fewer: more resident workers, maybe
    /// spills; default: the registry's own cap (MEMSET 80), else 128, lowered so one block of
    /// --lanes threads fits).
    #[arg(long, help_heading = "CUDA")]
    pub max_registers: Option<u32>,
    /// `mgws run` draws a progress line on a terminal (`mgws bench` draws its own).
    #[arg(skip)]
    pub show_progress: bool,
    /// Whether `--device auto` found a usable GPU (probed once).
    #[arg(skip)]
    pub auto_cuda: std::sync::OnceLock<bool>,
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
