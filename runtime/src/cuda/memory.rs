//! A persistent-kernel run's memory: orchestration data where the placement says, progress
//! records and statistics in each GPU's own memory, overflow stacks, initial tasks, data areas,
//! and one env per GPU.

use std::mem::size_of;

use mgws_core::bridge::{BridgeState, BRIDGE_CAPACITY};
use mgws_core::{
    DeviceIdle, Env, HostWord, QueueHeader, RunError, SharedState, Topology, WorkerProgress,
    WorkerStats, DATA_AREAS, MAX_DEVICES,
};
use mgws_tasks::TaskStruct;

use super::driver::{DeviceBuffer, Gpu, HostBuffer};
use super::plan::{self, shared_field, QueueArea, RunArea, TasksIn};
use super::session::{Loc, Placed, Session};
use super::split::{self, SplitBuffer};
use super::CudaBackend;
use crate::area_layout::{self, AreaLayout};
use crate::error::{Error, Result};
use crate::initial::{task_bytes, InitialTasks};
use crate::job::{AreaBytes, Job};

/// What a run's GPUs hold of the job: the initial tasks they start with (all of them, or their
/// share in a bridged run) and the bridge to the CPU side, if any.
#[derive(Clone, Copy)]
pub(super) struct GpuSide<'a> {
    pub initial: InitialTasks<'a>,
    pub bridge: Option<&'a HostBuffer>,
}

/// The byte layout of a bridged run's mapped host memory: the bridge state, then the slots of
/// each direction's mailbox.
pub(super) struct BridgeLayout;

impl BridgeLayout {
    pub const STATE: usize = 0;
    /// Bytes in all.
    pub const BYTES: usize = Self::slots(2);

    /// Byte offset of the slots of the mailbox into side `s`.
    pub const fn slots(s: usize) -> usize {
        let state = size_of::<BridgeState<HostWord>>().next_multiple_of(128);
        state + s * BRIDGE_CAPACITY as usize * size_of::<TaskStruct>()
    }
}

/// Everything allocated for one run. Dropped before the session (declared after it).
pub struct Memory {
    pub(super) queues: Vec<Placed>,
    pub(super) queue_areas: Vec<QueueArea>,
    pub(super) run: Placed,
    pub(super) run_area: RunArea,
    /// Per GPU: its workers' progress records ([`WorkerRecords`]), which the host reads while
    /// they run.
    pub(super) progress: Vec<Placed>,
    /// Per GPU: its workers' statistics, written once as each exits; `None` when the run
    /// collects none.
    pub(super) stats: Option<Vec<Placed>>,
    /// Per GPU: its workers' `Env::task_tags` words, in its own memory (lane 0 writes one as a
    /// task of another tag starts; in mapped host memory each such store would cross PCIe).
    pub(super) task_tags: Vec<Placed>,
    /// Per GPU: its `Env::device_idle` words (hierarchical termination), in its own memory, where
    /// only its workers update it at device scope.
    pub(super) device_idle: Vec<Placed>,
    /// Per GPU: its copy of the abort flag (`Env::abort`), in its own memory, which its workers
    /// read at every progress check instead of the shared state on the first GPU.
    pub(super) device_abort: Vec<Placed>,
    _spill: Vec<DeviceBuffer>,
    /// Each GPU's rows of `Env::remote_damping` (none with one GPU).
    _remote_damping: Vec<DeviceBuffer>,
    _initial_host: Option<HostBuffer>,
    _initial_dev: PlacedInitial,
    /// The data areas, by index.
    pub(super) areas: Vec<(u8, PlacedArea)>,
    pub(super) envs: Vec<DeviceBuffer>,
    /// Home ranges that hold initial tasks (for the hang report).
    pub(super) initial_ranges: u64,
}
pub(super) fn allocate(
    s: &Session,
    b: &CudaBackend,
    config: &mgws_core::SchedConfig,
    topology: &Topology,
    job: &mut Job<'_>,
    side: GpuSide<'_>,
) -> Result<Memory> {
    let n = s.run_devices;
    let span = tracing::debug_span!("cuda.allocate.orchestration").entered();
    let home_loc = |d: usize| match b.placement {
        plan::Placement::Host => Loc::Host,
        _ => Loc::Gpu(s.homes[d]),
    };
    let mut queues = Vec::new();
    let mut queue_areas = Vec::new();
    for d in 0..n {
        let count = topology.first_queue[d + 1] - topology.first_queue[d];
        let area = QueueArea::new(count, config.public_capacity);
        queues.push(Placed::zeroed(s, home_loc(d), area.total, "public queues")?);
        queue_areas.push(area);
    }
    tracing::trace!("queues");
    let run_area = RunArea::new(topology);
    let run = Placed::zeroed(s, home_loc(0), run_area.total, "shared state")?;
    tracing::trace!("records");
    s.gpus[0].make_current()?;
    let progress =
        WorkerRecords::<WorkerProgress>::allocate(s, topology, "worker progress records")?;
    let stats = if config.run_flags().contains(mgws_core::RunFlags::STATS) {
        Some(WorkerRecords::<WorkerStats>::allocate(
            s,
            topology,
            "worker statistics",
        )?)
    } else {
        None
    };
    tracing::trace!("spill");
    let task = size_of::<TaskStruct>();
    let spill_per_worker = config.spill_capacity as usize * task;
    let mut spill = Vec::new();
    for (d, g) in s.gpus[..n].iter().enumerate() {
        let w = topology.workers_on(d) as usize;
        spill.push(DeviceBuffer::alloc(
            g,
            w * spill_per_worker,
            &format!(
                "the overflow stacks (--spill-capacity {} x {w} workers)",
                config.spill_capacity
            ),
        )?);
    }
    let damping_row = damping_row_bytes(topology);
    let mut remote_damping = Vec::new();
    for (d, g) in s.gpus[..n].iter().enumerate() {
        let w = topology.workers_on(d) as usize;
        remote_damping.extend(damping_rows(g, topology, w, "other GPUs' queues")?);
    }
    tracing::trace!("tags");
    let task_tags = WorkerRecords::<u64>::allocate(s, topology, "the task-tag words")?;
    let mut device_idle = Vec::new();
    for d in 0..n {
        device_idle.push(Placed::zeroed(
            s,
            Loc::Gpu(d),
            size_of::<DeviceIdle<HostWord>>(),
            "the idle counter and relay",
        )?);
    }
    let device_abort = (0..n)
        .map(|d| Placed::zeroed(s, Loc::Gpu(d), 8, "the abort flag's copy"))
        .collect::<Result<Vec<_>>>()?;
    drop(span);
    let span = tracing::debug_span!("cuda.allocate.initial_and_areas").entered();
    // Whether memory can be split over the run's GPUs (asked once: initial tasks and areas).
    let splits = n > 1 && split::supported(&s.gpus[..n])?;
    let (initial_host, initial_dev) = match b.tasks_in {
        TasksIn::Host => {
            s.gpus[0].make_current()?;
            let held = task_bytes(side.initial.held());
            let mut h = HostBuffer::alloc(held.len(), "initial tasks")?;
            h.as_mut_slice().copy_from_slice(held);
            (Some(h), PlacedInitial::None)
        }
        TasksIn::Device => {
            let what = format!("the initial tasks ({} tasks)", side.initial.len());
            (
                None,
                PlacedInitial::place(s, topology, splits, side.initial, &what)?,
            )
        }
    };
    // Data areas: read-only ones copied to every GPU, read-write ones as their layout says.
    let mut areas = Vec::new();
    for (index, bytes) in job.areas.iter() {
        let chosen = b.area_layout.or_else(|| job.chosen_layout(*index));
        let mut layout = chosen.unwrap_or(AreaLayout::Partitioned);
        if matches!(bytes, AreaBytes::ReadWrite(_)) && n > 1 {
            layout.check(*index, bytes.len())?;
            if layout == AreaLayout::Partitioned && !splits {
                // The default falls back to the layout before partitioning; a choice is an error.
                if chosen.is_some() {
                    return Err(Error::Config(format!(
                        "data area {index} is partitioned, but not every GPU of the run has \
                         virtual memory management: lay it out single-home or replicated"
                    )));
                }
                layout = AreaLayout::SingleHome;
            }
        }
        areas.push((
            *index,
            PlacedArea::place(s, topology, *index, bytes, layout)?,
        ));
    }
    drop(span);
    let _span = tracing::debug_span!("cuda.allocate.envs").entered();
    let mut envs = Vec::new();
    // The same on every device (one topology, one initial set).
    let mut initial_ranges = 0;
    for (d, spill_d) in spill.iter().enumerate() {
        let mut queue_headers = [std::ptr::null(); MAX_DEVICES];
        let mut queue_slots = [std::ptr::null_mut(); MAX_DEVICES];
        for e in 0..n {
            let base = queues[e].device_ptr(s, d)?;
            queue_headers[e] =
                (base + queue_areas[e].headers as u64) as *const QueueHeader<HostWord>;
            queue_slots[e] = (base + queue_areas[e].slots as u64) as *mut TaskStruct;
        }
        let mut device_idle_ptrs = [std::ptr::null(); MAX_DEVICES];
        for (e, word) in device_idle.iter().enumerate() {
            device_idle_ptrs[e] = word.device_ptr(s, d)? as *const DeviceIdle<HostWord>;
        }
        let mut device_abort_ptrs = [std::ptr::null(); MAX_DEVICES];
        for (e, word) in device_abort.iter().enumerate() {
            device_abort_ptrs[e] = word.device_ptr(s, d)? as *const HostWord;
        }
        let run_base = run.device_ptr(s, d)?;
        // Side 0 of a bridged run: the bridge and its slots in mapped host memory.
        let bridge_ptrs = match side.bridge {
            Some(h) => {
                let base = h.device_ptr(&s.gpus[d])?;
                (
                    (base + BridgeLayout::STATE as u64) as *const BridgeState<HostWord>,
                    [0, 1].map(|i| (base + BridgeLayout::slots(i) as u64) as *mut TaskStruct),
                )
            }
            None => (std::ptr::null(), [std::ptr::null_mut(); 2]),
        };
        // Workers index the overflow stacks by their global id.
        let spill_base = by_worker(spill_d.ptr, topology.first_worker[d], spill_per_worker);
        let initial = match &initial_host {
            Some(h) => h.device_ptr(&s.gpus[d])?,
            None => initial_dev.ptr_on(d),
        };
        let mut area_ptrs = [0u64; DATA_AREAS];
        for (index, area) in &areas {
            area_ptrs[*index as usize] = area.ptr_on(d);
        }
        let env: Env<HostWord, TaskStruct> = Env {
            config: *config,
            topology: *topology,
            shared: (run_base + run_area.shared as u64) as *const SharedState<HostWord>,
            queue_headers,
            queue_slots,
            tree: (run_base + run_area.tree as u64) as *const HostWord,
            device_idle: device_idle_ptrs,
            abort: device_abort_ptrs[d],
            device_abort: device_abort_ptrs,
            bridge: bridge_ptrs.0,
            bridge_slots: bridge_ptrs.1,
            bridge_side: 0,
            // The last GPU worker: worker 0 starts with the first initial tasks (a tree's root),
            // and the bridge's reads of host memory would slow the run's start.
            bridge_worker: topology.workers() - 1,
            worker_base: 0,
            spill: spill_base as *mut TaskStruct,
            initial: initial as *const TaskStruct,
            initial_len: side.initial.len(),
            initial_counted_word: side.initial.counted_word(),
            progress: WorkerRecords::<WorkerProgress>::env_ptr(&progress, s, topology, d)?,
            stats: match &stats {
                Some(per_gpu) => WorkerRecords::<WorkerStats>::env_ptr(per_gpu, s, topology, d)?,
                None => std::ptr::null_mut(),
            },
            task_tags: WorkerRecords::<u64>::env_ptr(&task_tags, s, topology, d)?,
            areas: area_ptrs,
            area_limits: job.area_limits(),
            remote_damping: remote_damping.get(d).map_or(std::ptr::null_mut(), |b| {
                by_worker(b.ptr, topology.first_worker[d], damping_row) as *mut u64
            }),
        };
        let buf = DeviceBuffer::alloc(&s.gpus[d], size_of::<Env<HostWord, TaskStruct>>(), "env")?;
        buf.write(0, env_bytes(&env))?;
        envs.push(buf);
        initial_ranges = env.initial_ranges();
    }
    for g in &s.gpus {
        g.synchronize()?;
    }
    Ok(Memory {
        initial_ranges,
        queues,
        queue_areas,
        run,
        run_area,
        progress,
        stats,
        task_tags,
        device_idle,
        device_abort,
        _spill: spill,
        _remote_damping: remote_damping,
        _initial_host: initial_host,
        _initial_dev: initial_dev,
        areas,
        envs,
    })
}

/// The initial tasks in device memory: on one GPU a plain buffer; on several, one range split
/// so that each GPU holds its own queues' home ranges (`Env::initial_range`) and reaches the
/// others' over NVLink when it claims from them, or, where a GPU has no virtual memory
/// management or the set is too small to split by whole mapping units ([`split_keeps_home`]),
/// a copy on each. An indexed set is only its template, copied to every GPU, whose workers make
/// the tasks from it.
pub(super) enum PlacedInitial {
    None,
    One(DeviceBuffer),
    Split(SplitBuffer),
    /// A copy on each GPU: an indexed set's template, or the tasks where a GPU has no virtual
    /// memory management or the set is small.
    Copies(Vec<DeviceBuffer>),
}

impl PlacedInitial {
    /// `splits`: whether the run's GPUs can hold a [`SplitBuffer`].
    fn place(
        s: &Session,
        topology: &Topology,
        splits: bool,
        initial: InitialTasks<'_>,
        what: &str,
    ) -> Result<Self> {
        let n = s.run_devices;
        let bytes = task_bytes(initial.held());
        let indexed = matches!(initial, InitialTasks::Indexed { .. });
        let unit = if splits && !indexed {
            Some(split::unit(&s.gpus[..n])?)
        } else {
            None
        };
        let placement =
            initial_placement(n, bytes.len(), indexed, unit, &queue_shares(topology, n));
        tracing::debug!(
            ?placement,
            bytes = bytes.len(),
            "the initial tasks' placement"
        );
        Ok(match placement {
            InitialPlacement::One => {
                let buf = DeviceBuffer::alloc(&s.gpus[0], bytes.len(), what)?;
                buf.write(0, bytes)?;
                PlacedInitial::One(buf)
            }
            InitialPlacement::Copies => {
                PlacedInitial::Copies(copy_to_each(&s.gpus[..n], bytes, what)?)
            }
            InitialPlacement::Split => {
                let buf = split_by_queues(s, topology, bytes.len(), what)?;
                buf.write_all(bytes)?;
                PlacedInitial::Split(buf)
            }
        })
    }

    /// The address GPU `d` reads them at (0 if there are none).
    fn ptr_on(&self, d: usize) -> u64 {
        match self {
            PlacedInitial::None => 0,
            PlacedInitial::Copies(c) => c[d].ptr,
            PlacedInitial::One(b) => b.ptr,
            PlacedInitial::Split(b) => b.ptr,
        }
    }
}

/// Where a run's initial tasks go ([`PlacedInitial`] without the memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InitialPlacement {
    One,
    Copies,
    Split,
}

/// The placement of `bytes` bytes of initial tasks on `gpus` GPUs, given whether the set is
/// indexed (its bytes are a template), the mapping unit of a split (`None` where a GPU has no
/// virtual memory management) and each GPU's share of the home ranges (its public queues).
fn initial_placement(
    gpus: usize,
    bytes: usize,
    indexed: bool,
    unit: Option<usize>,
    shares: &[u64],
) -> InitialPlacement {
    if gpus == 1 || bytes == 0 {
        return InitialPlacement::One;
    }
    match unit {
        Some(unit) if !indexed && split_keeps_home(bytes, shares, unit) => InitialPlacement::Split,
        _ => InitialPlacement::Copies,
    }
}

/// Mapping units in the smallest GPU's share of a listed initial set, at least, for the set to
/// be split rather than copied to every GPU (see [`split_keeps_home`]).
const SPLIT_MIN_UNITS: u64 = 32;

/// Whether a listed initial set of `bytes` bytes, split in proportion to `shares` in mapping
/// units of `unit` bytes, leaves each GPU's home ranges in its own memory but for a small part.
/// Each boundary between two GPUs' slices is rounded to a unit, so up to half a unit of a GPU's
/// tasks lies in a neighbour's memory at each of its boundaries, where every claim of them is a
/// round trip over NVLink: 2.57 MB of CONTAINS tasks over 2 GPUs put 63% of the second GPU's
/// tasks on the first, and the run took 200 us against 140 on one GPU (docs/results.md). With
/// fewer than [`SPLIT_MIN_UNITS`] units in the smallest share (64 MB at the H200s' 2 MB) the set
/// is copied to every GPU, which misplaces nothing (a set of at most 64 MB per GPU: up to 256
/// MB copied to each of 4); with more, a split misplaces at most 1/32 of a share.
fn split_keeps_home(bytes: usize, shares: &[u64], unit: usize) -> bool {
    let total: u64 = shares.iter().sum();
    let least = shares.iter().copied().min().unwrap_or(0);
    bytes as u128 * u128::from(least) >= u128::from(SPLIT_MIN_UNITS * unit as u64 * total.max(1))
}

/// Each of the `gpus` GPUs' public queues: its share of the home ranges.
fn queue_shares(topology: &Topology, gpus: usize) -> Vec<u64> {
    (0..gpus)
        .map(|d| u64::from(topology.first_queue[d + 1] - topology.first_queue[d]))
        .collect()
}

/// `bytes` bytes split over the run's GPUs in proportion to each GPU's public queues, i.e. to its
/// share of the initial tasks.
fn split_by_queues(
    s: &Session,
    topology: &Topology,
    bytes: usize,
    what: &str,
) -> Result<SplitBuffer> {
    let n = s.run_devices;
    SplitBuffer::alloc(&s.gpus[..n], &queue_shares(topology, n), bytes, what)
}

/// One data area in device memory.
pub(super) enum PlacedArea {
    /// Read-only: a copy on each GPU.
    Copies(Vec<DeviceBuffer>),
    /// Read-write, one buffer on the first GPU (any layout on one GPU, or [`AreaLayout::SingleHome`]).
    Home(DeviceBuffer),
    /// Read-write, [`AreaLayout::Partitioned`] over several GPUs.
    Split(SplitBuffer),
    /// Read-write, a copy on each GPU: [`AreaLayout::Replicated`] (`before` holds the job's
    /// bytes) or [`AreaLayout::PerWorker`].
    Replicas {
        copies: Vec<DeviceBuffer>,
        layout: AreaLayout,
        before: Vec<u8>,
    },
}

impl PlacedArea {
    fn place(
        s: &Session,
        topology: &Topology,
        index: u8,
        bytes: &AreaBytes<'_>,
        layout: AreaLayout,
    ) -> Result<PlacedArea> {
        let gpus = &s.gpus[..s.run_devices];
        let what = format!("data area {index}");
        let src = match bytes {
            AreaBytes::Read(b) => return Ok(PlacedArea::Copies(copy_to_each(gpus, b, &what)?)),
            AreaBytes::ReadWrite(b) => &**b,
        };
        if gpus.len() == 1 || src.is_empty() {
            let mut one = copy_to_each(&gpus[..1], src, &what)?;
            return Ok(PlacedArea::Home(one.remove(0)));
        }
        Ok(match layout {
            AreaLayout::SingleHome => {
                let mut one = copy_to_each(&gpus[..1], src, &what)?;
                PlacedArea::Home(one.remove(0))
            }
            AreaLayout::Partitioned => {
                let what = format!("{what} (partitioned)");
                let buf = split_by_queues(s, topology, src.len(), &what)?;
                buf.write_all(src)?;
                PlacedArea::Split(buf)
            }
            AreaLayout::Replicated(_) | AreaLayout::PerWorker { .. } => PlacedArea::Replicas {
                copies: copy_to_each(gpus, src, &format!("{what} ({})", layout.name()))?,
                layout,
                before: match layout {
                    AreaLayout::Replicated(_) => src.to_vec(),
                    _ => Vec::new(),
                },
            },
        })
    }

    /// The address GPU `d`'s tasks see the area at.
    fn ptr_on(&self, d: usize) -> u64 {
        match self {
            PlacedArea::Copies(c) | PlacedArea::Replicas { copies: c, .. } => c[d].ptr,
            PlacedArea::Home(b) => b.ptr,
            PlacedArea::Split(b) => b.ptr,
        }
    }

    /// Copies a read-write area's bytes after the run into `dst`, putting the GPUs' parts back
    /// together as its layout says. Read-only areas are left alone.
    pub(super) fn read_back(&self, topology: &Topology, dst: &mut [u8]) -> Result<()> {
        match self {
            PlacedArea::Copies(_) => Ok(()),
            PlacedArea::Home(b) => b.read(0, dst),
            PlacedArea::Split(b) => b.read_all(dst),
            PlacedArea::Replicas {
                copies,
                layout,
                before,
            } => {
                copies[0].read(0, dst)?;
                let mut copy = vec![0u8; dst.len()];
                for (d, c) in copies.iter().enumerate().skip(1) {
                    c.read(0, &mut copy)?;
                    let workers = topology.first_worker[d]..topology.first_worker[d + 1];
                    area_layout::merge_copy(*layout, dst, &copy, workers, before);
                }
                Ok(())
            }
        }
    }
}

/// A copy of `bytes` in each GPU's memory, the GPUs copying at the same time (one thread each:
/// a copy from pageable host memory is paced by the CPU that stages it, so with several GPUs the
/// copies would otherwise add up).
fn copy_to_each(
    gpus: &[std::sync::Arc<super::driver::Gpu>],
    bytes: &[u8],
    what: &str,
) -> Result<Vec<DeviceBuffer>> {
    super::on_each_thread(gpus, |g| {
        let buf = DeviceBuffer::alloc(g, bytes.len(), what)?;
        buf.write(0, bytes)?;
        Ok(buf)
    })
    .into_iter()
    .collect()
}

pub(super) fn read_error_word(s: &Session, mem: &Memory) -> Option<RunError> {
    let w = mem
        .run
        .read_u64_live(s, mem.run_area.shared + shared_field::ERROR)
        .ok()?;
    RunError::unpack(w)
}

/// Every worker's progress record, read while the kernels may run (a torn or stale record only
/// delays the watchdog by one poll); a GPU whose records cannot be read shows zeroed records.
pub(super) fn progress_snapshot(
    s: &Session,
    mem: &Memory,
    topology: &Topology,
) -> Vec<WorkerProgress> {
    WorkerRecords::read_live_or_zeroed(&mem.progress, s, topology)
}

/// One record of type `R` per worker, in each GPU's own memory (`Placed` per GPU), indexed by
/// global worker id through the env's pointer: the progress records, the statistics and the
/// task tags. Lane 0 of a worker writes its records with plain volatile stores
/// (`Env::write_progress`, `Env::write_stats`, `Env::note_task`). In mapped host memory,
/// where they were first, each 8-byte store was a transaction across PCIe, and every worker's
/// records added to the end of every run, static or mgws (docs/results.md).
pub(super) struct WorkerRecords<R>(std::marker::PhantomData<R>);

impl<R: bytemuck::Pod> WorkerRecords<R> {
    /// Zeroed records for every worker of `topology`, one allocation per GPU.
    pub fn allocate(s: &Session, topology: &Topology, what: &str) -> Result<Vec<Placed>> {
        (0..topology.devices as usize)
            .map(|d| {
                Placed::zeroed(
                    s,
                    Loc::Gpu(d),
                    topology.workers_on(d) as usize * size_of::<R>(),
                    what,
                )
            })
            .collect()
    }

    /// The env's pointer for GPU `d`: its allocation offset by its first worker, so that the
    /// kernel indexes it by global worker id (and only ever with ids of GPU `d`'s workers).
    pub fn env_ptr(
        per_gpu: &[Placed],
        s: &Session,
        topology: &Topology,
        d: usize,
    ) -> Result<*mut R> {
        let base = per_gpu[d].device_ptr(s, d)?;
        Ok(by_worker(base, topology.first_worker[d], size_of::<R>()) as *mut R)
    }

    /// GPU `d`'s records, in worker order (a copy on its control stream, usable while the kernel
    /// runs).
    fn read_gpu(per_gpu: &[Placed], s: &Session, topology: &Topology, d: usize) -> Result<Vec<R>> {
        let mut bytes = vec![0u8; topology.workers_on(d) as usize * size_of::<R>()];
        per_gpu[d].read_live(s, 0, &mut bytes)?;
        Ok(bytes
            .chunks_exact(size_of::<R>())
            .map(bytemuck::pod_read_unaligned)
            .collect())
    }

    /// Every worker's record, read while the kernels may run; a GPU whose records cannot be read
    /// shows zeroed ones.
    pub fn read_live_or_zeroed(per_gpu: &[Placed], s: &Session, topology: &Topology) -> Vec<R> {
        (0..per_gpu.len())
            .flat_map(|d| {
                Self::read_gpu(per_gpu, s, topology, d)
                    .unwrap_or_else(|_| vec![R::zeroed(); topology.workers_on(d) as usize])
            })
            .collect()
    }

    /// Every worker's record, in worker order.
    pub fn read_all(per_gpu: &[Placed], s: &Session, topology: &Topology) -> Result<Vec<R>> {
        let mut all = Vec::with_capacity(topology.workers() as usize);
        for d in 0..per_gpu.len() {
            all.extend(Self::read_gpu(per_gpu, s, topology, d)?);
        }
        Ok(all)
    }
}

/// The address a kernel indexes by global worker id for a device whose records (`size` bytes
/// each) start at `base` with worker `first_worker`'s: `base` offset back by the workers before
/// it (the kernel only ever adds ids of that device's workers).
pub(crate) fn by_worker(base: u64, first_worker: u32, size: usize) -> u64 {
    base.wrapping_sub(u64::from(first_worker) * size as u64)
}

/// The bytes of an env (which has no padding: see the test below).
pub(crate) fn env_bytes(env: &Env<HostWord, TaskStruct>) -> &[u8] {
    // SAFETY: Env is repr(C) of integers and pointers without padding (tested below).
    unsafe {
        std::slice::from_raw_parts(
            env as *const _ as *const u8,
            size_of::<Env<HostWord, TaskStruct>>(),
        )
    }
}

/// Bytes of one worker's row of [`Env::remote_damping`](mgws_core::Env::remote_damping).
pub(crate) fn damping_row_bytes(topology: &Topology) -> usize {
    topology.remote_damping_words() * size_of::<u64>()
}

/// The rows of [`Env::remote_damping`](mgws_core::Env::remote_damping) of `workers` workers on
/// `gpu`, in its own memory: none where a row has no word (one domain). Each worker clears its
/// row at its start, so they are not zeroed here.
pub(crate) fn damping_rows(
    gpu: &Gpu,
    topology: &Topology,
    workers: usize,
    whose: &str,
) -> Result<Option<DeviceBuffer>> {
    let row = damping_row_bytes(topology);
    if row == 0 {
        return Ok(None);
    }
    let what = format!("the damping bits of {whose}");
    DeviceBuffer::alloc(gpu, workers * row, &what).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mgws_core::SchedConfig;

    #[test]
    fn a_listed_set_is_split_only_where_whole_units_keep_each_share_home() {
        use InitialPlacement::{Copies, One, Split};
        const MB: usize = 1 << 20;
        let unit = Some(2 * MB);
        let (even2, even4) = ([2112, 2112], [2112; 4]);
        // CONTAINS' 40,132 tasks (2.57 MB) over 2 GPUs of 2 MB units: copied.
        assert_eq!(
            initial_placement(2, 40_132 * 64, false, unit, &even2),
            Copies
        );
        // 64 MB in the smallest share is the least that is split.
        assert_eq!(initial_placement(2, 128 * MB, false, unit, &even2), Split);
        assert_eq!(
            initial_placement(2, 128 * MB - 1, false, unit, &even2),
            Copies
        );
        assert_eq!(initial_placement(4, 256 * MB, false, unit, &even4), Split);
        assert_eq!(
            initial_placement(4, 256 * MB, false, unit, &[3, 3, 3, 1]),
            Copies
        );
        assert_eq!(
            initial_placement(4, 640 * MB, false, unit, &[3, 3, 3, 1]),
            Split
        );
        // An indexed set (a template) and GPUs without virtual memory management: copies.
        assert_eq!(initial_placement(2, 1 << 40, true, unit, &even2), Copies);
        assert_eq!(initial_placement(2, 1 << 40, false, None, &even2), Copies);
        // One GPU, or no tasks: one buffer.
        assert_eq!(initial_placement(1, 1 << 40, false, unit, &[2112]), One);
        assert_eq!(initial_placement(2, 0, false, unit, &even2), One);
    }

    #[test]
    fn env_and_tasks_have_no_padding() {
        let fields = size_of::<SchedConfig>()
            + size_of::<Topology>()
            + 8
            + 4 * 8 * MAX_DEVICES
            + 8 // abort
            + 7 * 8
            + 8 // initial_counted_word
            + 8 // remote_damping
            // bridge, bridge_slots, bridge_side + bridge_worker, worker_base
            + 8 + 2 * 8 + 8 + 8
            // areas and area_limits
            + 2 * 8 * DATA_AREAS;
        assert_eq!(size_of::<Env<HostWord, TaskStruct>>(), fields);
        // The offsets the stand-in libcuda of the CLI's tests reads (cli/tests/cuda_mock).
        type E = Env<HostWord, TaskStruct>;
        assert_eq!(std::mem::offset_of!(E, shared), 136);
        assert_eq!(std::mem::offset_of!(E, queue_headers), 144);
        assert_eq!(std::mem::offset_of!(E, device_idle), 280);
        assert_eq!(std::mem::offset_of!(E, abort), 344);
        assert_eq!(std::mem::offset_of!(E, device_abort), 352);
        assert_eq!(std::mem::offset_of!(E, bridge), 416);
        assert_eq!(
            std::mem::offset_of!(mgws_core::bridge::BridgeState<HostWord>, decision),
            136
        );
        assert_eq!(std::mem::offset_of!(E, initial), 464);
        assert_eq!(std::mem::offset_of!(E, initial_len), 472);
        assert_eq!(std::mem::offset_of!(E, initial_counted_word), 480);
        assert_eq!(std::mem::offset_of!(E, progress), 488);
        assert_eq!(std::mem::offset_of!(E, stats), 496);
        assert_eq!(std::mem::offset_of!(E, areas), 504);
        assert_eq!(size_of::<SchedConfig>(), 12 * 4 + 8);
        assert_eq!(size_of::<Topology>(), (2 + 2 * (MAX_DEVICES + 1)) * 4);
        assert_eq!(size_of::<TaskStruct>(), 64);
    }
}
