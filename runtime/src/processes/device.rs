//! The launcher of a multi-process run as a [`Device`]: it lays the run out in a shared heap,
//! starts one process per PE (copies of the running program, which serve it through
//! [`super::Pe`]; [`super::children`]), releases them together, supervises them through the heap
//! like any run ([`super::running`]), and reads the results back, on a follower node from node 0.

use std::borrow::Cow;
use std::mem::MaybeUninit;

use std::path::PathBuf;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mgws_core::{AtomicWord, Env, HostWord, Ordering, RunError, Scope, Topology, MAX_DEVICES};
use mgws_tasks::{Registry, TaskStruct};

use super::children::Children;
use super::gpu::GpuPes;
use super::heap::SharedHeap;
use super::layout::{Header, HeapLayout, PeKind, MAGIC, PTX_PATH_BYTES};
use super::nodes::state::{self as node_state, RunResults};
use super::nodes::{NodeLink, NodeStart, Nodes};
use super::pe::{HEAP_FD_VAR, PE_VAR};
use super::running::{exit_grace, ProcessRunning};
use crate::cpu::device::side_progress;
use crate::device::{split_workers, Device, Grid, ReadBack, Running};
use crate::error::{Error, Result};
use crate::initial::InitialTasks;
use crate::job::{AreaBytes, Job};
use crate::memory::check_host;
use crate::scheduler::Scheduler;

/// The launcher of a run over `processes` PE processes, running tasks of registry `R`.
pub struct ProcessDevice<'a, R> {
    sched: &'a Scheduler,
    processes: u32,
    program: PathBuf,
    /// GPU PEs (each runs the mgws kernel on one GPU); `None`: CPU PEs.
    gpu: Option<GpuPes>,
    launch_s: f64,
    /// A run across nodes: which node this launcher is ([`super::nodes`]).
    nodes: Option<Nodes>,
    /// A run across nodes: the run's fingerprint (set by `place`) and the link to the other
    /// nodes' launchers (from the launch on).
    fingerprint: [u8; 20],
    link: Option<NodeLink>,
    _registry: std::marker::PhantomData<R>,
}

impl<R> ProcessDevice<'_, R> {
    /// How long the launcher waits for every PE to be ready.
    fn start_limit(&self) -> Duration {
        self.sched.start_timeout()
    }

    /// The PEs this launcher starts: all, or its node's share.
    fn local_pes(&self) -> std::ops::Range<u32> {
        match &self.nodes {
            Some(n) => n.local_pes(self.processes).unwrap_or(0..0),
            None => 0..self.processes,
        }
    }

    /// Whether this run spans several nodes.
    fn across_nodes(&self) -> bool {
        self.nodes.as_ref().is_some_and(|n| n.count > 1)
    }

    /// Tells the other nodes' launchers that this node's run failed with `e` (a run across
    /// nodes; nothing otherwise). [`super::run`] calls it for every error the pipeline returns.
    pub fn fail_nodes(&mut self, e: &Error) {
        if let Some(link) = &mut self.link {
            link.fail(e);
        }
    }
}

impl<'a, R: Registry> ProcessDevice<'a, R> {
    /// A launcher of `processes` copies of `program` (which must serve its PE first thing, see
    /// [`super::Pe`]): each PE runs its workers on host threads (`gpu` is `None`) or on one GPU
    /// with `gpu`'s settings.
    pub fn new(
        sched: &'a Scheduler,
        processes: u32,
        program: PathBuf,
        gpu: Option<super::GpuBackend>,
    ) -> Self {
        ProcessDevice {
            sched,
            processes,
            program,
            gpu: gpu.map(GpuPes::new),
            launch_s: 0.0,
            nodes: None,
            fingerprint: [0; 20],
            link: None,
            _registry: std::marker::PhantomData,
        }
    }

    /// The same launcher as node `nodes.rank` of a run over `nodes.count` nodes
    /// ([`super::nodes`]): it starts its node's share of the PEs and joins the other nodes'
    /// launchers. GPU PEs over NVSHMEM's device API only.
    pub fn across(mut self, nodes: Nodes) -> Self {
        self.nodes = Some(nodes);
        self
    }

    fn kind(&self) -> PeKind {
        match self.gpu {
            Some(_) => PeKind::Cuda,
            None => PeKind::Cpu,
        }
    }
}

/// The heap of a placed run, and the launcher's own view of it.
pub struct ProcessPlaced {
    pub(super) heap: SharedHeap,
    pub(super) layout: HeapLayout,
    pub(super) env: Env<HostWord, TaskStruct>,
}

impl ProcessPlaced {
    pub(super) fn header(&self) -> &Header {
        // SAFETY: the heap holds the layout, header first, for as long as `self` lives.
        unsafe { HeapLayout::header(self.heap.base()) }
    }
}

impl<R: Registry> Device for ProcessDevice<'_, R> {
    type Placed = ProcessPlaced;

    fn name(&self) -> &'static str {
        match self.kind() {
            PeKind::Cpu => "cpu-processes",
            PeKind::Cuda => "cuda-processes",
        }
    }

    fn size_grid(&mut self, sched: &Scheduler) -> Result<Grid> {
        if let (Ok(_), Ok(pe)) = (std::env::var(HEAP_FD_VAR), std::env::var(PE_VAR)) {
            return Err(Error::Config(format!(
                "this process is PE {pe} of a multi-process run, yet it runs a job itself: its \
                 program must call mgws::processes::Pe::from_env() first in main and serve the PE"
            )));
        }
        let cfg = &sched.config;
        if self.processes == 0 || self.processes as usize > mgws_core::MAX_DEVICES {
            return Err(Error::Config(format!(
                "a multi-process run needs 1 to {} processes, not {}",
                mgws_core::MAX_DEVICES,
                self.processes
            )));
        }
        if sched.cpu_domains > 1 || sched.cpu_bridge > 0 {
            return Err(Error::Config(
                "a multi-process run makes each process a domain of its own; it excludes CPU \
                 domains and bridged sides"
                    .into(),
            ));
        }
        if let Some(nodes) = &self.nodes {
            nodes.local_pes(self.processes)?;
            if nodes.count > 1 && self.kind() == PeKind::Cpu {
                return Err(Error::Config(
                    "runs across nodes run GPU PEs (--device cuda): CPU PEs share one memory \
                     file, which stops at the machine"
                        .into(),
                ));
            }
            if nodes.count > 1 && !self.gpu.as_ref().is_some_and(|g| g.device_api()) {
                return Err(Error::Config(format!(
                    "a run over {} nodes reaches the PEs of other nodes through NVSHMEM's \
                     device API: add --pe-transport device-api (the mapped transport reaches \
                     the PEs of one node only)",
                    nodes.count
                )));
            }
        }
        let mut config = *cfg;
        // Each PE claims initial tasks from its own ranges only: a GPU PE then copies only those
        // into its GPU (`cuda::pe`), and the CPU PEs, their twin, claim the same way.
        config.flags |= mgws_core::RunFlags::INITIAL_OWN_DEVICE.bits();
        let per_node = self.local_pes().len();
        if let Some(gpu) = &mut self.gpu {
            gpu.prepare::<R>(sched, self.processes, per_node)?;
            // Other processes' GPUs reach every PE's queues.
            config.queue_scope = Scope::System as u32;
        }
        let split = split_workers(cfg.workers, self.processes as usize, cfg.workers_per_queue)
            .map_err(|_| {
                Error::Config(format!(
                    "{} workers cannot be split over {} processes in whole public queues of {} \
                     workers: every process needs at least one queue's workers",
                    cfg.workers, self.processes, cfg.workers_per_queue
                ))
            })?;
        let mut topology = Topology::split(&split, cfg.workers_per_queue);
        if let Some(nodes) = self.nodes.as_ref().filter(|n| n.count > 1) {
            // The victim picker's second tier: the PEs of a node.
            topology.devices_per_node = self.processes / nodes.count;
        }
        Ok(Grid {
            config,
            topology,
            lanes: sched.lanes,
        })
    }

    fn place(&mut self, grid: &Grid, job: &mut Job<'_>) -> Result<ProcessPlaced> {
        if let Some(gpu) = &self.gpu {
            gpu.check_job(job)?;
        }
        let limits = job.area_limits();
        // Indexed initial tasks: the header holds the template, from which the PEs' workers
        // make them; listed ones: the heap holds them.
        let indexed = match job.initial {
            InitialTasks::Indexed { template, .. } => Some(template),
            InitialTasks::Listed(_) => None,
        };
        // The tasks the heap holds (written straight into it).
        let in_heap = match indexed {
            Some(_) => InitialTasks::Listed(&[]),
            None => job.initial,
        };
        let layout = HeapLayout::new(
            self.kind(),
            &grid.config,
            &grid.topology,
            in_heap.len(),
            &limits,
        )?;
        check_host(
            format_args!(
                "the shared heap of --workers {} with --public-capacity {} and --spill-capacity {}",
                grid.config.workers, grid.config.public_capacity, grid.config.spill_capacity
            ),
            layout.total,
        )?;
        let created = Instant::now();
        let heap = SharedHeap::create(layout.total as usize)?;
        tracing::debug!(
            bytes = layout.total,
            seconds = created.elapsed().as_secs_f64(),
            "shared heap created"
        );
        let base = heap.base();
        let mut registry_name = [0u8; 64];
        let name = &R::NAME.as_bytes()[..R::NAME.len().min(63)];
        registry_name[..name.len()].copy_from_slice(name);
        let chaos = self.sched.chaos;
        let header = Header {
            magic: MAGIC,
            registry_fingerprint: R::FINGERPRINT,
            registry_name,
            config: grid.config,
            topology: grid.topology,
            lanes: grid.lanes,
            pin_threads: u32::from(self.sched.pin_threads),
            chaos: chaos.map_or([0; 4], |c| {
                [
                    c.seed,
                    c.yield_per_1024.into(),
                    c.sleep_per_1024.into(),
                    c.max_sleep_us.into(),
                ]
            }),
            chaos_on: u64::from(chaos.is_some()),
            initial_len: job.initial.len(),
            initial_indexed: u64::from(indexed.is_some()),
            initial_template: indexed.unwrap_or(TaskStruct::new(0, &0u64)),
            start_limit_ms: self.start_limit().as_millis() as u64,
            area_limits: limits,
            area_copies: self.gpu.as_ref().map_or(0, |g| g.area_copies(job)),
            kind: self.kind() as u32,
            max_registers: self.gpu.as_ref().map_or(0, |g| g.max_registers()),
            gpus: self.gpu.as_ref().map_or([0; MAX_DEVICES], |g| g.pe_gpus()),
            // CPU PEs: the mapped transport's word (their shared file).
            pe_transport: self.gpu.as_ref().map_or(0, |g| g.transport_word()),
            ptx_path: match self.gpu.as_ref().map(|g| g.ptx()).transpose()?.flatten() {
                Some(path) => Header::encode_ptx_path(&path.canonicalize().map_err(|e| {
                    Error::BackendUnavailable(format!("the PTX {}: {e}", path.display()))
                })?)?,
                None => [0; PTX_PATH_BYTES],
            },
            // SAFETY: all-zero bytes are the handshake's initial state (integers and atomics).
            ..unsafe { std::mem::zeroed() }
        };
        // SAFETY: the heap is fresh, page-aligned and holds the layout, header first, then room
        // for `in_heap`'s tasks at `layout.initial`; no other process maps it yet.
        unsafe {
            (base as *mut Header).write(header);
            let slots = layout.initial(base) as *mut MaybeUninit<TaskStruct>;
            in_heap.write_into(std::slice::from_raw_parts_mut(
                slots,
                in_heap.len() as usize,
            ));
            for (index, bytes) in &job.areas {
                let (at, len) = layout.area(base, *index as usize, &limits);
                let src: &[u8] = match bytes {
                    AreaBytes::Read(b) => b,
                    AreaBytes::ReadWrite(b) => b,
                };
                // An empty area has no place in the heap (`at` is null).
                if len > 0 {
                    super::heap::copy_in_parallel(&src[..len.min(src.len())], at);
                }
            }
        }
        if self.across_nodes() {
            let bytes = crate::memory::bytes_of::<TaskStruct>(in_heap.len()) as usize;
            // SAFETY: the header, the initial tasks and the data areas were written just above,
            // into the heap's layout; nothing changes them before the PEs start.
            let (header, tasks) = unsafe {
                (
                    HeapLayout::header(base),
                    std::slice::from_raw_parts(layout.initial(base) as *const u8, bytes),
                )
            };
            let areas: Vec<&[u8]> = (0..mgws_core::DATA_AREAS)
                .map(|i| {
                    let (at, len) = layout.area(base, i, &limits);
                    if len == 0 {
                        &[][..]
                    } else {
                        // SAFETY: as above (an empty area is no slice of the heap).
                        unsafe { std::slice::from_raw_parts(at as *const u8, len) }
                    }
                })
                .collect();
            self.fingerprint = node_state::fingerprint(header, tasks, &areas);
        }
        // SAFETY: the header was written just above and the heap holds its layout.
        let env = unsafe { layout.env(base, HeapLayout::header(base)) };
        tracing::debug!(
            seconds = created.elapsed().as_secs_f64(),
            "initial tasks and data areas copied into the shared heap"
        );
        Ok(ProcessPlaced { heap, layout, env })
    }

    fn launch<T>(
        &mut self,
        grid: &Grid,
        placed: &ProcessPlaced,
        supervise: impl FnOnce(&dyn Running) -> T,
    ) -> Result<T> {
        let launched = Instant::now();
        let env = match &self.gpu {
            Some(gpu) => gpu.pe_env(
                &grid.config,
                &grid.topology,
                &placed.header().area_limits,
                placed.header().area_copies,
                self.across_nodes(),
            ),
            None => Vec::new(),
        };
        let mut limit = self.start_limit();
        if let Some(nodes) = self.nodes.clone().filter(|n| n.count > 1) {
            // A follower waits for node 0, which may start later, before it starts any PE.
            self.link = Some(NodeLink::open(&nodes, self.fingerprint, limit)?);
            if nodes.rank > 0 {
                // Node 0 decides when the start took too long (and says so); a follower gives
                // up only if node 0 never does.
                limit += Duration::from_secs(10);
            }
        }
        let pes = self.local_pes();
        // The start-up timeout counts from here: a follower may have waited for node 0 above.
        let spawned = Instant::now();
        let mut children = Children::spawn(&self.program, placed, pes.clone(), &env)?;
        let header = placed.header();
        let local = pes.len() as u64;
        loop {
            let local_ready = header.gate.all_ready(local);
            let start = match &mut self.link {
                Some(link) => match link.poll_start(header, local_ready) {
                    Ok(start) => start,
                    Err(e) => {
                        header.gate.cancel();
                        return Err(e);
                    }
                },
                None if local_ready => NodeStart::Open,
                None => NodeStart::Waiting,
            };
            if start == NodeStart::Open {
                break;
            }
            if let Some(e) = children.exited_early(placed)? {
                header.gate.cancel();
                return Err(e);
            }
            if spawned.elapsed() > limit {
                header.gate.cancel();
                // This node's late PEs, and the nodes that are not ready (a PE waits for the
                // PEs of other nodes in NVSHMEM's collectives, so both are named).
                let mut late = Vec::new();
                if !local_ready {
                    late.push(children.late_report(header, self.kind()));
                }
                if let Some(link) = &self.link {
                    late.push(link.late_nodes());
                }
                let late = late.join("; ");
                return Err(Error::Process(format!(
                    "not every one of the {} PE processes of {} was ready after {limit:?}: {late}",
                    grid.topology.devices,
                    self.program.display(),
                )));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        self.launch_s = launched.elapsed().as_secs_f64();
        tracing::debug!(
            seconds = self.launch_s,
            pes = local,
            "every PE started and ready"
        );
        if let Some(link) = &mut self.link {
            if let Err(e) = link.open_gates() {
                header.gate.cancel();
                return Err(e);
            }
        }
        header.gate.open();
        let running = ProcessRunning {
            placed,
            children: Mutex::new(children),
            teardown_grace: exit_grace(self.sched.watchdog),
            link: Mutex::new(self.link.take()),
            link_failed: std::sync::atomic::AtomicBool::new(false),
            pes,
        };
        let out = supervise(&running);
        // Whatever the supervisor decided, no PE outlives the run.
        running.lock().kill_all();
        self.link = running.link.into_inner().unwrap_or_else(|e| e.into_inner());
        if let Some((pe, worker, message)) = first_panic(header) {
            return Err(Error::TaskPanicked {
                worker,
                message: format!("{message} (PE {pe})"),
            });
        }
        Ok(out)
    }

    fn read_back(
        &mut self,
        grid: &Grid,
        placed: &ProcessPlaced,
        job: &mut Job<'_>,
    ) -> Result<ReadBack> {
        let header = placed.header();
        let base = placed.heap.base();
        if matches!(self.link, Some(NodeLink::Follower(_))) {
            return self.read_back_follower(grid, placed, job);
        }
        if let Some(link) = &mut self.link {
            let layout = &placed.layout;
            // SAFETY: every PE of this node has finished, and nothing else touches the heap's
            // areas and records until this returns.
            unsafe {
                link.merge_done(
                    &placed.env,
                    |i| {
                        let limit = *header.area_limits.get(i)?;
                        node_state::writable(limit)
                            .then(|| layout.area(base, i, &header.area_limits))
                    },
                    |pe, start, elapsed| {
                        if let Some(r) = header.pes.get(pe as usize) {
                            // Relaxed: read below by this thread.
                            r.started_ns.store(start, AtomicOrdering::Relaxed);
                            r.elapsed_ns.store(elapsed, AtomicOrdering::Relaxed);
                        }
                    },
                )?;
            }
        }
        let pes = &header.pes[..grid.topology.devices as usize];
        // From the earliest PE's start to the latest PE's end. Relaxed: every PE's state was
        // read with acquire before the run was done.
        let span = |r: &super::layout::PeRecord| {
            let start = r.started_ns.load(AtomicOrdering::Relaxed);
            (start, start + r.elapsed_ns.load(AtomicOrdering::Relaxed))
        };
        let first = pes.iter().map(|r| span(r).0).min().unwrap_or(0);
        let elapsed_ns = pes
            .iter()
            .map(|r| span(r).1.saturating_sub(first))
            .max()
            .unwrap_or(0);

        // SAFETY: every PE has finished; the shared state is the launcher's alone.
        let shared = unsafe { placed.env.shared() };
        // Acquire: pairs with the workers' release of the error word (the PEs' done states
        // already order it).
        let error_word = shared.error.load(Ordering::Acquire, Scope::System);
        for (index, bytes) in job.areas.iter_mut() {
            if let AreaBytes::ReadWrite(b) = bytes {
                let (at, len) = placed
                    .layout
                    .area(base, *index as usize, &header.area_limits);
                if len == 0 {
                    // An empty area has no place in the heap (`at` is null).
                    continue;
                }
                // SAFETY: the area lies in the heap (its layout) and every PE has finished.
                b.copy_from_slice(unsafe { std::slice::from_raw_parts(at, len) });
            }
        }
        let workers = grid.config.workers as usize;
        let on_gpus = self.kind() == PeKind::Cuda;
        // GPU PEs copy their statistics only when the run collects them (CPU PEs' workers
        // always write theirs).
        let stats = !on_gpus || grid.config.run_flags().contains(mgws_core::RunFlags::STATS);
        let back = ReadBack {
            elapsed_s: elapsed_ns as f64 * 1e-9,
            launch_s: self.launch_s,
            error: RunError::unpack(error_word),
            // PE 0 copied the kernels' count of workers that left their loop.
            exited_workers: on_gpus
                .then(|| shared.exited_workers.load(Ordering::Relaxed, Scope::System)),
            // SAFETY: one statistics block per worker in the heap; every PE has finished.
            stats: stats
                .then(|| unsafe { std::slice::from_raw_parts(placed.env.stats, workers) }.to_vec()),
            progress: side_progress(&placed.env),
            tasks_run: None,
            idle_ns: None,
        };
        if let Some(link) = &mut self.link {
            // Every follower gets the run's results: its caller sees what this one sees.
            let results = RunResults {
                elapsed_ns,
                launch_s: back.launch_s,
                error: error_word,
                exited_workers: back.exited_workers,
                stats: back.stats.as_deref().map(Cow::Borrowed),
                progress: Cow::Borrowed(&back.progress),
                areas: job
                    .areas
                    .iter()
                    .filter_map(|(i, b)| match b {
                        AreaBytes::ReadWrite(b) => Some((u32::from(*i), Cow::Borrowed(&b[..]))),
                        AreaBytes::Read(_) => None,
                    })
                    .collect(),
            };
            link.send_results(results.encode())?;
        }
        Ok(back)
    }
}

impl<R: Registry> ProcessDevice<'_, R> {
    /// A follower of a run across nodes, at the end: sends its PEs' times, statistics and area
    /// changes to node 0, and returns the run's results that node 0 sends back.
    fn read_back_follower(
        &mut self,
        grid: &Grid,
        placed: &ProcessPlaced,
        job: &mut Job<'_>,
    ) -> Result<ReadBack> {
        let header = placed.header();
        let base = placed.heap.base();
        let pes = self.local_pes();
        // Node 0 sends the results once every node's PEs finished, which they do together
        // (NVSHMEM's final barrier); its supervision ends a run that does not.
        let wait = self.sched.watchdog.max(self.start_limit()) + Duration::from_secs(10);
        let link = self.link.as_mut().expect("a follower has its link");
        let open_ns = link.open_ns();
        let spans: Vec<(u32, u64, u64)> = pes
            .clone()
            .map(|pe| {
                let r = &header.pes[pe as usize];
                // Relaxed: the PE's finished state (acquired) published them.
                let start = r.started_ns.load(AtomicOrdering::Relaxed);
                (
                    pe,
                    start.saturating_sub(open_ns),
                    r.elapsed_ns.load(AtomicOrdering::Relaxed),
                )
            })
            .collect();
        let mut areas = Vec::new();
        for (index, bytes) in job.areas.iter() {
            if let AreaBytes::ReadWrite(was) = bytes {
                let (at, len) = placed
                    .layout
                    .area(base, *index as usize, &header.area_limits);
                if len > 0 {
                    // SAFETY: the area lies in the heap (its layout) and every PE of this node
                    // has finished.
                    let now = unsafe { std::slice::from_raw_parts(at, len) };
                    areas.push((u32::from(*index), now, &was[..len]));
                }
            }
        }
        let stats = grid.config.run_flags().contains(mgws_core::RunFlags::STATS);
        let done = node_state::encode_done(&placed.env, pes, stats, &spans, &areas);
        let results = RunResults::decode(&link.exchange_results(done, wait)?)?;
        for (index, bytes) in job.areas.iter_mut() {
            if let AreaBytes::ReadWrite(b) = bytes {
                if let Some((_, sent)) = results.areas.iter().find(|(i, _)| *i == u32::from(*index))
                {
                    if sent.len() != b.len() {
                        return Err(Error::Process(format!(
                            "node 0 sent {} bytes of data area {index}, which has {}",
                            sent.len(),
                            b.len()
                        )));
                    }
                    b.copy_from_slice(sent);
                }
            }
        }
        Ok(ReadBack {
            elapsed_s: results.elapsed_ns as f64 * 1e-9,
            launch_s: results.launch_s,
            error: RunError::unpack(results.error),
            exited_workers: results.exited_workers,
            stats: results.stats.map(Cow::into_owned),
            progress: results.progress.into_owned(),
            tasks_run: None,
            idle_ns: None,
        })
    }
}

/// The first panic any PE reported: the PE, the worker and the message.
fn first_panic(header: &Header) -> Option<(u32, u32, String)> {
    header.pes[..header.topology.devices as usize]
        .iter()
        .enumerate()
        .find_map(|(pe, record)| {
            // The finished state publishes the record's other fields.
            if !record.state.is_finished() {
                return None;
            }
            let worker = record
                .panic_worker
                .load(AtomicOrdering::Relaxed)
                .checked_sub(1)?;
            Some((pe as u32, worker as u32, record.panic_message()))
        })
}
