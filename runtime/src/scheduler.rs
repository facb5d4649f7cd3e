//! The public entry point: configure a scheduler with [`SchedulerBuilder`], then run jobs on a
//! backend.

use std::time::Duration;

use mgws_core::{OverflowMode, RunFlags, SchedConfig, TerminationMode};
use mgws_tasks::Registry;

use crate::backend::Backend;
use crate::error::{Error, Result};

/// How thieves choose victims.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum VictimPolicy {
    /// Uniform over all other workers.
    Uniform,
    /// A victim on the thief's own device with this probability, otherwise uniform over the rest;
    /// in a run across nodes, off the own device, the own node's other devices with this
    /// probability again before other nodes' (`Topology::devices_per_node`).
    SameDeviceBias(f64),
    /// Only workers on the thief's own device.
    SameDeviceOnly,
    /// Workers on the thief's own device until this many attempts in a row found nothing, then
    /// one uniformly off it: stealing prefers the own GPU and goes remote when that fails. The
    /// default ([`DEFAULT_LOCAL_FIRST_TRIES`]); on one device it is uniform.
    LocalFirst(u16),
}

/// The failed attempts in a row on the own device after which [`VictimPolicy::LocalFirst`]
/// tries another device, by default (measured on 4 GPUs: docs/results.md).
pub const DEFAULT_LOCAL_FIRST_TRIES: u16 = 1;

/// Host-side chaos injection for tests: random yields and sleeps at every protocol step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chaos {
    /// Seed of the per-thread random streams.
    pub seed: u64,
    /// Out of 1024 protocol steps, how many yield the thread.
    pub yield_per_1024: u32,
    /// Out of 1024 protocol steps, how many sleep for up to `max_sleep_us`.
    pub sleep_per_1024: u32,
    /// The longest sleep, in microseconds.
    pub max_sleep_us: u32,
}

/// A validated scheduler configuration.
#[derive(Clone, Debug)]
pub struct Scheduler {
    pub(crate) config: SchedConfig,
    pub(crate) lanes: u32,
    pub(crate) watchdog: Duration,
    /// How long a multi-process run's launcher waits for its PEs to be ready (see
    /// [`SchedulerBuilder::start_timeout`]).
    pub(crate) start_timeout: Duration,
    pub(crate) chaos: Option<Chaos>,
    /// Whether CPU worker threads are bound to CPUs (round robin).
    pub(crate) pin_threads: bool,
    /// Domains the CPU backend splits its workers into (see [`SchedulerBuilder::cpu_domains`]).
    pub(crate) cpu_domains: u32,
    /// CPU workers run as the second side of a bridged run (see [`SchedulerBuilder::cpu_bridge`]).
    pub(crate) cpu_bridge: u32,
    /// Called when aborted workers cannot be given up and do not exit (see
    /// [`SchedulerBuilder::on_stuck_workers`]).
    pub(crate) on_stuck_workers: Option<StuckWorkersHook>,
    /// Called by the supervisor as the run goes (see [`SchedulerBuilder::on_progress`]).
    pub(crate) on_progress: Option<ProgressHook>,
    /// The CPU backend's threads, kept between runs (shared by clones).
    pub(crate) threads: std::sync::Arc<crate::cpu::threads::ThreadSets>,
}

/// Builds a [`Scheduler`]. Defaults follow the thesis: local queues of 32 tasks, public queues of
/// 256, one worker per public queue, the idle-counter termination and steal damping.
#[derive(Clone, Debug)]
pub struct SchedulerBuilder {
    config: SchedConfig,
    lanes: u32,
    victims: VictimPolicy,
    stats: bool,
    watchdog: Duration,
    start_timeout: Duration,
    chaos: Option<Chaos>,
    flags: RunFlags,
    pin_threads: bool,
    cpu_domains: u32,
    cpu_bridge: u32,
    /// The initial chunk the caller asked for; `None`: half the local queue, at most
    /// [`DEFAULT_MAX_INITIAL_CHUNK`].
    initial_chunk: Option<u32>,
    /// What the caller chose of the settings a backend can fill in ([`Self::build_for`]).
    chosen: Chosen,
    on_stuck_workers: Option<StuckWorkersHook>,
    on_progress: Option<ProgressHook>,
}

/// The settings whose defaults depend on the backend, as far as the caller named them.
#[derive(Clone, Copy, Debug, Default)]
struct Chosen {
    workers: Option<u32>,
    lanes: Option<u32>,
    local_capacity: Option<u32>,
    public_capacity: Option<u32>,
    queue_sharing: Option<u32>,
}

/// The largest initial chunk a run gets when it names none: half the local queue up to this.
/// On the CPU's default local queue (32) that is 16, the thesis's; on the CUDA backend's (64), 32,
/// which ran MEMSET faster than 16 on a GPU; MEMSET's GPU workers hold 128 and claim 64, two
/// batches of its one-lane tasks, faster again (docs/results.md): a claim costs a fetch-add, an
/// exchange and a copy whose latency the chunk's tasks share.
pub const DEFAULT_MAX_INITIAL_CHUNK: u32 = 64;

/// How far a run has come, as its supervisor sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunProgress {
    /// Tasks the workers have reported running (they report once per progress interval, so
    /// this trails the truth by up to that many tasks per worker).
    pub tasks_run: u64,
    /// Since the launch.
    pub elapsed: Duration,
    /// The run is over (the last call).
    pub finished: bool,
}

/// What [`SchedulerBuilder::on_progress`] calls.
#[derive(Clone)]
pub struct ProgressHook(pub std::sync::Arc<dyn Fn(RunProgress) + Send + Sync>);

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressHook")
    }
}

/// How long the launcher of a run over processes waits for its PEs by default
/// ([`SchedulerBuilder::start_timeout`]): well beyond the time a GPU PE takes to open its GPU,
/// load its kernel and join NVSHMEM (docs/results.md), and long enough for a PE under
/// compute-sanitizer, which starts far slower.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long after an abort workers that cannot be given up may take to exit before
/// [`SchedulerBuilder::on_stuck_workers`]'s hook is called.
pub const STUCK_GRACE: Duration = Duration::from_secs(1);

/// What [`SchedulerBuilder::on_stuck_workers`] calls: the error that ended the run (a hang, a
/// task failure, ...), before the run waits on for its stuck workers.
pub type StuckWorkersHook = fn(&crate::Error);

impl Default for SchedulerBuilder {
    fn default() -> Self {
        SchedulerBuilder {
            config: SchedConfig::new(default_workers()),
            lanes: 1,
            victims: VictimPolicy::LocalFirst(DEFAULT_LOCAL_FIRST_TRIES),
            stats: true,
            watchdog: Duration::from_secs(10),
            start_timeout: DEFAULT_START_TIMEOUT,
            chaos: None,
            flags: RunFlags::empty(),
            pin_threads: true,
            cpu_domains: 1,
            cpu_bridge: 0,
            initial_chunk: None,
            chosen: Chosen::default(),
            on_stuck_workers: None,
            on_progress: None,
        }
    }
}

/// One worker per available CPU.
pub fn default_workers() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// The most lanes a CPU worker may have (a GPU block's limit).
pub const MAX_LANES: u32 = 1024;

impl SchedulerBuilder {
    /// A builder with the defaults.
    pub fn new() -> Self {
        Self::default()
    }
    /// Number of workers (CPU: worker thread groups; GPU: thread blocks, per device).
    pub fn workers(mut self, n: u32) -> Self {
        self.config.workers = n;
        self.chosen.workers = Some(n);
        self
    }
    /// Lanes per worker (CPU: threads per worker; GPU: threads per block).
    pub fn lanes(mut self, n: u32) -> Self {
        self.lanes = n;
        self.chosen.lanes = Some(n);
        self
    }
    /// Tasks per worker's local queue (the GPU keeps it in shared memory); unless the caller
    /// names one, the initial chunk is half of it, at most [`DEFAULT_MAX_INITIAL_CHUNK`].
    pub fn local_capacity(mut self, n: u32) -> Self {
        self.config.local_capacity = n;
        self.chosen.local_capacity = Some(n);
        self
    }
    /// Tasks per public queue, which thieves steal from: 2 to 2^19 - 1 (default 256; on GPUs
    /// the registry's [`Registry::PUBLIC_CAPACITY`] where it names one, see [`Self::build_for`]).
    pub fn public_capacity(mut self, n: u32) -> Self {
        self.config.public_capacity = n;
        self.chosen.public_capacity = Some(n);
        self
    }
    /// Tasks per worker in the overflow stack used when both queues are full.
    pub fn spill_capacity(mut self, n: u32) -> Self {
        self.config.spill_capacity = n;
        self
    }
    /// The most initial tasks a worker claims at once: 1 to half the local queue (default: half
    /// the local queue, at most [`DEFAULT_MAX_INITIAL_CHUNK`]). Claims shrink towards one task as
    /// a home range empties (`mgws_core::layout::claim_size`).
    pub fn initial_chunk(mut self, n: u32) -> Self {
        self.initial_chunk = Some(n);
        self
    }
    /// Workers sharing one public queue: 1, 2 or 4.
    pub fn queue_sharing(mut self, n: u32) -> Self {
        self.config.workers_per_queue = n;
        self.chosen.queue_sharing = Some(n);
        self
    }
    /// How workers detect that every task ran: an idle counter (default) or a voting tree.
    pub fn termination(mut self, mode: TerminationMode) -> Self {
        self.config.termination = mode as u32;
        self
    }
    /// How thieves keep the steal counter from overflowing: steal damping (default) or a load
    /// before every fetch-add.
    pub fn overflow(mut self, mode: OverflowMode) -> Self {
        self.config.overflow = mode as u32;
        self
    }
    /// How thieves choose victims (default: uniformly).
    pub fn victims(mut self, policy: VictimPolicy) -> Self {
        self.victims = policy;
        self
    }
    /// Seed of the victim choice.
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = seed;
        self
    }
    /// Collect per-worker statistics (on by default; cheap).
    pub fn stats(mut self, on: bool) -> Self {
        self.stats = on;
        self
    }
    /// Abort a run that makes no progress for this long (default 10 s).
    pub fn watchdog(mut self, timeout: Duration) -> Self {
        self.watchdog = timeout;
        self
    }
    /// How long the launcher of a run over processes ([`crate::ProcessLayout::Pes`],
    /// [`crate::ProcessLayout::Nodes`]) waits for every PE to be ready: started, its GPU
    /// opened, NVSHMEM joined, its memory allocated (default [`DEFAULT_START_TIMEOUT`]; never
    /// less than the watchdog's timeout). A PE that is late then ends the run with an error
    /// saying where each late PE was in its start-up.
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }
    /// Whether the CPU backend binds its threads to CPUs, round robin over the CPUs the process
    /// may use (default: yes; see `cpu::threads`).
    pub fn pin_threads(mut self, pin: bool) -> Self {
        self.pin_threads = pin;
        self
    }
    /// A hook for runs whose workers cannot be stopped: CPU threads are never killed, so after an
    /// abort (the watchdog's, or a task's error) a task that never returns keeps `run` waiting.
    /// When the workers have not exited [`STUCK_GRACE`] after the abort, `hook` is called
    /// with the run's error; a program that cannot wait (a command-line tool) reports it and
    /// exits there. If the hook returns, the run waits on. GPU runs give such workers up
    /// instead, leaving their memory to the process (docs/cuda.md), and never call it.
    pub fn on_stuck_workers(mut self, hook: StuckWorkersHook) -> Self {
        self.on_stuck_workers = Some(hook);
        self
    }
    /// Calls `hook` from the supervising thread about every 50 ms while a run goes (with the
    /// tasks the workers have reported) and once when it ends, `finished` set: for a progress
    /// bar. Runs whose device reports no progress records call it only at the end.
    pub fn on_progress(mut self, hook: impl Fn(RunProgress) + Send + Sync + 'static) -> Self {
        self.on_progress = Some(ProgressHook(std::sync::Arc::new(hook)));
        self
    }
    /// Inject random yields and sleeps at every protocol step (CPU backend only).
    pub fn chaos(mut self, chaos: Chaos) -> Self {
        self.chaos = Some(chaos);
        self
    }
    /// CPU backend: split the workers into `n` domains (1 to `MAX_DEVICES`, default 1) that act
    /// as devices do on GPUs: each has its own public queues and, under
    /// [`TerminationMode::Hierarchical`], its own idle counter, and the same-device victim
    /// policies see them. Domains stand for the sockets or NUMA nodes of a large host, and they
    /// let a CPU run exercise the multi-device protocols. Workers are split as evenly as whole
    /// public queues allow.
    pub fn cpu_domains(mut self, n: u32) -> Self {
        self.cpu_domains = n;
        self
    }

    /// CPU backend: run the last `n` workers as a second side that shares no atomics with the
    /// others and reaches them only through a bridge of single-writer mailboxes
    /// (`mgws_core::bridge`): the protocol of CPU workers beside GPUs, on CPU threads alone, for
    /// tests. 0 (the default) runs one side.
    #[doc(hidden)]
    pub fn cpu_bridge(mut self, n: u32) -> Self {
        self.cpu_bridge = n;
        self
    }

    /// TESTING ONLY: switch off protocol rules to show that the tests catch their races.
    #[doc(hidden)]
    pub fn break_rules(mut self, flags: RunFlags) -> Self {
        self.flags |= flags & (RunFlags::BREAK_IN_FLIGHT_RULE | RunFlags::BREAK_TARGETED_RULE);
        self
    }

    /// Builds the scheduler for running registry `R` on `backend`, in one call: the settings
    /// this builder leaves open take that backend's defaults. On the CPU: one worker per CPU,
    /// one lane, local queues of 32. On GPUs: every worker that fits at once with the kernel
    /// entry these options pick (the kernel is compiled once here, and the run reuses it), 32
    /// lanes, local queues of 64, and queues shared by two where the workers pair up
    /// ([`crate::cuda::CudaBackend::default_queue_sharing`]). What the builder names is kept,
    /// and refused if the backend cannot run it (more workers than fit at once, for one).
    ///
    /// ```
    /// # #[mgws::task]
    /// # struct Noop { x: u64 }
    /// # impl mgws::TaskFunctor for Noop {
    /// #     fn run(&self, _: &mgws::TaskStruct, _: &mut impl mgws::Ctx) -> mgws::TaskResult {
    /// #         Ok(())
    /// #     }
    /// # }
    /// # #[mgws::registry]
    /// # enum MyTasks { Noop(Noop) }
    /// # fn main() -> mgws::Result<()> {
    /// let backend = mgws::Backend::cpu();
    /// let sched = mgws::Scheduler::builder().workers(3).build_for::<MyTasks>(&backend)?;
    /// assert_eq!((sched.workers(), sched.lanes()), (3, 1));
    /// # Ok(())
    /// # }
    /// ```
    pub fn build_for<R: Registry>(mut self, backend: &Backend) -> Result<Scheduler> {
        let c = self.chosen;
        let options = crate::device::KernelOptions {
            workers_per_queue: c.queue_sharing,
            termination: self.config.termination_mode(),
            overflow: self.config.overflow_mode(),
        };
        let d = {
            let _span = tracing::debug_span!("mgws.backend_defaults").entered();
            backend.defaults::<R>(c.lanes, c.local_capacity, c.workers, options)?
        };
        self.config.workers = d.workers;
        self.lanes = d.lanes;
        self.config.local_capacity = d.local_capacity;
        self.config.workers_per_queue = d.queue_sharing;
        if let (None, Some(n)) = (c.public_capacity, d.public_capacity) {
            self.config.public_capacity = n;
        }
        self.build()
    }

    /// Checks the configuration and builds the scheduler. The settings left open keep the CPU's
    /// defaults; [`Self::build_for`] takes a backend's instead.
    pub fn build(self) -> Result<Scheduler> {
        let mut config = self.config;
        let mut flags = self.flags;
        if self.stats {
            flags |= RunFlags::STATS;
        }
        match self.victims {
            VictimPolicy::Uniform => config.same_device_bias_permille = 0,
            VictimPolicy::LocalFirst(0) => {
                return Err(Error::Config(
                    "local-first stealing needs at least one attempt on the own device".into(),
                ))
            }
            VictimPolicy::LocalFirst(tries) => config.local_first_tries = tries,
            VictimPolicy::SameDeviceBias(p) => {
                if !(0.0..=1.0).contains(&p) {
                    return Err(Error::Config(format!(
                        "the same-device bias must be a probability in [0, 1], not {p}"
                    )));
                }
                config.same_device_bias_permille = (p * 1000.0).round() as u16;
            }
            VictimPolicy::SameDeviceOnly => flags |= RunFlags::SAME_DEVICE_ONLY,
        }
        config.flags = flags.bits();
        config.initial_chunk = self
            .initial_chunk
            .unwrap_or((config.local_capacity / 2).clamp(1, DEFAULT_MAX_INITIAL_CHUNK));
        config.validate()?;
        if self.lanes == 0 || self.lanes > MAX_LANES {
            return Err(Error::Config(format!(
                "lanes per worker must be between 1 and {MAX_LANES}, not {}",
                self.lanes
            )));
        }
        if !config.workers.is_multiple_of(config.workers_per_queue) {
            return Err(Error::Config(format!(
                "the number of workers ({}) must be a multiple of the workers per public queue ({})",
                config.workers, config.workers_per_queue
            )));
        }
        let units = config.workers / config.workers_per_queue;
        if self.cpu_domains == 0
            || self.cpu_domains as usize > mgws_core::MAX_DEVICES
            || self.cpu_domains > units
        {
            return Err(Error::Config(format!(
                "the CPU domains must be between 1 and {} and at most the number of public \
                 queues ({units}: {} workers, {} per queue), not {}",
                mgws_core::MAX_DEVICES,
                config.workers,
                config.workers_per_queue,
                self.cpu_domains
            )));
        }
        if self.watchdog.is_zero() {
            return Err(Error::Config(
                "the watchdog timeout must be positive".into(),
            ));
        }
        if self.start_timeout.is_zero() {
            return Err(Error::Config(
                "the start-up timeout of runs over processes must be positive".into(),
            ));
        }
        Ok(Scheduler {
            config,
            lanes: self.lanes,
            watchdog: self.watchdog,
            start_timeout: self.start_timeout,
            chaos: self.chaos,
            pin_threads: self.pin_threads,
            cpu_domains: self.cpu_domains,
            cpu_bridge: self.cpu_bridge,
            on_stuck_workers: self.on_stuck_workers,
            on_progress: self.on_progress,
            threads: Default::default(),
        })
    }
}

impl Scheduler {
    /// A scheduler with every default of `backend` for registry `R`
    /// (`Scheduler::builder().build_for::<R>(backend)`).
    pub fn for_backend<R: Registry>(backend: &Backend) -> Result<Scheduler> {
        Self::builder().build_for::<R>(backend)
    }

    /// A builder with the defaults.
    pub fn builder() -> SchedulerBuilder {
        SchedulerBuilder::new()
    }
    /// The validated configuration the workers receive.
    pub fn config(&self) -> &SchedConfig {
        &self.config
    }
    /// Lanes per worker.
    pub fn lanes(&self) -> u32 {
        self.lanes
    }
    /// Workers in total.
    pub fn workers(&self) -> u32 {
        self.config.workers
    }
    /// How long a run may go without progress before it is stopped.
    pub fn watchdog(&self) -> Duration {
        self.watchdog
    }
    /// How long a run over processes waits for its PEs to be ready (see
    /// [`SchedulerBuilder::start_timeout`]).
    pub fn start_timeout(&self) -> Duration {
        self.start_timeout.max(self.watchdog)
    }
    /// Whether the CPU backend binds its threads to CPUs (see [`SchedulerBuilder::pin_threads`]).
    pub fn pin_threads(&self) -> bool {
        self.pin_threads
    }
    /// The same settings for `workers` CPU workers of one lane (the CPU side of a run with CPU
    /// workers beside GPUs).
    #[cfg(feature = "cuda")]
    pub(crate) fn cpu_side(&self, workers: u32) -> Result<Scheduler> {
        let mut config = self.config;
        config.workers = workers;
        // The sides share no queue: the CPU's keep its own default, one worker per queue,
        // whatever the GPUs share.
        config.workers_per_queue = 1;
        config.validate()?;
        Ok(Scheduler {
            config,
            lanes: 1,
            cpu_domains: 1,
            cpu_bridge: 0,
            ..self.clone()
        })
    }

    /// Domains of the CPU backend (see [`SchedulerBuilder::cpu_domains`]).
    pub fn cpu_domains(&self) -> u32 {
        self.cpu_domains
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_runs_take_the_registrys_public_capacity_unless_the_caller_names_one() {
        use mgws_tasks::UtsTasks;
        // On the CPU the scheduler's default stays, whatever the registry names.
        let cpu = Backend::cpu();
        let capacity = |b: SchedulerBuilder| {
            b.workers(2)
                .build_for::<UtsTasks>(&cpu)
                .unwrap()
                .config()
                .public_capacity
        };
        assert_eq!(capacity(Scheduler::builder()), 256);
        assert_eq!(capacity(Scheduler::builder().public_capacity(1024)), 1024);
    }

    #[test]
    fn the_initial_chunk_defaults_to_half_the_local_queue_up_to_the_maximum() {
        let chunk = |b: SchedulerBuilder| b.build().unwrap().config().initial_chunk;
        assert_eq!(chunk(Scheduler::builder().workers(2)), 16);
        assert_eq!(
            chunk(Scheduler::builder().workers(2).local_capacity(64)),
            32
        );
        assert_eq!(
            chunk(Scheduler::builder().workers(2).local_capacity(128)),
            64
        );
        assert_eq!(
            chunk(Scheduler::builder().workers(2).local_capacity(1024)),
            DEFAULT_MAX_INITIAL_CHUNK
        );
        assert_eq!(chunk(Scheduler::builder().workers(2).local_capacity(2)), 1);
        // A chunk the caller names is kept, whatever the order of the calls, or refused.
        let named = Scheduler::builder().initial_chunk(3).local_capacity(64);
        assert_eq!(chunk(named), 3);
        assert!(Scheduler::builder()
            .local_capacity(32)
            .initial_chunk(17)
            .build()
            .is_err());
    }

    #[test]
    fn bad_configurations_are_refused_with_a_reason() {
        let cases: Vec<(SchedulerBuilder, &str)> = vec![
            (Scheduler::builder().workers(0), "at least one worker"),
            (Scheduler::builder().lanes(0), "lanes per worker"),
            (Scheduler::builder().lanes(2048), "lanes per worker"),
            (Scheduler::builder().queue_sharing(3), "1, 2 or 4"),
            (Scheduler::builder().workers(6).queue_sharing(4), "multiple"),
            (Scheduler::builder().public_capacity(1 << 20), "19-bit"),
            (Scheduler::builder().local_capacity(1), "local capacity"),
            (Scheduler::builder().local_capacity(48), "power of two"),
            (
                Scheduler::builder().victims(VictimPolicy::SameDeviceBias(1.5)),
                "probability",
            ),
            (Scheduler::builder().watchdog(Duration::ZERO), "watchdog"),
            (
                Scheduler::builder().start_timeout(Duration::ZERO),
                "start-up timeout",
            ),
            (
                Scheduler::builder().workers(4).cpu_domains(0),
                "CPU domains",
            ),
            (
                Scheduler::builder().workers(4).cpu_domains(5),
                "CPU domains",
            ),
            (
                Scheduler::builder().workers(16).cpu_domains(9),
                "CPU domains",
            ),
        ];
        for (builder, needle) in cases {
            let err = builder.build().unwrap_err().to_string();
            assert!(err.contains(needle), "{err:?} should mention {needle:?}");
        }
        assert!(Scheduler::builder()
            .workers(8)
            .queue_sharing(4)
            .build()
            .is_ok());
    }
}
