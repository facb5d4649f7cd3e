//! The kernel-per-level baseline (the design the thesis argues against): the host keeps the
//! frontier of a spawning workload in device memory and launches one kernel per level; the kernel
//! runs every frontier task once and appends the tasks they spawn to the next frontier.
//!
//! Device side (the `mgws_level` entry of the kernel crate):
//!
//! ```ignore
//! extern "ptx-kernel" fn mgws_level(args: *const LevelArgs, scratch_len: u32)
//! ```
//!
//! Block `b` of the grid runs frontier tasks `b, b + gridDim.x, ...` with all its lanes, through the
//! same task registry as `mgws_worker`. A task's `spawn` appends the child at index
//! `fetch_add(counters[0], 1)` of `out` if that index is below `out_capacity` (children beyond it
//! are counted but not written: the host then reports that the frontier outgrew its buffer). The
//! first task error is recorded in `counters[1]` as `RunError::pack` (compare-exchange from 0), and
//! the kernel's blocks stop taking tasks once it is set. Data areas and the atomic scope are as in
//! the persistent kernel (`ctx.area(i)` = `areas[i]`, device scope).

use std::ffi::c_void;
use std::mem::size_of;
use std::time::Instant;

use mgws_core::{RunError, DATA_AREAS};
use mgws_tasks::TaskStruct;

use super::driver::{self, DeviceBuffer};
use super::plan::{self, Param};
use super::session::Session;
use super::CudaBackend;
use crate::error::{Error, Result};
use crate::job::{AreaBytes, Job};
use crate::report::RunReport;
use crate::scheduler::Scheduler;

pub use mgws_core::LevelArgs;

/// The parameters of `mgws_level`: `(args, scratch_len)`.
pub const LEVEL_PARAMS: [Param; 2] = [Param::U64, Param::U32];

pub fn run<R: mgws_tasks::Registry>(
    b: &CudaBackend,
    sched: &Scheduler,
    mut job: Job<'_>,
) -> Result<RunReport> {
    job.validate()?;
    let lanes = sched.lanes;
    super::check_lanes(lanes)?;
    if b.device_list().len() > 1 {
        return Err(Error::Config(
            "the kernel-per-level baseline runs on one GPU; pass a single --device".into(),
        ));
    }
    let s = Session::open::<R>(b, lanes)?;
    let f = s.functions("mgws_level", &LEVEL_PARAMS)?[0];
    let g = &s.gpus[0];
    g.make_current()?;
    let cfg = &sched.config;
    // The grid is at most the scheduler's worker count (workloads size per-worker result rows by
    // it); blocks beyond what fits at once simply wait for a free SM. The kernel sizes its
    // scratch layout (damping bitmap) by the grid, so the largest grid sets the shared memory.
    let max_blocks = sched.config.workers;
    let smem = plan::scratch_bytes(cfg.local_capacity, lanes, max_blocks);
    // Checks the block size and raises the shared memory limit.
    super::grid::blocks_per_sm_for(g, &f, lanes, smem, cfg.local_capacity)?;
    let task = size_of::<TaskStruct>();
    let capacity = match b.level_capacity {
        Some(c) => c,
        None => {
            let (free, _) = g.mem_info()?;
            let area_bytes: usize = job.areas.iter().map(|(_, a)| a.len()).sum();
            // Two frontier buffers share 80% of what the data areas leave free.
            (free.saturating_sub(area_bytes) as u64 * 2 / 5 / task as u64).max(1 << 16)
        }
    }
    .max(job.tasks.len() as u64);
    let bytes = capacity as usize * task;
    let mut bufs = [
        DeviceBuffer::alloc(g, bytes, "frontier buffer")?,
        DeviceBuffer::alloc(g, bytes, "frontier buffer")?,
    ];
    bufs[0].write(0, as_bytes(job.tasks))?;
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
    let area_limits = job.area_limits();
    let mut config = *cfg;
    config.queue_scope = mgws_core::Scope::Device as u32;
    let stream = driver::Stream::new(g)?;
    g.synchronize()?;
    eprintln!(
        "mgws: levels on GPU {} ({}): up to {max_blocks} blocks x {lanes} threads, frontier \
         buffers of {capacity} tasks",
        g.ordinal, g.name
    );
    let mut frontier_len = job.tasks.len() as u64;
    let mut tasks_run = 0u64;
    let mut levels = 0u32;
    let start = Instant::now();
    while frontier_len > 0 {
        let args = LevelArgs {
            config,
            frontier: bufs[0].ptr,
            frontier_len,
            out: bufs[1].ptr,
            out_capacity: capacity,
            counters: counters.ptr,
            areas,
            area_limits,
        };
        counters.zero()?;
        // SAFETY: LevelArgs is repr(C) of integers without padding (SchedConfig has none).
        let arg_bytes = unsafe {
            std::slice::from_raw_parts(&args as *const _ as *const u8, size_of::<LevelArgs>())
        };
        args_buf.write(0, arg_bytes)?;
        let grid = frontier_len.min(max_blocks as u64) as u32;
        let mut a0: u64 = args_buf.ptr;
        let mut a1: u32 = smem as u32;
        let mut params = [
            &mut a0 as *mut u64 as *mut c_void,
            &mut a1 as *mut u32 as *mut c_void,
        ];
        // SAFETY: the parameters match LEVEL_PARAMS (checked against the PTX); every address in
        // the argument block stays allocated until the stream is synchronized below.
        let r = unsafe { f.launch(false, grid, lanes, smem as u32, &stream, &mut params) };
        driver::check(r, || format!("launching level {levels} ({grid} blocks)"))?;
        stream.synchronize().map_err(|e| {
            Error::Cuda(format!(
                "level {levels} of the kernel-per-level baseline failed: {e}"
            ))
        })?;
        let mut c = [0u8; 32];
        counters.read(0, &mut c)?;
        let word = |i: usize| u64::from_ne_bytes(c[i * 8..i * 8 + 8].try_into().unwrap());
        if let Some(e) = RunError::unpack(word(1)) {
            return Err(e.into());
        }
        let spawned = word(0);
        let ran = word(2);
        if ran != frontier_len {
            return Err(Error::Cuda(format!(
                "level {levels} of the kernel-per-level baseline ran {ran} of its {frontier_len} \
                 tasks"
            )));
        }
        if spawned > capacity {
            return Err(Error::Config(format!(
                "level {} of the kernel-per-level baseline spawned {spawned} tasks, more than a \
                 frontier buffer holds ({capacity}); pass a larger level capacity if memory allows",
                levels + 1
            )));
        }
        tasks_run += frontier_len;
        frontier_len = spawned;
        bufs.swap(0, 1);
        levels += 1;
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    for (index, buf) in &area_bufs {
        if let Some((_, AreaBytes::ReadWrite(dst))) = job.areas.iter_mut().find(|(i, _)| i == index)
        {
            buf.read(0, dst)?;
        }
    }
    tracing::info!(
        levels,
        tasks_run,
        elapsed_s,
        "kernel-per-level run finished"
    );
    Ok(RunReport {
        backend: "cuda-levels".into(),
        workers: max_blocks,
        lanes,
        elapsed_s,
        tasks_run,
        per_worker: Vec::new(),
    })
}

fn as_bytes(tasks: &[TaskStruct]) -> &[u8] {
    // SAFETY: TaskStruct is plain repr(C) data of 64 bytes without padding.
    unsafe { std::slice::from_raw_parts(tasks.as_ptr() as *const u8, std::mem::size_of_val(tasks)) }
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
