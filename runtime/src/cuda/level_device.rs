//! The kernel-per-level baseline (the design the thesis argues against): the host keeps the
//! frontier of a spawning workload in device memory and launches one kernel per level; the kernel
//! runs every frontier task once and appends the tasks they spawn to the next frontier.
//!
//! Device side (the `mgws_<kernel>_level` entry of the kernel crate, one per registry):
//!
//! ```ignore
//! extern "ptx-kernel" fn mgws_<kernel>_level(args: *const LevelArgs, scratch_len: u32)
//! ```
//!
//! Block `b` of the grid runs frontier tasks `b, b + gridDim.x, ...` with all its lanes, through the
//! same task registry as that registry's worker entries (`mgws_<kernel>_worker_<spec>`). A task's
//! `spawn` appends the child at index `fetch_add(counters[0], 1)` of `out` if that index is below
//! `out_capacity` (children beyond it are counted but not written: the host then reports that the
//! frontier outgrew its buffer). The first task error is recorded in `counters[1]` as
//! `RunError::pack` (compare-exchange from 0), and the kernel's blocks stop taking tasks once it
//! is set. Data areas and the atomic scope are as in the persistent kernel (`ctx.area(i)` =
//! `areas[i]`, device scope).

use std::cell::Cell;
use std::ffi::c_void;
use std::mem::size_of;
use std::time::Duration;

use mgws_core::{RunError, Topology, WorkerProgress, DATA_AREAS};
use mgws_tasks::TaskStruct;

use super::driver::{self, DeviceBuffer, Function, Stream};
use super::fill::{Filler, OpenFiller};
use super::plan::{self, Param};
use super::poll::Backoff;
use super::session::Session;
use super::CudaBackend;
use crate::device::{Grid, LiveState, Running};
use crate::error::{Error, Result};
use crate::initial::{task_bytes, InitialTasks};
use crate::job::{AreaBytes, Job};
use crate::levels::{LevelCounters, LevelDevice, LevelPlan};
use crate::report::{RunReport, WorkerReport};
use crate::scheduler::Scheduler;

pub use mgws_core::LevelArgs;

/// The parameters of `mgws_<kernel>_level`: `(args, scratch_len)`.
pub const LEVEL_PARAMS: [Param; 2] = [Param::U64, Param::U32];

/// Byte offset of `LevelSink`'s abort counter in the counter buffer.
const ABORT_OFFSET: usize = 3 * 8;

/// Runs `job` level by level on one GPU (the level loop with a [`CudaLevels`] step);
/// `level_capacity`: tasks one frontier buffer holds (`None`: sized from free memory).
pub fn run<R: mgws_tasks::Registry>(
    b: &CudaBackend,
    level_capacity: Option<u64>,
    sched: &Scheduler,
    job: Job<'_>,
) -> Result<RunReport> {
    let opened = std::time::Instant::now();
    let mut device = CudaLevels::open::<R>(b, level_capacity, sched.lanes)?;
    crate::levels::run(&mut device, sched, job, opened)
}

/// The level step on one GPU: one launch of `mgws_<kernel>_level` per level.
pub struct CudaLevels {
    /// Tasks one frontier buffer holds; `None`: sized from free memory.
    level_capacity: Option<u64>,
    s: Session,
    f: Function,
    /// Opens the kernel's fill entry, for a job whose initial tasks are indexed.
    open_filler: OpenFiller,
    b: CudaBackend,
    placed: Option<Placed>,
}

/// The device memory of a level run.
struct Placed {
    grid: Grid,
    capacity: u64,
    smem: usize,
    bufs: [DeviceBuffer; 2],
    counters: DeviceBuffer,
    args_buf: DeviceBuffer,
    areas: [u64; DATA_AREAS],
    area_limits: [u64; DATA_AREAS],
    area_bufs: Vec<(u8, DeviceBuffer)>,
    /// The launch stream, and the control stream the abort is written on while a level runs.
    stream: Stream,
    control: Stream,
}

impl CudaLevels {
    /// Opens the GPU of `b` (one only) and finds `mgws_<R::KERNEL>_level` in the PTX of `R`.
    pub fn open<R: mgws_tasks::Registry>(
        b: &CudaBackend,
        level_capacity: Option<u64>,
        lanes: u32,
    ) -> Result<Self> {
        super::check_lanes(lanes)?;
        if b.device_list().len() > 1 {
            return Err(Error::Config(
                "the kernel-per-level baseline runs on one GPU; pass a single GPU (--devices N)"
                    .into(),
            ));
        }
        let entry = super::Method::LEVELS.entry::<R>(&mgws_core::SchedConfig::new(1));
        let s = Session::open::<R>(b, lanes, &entry)?;
        let f = s.functions(&entry, &LEVEL_PARAMS)?[0];
        Ok(CudaLevels {
            level_capacity,
            s,
            f,
            open_filler: Filler::open::<R>,
            b: b.clone(),
            placed: None,
        })
    }

    fn placed(&self) -> &Placed {
        self.placed.as_ref().expect("placed before it runs")
    }
}

impl LevelDevice for CudaLevels {
    fn name(&self) -> &'static str {
        super::Method::LEVELS.cuda_name()
    }

    fn place(&mut self, sched: &Scheduler, job: &mut Job<'_>) -> Result<LevelPlan> {
        let lanes = sched.lanes;
        let g = &self.s.gpus[0];
        g.make_current()?;
        let cfg = &sched.config;
        // The grid is at most the scheduler's worker count (workloads size per-worker result
        // rows by it); blocks beyond what fits at once simply wait for a free SM. The kernel
        // sizes its scratch layout (damping bitmap) by the grid, so the largest grid sets the
        // shared memory.
        let max_blocks = cfg.workers;
        let smem = plan::scratch_bytes(cfg.local_capacity, lanes, max_blocks);
        // Checks the block size, raises the shared memory limit and reserves the local memory.
        super::grid::blocks_per_sm_for(g, &self.f, lanes, smem, cfg.local_capacity)?;
        let task = size_of::<TaskStruct>();
        let capacity = match self.level_capacity {
            Some(c) => c,
            None => {
                // Sized by what is free: none of it kept for later runs of the process.
                g.release_kept_memory()?;
                let (free, _) = g.mem_info()?;
                let area_bytes: usize = job.areas.iter().map(|(_, a)| a.len()).sum();
                // Two frontier buffers share 80% of what the data areas leave free.
                (free.saturating_sub(area_bytes) as u64 * 2 / 5 / task as u64).max(1 << 16)
            }
        }
        .max(job.initial.len());
        let bytes = (capacity as usize).saturating_mul(task);
        let bufs = [
            DeviceBuffer::alloc(
                g,
                bytes,
                &format!("a frontier buffer (--level-capacity {capacity})"),
            )?,
            DeviceBuffer::alloc(
                g,
                bytes,
                &format!("a frontier buffer (--level-capacity {capacity})"),
            )?,
        ];
        match job.initial {
            InitialTasks::Listed(tasks) => bufs[0].write(0, task_bytes(tasks))?,
            InitialTasks::Indexed { template, count } => {
                (self.open_filler)(&self.b)?.fill(bufs[0].ptr, template, 0, count)?
            }
        }
        let counters = DeviceBuffer::alloc(g, 32, "level counters")?;
        let args_buf = DeviceBuffer::alloc(g, size_of::<LevelArgs>(), "level arguments")?;
        let mut areas = [0u64; DATA_AREAS];
        let mut area_bufs = Vec::new();
        for (index, a) in job.areas.iter() {
            let src: &[u8] = match a {
                AreaBytes::Read(b) => b,
                AreaBytes::ReadWrite(b) => b,
            };
            let buf = DeviceBuffer::alloc(g, src.len(), &format!("data area {index}"))?;
            buf.write(0, src)?;
            areas[*index as usize] = buf.ptr;
            area_bufs.push((*index, buf));
        }
        let mut config = *cfg;
        config.queue_scope = mgws_core::Scope::Device as u32;
        let stream = Stream::new(g)?;
        let control = Stream::new(g)?;
        g.synchronize()?;
        tracing::info!(
            target: "mgws::grid",
            "levels on GPU {} ({}): up to {max_blocks} blocks x {lanes} threads, frontier \
             buffers of {capacity} tasks",
            g.ordinal,
            g.name
        );
        let grid = Grid {
            config,
            topology: Topology::single(max_blocks, 1),
            lanes,
        };
        self.placed = Some(Placed {
            grid,
            capacity,
            smem,
            bufs,
            counters,
            args_buf,
            areas,
            area_limits: job.area_limits(),
            area_bufs,
            stream,
            control,
        });
        Ok(LevelPlan { grid, capacity })
    }

    fn launch_level<T>(
        &mut self,
        level: u32,
        len: u64,
        supervise: impl FnOnce(&dyn Running) -> T,
    ) -> Result<T> {
        let f = self.f;
        let pl = self.placed();
        let parity = (level % 2) as usize;
        let args = LevelArgs {
            config: pl.grid.config,
            frontier: pl.bufs[parity].ptr,
            frontier_len: len,
            out: pl.bufs[1 - parity].ptr,
            out_capacity: pl.capacity,
            counters: pl.counters.ptr,
            areas: pl.areas,
            area_limits: pl.area_limits,
        };
        pl.counters.zero()?;
        // SAFETY: LevelArgs is repr(C) of integers without padding (SchedConfig has none).
        let arg_bytes = unsafe {
            std::slice::from_raw_parts(&args as *const _ as *const u8, size_of::<LevelArgs>())
        };
        pl.args_buf.write(0, arg_bytes)?;
        // The zeroing (a memset on the default stream, asynchronous for device memory) and the
        // copy from pageable memory (which may return before its DMA landed) must both be done
        // before the level starts on its non-blocking stream: otherwise a level could read the
        // previous level's arguments or have its counters zeroed under it.
        self.s.gpus[0].synchronize()?;
        let grid = len.min(pl.grid.config.workers as u64) as u32;
        let lanes = pl.grid.lanes;
        let mut a0: u64 = pl.args_buf.ptr;
        let mut a1: u32 = pl.smem as u32;
        let mut params = [
            &mut a0 as *mut u64 as *mut c_void,
            &mut a1 as *mut u32 as *mut c_void,
        ];
        // SAFETY: the parameters match LEVEL_PARAMS (checked against the PTX); every address in
        // the argument block stays allocated until the level finished (or the run is leaked).
        let r = unsafe { f.launch(false, grid, lanes, pl.smem as u32, &pl.stream, &mut params) };
        driver::check(r, || format!("launching level {level} ({grid} blocks)"))?;
        let running = CudaLevelRunning {
            pl,
            level,
            backoff: Backoff::spinning(SPIN_FOR),
            faulted: Cell::new(false),
        };
        Ok(supervise(&running))
    }

    fn counters(&mut self) -> Result<LevelCounters> {
        let mut c = [0u8; 32];
        self.placed().counters.read(0, &mut c)?;
        let word = |i: usize| u64::from_ne_bytes(c[i * 8..i * 8 + 8].try_into().unwrap());
        Ok(LevelCounters {
            spawned: word(0),
            error: RunError::unpack(word(1)),
            tasks_run: word(2),
        })
    }

    fn read_back(&mut self, job: &mut Job<'_>) -> Result<Vec<WorkerReport>> {
        for (index, buf) in &self.placed().area_bufs {
            if let Some((_, AreaBytes::ReadWrite(dst))) =
                job.areas.iter_mut().find(|(i, _)| i == index)
            {
                buf.read(0, dst)?;
            }
        }
        // The kernel keeps no per-block records.
        Ok(Vec::new())
    }

    fn leak(&mut self) {
        // A level kernel may still run: its buffers must outlive the process's use of them.
        std::mem::forget(self.placed.take());
    }
}

/// How long a level's wait polls its stream without sleeping: a level often takes
/// microseconds, and its end delays the next launch (sleeping from the first poll on, a deep
/// tree paid at least the timer slack at every level, docs/results.md).
const SPIN_FOR: Duration = Duration::from_millis(2);

/// A level kernel in progress.
struct CudaLevelRunning<'a> {
    pl: &'a Placed,
    level: u32,
    /// Polls, then sleeps, between stream queries.
    backoff: Backoff,
    /// The level faulted and `wait` reported it: the kernel is over (a faulted stream keeps
    /// answering the error, which must not read as "still running").
    faulted: Cell<bool>,
}

impl Running for CudaLevelRunning<'_> {
    fn wait(&self, timeout: Duration) -> Result<bool> {
        if self.faulted.get() {
            return Ok(true);
        }
        self.backoff.wait(timeout, || match self.pl.stream.query() {
            Ok(true) => Some(Ok(true)),
            Ok(false) => None,
            Err(r) => {
                self.faulted.set(true);
                Some(Err(Error::Cuda(format!(
                    "level {} of the kernel-per-level baseline failed: {}",
                    self.level,
                    driver::describe(r)
                ))))
            }
        })
    }

    fn progress(&self) -> Vec<WorkerProgress> {
        // The level kernel writes no per-block progress records: the level's live counters
        // stand for the whole grid as one record (tasks spawned so far plus the blocks' counts
        // of tasks run, added as each block finishes). A read that fails shows no progress.
        let mut c = [0u8; 24];
        if self
            .pl
            .counters
            .read_async(0, &mut c, &self.pl.control)
            .is_err()
        {
            return vec![WorkerProgress::default()];
        }
        let word = |i: usize| u64::from_ne_bytes(c[i * 8..i * 8 + 8].try_into().unwrap());
        vec![WorkerProgress {
            tasks_run: word(0) + word(2),
            ..WorkerProgress::default()
        }]
    }

    fn live_state(&self) -> LiveState {
        LiveState::default()
    }

    fn abort(&self) {
        tracing::warn!("aborting level {}", self.level);
        // The blocks read `LevelSink`'s abort counter at their progress checks; the copy runs on
        // the control stream while the level kernel occupies the launch stream.
        let _ = self
            .pl
            .counters
            .write_async(ABORT_OFFSET, &1u64.to_ne_bytes(), &self.pl.control);
    }

    fn exit_grace(&self, watchdog: Duration) -> Option<Duration> {
        // A kernel cannot be killed: give it up after the grace and leak its memory.
        Some(watchdog.clamp(Duration::from_secs(1), Duration::from_secs(10)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use mgws_core::SchedConfig;

    #[test]
    fn level_args_have_a_fixed_layout() {
        assert_eq!(
            size_of::<LevelArgs>(),
            size_of::<SchedConfig>() + 5 * 8 + 2 * 8 * DATA_AREAS
        );
        assert_eq!(std::mem::offset_of!(LevelArgs, frontier), 56);
        assert_eq!(std::mem::offset_of!(LevelArgs, areas), 96);
    }
}
