//! GPUs and CPU workers in one run (`CudaBackend::cpu_workers`): the GPUs' persistent kernels are
//! side 0 of a bridged run and CPU threads side 1 (`mgws_core::bridge`). Each side keeps its
//! queues and idle counter in its own memory; the bridge (its state and mailbox slots) lives in
//! mapped pinned host memory, where only plain loads and stores cross between the agents.
//!
//! Every initial task starts on the GPUs; the CPU workers steal what they can handle.
//!
//! Data areas: read-only ones are read by the CPU workers where the job keeps them and copied to
//! the GPUs as in any GPU run. A read-write area is copied to the GPUs too, while the CPU workers
//! write the job's own bytes; after the run the two are merged word by word (8 bytes): a word
//! changed on one side takes that side's value, and a word changed on both sides is an error
//! (even where the values agree). Tasks of the two sides must therefore write disjoint words, as
//! per-worker accumulators and MEMSET's slots do; an atomic counter shared by all tasks is
//! refused at the end with that error rather than silently wrong. A task does not see what a
//! task on the other side wrote during the run: read-write words are for results, not for
//! communication between tasks.

use std::time::Duration;

use mgws_core::bridge::BridgeState;
use mgws_core::{HostWord, TaskExecutor, WorkerProgress};
use mgws_tasks::{Registry, TaskStruct};

use super::device::CudaDevice;
use super::driver::HostBuffer;
use super::memory::{BridgeLayout, GpuSide, Memory};
use super::CudaBackend;
use crate::cpu::{BridgeLink, CpuDevice, CpuPlaced};
use crate::device::{Device, Grid, LiveState, ReadBack, Running};
use crate::error::{Error, Result};
use crate::initial::InitialTasks;
use crate::job::{AreaBytes, Job};
use crate::scheduler::Scheduler;

/// The GPUs of a backend with `cpu_workers` CPU workers beside them.
pub struct MixedDevice<'a, R> {
    gpu: CudaDevice<'a>,
    cpu: Option<CpuDevice<'a, R>>,
    cpu_sched: &'a Scheduler,
    registry: &'a R,
    gpu_grid: Option<Grid>,
    cpu_grid: Option<Grid>,
}

/// A mixed run's memory.
pub struct MixedPlaced {
    gpu: Memory,
    cpu: CpuPlaced,
    /// The bridge and its mailboxes (mapped pinned host memory).
    _bridge: HostBuffer,
    /// Each read-write area's bytes before the run (index, bytes), for the merge.
    before: Vec<(u8, Vec<u8>)>,
}

impl<'a, R: Registry + TaskExecutor<TaskStruct> + Sync> MixedDevice<'a, R> {
    /// Opens the GPUs of `b` for `sched` (as [`CudaDevice::open`]); `cpu_sched` is `sched` for
    /// the CPU side (`b.cpu_workers` workers of one lane).
    pub fn open(
        b: &'a CudaBackend,
        sched: &'a Scheduler,
        cpu_sched: &'a Scheduler,
        registry: &'a R,
    ) -> Result<Self> {
        Ok(MixedDevice {
            gpu: CudaDevice::open::<R>(b, super::Method::Mgws, sched)?,
            cpu: None,
            cpu_sched,
            registry,
            gpu_grid: None,
            cpu_grid: None,
        })
    }
}

impl<R: Registry + TaskExecutor<TaskStruct> + Sync> Device for MixedDevice<'_, R> {
    type Placed = MixedPlaced;

    fn name(&self) -> &'static str {
        "cuda+cpu"
    }

    fn module_load_s(&self) -> f64 {
        self.gpu.module_load_s()
    }

    fn size_grid(&mut self, sched: &Scheduler) -> Result<Grid> {
        let gpu = self.gpu.size_grid(sched)?;
        crate::cpu::check_bridged(&gpu.config)?;
        let cpu_workers = self.cpu_sched.workers();
        let mut config = gpu.config;
        config.workers = gpu.config.workers + cpu_workers;
        self.gpu_grid = Some(gpu);
        Ok(Grid {
            config,
            topology: gpu.topology,
            lanes: gpu.lanes,
        })
    }

    fn place(&mut self, _grid: &Grid, job: &mut Job<'_>) -> Result<MixedPlaced> {
        let gpu_grid = self.gpu_grid.expect("size_grid runs first");
        let gpu_workers = gpu_grid.config.workers;
        // Every initial task starts on the GPUs: the CPU workers take what they can handle
        // through the bridge (a share by worker count would leave the run waiting for the
        // CPU's slow tail, or, with one root task, start the whole tree on a CPU thread).
        let all = job.initial;
        let before = read_write_copies(job);
        self.gpu.make_current()?;
        let bridge = HostBuffer::alloc(BridgeLayout::BYTES, "the CPU workers' bridge")?;
        let gpu = self.gpu.place_side(
            &gpu_grid,
            job,
            GpuSide {
                initial: all,
                bridge: Some(&bridge),
            },
        )?;
        let link = BridgeLink {
            // SAFETY (of the offsets): `BridgeLayout` lays out BYTES bytes, all of `bridge`.
            state: bridge.host.wrapping_add(BridgeLayout::STATE) as *const BridgeState<HostWord>,
            slots: [0, 1].map(|s| bridge.host.wrapping_add(BridgeLayout::slots(s)) as *mut _),
            worker_base: gpu_workers,
        };
        let mut cpu = CpuDevice::linked(self.cpu_sched, self.registry, link);
        let cpu_grid = cpu.size_grid(self.cpu_sched)?;
        job.initial = InitialTasks::Listed(&[]);
        let placed = cpu.place(&cpu_grid, job);
        job.initial = all;
        let cpu_placed = placed?;
        tracing::info!(
            target: "mgws::grid",
            "and {} CPU workers beside the GPUs, bridged through pinned host memory",
            cpu_grid.config.workers,
        );
        self.cpu = Some(cpu);
        self.cpu_grid = Some(cpu_grid);
        Ok(MixedPlaced {
            gpu,
            cpu: cpu_placed,
            _bridge: bridge,
            before,
        })
    }

    fn launch<T>(
        &mut self,
        _grid: &Grid,
        placed: &MixedPlaced,
        supervise: impl FnOnce(&dyn Running) -> T,
    ) -> Result<T> {
        let gpu_grid = self.gpu_grid.expect("size_grid runs first");
        let cpu_grid = self.cpu_grid.expect("place runs first");
        let cpu = self.cpu.as_mut().expect("place runs first");
        let gpu = &mut self.gpu;
        // The CPU threads start first and the GPUs while they run, so that a launch that
        // returns only once its kernel ended (under a profiler) still finds the CPU side
        // running: the kernel waits for it. The supervisor watches both.
        cpu.launch(&cpu_grid, &placed.cpu, |cpu| {
            let out = gpu.launch(&gpu_grid, &placed.gpu, |gpu| {
                supervise(&MixedRunning { gpu, cpu })
            });
            if out.is_err() {
                // No kernel started: the CPU side would wait for the GPUs forever.
                cpu.abort();
            }
            out
        })?
    }

    fn read_back(
        &mut self,
        _grid: &Grid,
        placed: &MixedPlaced,
        job: &mut Job<'_>,
    ) -> Result<ReadBack> {
        let gpu_grid = self.gpu_grid.expect("size_grid runs first");
        let cpu_grid = self.cpu_grid.expect("place runs first");
        // The CPU workers wrote the job's read-write areas; keep their bytes, then let the GPU
        // side's read-back overwrite the areas with the GPUs' copies, and merge.
        let cpu_bytes = read_write_copies(job);
        let gpu = self.gpu.read_back(&gpu_grid, &placed.gpu, job)?;
        let cpu =
            self.cpu
                .as_mut()
                .expect("place runs first")
                .read_back(&cpu_grid, &placed.cpu, job)?;
        let error = gpu.error.or(cpu.error);
        // A failed run's areas are not merged: its error is what the caller gets.
        for (index, bytes) in job.areas.iter_mut().filter(|_| error.is_none()) {
            let AreaBytes::ReadWrite(merged) = bytes else {
                continue;
            };
            let find = |list: &[(u8, Vec<u8>)]| -> Vec<u8> {
                list.iter()
                    .find(|(i, _)| i == index)
                    .map(|(_, b)| b.clone())
                    .unwrap_or_default()
            };
            merge_area(*index, merged, &find(&placed.before), &find(&cpu_bytes))?;
        }
        let cpu_workers = cpu_grid.config.workers as u64;
        let cpu_tasks: u64 = cpu.progress.iter().map(|p| p.tasks_run).sum();
        // The CPU side's clock starts before the GPUs are launched, and until a kernel runs the
        // CPU workers can only wait for tasks: the run lasts from the kernels' release (which
        // precedes their start, so this never shortens the run) until the later side ended.
        let cpu_started = self.cpu.as_ref().and_then(|c| c.started_at());
        let head_start_s = match (cpu_started, self.gpu.released_at()) {
            (Some(cpu), Some(gpu)) => gpu.saturating_duration_since(cpu).as_secs_f64(),
            _ => 0.0,
        };
        let cpu_after_launch_s = (cpu.elapsed_s - head_start_s).max(0.0);
        tracing::info!(
            gpu_s = gpu.elapsed_s,
            cpu_s = cpu.elapsed_s,
            cpu_after_launch_s,
            cpu_tasks,
            "mixed run: both sides finished"
        );
        Ok(ReadBack {
            elapsed_s: gpu.elapsed_s.max(cpu_after_launch_s),
            // The CPU workers run while the GPUs are launched: no launch time is set-up.
            launch_s: 0.0,
            error,
            // Every CPU worker left its loop: its thread returned.
            exited_workers: gpu.exited_workers.map(|n| n + cpu_workers),
            stats: match (gpu.stats, cpu.stats) {
                (Some(mut g), Some(c)) => {
                    g.extend(c);
                    Some(g)
                }
                _ => None,
            },
            progress: gpu.progress.into_iter().chain(cpu.progress).collect(),
            tasks_run: None,
            idle_ns: None,
        })
    }
}

/// A copy of each read-write area of `job`, with its index.
fn read_write_copies(job: &Job<'_>) -> Vec<(u8, Vec<u8>)> {
    job.areas
        .iter()
        .filter_map(|(index, bytes)| match bytes {
            AreaBytes::ReadWrite(b) => Some((*index, b.to_vec())),
            AreaBytes::Read(_) => None,
        })
        .collect()
}

/// Merges read-write area `index` word by word: `gpu` holds the GPUs' copy (and receives the
/// result), `cpu` the CPU workers' bytes, `before` the bytes before the run.
fn merge_area(index: u8, gpu: &mut [u8], before: &[u8], cpu: &[u8]) -> Result<()> {
    for (offset, ((g, c), b)) in gpu
        .chunks_mut(8)
        .zip(cpu.chunks(8))
        .zip(before.chunks(8))
        .enumerate()
    {
        if c == b {
            continue;
        }
        if g != b {
            return Err(Error::Verification(format!(
                "data area {index}: the word at byte {} was changed both by tasks on the GPUs \
                 and by tasks on the CPU workers ({:02x?} on the GPUs, {:02x?} on the CPU); in a \
                 run with CPU workers beside the GPUs, tasks on the two sides must write \
                 disjoint words (per-worker accumulators do), and a word written on both sides \
                 is refused even where the values agree",
                offset * 8,
                &*g,
                c
            )));
        }
        g.copy_from_slice(c);
    }
    Ok(())
}

/// Both sides of a mixed run in progress.
struct MixedRunning<'a> {
    gpu: &'a dyn Running,
    cpu: &'a dyn Running,
}

impl Running for MixedRunning<'_> {
    fn wait(&self, timeout: Duration) -> Result<bool> {
        let done = self.gpu.wait(timeout)? && self.cpu.wait(timeout)?;
        if !done && self.aborted() {
            // The two sides share no abort word: a failure on one stops both.
            self.abort();
        }
        Ok(done)
    }

    fn aborted(&self) -> bool {
        self.gpu.aborted() || self.cpu.aborted()
    }

    fn progress(&self) -> Vec<WorkerProgress> {
        let mut all = self.gpu.progress();
        all.extend(self.cpu.progress());
        all
    }

    fn live_state(&self) -> LiveState {
        let mut state = self.gpu.live_state();
        state.absorb(self.cpu.live_state());
        state
    }

    fn abort(&self) {
        self.gpu.abort();
        self.cpu.abort();
    }

    fn exit_grace(&self, _watchdog: Duration) -> Option<Duration> {
        // The CPU threads borrow the job and cannot be given up, so neither side is: the
        // pipeline waits for both, and calls the stuck-workers hook if they do not exit.
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn areas_merge_word_by_word_and_refuse_words_changed_on_both_sides() {
        let before = [0u8; 24];
        let mut gpu = [0u8; 24];
        let mut cpu = [0u8; 24];
        gpu[0] = 1; // the GPUs wrote word 0
        cpu[8] = 2; // the CPU workers wrote word 1
        merge_area(0, &mut gpu, &before, &cpu).unwrap();
        assert_eq!((gpu[0], gpu[8], gpu[16]), (1, 2, 0));
        // A word changed on both sides is refused, whether or not the values agree.
        for value in [1, 7] {
            let mut cpu3 = [0u8; 24];
            cpu3[0] = value;
            let err = merge_area(3, &mut gpu.clone(), &before, &cpu3)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("data area 3") && err.contains("byte 0"),
                "{err}"
            );
        }
    }
}
