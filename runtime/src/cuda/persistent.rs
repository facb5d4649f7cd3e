//! A persistent-kernel run: `mgws_worker` (MGWS) or `mgws_static` (the static-assignment
//! baseline), one block per worker, all resident at once, supervised by the host's watchdog.

use std::ffi::c_void;
use std::mem::size_of;
use std::time::{Duration, Instant};

use mgws_core::{
    Env, HostWord, QueueHeader, RunError, SharedState, Topology, WorkerProgress, WorkerStats,
    DATA_AREAS, MAX_DEVICES,
};
use mgws_tasks::TaskStruct;

use super::driver::{self, DeviceBuffer, Event, FuncAttr, Function, Gpu, HostBuffer};
use super::plan::{self, shared_field, Param, QueueArea, RunArea, TasksIn};
use super::session::{Loc, Placed, Session};
use super::{CudaBackend, GpuKernel};
use crate::error::{Error, Result};
use crate::job::{AreaBytes, Job};
use crate::report::{HangReport, RunReport, WorkerHangState, WorkerReport};
use crate::scheduler::Scheduler;
use crate::watchdog::Watchdog;

/// The parameters of `mgws_worker` and `mgws_static`: `(env, scratch_len, device)`.
pub const WORKER_PARAMS: [Param; 3] = [Param::U64, Param::U32, Param::U32];

/// How a run's workers are laid out on its GPUs.
#[derive(Clone, Debug)]
pub struct Grid {
    pub topology: Topology,
    pub workers: Vec<u32>,
    pub smem: usize,
    pub blocks_per_sm: Vec<u32>,
}

/// Sizes the grid: `total` workers split over the run's GPUs (refused if they do not all fit at
/// once), or, for `None`, the most workers that are co-resident on each GPU with `lanes` threads
/// and the scratch layout's shared memory.
pub fn size_grid(
    s: &Session,
    funcs: &[Function],
    local_capacity: u32,
    workers_per_queue: u32,
    lanes: u32,
    total: Option<u32>,
) -> Result<Grid> {
    let wpq = workers_per_queue;
    let gpus = &s.gpus[..s.run_devices];
    let requested = total
        .map(|t| plan::split_workers(t, gpus.len(), wpq))
        .transpose()?;
    let queues_ub: u32 = match (total, &requested) {
        (Some(t), Some(_)) => t / wpq,
        _ => gpus
            .iter()
            .map(|g| plan::worker_upper_bound(g.sms).div_ceil(wpq))
            .sum(),
    };
    let smem_ub = plan::scratch_bytes(local_capacity, lanes, queues_ub);
    let mut workers = Vec::new();
    let mut blocks_per_sm = Vec::new();
    for (d, (g, f)) in gpus.iter().zip(funcs).enumerate() {
        let per_sm = blocks_per_sm_for(g, f, lanes, smem_ub, local_capacity)?;
        let what = format!("GPU {} ({})", g.ordinal, g.name);
        let want = requested.as_ref().map(|r| r[d]);
        workers.push(plan::fit_workers(want, per_sm, g.sms, wpq, &what)?);
        blocks_per_sm.push(per_sm);
    }
    let topology = Topology::split(&workers, wpq);
    // The real queue count is at most the bound, so this needs at most `smem_ub`: it fits.
    let smem = plan::scratch_bytes(local_capacity, lanes, topology.queues());
    debug_assert!(smem <= smem_ub);
    Ok(Grid {
        topology,
        workers,
        smem,
        blocks_per_sm,
    })
}

/// How many blocks of `f` with `lanes` threads and `smem` bytes of dynamic shared memory fit on
/// one SM of `g` (after raising the kernel's dynamic shared memory limit where needed).
pub fn blocks_per_sm_for(
    g: &Gpu,
    f: &Function,
    lanes: u32,
    smem: usize,
    local_capacity: u32,
) -> Result<u32> {
    g.make_current()?;
    let max_threads = f.attr(FuncAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
    if lanes as i32 > max_threads {
        return Err(Error::Config(format!(
            "the kernel can run at most {max_threads} threads per block on GPU {} (it uses {} \
             registers per thread), not {lanes}; lower --lanes",
            g.ordinal,
            f.attr(FuncAttr::CU_FUNC_ATTRIBUTE_NUM_REGS)?
        )));
    }
    let static_smem = f.attr(FuncAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)? as usize;
    let optin =
        g.attr(driver::Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as usize;
    if smem + static_smem > optin {
        return Err(Error::Config(format!(
            "a worker needs {} of shared memory (local queue of {local_capacity} tasks, {lanes} \
             lanes), more than the {} a block may have on GPU {}; lower --local-capacity",
            driver::human_bytes(smem + static_smem),
            driver::human_bytes(optin),
            g.ordinal
        )));
    }
    if smem > 48 * 1024 {
        f.set_attr(
            FuncAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem as i32,
        )?;
    }
    f.max_blocks_per_sm(lanes, smem)
}

/// Everything allocated for one run. Dropped before the session (declared after it).
struct Memory {
    queues: Vec<Placed>,
    queue_areas: Vec<QueueArea>,
    run: Placed,
    run_area: RunArea,
    progress: HostBuffer,
    stats: Option<HostBuffer>,
    _spill: Vec<DeviceBuffer>,
    _initial_host: Option<HostBuffer>,
    _initial_dev: Vec<DeviceBuffer>,
    /// Per data area: the copies (first = the one read back), and whether to read it back.
    areas: Vec<(u8, Vec<DeviceBuffer>, bool)>,
    envs: Vec<DeviceBuffer>,
    /// Home ranges that hold initial tasks (for the hang report).
    initial_ranges: u64,
}

pub fn run(b: &CudaBackend, sched: &Scheduler, mut job: Job<'_>) -> Result<RunReport> {
    job.validate()?;
    let lanes = sched.lanes;
    super::check_lanes(lanes)?;
    let s = Session::open(b, lanes)?;
    let funcs = s.functions(b.kernel.entry(), &WORKER_PARAMS)?;
    let grid = size_grid(
        &s,
        &funcs,
        sched.config.local_capacity,
        sched.config.workers_per_queue,
        lanes,
        Some(sched.config.workers),
    )?;
    s.prepare_placement(b.placement)?;
    let topology = grid.topology;
    let mut config = sched.config;
    config.workers = topology.workers();
    config.queue_scope = plan::queue_scope(b.placement, s.run_devices) as u32;
    config.validate()?;
    let mem = allocate(&s, b, &config, &topology, &mut job)?;
    for (d, g) in s.gpus[..s.run_devices].iter().enumerate() {
        eprintln!(
            "mgws: {} on GPU {} ({}, {} SMs): {} workers x {lanes} threads ({} per SM), {} B shared \
             memory each, placement {}, tasks in {}",
            b.kernel.name(),
            g.ordinal,
            g.name,
            g.sms,
            grid.workers[d],
            grid.blocks_per_sm[d],
            grid.smem,
            b.placement.name(),
            match b.tasks_in {
                TasksIn::Device => "device memory",
                TasksIn::Host => "host memory",
            }
        );
    }
    let outcome = launch_and_supervise(&s, &funcs, &grid, lanes, &mem, sched);
    match outcome {
        Supervised::Leak(e) => {
            // The kernel still runs: freeing its memory would block (or fault). Leave everything
            // to process exit.
            std::mem::forget(mem);
            std::mem::forget(s);
            Err(e)
        }
        Supervised::Failed(e) => Err(e),
        Supervised::Done { elapsed_s } => finish(
            &s, b.kernel, sched, &config, &mem, &mut job, lanes, elapsed_s,
        ),
    }
}

fn allocate(
    s: &Session,
    b: &CudaBackend,
    config: &mgws_core::SchedConfig,
    topology: &Topology,
    job: &mut Job<'_>,
) -> Result<Memory> {
    let n = s.run_devices;
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
    let run_area = RunArea::new(topology);
    let run = Placed::zeroed(s, home_loc(0), run_area.total, "shared state")?;
    s.gpus[0].make_current()?;
    let workers = topology.workers() as usize;
    let progress = HostBuffer::alloc(
        workers * size_of::<WorkerProgress>(),
        "worker progress records",
    )?;
    let stats = if config.run_flags().contains(mgws_core::RunFlags::STATS) {
        Some(HostBuffer::alloc(
            workers * size_of::<WorkerStats>(),
            "worker statistics",
        )?)
    } else {
        None
    };
    let task = size_of::<TaskStruct>();
    let spill_per_worker = config.spill_capacity as usize * task;
    let mut spill = Vec::new();
    for (d, g) in s.gpus[..n].iter().enumerate() {
        let w = (topology.first_worker[d + 1] - topology.first_worker[d]) as usize;
        spill.push(DeviceBuffer::alloc(
            g,
            w * spill_per_worker,
            "overflow stacks",
        )?);
    }
    let initial_bytes = as_bytes(job.tasks);
    let (initial_host, initial_dev) = match b.tasks_in {
        TasksIn::Host => {
            s.gpus[0].make_current()?;
            let mut h = HostBuffer::alloc(initial_bytes.len(), "initial tasks")?;
            h.as_mut_slice().copy_from_slice(initial_bytes);
            (Some(h), Vec::new())
        }
        TasksIn::Device => {
            let mut v = Vec::new();
            for g in &s.gpus[..n] {
                let buf = DeviceBuffer::alloc(g, initial_bytes.len(), "initial tasks")?;
                buf.write(0, initial_bytes)?;
                v.push(buf);
            }
            (None, v)
        }
    };
    // Data areas: read-only ones copied to every GPU; read-write ones once, on the first GPU,
    // shared by all (peer access), and copied back after the run.
    let mut areas = Vec::new();
    for (index, bytes) in job.areas.iter_mut() {
        let (src, write_back) = match bytes {
            AreaBytes::Read(b) => (&**b, false),
            AreaBytes::ReadWrite(b) => (&**b, true),
        };
        let copies = if write_back { 1 } else { n };
        let mut bufs = Vec::new();
        for g in &s.gpus[..copies] {
            let buf = DeviceBuffer::alloc(g, src.len(), &format!("data area {index}"))?;
            buf.write(0, src)?;
            bufs.push(buf);
        }
        areas.push((*index, bufs, write_back));
    }
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
        let run_base = run.device_ptr(s, d)?;
        // Workers index the overflow stacks by their global id: offset this GPU's allocation
        // by its first worker (the kernel only ever adds ids of this GPU's workers).
        let spill_base = spill_d
            .ptr
            .wrapping_sub(topology.first_worker[d] as u64 * spill_per_worker as u64);
        let initial = match (&initial_host, initial_dev.get(d)) {
            (Some(h), _) => h.device_ptr(&s.gpus[d])?,
            (None, Some(buf)) => buf.ptr,
            (None, None) => 0,
        };
        let mut area_ptrs = [0u64; DATA_AREAS];
        for (index, bufs, _) in &areas {
            area_ptrs[*index as usize] = bufs.get(d).unwrap_or(&bufs[0]).ptr;
        }
        let env: Env<HostWord, TaskStruct> = Env {
            config: *config,
            topology: *topology,
            shared: (run_base + run_area.shared as u64) as *const SharedState<HostWord>,
            queue_headers,
            queue_slots,
            tree: (run_base + run_area.tree as u64) as *const HostWord,
            spill: spill_base as *mut TaskStruct,
            initial: initial as *const TaskStruct,
            initial_len: job.tasks.len() as u64,
            progress: progress.device_ptr(&s.gpus[d])? as *mut WorkerProgress,
            stats: match &stats {
                Some(h) => h.device_ptr(&s.gpus[d])? as *mut WorkerStats,
                None => std::ptr::null_mut(),
            },
            areas: area_ptrs,
            area_limits: job.area_limits(),
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
        _spill: spill,
        _initial_host: initial_host,
        _initial_dev: initial_dev,
        areas,
        envs,
    })
}

enum Supervised {
    Done {
        elapsed_s: f64,
    },
    /// The run failed; the kernels have exited (or never started).
    Failed(Error),
    /// The run failed and a kernel may still be running: its memory must not be freed.
    Leak(Error),
}

fn launch_and_supervise(
    s: &Session,
    funcs: &[Function],
    grid: &Grid,
    lanes: u32,
    mem: &Memory,
    sched: &Scheduler,
) -> Supervised {
    let n = s.run_devices;
    let mut streams = Vec::new();
    let mut events = Vec::new();
    for g in &s.gpus[..n] {
        match (
            driver::Stream::new(g),
            Event::new(g).and_then(|a| Ok((a, Event::new(g)?))),
        ) {
            (Ok(st), Ok(ev)) => {
                streams.push(st);
                events.push(ev);
            }
            (Err(e), _) | (_, Err(e)) => return Supervised::Failed(e),
        }
    }
    let abort_all = |why: &str| {
        tracing::warn!("aborting the run: {why}");
        let _ = mem
            .run
            .write_u64_live(s, mem.run_area.shared + shared_field::ABORT, 1);
    };
    for (launched, d) in (0..n).enumerate() {
        let mut env_ptr: u64 = mem.envs[d].ptr;
        let mut scratch: u32 = grid.smem as u32;
        let mut device: u32 = d as u32;
        let mut params = [
            &mut env_ptr as *mut u64 as *mut c_void,
            &mut scratch as *mut u32 as *mut c_void,
            &mut device as *mut u32 as *mut c_void,
        ];
        let _ = s.gpus[d].make_current();
        let _ = events[d].0.record(&streams[d]);
        // SAFETY: the parameters match WORKER_PARAMS, which `Session::functions` checked against
        // the PTX; the env and everything it points to stay allocated until the kernel exits.
        let r = unsafe {
            funcs[d].launch(
                true,
                grid.workers[d],
                lanes,
                grid.smem as u32,
                &streams[d],
                &mut params,
            )
        };
        if let Err(e) = driver::check(r, || {
            format!(
                "launching {} blocks of {lanes} threads cooperatively on GPU {}",
                grid.workers[d], s.gpus[d].ordinal
            )
        }) {
            if launched == 0 {
                return Supervised::Failed(e);
            }
            abort_all("a later GPU's launch failed");
            return wait_after_abort(s, &streams[..launched], sched, e);
        }
        let _ = events[d].1.record(&streams[d]);
    }
    let workers = grid.topology.workers() as usize;
    let mut watchdog = Watchdog::new(sched.watchdog, workers);
    let mut done = vec![false; n];
    let mut poll = Duration::from_micros(20);
    loop {
        let mut fault = None;
        for d in 0..n {
            if done[d] {
                continue;
            }
            match streams[d].query() {
                Ok(true) => done[d] = true,
                Ok(false) => {}
                Err(r) => {
                    done[d] = true;
                    fault = Some((d, r));
                }
            }
        }
        if let Some((d, r)) = fault {
            let g = &s.gpus[d];
            let e = Error::Cuda(format!(
                "the kernel on GPU {} ({}) stopped with {}: {}. The GPU's context is unusable for \
                 the rest of this process.{}",
                g.ordinal,
                g.name,
                driver::error_name(r),
                match driver::explain(r) {
                    "" => "an unexpected driver error",
                    why => why,
                },
                match read_error_word(s, mem) {
                    Some(e) => format!(" The scheduler had recorded: {e:?}."),
                    None => String::new(),
                }
            ));
            if done.iter().all(|&x| x) {
                return Supervised::Failed(e);
            }
            abort_all("a kernel faulted");
            let running: Vec<_> = (0..n).filter(|&i| !done[i]).collect();
            return wait_streams_after_abort(s, &streams, &running, sched, e);
        }
        if done.iter().all(|&x| x) {
            break;
        }
        let snapshot = progress_snapshot(mem, workers);
        if let Some(stalled_for) = watchdog.observe(&snapshot) {
            let report = hang_report(s, mem, &grid.topology, sched, &snapshot, stalled_for);
            tracing::error!("watchdog: no progress for {stalled_for:?}; aborting the run");
            abort_all("the watchdog fired");
            let e = Error::Hang {
                report: Box::new(report),
            };
            let running: Vec<_> = (0..n).filter(|&i| !done[i]).collect();
            return wait_streams_after_abort(s, &streams, &running, sched, e);
        }
        std::thread::sleep(poll);
        poll = (poll * 2).min(Duration::from_millis(2));
    }
    let mut elapsed_s = 0f64;
    for (start, end) in &events {
        match start.seconds_until(end) {
            Ok(t) => elapsed_s = elapsed_s.max(t),
            Err(e) => return Supervised::Failed(e),
        }
    }
    Supervised::Done { elapsed_s }
}

fn wait_after_abort(
    s: &Session,
    streams: &[driver::Stream],
    sched: &Scheduler,
    e: Error,
) -> Supervised {
    let all: Vec<usize> = (0..streams.len()).collect();
    wait_streams_after_abort(s, streams, &all, sched, e)
}

/// After writing the abort flag: waits (bounded) for the kernels in `running` to exit.
fn wait_streams_after_abort(
    s: &Session,
    streams: &[driver::Stream],
    running: &[usize],
    sched: &Scheduler,
    e: Error,
) -> Supervised {
    let grace = sched
        .watchdog
        .clamp(Duration::from_secs(1), Duration::from_secs(10));
    let start = Instant::now();
    let mut left: Vec<usize> = running.to_vec();
    while !left.is_empty() {
        left.retain(|&d| matches!(streams[d].query(), Ok(false)));
        if left.is_empty() {
            break;
        }
        if start.elapsed() > grace {
            let gpus: Vec<String> = left
                .iter()
                .map(|&d| s.gpus[d].ordinal.to_string())
                .collect();
            tracing::error!(
                "the kernel on GPU(s) {} did not exit within {grace:?} of the abort; its memory \
                 stays allocated until the process exits",
                gpus.join(",")
            );
            eprintln!(
                "mgws: the kernel on GPU(s) {} did not exit within {grace:?} of the abort \
                 (a task that never returns?); the process must exit to free the GPU",
                gpus.join(",")
            );
            return Supervised::Leak(e);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Supervised::Failed(e)
}

fn read_error_word(s: &Session, mem: &Memory) -> Option<RunError> {
    let w = mem
        .run
        .read_u64_live(s, mem.run_area.shared + shared_field::ERROR)
        .ok()?;
    RunError::unpack(w)
}

fn progress_snapshot(mem: &Memory, workers: usize) -> Vec<WorkerProgress> {
    (0..workers)
        // SAFETY: one record per worker, written by the kernels with volatile stores; a torn
        // read only delays the watchdog by one poll.
        .map(|w| unsafe {
            mem.progress
                .read_volatile::<WorkerProgress>(w * size_of::<WorkerProgress>())
        })
        .collect()
}

fn hang_report(
    s: &Session,
    mem: &Memory,
    topology: &Topology,
    sched: &Scheduler,
    snapshot: &[WorkerProgress],
    stalled_for: Duration,
) -> HangReport {
    let read = |off: usize| {
        mem.run
            .read_u64_live(s, mem.run_area.shared + off)
            .unwrap_or(u64::MAX)
    };
    // Every queue word, one read per GPU.
    let mut words: Vec<Vec<u8>> = Vec::new();
    for (d, area) in mem.queue_areas.iter().enumerate() {
        let mut buf = vec![0u8; area.slots - area.headers];
        if mem.queues[d].read_live(s, area.headers, &mut buf).is_err() {
            buf.clear();
        }
        words.push(buf);
    }
    let wpq = sched.config.workers_per_queue;
    HangReport {
        stalled_for,
        idle_counter: read(shared_field::IDLE_WORKERS),
        initial_ranges_done: read(shared_field::INITIAL_RANGES_DONE),
        initial_ranges: mem.initial_ranges,
        workers: snapshot
            .iter()
            .enumerate()
            .map(|(w, p)| {
                let q = topology.queue_of_worker(w as u32, wpq);
                let d = topology.device_of_queue(q) as usize;
                let off = mem.queue_areas[d].header_offset(q - topology.first_queue[d]);
                let word = words[d]
                    .get(off..off + 8)
                    .map_or(u64::MAX, |b| u64::from_ne_bytes(b.try_into().unwrap()));
                WorkerHangState::new(w as u32, p, word)
            })
            .collect(),
    }
}

#[allow(clippy::too_many_arguments)]
fn finish(
    s: &Session,
    kernel: GpuKernel,
    sched: &Scheduler,
    config: &mgws_core::SchedConfig,
    mem: &Memory,
    job: &mut Job<'_>,
    lanes: u32,
    elapsed_s: f64,
) -> Result<RunReport> {
    let mut shared = [0u8; size_of::<SharedState<HostWord>>()];
    mem.run.read_live(s, mem.run_area.shared, &mut shared)?;
    let word = |off: usize| u64::from_ne_bytes(shared[off..off + 8].try_into().unwrap());
    if let Some(e) = RunError::unpack(word(shared_field::ERROR)) {
        return Err(e.into());
    }
    let workers = config.workers as usize;
    if kernel == GpuKernel::Mgws && word(shared_field::EXITED_WORKERS) != workers as u64 {
        return Err(Error::Cuda(format!(
            "the kernel finished, but only {} of {workers} workers reported leaving the worker \
             loop",
            word(shared_field::EXITED_WORKERS)
        )));
    }
    // Copy read-write data areas back into the job.
    for (index, bufs, write_back) in &mem.areas {
        if !write_back {
            continue;
        }
        if let Some((_, AreaBytes::ReadWrite(dst))) = job.areas.iter_mut().find(|(i, _)| i == index)
        {
            bufs[0].read(0, dst)?;
        }
    }
    let per_worker: Vec<WorkerReport> = match &mem.stats {
        Some(h) => (0..workers)
            .map(|w| {
                // SAFETY: one record per worker, written by the kernel before it exited.
                let st = unsafe { h.read_volatile::<WorkerStats>(w * size_of::<WorkerStats>()) };
                WorkerReport::from_stats(w as u32, &st)
            })
            .collect(),
        None => Vec::new(),
    };
    let progress = progress_snapshot(mem, workers);
    let mut tasks_run: u64 = if per_worker.is_empty() {
        progress.iter().map(|p| p.tasks_run).sum()
    } else {
        per_worker.iter().map(|w| w.tasks_run).sum()
    };
    if tasks_run == 0 && kernel == GpuKernel::Static {
        // A static kernel that keeps no statistics ran exactly the initial tasks.
        tasks_run = job.tasks.len() as u64;
    }
    let _ = sched;
    Ok(RunReport {
        backend: kernel.backend_name().into(),
        workers: config.workers,
        lanes,
        elapsed_s,
        tasks_run,
        per_worker,
    })
}

/// The bytes of the initial tasks.
fn as_bytes(tasks: &[TaskStruct]) -> &[u8] {
    // SAFETY: TaskStruct is plain repr(C) data with no padding (64 bytes of integers).
    unsafe { std::slice::from_raw_parts(tasks.as_ptr() as *const u8, std::mem::size_of_val(tasks)) }
}

/// The bytes of an env (which has no padding: see the test below).
fn env_bytes(env: &Env<HostWord, TaskStruct>) -> &[u8] {
    // SAFETY: Env is repr(C) of integers and pointers without padding (tested below).
    unsafe {
        std::slice::from_raw_parts(
            env as *const _ as *const u8,
            size_of::<Env<HostWord, TaskStruct>>(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mgws_core::SchedConfig;

    #[test]
    fn env_and_tasks_have_no_padding() {
        let fields = size_of::<SchedConfig>()
            + size_of::<Topology>()
            + 8
            + 2 * 8 * MAX_DEVICES
            + 6 * 8
            + 2 * 8 * DATA_AREAS;
        assert_eq!(size_of::<Env<HostWord, TaskStruct>>(), fields);
        assert_eq!(size_of::<SchedConfig>(), 12 * 4 + 8);
        assert_eq!(size_of::<Topology>(), (2 + 2 * (MAX_DEVICES + 1)) * 4);
        assert_eq!(size_of::<TaskStruct>(), 64);
    }
}
