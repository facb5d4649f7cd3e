//! The CUDA backend: the scheduler core as one persistent kernel per GPU, one worker per thread
//! block, launched cooperatively so that every worker is resident at once.
//!
//! The kernel comes from PTX built by `cargo xtask ptx` (the entries `device/kernel` defines for
//! each built-in registry with `mgws_kernel_support::worker_kernel!`; a run launches
//! `mgws_<kernel>_worker_<spec>`, see [`Method::entry`]); libcuda is loaded at run time
//! (`cudarc` with dynamic loading), so building and testing need no CUDA, and a machine without a
//! GPU gets [`Error::BackendUnavailable`].
//!
//! - Grid: the occupancy API says how many blocks of `lanes` threads with the scratch layout's
//!   dynamic shared memory fit per SM; times the SM count that is the most workers a GPU can run
//!   (the default). More are refused.
//! - Orchestration data (public queues, shared state, voting tree) lives where
//!   [`CudaBackend::placement`] says; per-worker progress records and statistics live in each
//!   GPU's own memory, and the host's watchdog copies the progress records out on a separate
//!   stream while the kernel runs.
//! - Never hang: a run that stops making progress is aborted through `SharedState::abort`
//!   (written with a copy on a separate stream while the kernel runs), and returns
//!   [`Error::Hang`] with every worker's state. A kernel fault (trap, illegal address) becomes
//!   [`Error::Cuda`] naming the cause; the process goes on.
//! - Baselines in the same process: [`Method::Static`] runs the PTX's
//!   `mgws_<kernel>_static_<device|system>` entry with the same tasks split evenly;
//!   [`Method::Levels`] runs one launch of `mgws_<kernel>_level` per level of a spawning
//!   workload, orchestrated by the host.

mod bridge_policy;
pub(crate) mod cache;
pub(crate) mod device;
pub(crate) mod driver;
#[cfg(test)]
mod emulate;
pub(crate) mod fill;
mod gate;
pub(crate) mod grid;
mod level_device;
pub(crate) mod link_wake;
pub(crate) mod load_notice;
pub(crate) mod memory;
mod mixed_device;
pub(crate) mod plan;
mod poll;
mod pool;
pub mod ptx;
mod ptx_prune;
pub(crate) mod session;
mod split;

use std::path::PathBuf;

use mgws_core::SchedConfig;
use mgws_tasks::Registry;

pub use bridge_policy::{BridgePolicy, LEDGER_FILE, MIN_CPU_SHARE};
pub use plan::{parse_devices, Placement, TasksIn};

pub use crate::backend::Method;
use crate::device::Defaults;
pub use crate::device::KernelOptions;
use crate::error::{Error, Result};
use crate::job::Job;
use crate::report::RunReport;
use crate::scheduler::Scheduler;

/// The compute capability of GPU `ordinal` (opens it: the driver must load).
#[cfg(feature = "processes")]
pub(crate) fn gpu_cc(ordinal: u32) -> Result<(u32, u32)> {
    guard(|| {
        driver::init()?;
        Ok(cache::gpu(ordinal)?.cc)
    })
}

/// The GPU side of the methods: each runs its own kernel.
impl Method {
    /// The PTX entry point that runs registry `R` with `cfg` (whose `queue_scope` is the one the
    /// run uses, see [`CudaBackend::entry`]): `mgws_<R::KERNEL>_worker_<spec>` (the worker compiled
    /// for `cfg`'s termination, overflow, queue sharing and scope, `mgws_core::entry_suffix`),
    /// `mgws_<R::KERNEL>_static_<device|system>` or `mgws_<R::KERNEL>_level`.
    pub fn entry<R: Registry>(self, cfg: &SchedConfig) -> String {
        match self {
            Method::Mgws => {
                format!("mgws_{}_worker_{}", R::KERNEL, mgws_core::entry_suffix(cfg))
            }
            Method::Static => {
                format!("mgws_{}_static_{}", R::KERNEL, mgws_core::scope_suffix(cfg))
            }
            Method::Levels { .. } => format!("mgws_{}_level", R::KERNEL),
        }
    }

    /// The name runs of this method on CUDA in one process report as their backend (`cuda`,
    /// `cuda-static`, `cuda-levels`).
    pub fn cuda_name(self) -> &'static str {
        match self {
            Method::Mgws => "cuda",
            Method::Static => "cuda-static",
            Method::Levels { .. } => "cuda-levels",
        }
    }
}

/// Options of the CUDA backend. The scheduler's settings (workers in total over all GPUs, lanes =
/// threads per block, queue capacities, termination, ...) come from the [`Scheduler`]; size its
/// workers with [`CudaBackend::max_workers`] to fill the GPUs (workloads size their per-worker
/// result tables from the scheduler, so the count must be known before the job is built).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CudaBackend {
    /// GPU ordinals to run on; empty means GPU 0.
    pub devices: Vec<u32>,
    /// Where the orchestration data (public queues, termination state) lives.
    pub placement: Placement,
    /// Where the initial tasks live.
    pub tasks_in: TasksIn,
    /// The PTX to load; `None` searches as [`ptx::resolve`] says.
    pub ptx: Option<PathBuf>,
    /// Registers per thread the JIT may use (`CU_JIT_MAX_REGISTERS`; fewer registers, more
    /// resident blocks, possibly spills). `None`: as many as still let one block of the run's
    /// lanes fit on an SM (65536 registers / lanes), at most `plan::DEFAULT_MAX_REGISTERS`.
    pub max_registers: Option<u32>,
    /// CPU worker threads that run beside the GPUs and steal from them through a bridge of
    /// single-writer mailboxes in mapped host memory (`mgws_core::bridge`; the GPUs' atomics
    /// on host memory are not atomic against the CPU's). 0: a GPU-only run.
    pub cpu_workers: u32,
    /// Whether those CPU workers run beside the GPUs always, or only while they pay for the
    /// bridge, by measurement per job ([`BridgePolicy`]).
    pub bridge_policy: BridgePolicy,
    /// Runs over GPU PEs ([`crate::ProcessLayout::Pes`] on CUDA) only: how the PEs reach each
    /// other's queues and termination words.
    pub pe_transport: PeTransport,
    /// Lays every read-write data area of a run over several GPUs out this way, whatever the job
    /// chose ([`crate::Job::layout`]): a manual override for comparisons. `None`: each area's own.
    pub area_layout: Option<crate::AreaLayout>,
}

/// How GPU PEs ([`crate::ProcessLayout::Pes`] on CUDA) reach each other's orchestration memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PeTransport {
    /// Loads, stores and atomics through NVSHMEM's mappings of the other PEs' memory
    /// (`nvshmem_ptr`), the path NVSHMEM's own device calls take within a node: the PTX has no
    /// NVSHMEM call. Every PE must map every other: PEs of one node with peer access.
    #[default]
    Mapped,
    /// NVSHMEM's device API (one-sided atomics and gets named by PE), which also reaches PEs
    /// that cannot be mapped (another node): a kernel built with `cargo xtask ptx --nvshmem`,
    /// linked at load time with wrappers compiled by NVRTC and NVSHMEM's device library. Each PE
    /// writes its own copy of the writable data areas; they are combined after the run (design
    /// 5.8).
    DeviceApi,
}

impl PeTransport {
    /// Its name on the command line and in reports (`mapped`, `device-api`).
    pub fn name(self) -> &'static str {
        match self {
            PeTransport::Mapped => "mapped",
            PeTransport::DeviceApi => "device-api",
        }
    }

    /// The transport of `name` (see [`PeTransport::name`]).
    pub fn parse(name: &str) -> Result<PeTransport> {
        match name {
            "mapped" => Ok(PeTransport::Mapped),
            "device-api" => Ok(PeTransport::DeviceApi),
            other => Err(Error::Config(format!(
                "unknown PE transport `{other}`: mapped or device-api"
            ))),
        }
    }

    /// Its word in the multi-process heap's header.
    #[cfg(feature = "processes")]
    pub(crate) fn to_word(self) -> u32 {
        self as u32
    }

    /// The transport a header word names, if any.
    #[cfg(feature = "processes")]
    pub(crate) fn from_word(word: u32) -> Option<PeTransport> {
        [PeTransport::Mapped, PeTransport::DeviceApi]
            .into_iter()
            .find(|t| t.to_word() == word)
    }
}

/// Threads per block the CUDA backend accepts (`--lanes`).
pub const LANES: std::ops::RangeInclusive<u32> = 32..=1024;

/// Refuses a block size outside [`LANES`] with the flag to change.
pub fn check_lanes(lanes: u32) -> Result<()> {
    if LANES.contains(&lanes) {
        return Ok(());
    }
    Err(Error::Config(format!(
        "the CUDA backend runs {}..={} threads per block (--lanes), not {lanes}",
        LANES.start(),
        LANES.end()
    )))
}

/// Threads per block when none are given.
pub const DEFAULT_LANES: u32 = 32;

/// The CLI's local-queue capacity for `--device cuda` when `--local-capacity` is not given (the
/// thesis's 32 stays the default elsewhere). A deep tree fills a 32-task local queue on every
/// branch, and each overflow is a release to the public queue and a later acquire. 64 overflows
/// less often, which ran UTS T1L and FIB faster on a GPU and the other workloads no slower; 48
/// helped less, and 128 was slower again (docs/results.md). The scratch of a 32-lane block grows
/// from 2.6 to 4.7 KB, which leaves the occupancy (16 blocks per SM, bound by registers)
/// unchanged.
pub const DEFAULT_LOCAL_CAPACITY: u32 = 64;

/// The local capacity of `method`'s workers for `R` when the run names none: the registry's
/// ([`Registry::LEVELS_LOCAL_CAPACITY`] for the kernel per level and
/// [`Registry::STATIC_LOCAL_CAPACITY`] for static assignment, falling back to
/// [`Registry::LOCAL_CAPACITY`]), else [`DEFAULT_LOCAL_CAPACITY`].
pub fn default_local_capacity<R: Registry>(method: Method) -> u32 {
    let baseline = match method {
        Method::Levels { .. } => R::LEVELS_LOCAL_CAPACITY,
        Method::Static => R::STATIC_LOCAL_CAPACITY,
        Method::Mgws => None,
    };
    baseline
        .or(R::LOCAL_CAPACITY)
        .unwrap_or(DEFAULT_LOCAL_CAPACITY)
}

/// Workers per public queue of a GPU run that names none
/// ([`CudaBackend::default_queue_sharing`]; measured in docs/results.md, one GPU and four).
pub const DEFAULT_QUEUE_SHARING: u32 = 2;

/// Opens the session a run of a registry loads its kernel through: [`Session::open`] in one
/// process; GPU PEs link NVSHMEM's device code first where their transport calls it.
pub(crate) type Opener = dyn Fn(&CudaBackend, u32, &str) -> Result<session::Session>;

/// [`Opener`] of a single-process run.
fn open<R: Registry>(b: &CudaBackend, lanes: u32, entry: &str) -> Result<session::Session> {
    session::Session::open::<R>(b, lanes, entry)
}

impl CudaBackend {
    /// GPU 0, global placement, initial tasks in device memory, the MGWS kernel.
    pub fn new() -> Self {
        Self::default()
    }

    /// The GPU ordinals of the run.
    pub fn device_list(&self) -> Vec<u32> {
        if self.devices.is_empty() {
            vec![0]
        } else {
            self.devices.clone()
        }
    }

    /// How many GPUs the driver sees (at least one, else [`Error::BackendUnavailable`]).
    pub fn visible_gpus(&self) -> Result<u32> {
        guard(|| {
            driver::init()?;
            match driver::device_count()? {
                0 => Err(Error::BackendUnavailable("no CUDA GPU is visible".into())),
                n => Ok(n),
            }
        })
    }

    /// The number of SMs of the run's first GPU (opens it; the driver must load).
    pub fn sm_count(&self) -> Result<u32> {
        guard(|| {
            driver::init()?;
            Ok(cache::gpu(self.device_list()[0])?.sms)
        })
    }

    /// Frees the device memory this process keeps on the backend's GPUs for later runs (runs
    /// keep their allocations, up to 8 GiB per GPU, so that the next run does not pay for them;
    /// docs/cuda.md, "Start-up"). For a program that needs that memory for something else. GPUs
    /// the process has not opened are left alone.
    pub fn release_kept_memory(&self) -> Result<()> {
        guard(|| {
            driver::init()?;
            for &d in &self.device_list() {
                if let Some(gpu) = cache::opened_gpu(d) {
                    gpu.release_kept_memory()?;
                }
            }
            Ok(())
        })
    }

    /// The compute capability `(major, minor)` of the run's first GPU.
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        guard(|| {
            driver::init()?;
            let cc = cache::gpu(self.device_list()[0])?.cc;
            Ok((cc.0 as i32, cc.1 as i32))
        })
    }

    /// The register limit registry `R`'s PTX is compiled with for blocks of `lanes` threads:
    /// the backend's `max_registers`, else the registry's [`Registry::MAX_REGISTERS`] (lowered
    /// where a block of `lanes` threads would not fit), else the default cap (128 registers,
    /// lowered where one block of `lanes` threads would not fit on an SM).
    pub fn register_cap<R: Registry>(&self, lanes: u32) -> Option<u32> {
        plan::register_cap(self.max_registers, R::MAX_REGISTERS, lanes)
    }

    /// The entry of `method`'s kernel that runs registry `R` with `cfg`, on these GPUs with
    /// this placement (which decide the scope of the orchestration atomics).
    pub fn entry<R: Registry>(&self, method: Method, cfg: &SchedConfig) -> String {
        method.entry::<R>(&self.scoped(method, cfg))
    }

    /// `cfg` with the queue scope this backend's placement and GPUs need for `method`.
    pub fn scoped(&self, method: Method, cfg: &SchedConfig) -> SchedConfig {
        let mut cfg = *cfg;
        // An invalid setting is refused when the grid is sized (`CudaDevice::size_grid`).
        let forced = plan::system_scope_forced(std::env::var("MGWS_QUEUE_SCOPE").ok().as_deref())
            .unwrap_or(false);
        cfg.queue_scope =
            plan::queue_scope(self.placement, self.device_list().len(), forced) as u32;
        if self.cpu_workers > 0 && method == Method::Mgws {
            // The GPUs are side 0 of a bridged run (their own queues keep the scope the GPUs
            // need; the bridge is always accessed at system scope).
            cfg.flags |= mgws_core::RunFlags::BRIDGED.bits();
        }
        cfg
    }

    /// Checks that this backend can run registry `R` here: libcuda loads, the GPUs exist and the
    /// PTX of `R` is found (and carries `R`'s fingerprint). Returns a one-line description of what
    /// would run. Compiles nothing.
    pub fn probe<R: Registry>(&self) -> Result<String> {
        guard(|| {
            driver::init()?;
            let count = driver::device_count()?;
            let devices = self.device_list();
            if count == 0 {
                return Err(Error::BackendUnavailable("no CUDA GPU is visible".into()));
            }
            if let Some(&d) = devices.iter().find(|&&d| d >= count) {
                return Err(Error::BackendUnavailable(format!(
                    "GPU {d} does not exist: {count} GPU{} visible",
                    if count == 1 { " is" } else { "s are" }
                )));
            }
            let src = ptx::source::<R>(self.ptx.as_deref())?;
            let gpu = cache::gpu(devices[0])?;
            let (major, minor) = driver::driver_version()?;
            Ok(format!(
                "GPU {} ({}, {} SMs, sm_{}{}){}, driver CUDA {major}.{minor}, PTX {}",
                gpu.ordinal,
                gpu.name,
                gpu.sms,
                gpu.cc.0,
                gpu.cc.1,
                if devices.len() > 1 {
                    format!(" and {} more", devices.len() - 1)
                } else {
                    String::new()
                },
                src.origin
            ))
        })
    }

    /// The most workers (thread blocks, over all GPUs of the run) that are co-resident with
    /// `lanes` threads per block and the scratch memory of `local_capacity` tasks for `method`'s
    /// kernel: the default worker count of a GPU run, and the most it accepts.
    pub fn max_workers<R: Registry>(
        &self,
        method: Method,
        lanes: u32,
        local_capacity: u32,
        options: KernelOptions,
    ) -> Result<u32> {
        self.check_single_process()?;
        self.max_workers_of::<R>(method, lanes, local_capacity, options, 1, &open::<R>)
    }

    /// [`Self::max_workers`] for a run whose public queues are `copies` times this backend's:
    /// one PE's GPU of a run over `copies` GPU PEs, its kernel loaded by `open`. Only the kernel
    /// per level depends on `copies` (its scratch holds a bit per block of the whole run); a
    /// worker's holds bits for its own GPU's queues only.
    pub(crate) fn max_workers_of<R: Registry>(
        &self,
        method: Method,
        lanes: u32,
        local_capacity: u32,
        options: KernelOptions,
        copies: u32,
        open: &Opener,
    ) -> Result<u32> {
        let workers_per_queue = options
            .workers_per_queue
            .unwrap_or_else(|| self.default_queue_sharing(method, None));
        guard(|| {
            let entry = self.entry::<R>(method, &options.config(workers_per_queue));
            let s = open(self, lanes, &entry)?;
            match method {
                Method::Mgws | Method::Static => {
                    let funcs = s.functions(&entry, &device::WORKER_PARAMS)?;
                    let grid = grid::size_grid(
                        &s,
                        &funcs,
                        local_capacity,
                        workers_per_queue,
                        lanes,
                        None,
                    )?;
                    Ok(grid.topology.workers())
                }
                Method::Levels { .. } => {
                    let f = s.functions(&entry, &level_device::LEVEL_PARAMS)?[0];
                    let g = &s.gpus[0];
                    // The kernel's scratch grows with the grid (one damping bit per block):
                    // size the occupancy query for the largest grid it could get.
                    let ub = copies * plan::worker_upper_bound(g.sms);
                    let smem = plan::scratch_bytes(local_capacity, lanes, ub);
                    let per_sm = grid::blocks_per_sm_for(g, &f, lanes, smem, local_capacity)?;
                    let what = format!("GPU {} ({})", g.ordinal, g.name);
                    plan::fit_workers(None, per_sm, g.sms, workers_per_queue, &what)
                }
            }
        })
    }

    /// The settings a run of registry `R` uses for those left open: [`DEFAULT_LANES`] threads
    /// per block, the registry's local capacity ([`Registry::LOCAL_CAPACITY`], else
    /// [`DEFAULT_LOCAL_CAPACITY`]) and as many workers as are co-resident
    /// ([`Self::max_workers`]; the kernel of `method` is loaded once and cached for the run).
    pub(crate) fn defaults<R: Registry>(
        &self,
        method: Method,
        lanes: Option<u32>,
        local_capacity: Option<u32>,
        workers: Option<u32>,
        options: KernelOptions,
    ) -> Result<Defaults> {
        self.check_single_process()?;
        self.defaults_of::<R>(
            method,
            lanes,
            local_capacity,
            workers,
            options,
            1,
            &open::<R>,
        )
    }

    /// Refuses settings that only runs over GPU PEs have (the device-API transport's kernel
    /// runs only with a window and NVSHMEM's device state, which a PE sets up).
    fn check_single_process(&self) -> Result<()> {
        if self.pe_transport != PeTransport::Mapped {
            return Err(Error::Config(format!(
                "pe_transport {} is how GPU PEs reach each other: it applies to runs over GPU PE \
                 processes (ProcessLayout::Pes, --processes) only",
                self.pe_transport.name()
            )));
        }
        Ok(())
    }

    /// [`Self::defaults`] for a run whose public queues are `copies` times this backend's, its
    /// kernel loaded by `open` (see [`Self::max_workers_of`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn defaults_of<R: Registry>(
        &self,
        method: Method,
        lanes: Option<u32>,
        local_capacity: Option<u32>,
        workers: Option<u32>,
        options: KernelOptions,
        copies: u32,
        open: &Opener,
    ) -> Result<Defaults> {
        let lanes = lanes.unwrap_or(DEFAULT_LANES);
        check_lanes(lanes)?;
        let local_capacity = local_capacity.unwrap_or_else(|| default_local_capacity::<R>(method));
        let queue_sharing = options
            .workers_per_queue
            .unwrap_or_else(|| self.default_queue_sharing(method, workers));
        let options = KernelOptions {
            workers_per_queue: Some(queue_sharing),
            ..options
        };
        let workers = match workers {
            Some(w) => w,
            None => {
                self.max_workers_of::<R>(method, lanes, local_capacity, options, copies, open)?
            }
        };
        Ok(Defaults {
            lanes,
            local_capacity,
            workers,
            queue_sharing,
            public_capacity: R::PUBLIC_CAPACITY,
        })
    }

    /// Workers per public queue when the caller names none: [`DEFAULT_QUEUE_SHARING`] for a
    /// run of the mgws kernel whose worker count, if given, splits into pairs on every GPU;
    /// else 1 (the baselines have no public queues). The GPUs of a run with CPU workers beside
    /// them share theirs too; the CPU side keeps one worker per queue. On several GPUs, sharing
    /// also halves the steal-damping bitmap that every worker keeps for every queue of the run,
    /// which lets a full block count fit again.
    pub fn default_queue_sharing(&self, method: Method, workers: Option<u32>) -> u32 {
        let gpus = self.devices.len().max(1) as u32;
        let pairs_up = workers.is_none_or(|w| {
            w.is_multiple_of(DEFAULT_QUEUE_SHARING) && w / DEFAULT_QUEUE_SHARING >= gpus
        });
        if method == Method::Mgws && pairs_up {
            DEFAULT_QUEUE_SHARING
        } else {
            1
        }
    }

    /// Runs `job` with the scheduler's settings and `method`'s kernel built for `R` (refusing a
    /// PTX built for another registry).
    pub fn run<R: Registry>(
        &self,
        method: Method,
        sched: &Scheduler,
        registry: &R,
        job: Job<'_>,
    ) -> Result<RunReport> {
        self.check_single_process()?;
        if self.placement == Placement::Symmetric {
            return Err(Error::Config(
                "placement symmetric (NVSHMEM's symmetric heap) is the placement of runs over GPU \
                 PE processes (ProcessLayout::Pes, --processes)"
                    .into(),
            ));
        }
        guard(|| match method {
            Method::Mgws if self.cpu_workers > 0 => self.run_beside_cpu(sched, registry, job),
            Method::Static | Method::Levels { .. } if self.cpu_workers > 0 => Err(Error::Config(
                "CPU workers beside the GPUs need the mgws kernel: the baselines run on the \
                 GPUs alone"
                    .into(),
            )),
            Method::Mgws | Method::Static => {
                let opened = std::time::Instant::now();
                let mut device = device::CudaDevice::open::<R>(self, method, sched)?;
                crate::pipeline::run(&mut device, sched, job, opened)
            }
            Method::Levels { level_capacity } => {
                level_device::run::<R>(self, level_capacity, sched, job)
            }
        })
    }

    /// Runs `job` with the mgws kernel beside `self.cpu_workers` CPU workers, or on the GPUs
    /// alone where the [`BridgePolicy`] says that they do not pay.
    fn run_beside_cpu<R: Registry>(
        &self,
        sched: &Scheduler,
        registry: &R,
        job: Job<'_>,
    ) -> Result<RunReport> {
        let opened = std::time::Instant::now();
        // A GPU that cannot be named keys the job without a name: its opening says what is wrong.
        let driver_loaded = driver::init().is_ok();
        let gpus: Vec<String> = self
            .device_list()
            .into_iter()
            .map(|d| {
                if driver_loaded {
                    driver::device_name(d).unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .collect();
        let key = bridge_policy::JobKey::of(self, sched, &job, &gpus);
        let choice = match self.bridge_policy {
            BridgePolicy::Measured => bridge_policy::choose(key, self.cpu_workers),
            BridgePolicy::Always => bridge_policy::Choice::Beside,
        };
        let report = match &choice {
            bridge_policy::Choice::Probe => {
                tracing::info!(
                    target: "mgws::grid",
                    "a first run of this job: one of the {} CPU workers beside the GPUs, to \
                     measure what they add",
                    self.cpu_workers
                );
                self.run_mixed(1, sched, registry, job, opened)?
            }
            bridge_policy::Choice::Beside => {
                self.run_mixed(self.cpu_workers, sched, registry, job, opened)?
            }
            bridge_policy::Choice::Alone(why) => {
                tracing::info!(target: "mgws::grid", "{why}");
                let alone = CudaBackend {
                    cpu_workers: 0,
                    ..self.clone()
                };
                let mut device = device::CudaDevice::open::<R>(&alone, Method::Mgws, sched)?;
                let report = crate::pipeline::run(&mut device, sched, job, opened)?;
                RunReport {
                    cpu_workers_left_out: Some(why.clone()),
                    ..report
                }
            }
        };
        bridge_policy::note(key, &report, &choice, self.cpu_workers);
        Ok(report)
    }

    /// Runs `job` with the mgws kernel beside `cpu_workers` CPU workers (opened at `opened`).
    fn run_mixed<R: Registry>(
        &self,
        cpu_workers: u32,
        sched: &Scheduler,
        registry: &R,
        job: Job<'_>,
        opened: std::time::Instant,
    ) -> Result<RunReport> {
        let cpu_sched = sched.cpu_side(cpu_workers)?;
        let mut device = mixed_device::MixedDevice::open(self, sched, &cpu_sched, registry)?;
        crate::pipeline::run(&mut device, sched, job, opened)
    }
}

/// An on/off setting from the environment variable `name`, given its value: unset or empty is
/// on; a value that is neither on nor off (also 1/0, true/false, yes/no) is a configuration
/// error naming the variable.
fn switch_setting(name: &str, setting: Option<&str>) -> Result<bool> {
    match setting.map(str::trim) {
        None | Some("" | "on" | "1" | "true" | "yes") => Ok(true),
        Some("off" | "0" | "false" | "no") => Ok(false),
        Some(other) => Err(Error::Config(format!(
            "{name}={other:?}: expected on or off (also 1/0, true/false, yes/no)"
        ))),
    }
}

/// Runs `f`, turning a panic inside the driver bindings (a libcuda that lacks a symbol they
/// expect) into an error instead of a crash.
fn guard<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("unknown panic");
        Err(Error::Cuda(format!(
            "the CUDA driver bindings failed: {msg} (is the NVIDIA driver older than CUDA 12.8?)"
        )))
    })
}

/// `f` of each item, each on a thread of its own (the GPUs of a run open, compile and copy at
/// the same time), in the items' order; a panic on one of the threads is resumed here.
pub(crate) fn on_each_thread<I: Sync, R: Send>(
    items: &[I],
    f: impl Fn(&I) -> Result<R> + Sync,
) -> Vec<Result<R>> {
    if items.len() == 1 {
        return vec![f(&items[0])];
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .iter()
            .map(|item| {
                let f = &f;
                scope.spawn(move || f(item))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mgws_core::TerminationMode;

    #[test]
    fn an_on_off_setting_takes_the_usual_spellings_and_refuses_others_by_name() {
        for on in [
            None,
            Some(""),
            Some("on"),
            Some(" 1 "),
            Some("true"),
            Some("yes"),
        ] {
            assert!(switch_setting("MGWS_X", on).unwrap(), "{on:?}");
        }
        for off in [Some("off"), Some(" 0 "), Some("false"), Some("no")] {
            assert!(!switch_setting("MGWS_X", off).unwrap(), "{off:?}");
        }
        let e = switch_setting("MGWS_X", Some("maybe")).unwrap_err();
        assert_eq!(e.kind(), "config");
        assert!(
            e.to_string()
                .contains("MGWS_X=\"maybe\": expected on or off"),
            "{e}"
        );
    }

    #[test]
    fn the_device_api_transport_is_refused_outside_runs_over_gpu_pes() {
        let b = CudaBackend {
            pe_transport: PeTransport::DeviceApi,
            ..CudaBackend::new()
        };
        let e = b.check_single_process().unwrap_err().to_string();
        assert!(
            e.contains("device-api") && e.contains("ProcessLayout::Pes"),
            "{e}"
        );
        assert!(CudaBackend::new().check_single_process().is_ok());
        assert_eq!(
            PeTransport::parse("device-api").unwrap(),
            PeTransport::DeviceApi
        );
        assert!(PeTransport::parse("rdma").is_err());
        for t in [PeTransport::Mapped, PeTransport::DeviceApi] {
            #[cfg(feature = "processes")]
            assert_eq!(PeTransport::from_word(t.to_word()), Some(t));
            assert_eq!(PeTransport::parse(t.name()).unwrap(), t);
        }
        #[cfg(feature = "processes")]
        assert_eq!(PeTransport::from_word(7), None);
    }

    #[test]
    fn gpu_runs_take_the_registrys_public_capacity() {
        use mgws_tasks::{FibTasks, UtsTasks};
        // Every setting named, so that no GPU is asked how many workers fit.
        let public = |d: Result<Defaults>| d.unwrap().public_capacity;
        let b = CudaBackend::new();
        let options = crate::device::KernelOptions::default();
        let uts = b.defaults::<UtsTasks>(Method::Mgws, Some(32), Some(256), Some(64), options);
        assert_eq!(public(uts), Some(512));
        let fib = b.defaults::<FibTasks>(Method::Mgws, Some(32), Some(256), Some(64), options);
        assert_eq!(public(fib), None);
    }

    #[test]
    fn the_baselines_take_their_own_local_capacity_where_the_registry_names_one() {
        use mgws_tasks::{ContainsTasks, FibTasks, MemsetTasks, UtsTasks};
        assert_eq!(default_local_capacity::<FibTasks>(Method::Mgws), 256);
        assert_eq!(default_local_capacity::<FibTasks>(Method::Static), 256);
        assert_eq!(default_local_capacity::<FibTasks>(Method::LEVELS), 128);
        // No levels capacity: the registry's for every method.
        assert_eq!(default_local_capacity::<UtsTasks>(Method::LEVELS), 256);
        // A static capacity: static assignment's own, the others the registry's.
        assert_eq!(default_local_capacity::<MemsetTasks>(Method::Mgws), 128);
        assert_eq!(default_local_capacity::<MemsetTasks>(Method::Static), 64);
        assert_eq!(default_local_capacity::<MemsetTasks>(Method::LEVELS), 128);
        // Neither: the backend's default.
        for m in [Method::Mgws, Method::Static, Method::LEVELS] {
            assert_eq!(
                default_local_capacity::<ContainsTasks>(m),
                DEFAULT_LOCAL_CAPACITY
            );
        }
    }

    #[test]
    fn without_libcuda_the_backend_is_unavailable_with_a_reason() {
        // SAFETY: only probes for the library.
        if unsafe { cudarc::driver::sys::is_culib_present() } {
            return; // a machine with a driver: nothing to check here
        }
        let e = CudaBackend::new()
            .probe::<mgws_tasks::MemsetTasks>()
            .unwrap_err();
        assert!(matches!(e, Error::BackendUnavailable(_)), "{e:?}");
        assert!(e.to_string().contains("libcuda"), "{e}");
        let sched = Scheduler::builder().workers(1).lanes(32).build().unwrap();
        let backend = crate::Backend::cuda(CudaBackend::new());
        let tasks = [mgws_tasks::MemsetTasks::task(
            &mgws_tasks::workloads::memset::MemsetTask { index: 0 },
        )];
        let e = backend
            .run(&sched, &mgws_tasks::MemsetTasks, Job::new(&tasks))
            .unwrap_err();
        assert!(matches!(e, Error::BackendUnavailable(_)), "{e:?}");
    }

    #[test]
    fn gpu_runs_share_queues_by_two_where_they_can() {
        let gpu = CudaBackend::new();
        let mgws = Method::Mgws;
        assert_eq!(gpu.default_queue_sharing(mgws, None), DEFAULT_QUEUE_SHARING);
        assert_eq!(
            gpu.default_queue_sharing(mgws, Some(2640)),
            DEFAULT_QUEUE_SHARING
        );
        // An odd worker count cannot be split into pairs: unshared rather than an error.
        assert_eq!(gpu.default_queue_sharing(mgws, Some(7)), 1);
        // The GPUs of a bridged run share their queues too; the baselines have no public queues.
        let bridged = CudaBackend {
            cpu_workers: 4,
            ..CudaBackend::new()
        };
        assert_eq!(
            bridged.default_queue_sharing(mgws, None),
            DEFAULT_QUEUE_SHARING
        );
        let two_gpus = CudaBackend {
            devices: vec![0, 1],
            ..CudaBackend::new()
        };
        assert_eq!(
            two_gpus.default_queue_sharing(mgws, None),
            DEFAULT_QUEUE_SHARING
        );
        assert_eq!(
            two_gpus.default_queue_sharing(mgws, Some(8)),
            DEFAULT_QUEUE_SHARING
        );
        // Two workers over two GPUs: one each, no pair to share a queue.
        assert_eq!(two_gpus.default_queue_sharing(mgws, Some(2)), 1);
        for method in [Method::Static, Method::LEVELS] {
            assert_eq!(gpu.default_queue_sharing(method, None), 1);
        }
    }

    #[test]
    fn named_queue_sharing_is_kept_and_the_cpu_default_is_unshared() {
        // Workers are given, so neither call loads a kernel.
        let named = KernelOptions {
            workers_per_queue: Some(4),
            ..KernelOptions::default()
        };
        let gpu = crate::Backend::cuda(CudaBackend::new());
        let d = gpu
            .defaults::<mgws_tasks::MemsetTasks>(None, None, Some(8), named)
            .unwrap();
        assert_eq!((d.workers, d.queue_sharing), (8, 4));
        let d = gpu
            .defaults::<mgws_tasks::MemsetTasks>(None, None, Some(8), KernelOptions::default())
            .unwrap();
        assert_eq!(d.queue_sharing, DEFAULT_QUEUE_SHARING);
        let d = crate::Backend::cpu()
            .defaults::<mgws_tasks::MemsetTasks>(None, None, Some(8), KernelOptions::default())
            .unwrap();
        assert_eq!(d.queue_sharing, 1);
        let d = crate::Backend::cpu()
            .defaults::<mgws_tasks::MemsetTasks>(None, None, Some(8), named)
            .unwrap();
        assert_eq!(d.queue_sharing, 4);
    }

    #[test]
    fn kernels_have_entries_and_names() {
        assert_eq!(Method::default(), Method::Mgws);
        let mut cfg = SchedConfig::new(4);
        assert_eq!(
            Method::Mgws.entry::<mgws_tasks::FibTasks>(&cfg),
            "mgws_fib_worker_counter_damping_single_device"
        );
        cfg.termination = TerminationMode::VotingTree as u32;
        cfg.workers_per_queue = 2;
        let two = CudaBackend {
            devices: vec![0, 1],
            ..CudaBackend::new()
        };
        assert_eq!(
            two.entry::<mgws_tasks::UtsTasks>(Method::Mgws, &cfg),
            "mgws_uts_worker_tree_damping_shared_system"
        );
        assert_eq!(
            two.entry::<mgws_tasks::UtsTasks>(Method::Static, &cfg),
            "mgws_uts_static_system"
        );
        assert_eq!(
            Method::LEVELS.entry::<mgws_tasks::UtsTasks>(&cfg),
            "mgws_uts_level"
        );
        assert_eq!(Method::Static.cuda_name(), "cuda-static");
        assert_eq!(CudaBackend::new().device_list(), vec![0]);
        // A bridged run's flag belongs to the mgws kernel only.
        let bridged = CudaBackend {
            cpu_workers: 2,
            ..CudaBackend::new()
        };
        let flag = mgws_core::RunFlags::BRIDGED.bits();
        assert_ne!(bridged.scoped(Method::Mgws, &cfg).flags & flag, 0);
        assert_eq!(bridged.scoped(Method::Static, &cfg).flags & flag, 0);
    }
}
