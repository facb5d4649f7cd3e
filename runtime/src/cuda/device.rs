//! A persistent-kernel run as a [`Device`]: an `mgws_<kernel>_worker_<spec>` entry (MGWS) or
//! `mgws_<kernel>_static_<scope>` (the static-assignment baseline), one block per worker, all
//! resident at once (cooperative launch), supervised by the pipeline while the host copies the
//! workers' progress records out of each GPU's memory on a stream of its own.

use std::cell::RefCell;
use std::ffi::c_void;
use std::mem::size_of;
use std::time::{Duration, Instant};

use mgws_core::{HostWord, RunError, SharedState, WorkerProgress, WorkerStats};
use mgws_tasks::Registry;

use super::driver::{self, Event, Function, Stream};
use super::gate::LaunchGate;
use super::grid::{size_grid, Grid as CudaGrid};
use super::link_wake::LinkWake;
use super::memory::{allocate, progress_snapshot, read_error_word, GpuSide, Memory, WorkerRecords};
use super::plan::{shared_field, Param, TasksIn};
use super::poll::Backoff;
use super::session::Session;
use super::{CudaBackend, Method};
use crate::device::{Device, Grid, LiveState, ReadBack, Running};
use crate::error::{Error, Result};
use crate::job::{AreaBytes, Job};
use crate::scheduler::Scheduler;

/// The parameters of the worker and static entries: `(env, scratch_len, device)`.
pub const WORKER_PARAMS: [Param; 3] = [Param::U64, Param::U32, Param::U32];

/// The GPUs of a [`CudaBackend`] running a persistent kernel.
pub struct CudaDevice<'a> {
    b: &'a CudaBackend,
    /// The method whose kernel runs: mgws or the static baseline.
    method: Method,
    s: Session,
    funcs: Vec<Function>,
    grid: Option<CudaGrid>,
    /// The pairs of GPUs (indices into the session's) whose links the launch wakes: those that
    /// peer access joins, none with `MGWS_LINK_WAKE=off`.
    wake_pairs: Vec<(usize, usize)>,
    /// The launch streams and (start, end) events per run device, kept for `read_back`.
    streams: Vec<Stream>,
    events: Vec<(Event, Event)>,
    /// The gate the launch streams waited on ([`LaunchGate`]), kept until the device is dropped.
    gate: Option<LaunchGate>,
    /// Seconds from the first launch call to the gate's opening, when every GPU waited for it
    /// (`ReadBack::launch_s`); 0 otherwise.
    launch_s: f64,
    /// When the last run's kernels were let go: just before the gate opened, or, where the gate
    /// did not hold every GPU, the first launch call. The kernels start after it.
    released_at: Option<Instant>,
}

impl<'a> CudaDevice<'a> {
    /// Opens the GPUs of `b` and the entry of registry `R`'s kernel of `method` that runs
    /// `sched` (from the process's cache: loaded and JIT-compiled once).
    pub fn open<R: Registry>(
        b: &'a CudaBackend,
        method: Method,
        sched: &Scheduler,
    ) -> Result<Self> {
        let lanes = sched.lanes;
        super::check_lanes(lanes)?;
        let entry = b.entry::<R>(method, &sched.config);
        let s = Session::open::<R>(b, lanes, &entry)?;
        let funcs = s.functions(&entry, &WORKER_PARAMS)?;
        Ok(CudaDevice {
            b,
            method,
            s,
            funcs,
            grid: None,
            wake_pairs: Vec::new(),
            streams: Vec::new(),
            events: Vec::new(),
            gate: None,
            launch_s: 0.0,
            released_at: None,
        })
    }

    /// Places the GPUs' part of `job`: `side` says which initial tasks they start with and
    /// where the bridge to CPU workers is (a bridged run).
    pub(super) fn place_side(
        &mut self,
        grid: &Grid,
        job: &mut Job<'_>,
        side: GpuSide<'_>,
    ) -> Result<Memory> {
        let mem = allocate(&self.s, self.b, &grid.config, &grid.topology, job, side)?;
        let (b, g) = (self.b, self.cuda_grid());
        // Only the mgws kernel has public queues.
        let sharing = match self.method {
            Method::Mgws => format!(", {} per public queue", grid.config.workers_per_queue),
            _ => String::new(),
        };
        for (d, gpu) in self.s.gpus[..self.s.run_devices].iter().enumerate() {
            tracing::info!(
                target: "mgws::grid",
                "{} on GPU {} ({}, {} SMs): {} workers x {} threads ({} per SM{sharing}), {} B \
                 shared memory each, placement {}, tasks in {}",
                self.method.name(),
                gpu.ordinal,
                gpu.name,
                gpu.sms,
                g.workers[d],
                grid.lanes,
                g.blocks_per_sm[d],
                g.smem,
                b.placement.name(),
                match b.tasks_in {
                    TasksIn::Device => "device memory",
                    TasksIn::Host => "host memory",
                }
            );
        }
        Ok(mem)
    }

    /// When the last run's kernels were let go (before any of them started).
    pub(super) fn released_at(&self) -> Option<Instant> {
        self.released_at
    }

    /// Makes the run's first GPU current on the calling thread (for host allocations).
    pub(super) fn make_current(&self) -> Result<()> {
        self.s.gpus[0].make_current()
    }

    fn cuda_grid(&self) -> &CudaGrid {
        self.grid.as_ref().expect("size_grid runs first")
    }
}

impl Device for CudaDevice<'_> {
    type Placed = Memory;

    fn name(&self) -> &'static str {
        self.method.cuda_name()
    }

    fn module_load_s(&self) -> f64 {
        self.s.module_load_s
    }

    fn size_grid(&mut self, sched: &Scheduler) -> Result<Grid> {
        let lanes = sched.lanes;
        super::plan::system_scope_forced(std::env::var("MGWS_QUEUE_SCOPE").ok().as_deref())?;
        let grid = size_grid(
            &self.s,
            &self.funcs,
            sched.config.local_capacity,
            sched.config.workers_per_queue,
            lanes,
            Some(sched.config.workers),
        )?;
        let wake = super::link_wake::wake_wanted()?;
        let peers = self.s.prepare_placement(self.b.placement)?;
        self.wake_pairs = if wake { peers } else { Vec::new() };
        let mut config = self.b.scoped(self.method, &sched.config);
        config.workers = grid.topology.workers();
        let topology = grid.topology;
        self.grid = Some(grid);
        Ok(Grid {
            config,
            topology,
            lanes,
        })
    }

    fn place(&mut self, grid: &Grid, job: &mut Job<'_>) -> Result<Memory> {
        let side = GpuSide {
            initial: job.initial,
            bridge: None,
        };
        self.place_side(grid, job, side)
    }

    fn launch<T>(
        &mut self,
        grid: &Grid,
        mem: &Memory,
        supervise: impl FnOnce(&dyn Running) -> T,
    ) -> Result<T> {
        let s = &self.s;
        let n = s.run_devices;
        for g in &s.gpus[..n] {
            self.streams.push(Stream::new(g)?);
            self.events.push((Event::new(g)?, Event::new(g)?));
        }
        let cg = self.grid.as_ref().expect("size_grid runs first");
        let lanes = grid.lanes;
        // Opened once every kernel is queued (or a launch failed), so that the launch calls
        // stay out of the timed run; dropping it opens it too.
        let gate = self.gate.insert(LaunchGate::new(&s.gpus[0])?);
        let launching = Instant::now();
        // Woken while the kernels are launched, so that they start with their links awake.
        let wake = LinkWake::start(&s.gpus, &self.wake_pairs)?;
        let mut all_held = true;
        let mut launched = 0;
        let mut pending = None;
        for d in 0..n {
            let mut env_ptr: u64 = mem.envs[d].ptr;
            let mut scratch: u32 = cg.smem as u32;
            let mut device: u32 = d as u32;
            let mut params = [
                &mut env_ptr as *mut u64 as *mut c_void,
                &mut scratch as *mut u32 as *mut c_void,
                &mut device as *mut u32 as *mut c_void,
            ];
            let _ = s.gpus[d].make_current();
            all_held &= gate.hold(&s.gpus[d], &self.streams[d]);
            let _ = self.events[d].0.record(&self.streams[d]);
            // SAFETY: the parameters match WORKER_PARAMS, which `Session::functions` checked
            // against the PTX; the env and everything it points to stay allocated until the
            // kernel exits (the pipeline frees `mem` only after `Running::wait` saw it exit, and
            // leaks it otherwise).
            let r = unsafe {
                self.funcs[d].launch(
                    true,
                    cg.workers[d],
                    lanes,
                    cg.smem as u32,
                    &self.streams[d],
                    &mut params,
                )
            };
            if let Err(e) = driver::check(r, || {
                format!(
                    "launching {} blocks of {lanes} threads cooperatively on GPU {}",
                    cg.workers[d], s.gpus[d].ordinal
                )
            }) {
                if d == 0 {
                    gate.open();
                    return Err(e);
                }
                // The GPUs before it run: the supervisor aborts them.
                pending = Some(e);
                break;
            }
            let _ = self.events[d].1.record(&self.streams[d]);
            launched += 1;
        }
        // Waited for only where the gate holds the kernels. An ungated kernel already runs: its
        // copies are waited for when `_ungated_wake` drops, after the run.
        let _ungated_wake = match wake {
            Some(wake) if all_held => {
                if let Err(e) = wake.finish() {
                    // The kernels are queued: the supervisor aborts them and reports the error.
                    pending.get_or_insert(e);
                }
                None
            }
            wake => wake,
        };
        self.released_at = Some(if all_held { Instant::now() } else { launching });
        gate.open();
        self.launch_s = if all_held {
            launching.elapsed().as_secs_f64()
        } else {
            0.0
        };
        let running = CudaRunning {
            s,
            mem,
            streams: &self.streams[..launched],
            done: RefCell::new(vec![false; launched]),
            pending: RefCell::new(pending),
            backoff: Backoff::sleeping(),
            workers: grid.config.workers as usize,
            topology: grid.topology,
            workers_per_queue: grid.config.workers_per_queue,
            termination: grid.config.termination_mode(),
        };
        Ok(supervise(&running))
    }

    fn read_back(&mut self, grid: &Grid, mem: &Memory, job: &mut Job<'_>) -> Result<ReadBack> {
        let s = &self.s;
        let mut elapsed_s = 0f64;
        for (d, (start, end)) in self.events.iter().enumerate() {
            let kernel_s = start.seconds_until(end)?;
            // Each GPU's own time: where several GPUs run, whether one ended late or all did.
            tracing::debug!(
                gpu = s.gpus[d].ordinal,
                kernel_s,
                "a GPU's kernel time, from its release"
            );
            elapsed_s = elapsed_s.max(kernel_s);
        }
        let mut shared = [0u8; size_of::<SharedState<HostWord>>()];
        mem.run.read_live(s, mem.run_area.shared, &mut shared)?;
        let word = |off: usize| u64::from_ne_bytes(shared[off..off + 8].try_into().unwrap());
        // Copy read-write data areas back into the job.
        for (index, area) in &mem.areas {
            if let Some((_, AreaBytes::ReadWrite(dst))) =
                job.areas.iter_mut().find(|(i, _)| i == index)
            {
                area.read_back(&grid.topology, dst)?;
            }
        }
        // Written by the kernel before it exited.
        let stats = match &mem.stats {
            Some(per_gpu) => {
                Some(tracing::debug_span!("cuda.read_back.stats").in_scope(|| {
                    WorkerRecords::<WorkerStats>::read_all(per_gpu, s, &grid.topology)
                })?)
            }
            None => None,
        };
        let progress = tracing::debug_span!("cuda.read_back.progress")
            .in_scope(|| progress_snapshot(s, mem, &grid.topology));
        let counted: u64 = match &stats {
            Some(st) => st.iter().map(|w| w.tasks_run).sum(),
            None => progress.iter().map(|p| p.tasks_run).sum(),
        };
        let method = self.method;
        let idle_ns = (method == Method::Static)
            .then(|| idle_after_finish(&progress))
            .flatten();
        Ok(ReadBack {
            elapsed_s,
            error: RunError::unpack(word(shared_field::ERROR)),
            // Only the MGWS kernel counts the workers that left its loop.
            exited_workers: (method == Method::Mgws).then(|| word(shared_field::EXITED_WORKERS)),
            stats,
            progress,
            // Both kernels count their tasks in the progress records; should a static run's
            // records count none, its initial tasks are the only count known (a lower bound:
            // the static kernel runs what they spawn too).
            tasks_run: (counted == 0 && method == Method::Static).then_some(job.initial.len()),
            idle_ns,
            launch_s: self.launch_s,
        })
    }
}

/// Each worker's idle time at the end of a static run: how long before the last worker it left
/// its loop (`WorkerProgress::finish_ns`, the GPU's global timer); `None` if a worker recorded no
/// finish time.
fn idle_after_finish(progress: &[WorkerProgress]) -> Option<Vec<u64>> {
    let last = progress.iter().map(|p| p.finish_ns).max()?;
    if progress.iter().any(|p| p.finish_ns == 0) {
        return None;
    }
    Some(progress.iter().map(|p| last - p.finish_ns).collect())
}

/// The kernels of a run in progress.
struct CudaRunning<'a> {
    s: &'a Session,
    mem: &'a Memory,
    /// The launch streams of the GPUs whose kernel started.
    streams: &'a [Stream],
    /// Per launched GPU: whether its kernel exited (or faulted).
    done: RefCell<Vec<bool>>,
    /// A later GPU's launch failure, reported by the first `wait`.
    pending: RefCell<Option<Error>>,
    /// The sleep between stream queries.
    backoff: Backoff,
    workers: usize,
    topology: mgws_core::Topology,
    workers_per_queue: u32,
    termination: mgws_core::TerminationMode,
}

impl CudaRunning<'_> {
    /// The error of a kernel that stopped with `r`.
    fn fault(&self, d: usize, r: cudarc::driver::sys::CUresult) -> Error {
        let g = &self.s.gpus[d];
        Error::Cuda(format!(
            "the kernel on GPU {} ({}) stopped with {}. The GPU's context is unusable for the \
             rest of this process.{}",
            g.ordinal,
            g.name,
            driver::describe(r),
            match read_error_word(self.s, self.mem) {
                Some(e) => format!(" The scheduler had recorded: {e:?}."),
                None => String::new(),
            }
        ))
    }
}

impl Running for CudaRunning<'_> {
    fn wait(&self, timeout: Duration) -> Result<bool> {
        if let Some(e) = self.pending.borrow_mut().take() {
            return Err(e);
        }
        self.backoff.wait(timeout, || {
            let mut done = self.done.borrow_mut();
            for (d, stream) in self.streams.iter().enumerate() {
                if done[d] {
                    continue;
                }
                match stream.query() {
                    Ok(true) => done[d] = true,
                    Ok(false) => {}
                    Err(r) => {
                        done[d] = true;
                        return Some(Err(self.fault(d, r)));
                    }
                }
            }
            done.iter().all(|&x| x).then_some(Ok(true))
        })
    }

    fn progress(&self) -> Vec<WorkerProgress> {
        progress_snapshot(self.s, self.mem, &self.topology)
    }

    fn live_state(&self) -> LiveState {
        let (s, mem) = (self.s, self.mem);
        let read = |off: usize| {
            mem.run
                .read_u64_live(s, mem.run_area.shared + off)
                .unwrap_or(u64::MAX)
        };
        // Every queue word, one read per GPU.
        let words: Vec<Vec<u8>> = mem
            .queue_areas
            .iter()
            .enumerate()
            .map(|(d, area)| {
                let mut buf = vec![0u8; area.slots - area.headers];
                if mem.queues[d].read_live(s, area.headers, &mut buf).is_err() {
                    buf.clear();
                }
                buf
            })
            .collect();
        let topology = &self.topology;
        LiveState {
            task_tags: WorkerRecords::read_live_or_zeroed(&mem.task_tags, s, topology),
            idle_counter: if self.termination == mgws_core::TerminationMode::Hierarchical {
                // The sum of the per-GPU counters; `u64::MAX` if one cannot be read.
                mem.device_idle
                    .iter()
                    .map(|word| word.read_u64_live(s, 0).unwrap_or(u64::MAX))
                    .fold(0u64, u64::saturating_add)
            } else {
                read(shared_field::IDLE_WORKERS)
            },
            initial_ranges_done: read(shared_field::INITIAL_RANGES_DONE),
            initial_ranges: mem.initial_ranges,
            queue_words: (0..self.workers as u32)
                .map(|w| {
                    let q = topology.queue_of_worker(w, self.workers_per_queue);
                    let d = topology.device_of_queue(q) as usize;
                    let off = mem.queue_areas[d].header_offset(q - topology.first_queue[d]);
                    words[d]
                        .get(off..off + 8)
                        .map_or(u64::MAX, |b| u64::from_ne_bytes(b.try_into().unwrap()))
                })
                .collect(),
        }
    }

    fn abort(&self) {
        tracing::warn!("aborting the run");
        // A copy on the owner's control stream (device memory) or a volatile store followed by
        // a SeqCst fence (mapped host memory). The shared word is the one `aborted` reads; the
        // workers read their GPU's copy.
        let _ =
            self.mem
                .run
                .write_u64_live(self.s, self.mem.run_area.shared + shared_field::ABORT, 1);
        for copy in &self.mem.device_abort {
            let _ = copy.write_u64_live(self.s, 0, 1);
        }
    }

    fn aborted(&self) -> bool {
        self.mem
            .run
            .read_u64_live(self.s, self.mem.run_area.shared + shared_field::ABORT)
            .is_ok_and(|word| word != 0)
    }

    fn exit_grace(&self, watchdog: Duration) -> Option<Duration> {
        // A kernel whose task never returns cannot be stopped: give it up after the grace and
        // leak its memory rather than hang the host.
        Some(watchdog.clamp(Duration::from_secs(1), Duration::from_secs(10)))
    }
}
