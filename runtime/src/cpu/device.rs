//! The CPU as a [`Device`]: every worker is `lanes` threads of the scheduler's thread set, the
//! orchestration memory is an [`Arena`] on the heap, and the calling thread supervises. The
//! workers run the mgws loop ([`CpuMethod::Mgws`]) or the static-assignment baseline
//! ([`CpuMethod::Static`]); everything else of the run is the same.
//!
//! A CPU run may be one side, or both sides, of a bridged run (`mgws_core::bridge`): beside
//! GPUs (the CUDA backend's `cpu_workers`, through a [`BridgeLink`]), or, as the protocol's CPU
//! twin, split into two sides of its own ([`crate::SchedulerBuilder::cpu_bridge`]). Each side
//! has its own arena and env; the sides meet only through the bridge.

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::time::Duration;

use mgws_core::{
    AtomicWord, Env, HostWord, LeanStatic, Ordering, RunError, Scope, TaskExecutor,
    TerminationMode, Topology, Worker, WorkerProgress,
};
use mgws_tasks::TaskStruct;

use mgws_core::bridge::{BridgeState, BRIDGE_CAPACITY};

use super::arena::Arena;
use super::platform::{CpuPlatform, LaneGroup};
use super::threads::{Completion, RunClock};
use crate::area_layout::{self, AreaLayout};
use crate::device::{split_workers, Device, Grid, LiveState, ReadBack, Running};
use crate::error::Result;
use crate::job::{AreaBytes, Job};
use crate::rows::Line;
use crate::scheduler::Scheduler;

/// A pointer-bundle that may cross into the worker threads.
struct SendEnv(Env<HostWord, TaskStruct>);
// SAFETY: the env's pointers refer to the arena and the job, which outlive the run (the
// pipeline keeps both until `read_back`, after every thread finished); concurrent access to
// them follows the scheduler's protocols.
unsafe impl Sync for SendEnv {}

/// Runs worker `w`'s loop of `method` on this lane.
///
/// # Safety
/// As for [`Worker::start`]: `env` describes live orchestration memory for this configuration,
/// the platform's scratch holds its layout, and every lane of worker `w` makes this same call.
#[inline(always)]
unsafe fn run_worker<P: mgws_core::Platform<Word = HostWord>, R: TaskExecutor<TaskStruct>>(
    method: CpuMethod,
    p: P,
    env: &Env<HostWord, TaskStruct>,
    registry: &R,
    w: u32,
) {
    // SAFETY: the caller's guarantees, which both loops require.
    unsafe {
        match method {
            CpuMethod::Mgws => Worker::<_, _, _, mgws_core::FromConfig>::start(p, env, registry, w),
            CpuMethod::Static => {
                LeanStatic::<_, _, mgws_core::FromConfig>::new(p, env, w).run(registry)
            }
        }
    }
}

/// What one lane of a CPU worker runs with, besides its env and registry.
pub(crate) struct LaneRun<'g> {
    pub method: CpuMethod,
    pub lane: u32,
    pub lanes: u32,
    /// The worker's lane group (barrier, broadcast slot, scratch).
    pub group: &'g LaneGroup,
    /// The run's start, the platform clock's zero.
    pub start: std::time::Instant,
    pub chaos: Option<crate::scheduler::Chaos>,
}

/// Runs one lane of worker `w` (its run-wide index; `id`: its index in `env`). A panic is kept in
/// `panicked`, poisons the worker's other lanes and calls `abort` to stop every other worker.
///
/// Every lane of worker `w` must make this call at once, with the same env and group; `env`
/// describes live orchestration memory for its configuration, and the group's scratch holds the
/// configuration's scratch layout.
pub(crate) fn run_lane<R: TaskExecutor<TaskStruct>>(
    run: LaneRun<'_>,
    env: &Env<HostWord, TaskStruct>,
    registry: &R,
    (w, id): (u32, u32),
    panicked: &super::panics::FirstPanic,
    abort: impl FnOnce(),
) {
    let (method, group, start, chaos) = (run.method, run.group, run.start, run.chaos);
    panicked.contain(w, group, abort, || {
        // SAFETY: the env describes live memory sized for its configuration, the lane group's
        // scratch holds the scratch layout's bytes, and every lane of worker w makes this same
        // call (this function's contract).
        unsafe {
            if run.lanes == 1 {
                let p = CpuPlatform::<true>::new(0, 1, group, start, chaos, w);
                run_worker(method, p, env, registry, id);
            } else {
                let p = CpuPlatform::<false>::new(run.lane, run.lanes, group, start, chaos, w);
                run_worker(method, p, env, registry, id);
            }
        }
    });
}

/// The loop the CPU workers run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CpuMethod {
    /// The mgws worker loop (`mgws_core::Worker`).
    #[default]
    Mgws,
    /// The static-assignment baseline (`mgws_core::LeanStatic`): each worker runs its
    /// contiguous share of the initial tasks and everything they spawn, depth-first, alone.
    Static,
}

/// CPU threads running registry `R`.
pub struct CpuDevice<'a, R> {
    sched: &'a Scheduler,
    registry: &'a R,
    method: CpuMethod,
    elapsed_s: f64,
    /// When the last run's clock started (its threads' loops start after it).
    started_at: Option<std::time::Instant>,
    /// Static baseline: per worker, nanoseconds from the launch until it finished its share.
    finished_ns: Vec<u64>,
    /// This run is side 1 of a bridge held by another device.
    link: Option<BridgeLink>,
}

/// Where a CPU run that is side 1 of another device's bridged run finds the bridge.
#[derive(Clone, Copy, Debug)]
pub struct BridgeLink {
    /// The bridge state, as a host pointer.
    pub state: *const BridgeState<HostWord>,
    /// The mailboxes' slots (`Env::bridge_slots`), as host pointers.
    pub slots: [*mut TaskStruct; 2],
    /// Added to the CPU workers' ids where tasks see them (the other side's workers come first).
    pub worker_base: u32,
}

/// The bridge state and mailbox slots of a CPU run split into two sides.
struct HostBridge {
    state: BridgeState<HostWord>,
    slots: [Vec<TaskStruct>; 2],
}

/// The checks a configuration must pass to run as a side of a bridged run.
pub(crate) fn check_bridged(config: &mgws_core::SchedConfig) -> Result<()> {
    if let Some(why) = mgws_core::spec::bridge_entry_error(config) {
        return Err(crate::Error::Config(why.into()));
    }
    if (config.local_capacity as u64) < BRIDGE_CAPACITY {
        return Err(crate::Error::Config(format!(
            "a run with workers on two sides of a bridge needs a local capacity of at least \
             {BRIDGE_CAPACITY} tasks (a reply's size), not {}",
            config.local_capacity
        )));
    }
    Ok(())
}

impl<'a, R> CpuDevice<'a, R> {
    /// The CPU threads of `sched` (created on its first run), running tasks of `registry` with
    /// the mgws loop.
    pub fn new(sched: &'a Scheduler, registry: &'a R) -> Self {
        Self::with_method(sched, registry, CpuMethod::Mgws)
    }

    /// The same threads running `method`.
    pub fn with_method(sched: &'a Scheduler, registry: &'a R, method: CpuMethod) -> Self {
        CpuDevice {
            sched,
            registry,
            method,
            elapsed_s: 0.0,
            started_at: None,
            finished_ns: Vec::new(),
            link: None,
        }
    }

    /// The same threads as side 1 of the bridged run whose bridge `link` names.
    pub fn linked(sched: &'a Scheduler, registry: &'a R, link: BridgeLink) -> Self {
        CpuDevice {
            link: Some(link),
            ..Self::new(sched, registry)
        }
    }

    /// When the last run's clock started: its `elapsed_s` counts from here.
    #[cfg(feature = "cuda")]
    pub(crate) fn started_at(&self) -> Option<std::time::Instant> {
        self.started_at
    }
}

/// A CPU run's memory: per side, the arena and the env pointing into it; one lane group
/// (barrier, broadcast slot, scratch) per worker; the bridge of a run split into two sides.
pub struct CpuPlaced {
    sides: Vec<CpuSide>,
    groups: Vec<LaneGroup>,
    /// The per-domain copies of data areas (see [`DomainCopies`]).
    copies: Vec<DomainCopies>,
    _bridge: Option<Box<HostBridge>>,
}

/// One side of a CPU run: workers `first..first + env.config.workers`.
struct CpuSide {
    arena: Arena,
    /// The env of domain 0 (of the only domain, unless the run has CPU domains and areas that
    /// each domain copies).
    env: SendEnv,
    /// The envs of domains 1.., which differ only in the data areas copied per domain.
    domain_envs: Vec<SendEnv>,
    first: u32,
}

impl CpuSide {
    /// The env of the domain that the side's worker `id` belongs to.
    fn env_of(&self, id: u32) -> &Env<HostWord, TaskStruct> {
        match self.env.0.topology.device_of_worker(id) {
            0 => &self.env.0,
            d => self
                .domain_envs
                .get(d as usize - 1)
                .map_or(&self.env.0, |e| &e.0),
        }
    }
}

/// The copies of one read-write data area that the domains 1.. of a run split into CPU domains
/// write, where its layout gives each device a copy ([`area_layout::copies`]): replicated or
/// per worker, as on several GPUs (docs/design.md 7.1), so that CPU runs exercise the same
/// placement and merge. Domain 0 writes the job's own bytes.
struct DomainCopies {
    index: u8,
    layout: AreaLayout,
    /// The job's bytes before the run (replicated layouts only).
    before: Vec<u8>,
    domains: Vec<Vec<Line>>,
    len: usize,
}

impl DomainCopies {
    /// The copies for the `devices` domains of `job`'s areas that need them.
    fn of(job: &Job<'_>, devices: u32) -> Vec<DomainCopies> {
        let mut all = Vec::new();
        for (index, bytes) in &job.areas {
            let AreaBytes::ReadWrite(bytes) = bytes else {
                continue;
            };
            let layout = job.layout_of(*index);
            if !area_layout::copies(layout) {
                continue;
            }
            let copy = || {
                let mut lines = vec![Line([0; 64]); bytes.len().div_ceil(64)];
                for (line, chunk) in lines.iter_mut().zip(bytes.chunks(64)) {
                    line.0[..chunk.len()].copy_from_slice(chunk);
                }
                lines
            };
            all.push(DomainCopies {
                index: *index,
                layout,
                before: match layout {
                    AreaLayout::Replicated(_) => bytes.to_vec(),
                    _ => Vec::new(),
                },
                domains: (1..devices).map(|_| copy()).collect(),
                len: bytes.len(),
            });
        }
        all
    }

    /// Merges every domain's copy into the job's area, as its layout says.
    fn merge_into(&self, job: &mut Job<'_>, topology: &Topology) {
        let Some((_, AreaBytes::ReadWrite(dst))) =
            job.areas.iter_mut().find(|(i, _)| *i == self.index)
        else {
            return;
        };
        for (d, lines) in self.domains.iter().enumerate() {
            let d = d + 1;
            // SAFETY: `Line` is 64 plain bytes; the copy holds at least `len` bytes, and every
            // worker thread has finished writing it.
            let copy = unsafe { std::slice::from_raw_parts(lines.as_ptr() as *const u8, self.len) };
            let workers = topology.first_worker[d]..topology.first_worker[d + 1];
            area_layout::merge_copy(self.layout, dst, copy, workers, &self.before);
        }
    }
}

impl CpuPlaced {
    /// The side of worker `w` (a run-wide index) and its index within that side.
    fn side_of(&self, w: u32) -> (&CpuSide, u32) {
        let side = self
            .sides
            .iter()
            .rev()
            .find(|s| s.first <= w)
            .expect("side 0 starts at worker 0");
        (side, w - side.first)
    }
}

impl<R: TaskExecutor<TaskStruct> + Sync> Device for CpuDevice<'_, R> {
    type Placed = CpuPlaced;

    fn name(&self) -> &'static str {
        match self.method {
            CpuMethod::Mgws => "cpu",
            CpuMethod::Static => "cpu-static",
        }
    }

    fn size_grid(&mut self, sched: &Scheduler) -> Result<Grid> {
        // Exactly the workers asked for, in the domains asked for; host atomics are coherent
        // system-wide (the scope is ignored by `HostWord`).
        let cfg = &sched.config;
        if sched.cpu_bridge > 0 || self.link.is_some() {
            check_bridged(cfg)?;
            if sched.cpu_domains > 1 {
                return Err(crate::Error::Config(
                    "CPU domains and a bridged run exclude each other".into(),
                ));
            }
        }
        let split = split_workers(
            cfg.workers,
            sched.cpu_domains as usize,
            cfg.workers_per_queue,
        )?;
        Ok(Grid {
            config: sched.config,
            topology: Topology::split(&split, cfg.workers_per_queue),
            lanes: sched.lanes,
        })
    }

    fn place(&mut self, grid: &Grid, job: &mut Job<'_>) -> Result<CpuPlaced> {
        let areas = (job.host_area_pointers(), job.area_limits());
        let tasks = job.initial;
        let total = grid.config.workers;
        // The workers of each side: one side, or the twin's two (the last `cpu_bridge` workers
        // form side 1).
        let counts = match (self.link, self.sched.cpu_bridge) {
            (None, 0) => vec![total],
            (None, n) if n < total => vec![total - n, n],
            (None, n) => {
                return Err(crate::Error::Config(format!(
                    "a CPU run split into two bridged sides needs workers on both: {n} of \
                     {total} workers on side 1"
                )))
            }
            (Some(_), _) => vec![total],
        };
        let wpq = grid.config.workers_per_queue;
        if counts.len() == 2 && counts.iter().any(|&n| n % wpq != 0) {
            return Err(crate::Error::Config(format!(
                "the two bridged sides have {} and {} workers; with {wpq} workers per public \
                 queue each side needs a multiple of {wpq}",
                counts[0], counts[1]
            )));
        }
        let mut bridge = (self.link.is_none() && counts.len() == 2).then(|| {
            Box::new(HostBridge {
                state: BridgeState::new(),
                slots: [0, 1].map(|_| vec![TaskStruct::new(0, &0u64); BRIDGE_CAPACITY as usize]),
            })
        });
        let bridged = bridge.is_some() || self.link.is_some();
        // Areas that each domain of a run split into domains writes a copy of (bridged runs have
        // one domain per side).
        let mut copies = if counts.len() == 1 && grid.topology.devices > 1 {
            DomainCopies::of(job, grid.topology.devices)
        } else {
            Vec::new()
        };
        let mut sides = Vec::new();
        let mut first = 0u32;
        for (s, &n) in counts.iter().enumerate() {
            let mut config = grid.config;
            config.workers = n;
            let topology = if counts.len() == 1 {
                grid.topology
            } else {
                Topology::single(n, config.workers_per_queue)
            };
            // Initial tasks in proportion to the side's workers.
            let share = |w: u32| (tasks.len() as u128 * w as u128 / total as u128) as u64;
            let (lo, hi) = (share(first), share(first + n));
            if bridged {
                config.flags |= mgws_core::RunFlags::BRIDGED.bits();
            }
            let mut arena = Arena::new(&config, &topology)?;
            let mut env = arena.env(config, topology, tasks.range(lo, hi), areas);
            if let Some(b) = bridge.as_deref_mut() {
                env.bridge = &b.state;
                env.bridge_slots = [b.slots[0].as_mut_ptr(), b.slots[1].as_mut_ptr()];
                env.bridge_side = s as u32;
                env.worker_base = first as u64;
            } else if let Some(link) = self.link {
                env.bridge = link.state;
                env.bridge_slots = link.slots;
                env.bridge_side = 1;
                env.worker_base = link.worker_base as u64;
            }
            let mut domain_envs = Vec::new();
            let domains = if copies.is_empty() {
                1
            } else {
                topology.devices as usize
            };
            for d in 1..domains {
                // SAFETY: an env is integers and pointers (`HostWord` appears only behind
                // pointers), so a bitwise copy is another valid env of the same memory.
                let mut e = unsafe { std::ptr::read(&env) };
                for c in copies.iter_mut() {
                    e.areas[c.index as usize] = c.domains[d - 1].as_mut_ptr() as u64;
                }
                domain_envs.push(SendEnv(e));
            }
            sides.push(CpuSide {
                arena,
                env: SendEnv(env),
                domain_envs,
                first,
            });
            first += n;
        }
        // Create the threads now (on a first run), so that the launch starts them at once: a
        // bridged side that starts late keeps its peer waiting.
        self.sched.threads.get(
            (total * grid.lanes) as usize,
            "mgws-cpu",
            self.sched.pin_threads,
        )?;
        let groups = LaneGroup::for_workers(
            total,
            grid.lanes,
            grid.config.local_capacity,
            grid.topology.device_queues_max(),
        );
        Ok(CpuPlaced {
            sides,
            groups,
            copies,
            _bridge: bridge,
        })
    }

    fn launch<T>(
        &mut self,
        grid: &Grid,
        placed: &CpuPlaced,
        supervise: impl FnOnce(&dyn Running) -> T,
    ) -> Result<T> {
        let lanes = grid.lanes;
        // Every lane of every worker; the calling thread supervises them.
        let threads = self.sched.threads.get(
            (grid.config.workers * lanes) as usize,
            "mgws-cpu",
            self.sched.pin_threads,
        )?;
        // Until the last worker left its loop (the supervisor wakes only once per watchdog poll).
        let clock = RunClock::start();
        let start = clock.started_at();
        self.started_at = Some(start);
        let chaos = self.sched.chaos;
        let (registry, method) = (self.registry, self.method);
        let finished: Vec<AtomicU64> = (0..grid.config.workers)
            .map(|_| AtomicU64::new(0))
            .collect();
        let panicked = super::panics::FirstPanic::default();
        let (_, out) = threads.broadcast_while(
            |i| {
                let (w, lane) = (i as u32 / lanes, i as u32 % lanes);
                let group = &placed.groups[w as usize];
                let (side, id) = placed.side_of(w);
                // A panic stops every side.
                run_lane(
                    LaneRun {
                        method,
                        lane,
                        lanes,
                        group,
                        start,
                        chaos,
                    },
                    side.env_of(id),
                    registry,
                    (w, id),
                    &panicked,
                    || abort_sides(&placed.sides),
                );
                if lane == 0 {
                    // Relaxed: read after the broadcast joined every thread.
                    finished[w as usize]
                        .store(start.elapsed().as_nanos() as u64, AtomicOrdering::Relaxed);
                }
                clock.finished();
            },
            |done| {
                supervise(&CpuRunning {
                    sides: &placed.sides,
                    done,
                })
            },
        );
        self.elapsed_s = clock.elapsed().as_secs_f64();
        self.finished_ns = finished.into_iter().map(AtomicU64::into_inner).collect();
        panicked.into_result()?;
        Ok(out)
    }

    fn read_back(
        &mut self,
        grid: &Grid,
        placed: &CpuPlaced,
        job: &mut Job<'_>,
    ) -> Result<ReadBack> {
        for c in &placed.copies {
            c.merge_into(job, &grid.topology);
        }
        // The first error of any side. Acquire: pairs with the workers' release of the error
        // word (the set's join already orders it; the ordering documents the pairing).
        let error = placed.sides.iter().find_map(|side| {
            // SAFETY: every worker thread has finished; the shared state is ours again.
            let shared = unsafe { side.env.0.shared() };
            RunError::unpack(shared.error.load(Ordering::Acquire, Scope::System))
        });
        // The static baseline's workers wait from the end of their share until the last one
        // finished (the run's end); an mgws worker's waiting is stealing, counted in its stats.
        let idle_ns = (self.method == CpuMethod::Static).then(|| {
            let end = self.finished_ns.iter().copied().max().unwrap_or(0);
            self.finished_ns.iter().map(|&f| end - f).collect()
        });
        Ok(ReadBack {
            elapsed_s: self.elapsed_s,
            // Each thread starts its worker as it is spawned: the spawning is run time.
            launch_s: 0.0,
            error,
            exited_workers: None,
            stats: Some(
                placed
                    .sides
                    .iter()
                    .flat_map(|side| side.arena.stats.iter().copied())
                    .collect(),
            ),
            progress: placed
                .sides
                .iter()
                .flat_map(|side| side.arena.progress.iter().copied())
                .collect(),
            tasks_run: None,
            idle_ns,
        })
    }
}

/// A CPU run in progress: its sides and the thread set's completion.
struct CpuRunning<'a> {
    sides: &'a [CpuSide],
    done: &'a Completion<'a>,
}

impl Running for CpuRunning<'_> {
    fn wait(&self, timeout: Duration) -> Result<bool> {
        let done = self.done.wait(timeout);
        if !done && self.sides.len() > 1 && self.aborted() {
            // The sides of a bridged run share no abort word: a failure on one stops all.
            self.abort();
        }
        Ok(done)
    }

    fn aborted(&self) -> bool {
        self.sides.iter().any(|side| abort_requested(&side.env.0))
    }

    fn progress(&self) -> Vec<WorkerProgress> {
        self.sides
            .iter()
            .flat_map(|side| side_progress(&side.env.0))
            .collect()
    }

    fn live_state(&self) -> LiveState {
        let mut state = LiveState::default();
        for side in self.sides {
            state.absorb(side_live_state(&side.env.0));
        }
        state
    }

    fn abort(&self) {
        abort_sides(self.sides);
    }

    fn exit_grace(&self, _watchdog: Duration) -> Option<Duration> {
        // The threads borrow the job and the arena: they are always waited for.
        None
    }
}

/// Asks the workers of every side to stop (a panic or a failure on one side stops all).
fn abort_sides(sides: &[CpuSide]) {
    for side in sides {
        request_abort(&side.env.0);
    }
}

/// Asks the workers of `env` to stop (`SharedState::abort = 1`).
pub(crate) fn request_abort(env: &Env<HostWord, TaskStruct>) {
    // The shared word and every domain's copy. Release: nothing else is published by it, so
    // release only keeps the hang report's reads before it.
    // SAFETY: the env's memory lives as long as the run's, which outlives every caller (the
    // devices hold it until their workers have exited).
    unsafe { env.raise_abort(Scope::System) };
}

/// Whether a worker of `env` (or the host) asked the run to stop.
pub(crate) fn abort_requested(env: &Env<HostWord, TaskStruct>) -> bool {
    // SAFETY: as in `request_abort`.
    let shared = unsafe { env.shared() };
    // Relaxed: a hint for the supervisor; the abort it triggers is a release store.
    shared.abort.load(Ordering::Relaxed, Scope::System) != 0
}

/// The progress records of one side's workers.
pub(crate) fn side_progress(env: &Env<HostWord, TaskStruct>) -> Vec<WorkerProgress> {
    (0..env.config.workers as usize)
        // SAFETY: one record per worker; workers write them with volatile stores, and a torn or
        // stale read only delays the watchdog by one poll.
        .map(|w| unsafe { env.progress.add(w).read_volatile() })
        .collect()
}

/// What the hang report shows of one side.
pub(crate) fn side_live_state(env: &Env<HostWord, TaskStruct>) -> LiveState {
    // SAFETY: the shared state lives in the arena for the whole run.
    let shared = unsafe { env.shared() };
    let workers = env.config.workers as usize;
    LiveState {
        task_tags: (0..workers)
            // SAFETY: one word per worker in the arena; a torn or stale read only misnames the
            // task in a diagnostic.
            .map(|w| unsafe { env.task_tags.add(w).read_volatile() })
            .collect(),
        // Acquire: a diagnostic read; pairs with the workers' releases so the counters are no
        // older than the progress records read before.
        idle_counter: if env.config.termination_mode() == TerminationMode::Hierarchical {
            (0..env.topology.devices as usize)
                .map(|d| {
                    // SAFETY: the arena holds one counter per device for the whole run.
                    unsafe { &*env.device_idle[d] }
                        .count
                        .load(Ordering::Acquire, Scope::System)
                })
                .sum()
        } else {
            shared.idle_workers.load(Ordering::Acquire, Scope::System)
        },
        initial_ranges_done: shared
            .initial_ranges_done
            .load(Ordering::Acquire, Scope::System),
        initial_ranges: env.initial_ranges(),
        queue_words: (0..env.config.workers)
            .map(|w| {
                let q = env
                    .topology
                    .queue_of_worker(w, env.config.workers_per_queue);
                // SAFETY: q is a valid queue of this env.
                let header = unsafe { env.header(q) };
                // Relaxed: the word is only printed; nothing is read through it.
                header.word.load(Ordering::Relaxed, Scope::System)
            })
            .collect(),
    }
}
