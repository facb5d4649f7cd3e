//! What a run reports: timing, task counts and per-worker statistics, or, for a run the watchdog
//! stopped, each worker's last known state.

use std::fmt;
use std::time::Duration;

use mgws_core::{Operation, WorkerProgress, WorkerStats};

/// Per-worker statistics of a finished run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct WorkerReport {
    /// The worker's index (`0..workers`).
    pub worker: u32,
    /// Tasks it executed.
    pub tasks_run: u64,
    /// Tasks its tasks spawned.
    pub tasks_spawned: u64,
    /// Steal attempts (fetch-adds on a victim's queue word).
    pub steal_attempts: u64,
    /// Successful steals.
    pub steals: u64,
    /// Tasks it stole in total.
    pub tasks_stolen: u64,
    /// Times it took work back from its own public queue.
    pub acquires: u64,
    /// Times it published work to its public queue.
    pub releases: u64,
    /// Rounds it spent idle, looking for work.
    pub idle_rounds: u64,
    /// Chunks of initial tasks it loaded.
    pub initial_loads: u64,
    /// Times it moved tasks to its overflow stack.
    pub spills: u64,
    /// Tasks it received from the other side of a bridged run (its side's bridge worker only).
    pub tasks_bridged_in: u64,
    /// Tasks it sent to the other side of a bridged run (its side's bridge worker only).
    pub tasks_bridged_out: u64,
    /// Batches of narrow tasks it ran side by side.
    pub narrow_batches: u64,
    /// Nanoseconds the worker spent waiting for the others: recorded by the static-assignment
    /// baseline on the CPU (its waits at the level barriers, the last one included), `None`
    /// elsewhere.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub idle_ns: Option<u64>,
}

impl WorkerReport {
    /// The report of worker `worker` from the statistics its loop kept.
    pub fn from_stats(worker: u32, s: &WorkerStats) -> Self {
        WorkerReport {
            worker,
            tasks_run: s.tasks_run,
            tasks_spawned: s.tasks_spawned,
            steal_attempts: s.steal_attempts,
            steals: s.steals,
            tasks_stolen: s.tasks_stolen,
            acquires: s.acquires,
            releases: s.releases,
            idle_rounds: s.idle_rounds,
            initial_loads: s.initial_loads,
            spills: s.spills,
            tasks_bridged_in: s.tasks_bridged_in,
            tasks_bridged_out: s.tasks_bridged_out,
            narrow_batches: s.narrow_batches,
            idle_ns: None,
        }
    }
}

/// The outcome of a finished run.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RunReport {
    /// The backend's name (`cpu`, `cuda`, `cuda-static`, ...).
    pub backend: String,
    /// Workers that ran.
    pub workers: u32,
    /// Lanes (threads) per worker.
    pub lanes: u32,
    /// Wall time before the scheduling phase: opening the device (on a GPU: contexts, module
    /// loads, JIT compiles on first use), sizing the grid, allocating and copying the job in,
    /// and on GPUs the launch calls, which happen behind a closed launch gate. The sum of
    /// [`RunReport::setup`]'s parts.
    pub setup_s: f64,
    /// [`RunReport::setup_s`] part by part.
    pub setup: SetupTimes,
    /// Wall time of the scheduling phase alone (no allocation or copies).
    pub elapsed_s: f64,
    /// Wall time after the scheduling phase: reading the results back and, on devices that free
    /// it then (the persistent kernels and the CPU), the run's memory.
    pub finish_s: f64,
    /// Wall time of the whole run, from the device's opening to the report: set-up, the
    /// scheduling phase, the host seeing it end, and the finish.
    pub wall_s: f64,
    /// Tasks executed, initial and spawned.
    pub tasks_run: u64,
    /// Each worker's statistics.
    pub per_worker: Vec<WorkerReport>,
    /// Why the CPU workers the backend names did not run beside its GPUs, where they did not
    /// (`cuda::BridgePolicy::Measured`).
    pub cpu_workers_left_out: Option<String>,
}

/// Where a run's set-up time went, in seconds of wall time. A device opened once per process
/// (a GPU's context, a JIT-compiled module) costs its first run alone.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SetupTimes {
    /// Opening the device apart from its modules: on a GPU the driver, the contexts, the
    /// streams and the kernel text's checks.
    pub open_s: f64,
    /// Loading the kernel modules (a JIT compile on first use in the process); a device that
    /// does not time it apart (the level baseline) counts it in `open_s`.
    pub module_s: f64,
    /// Sizing the grid, allocating the run's memory and copying the job in.
    pub memory_s: f64,
    /// The launch calls, up to the moment every worker may start.
    pub launch_s: f64,
}

impl SetupTimes {
    /// The parts' sum: [`RunReport::setup_s`].
    pub fn total(&self) -> f64 {
        self.open_s + self.module_s + self.memory_s + self.launch_s
    }
}

impl RunReport {
    /// Tasks executed per second of [`RunReport::elapsed_s`].
    pub fn tasks_per_s(&self) -> f64 {
        self.tasks_run as f64 / self.elapsed_s.max(1e-12)
    }

    /// Sum of a statistic over all workers.
    pub fn total(&self, f: impl Fn(&WorkerReport) -> u64) -> u64 {
        self.per_worker.iter().map(f).sum()
    }

    /// The workers' mean [`WorkerReport::idle_ns`] as a share of the run, where the backend
    /// records it for every worker: how far the run is from balanced (0 is perfect balance; an
    /// ideal scheduler would have run in `1 - idle_share` of the time, overheads aside).
    pub fn idle_share(&self) -> Option<f64> {
        let idle: Option<Vec<u64>> = self.per_worker.iter().map(|w| w.idle_ns).collect();
        let idle = idle.filter(|t| !t.is_empty() && self.elapsed_s > 0.0)?;
        let mean_s = idle.iter().sum::<u64>() as f64 * 1e-9 / idle.len() as f64;
        Some(mean_s / self.elapsed_s)
    }
}

/// One worker's state when the watchdog fired.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct WorkerHangState {
    /// The worker's index.
    pub worker: u32,
    /// Loop iterations it had reported.
    pub iterations: u64,
    /// Tasks it had run.
    pub tasks_run: u64,
    /// What it was doing when it last reported (`run-task`, `steal`, `publish`, ...).
    pub last_operation: String,
    /// The tag of the task the worker was running, if it was inside one.
    pub task_tag: Option<u32>,
    /// How long its progress record had shown no progress (tasks, idle changes, heartbeats).
    pub since_progress: Duration,
    /// Whether it was idle, looking for work.
    pub idle: bool,
    /// Whether it had left its loop.
    pub exited: bool,
    /// The worker's public-queue word, decoded.
    pub queue_word: String,
}

impl WorkerHangState {
    /// The state of worker `worker` from its progress record `p`, its public queue's word and
    /// how long its record has shown no progress.
    /// `task_tag_word` is its `Env::task_tags` word: the running task's tag plus one, 0 if none.
    pub fn new(
        worker: u32,
        p: &WorkerProgress,
        queue_word: u64,
        task_tag_word: u64,
        since_progress: Duration,
    ) -> Self {
        let w = mgws_core::QueueWord(queue_word);
        // The tag word holds the last task the worker started. It is the running one while the
        // record says the worker runs tasks (or has not reported yet: records are written once
        // per progress interval, so a worker stuck in its first task still says `start`).
        let operation = Operation::from_u64(p.last_operation);
        let running =
            matches!(operation, Some(Operation::RunTask | Operation::Start)) && p.state == 0;
        let task_tag = task_tag_word
            .checked_sub(1)
            .filter(|_| running)
            .map(|t| t as u32);
        let last_operation = if task_tag.is_some() {
            Operation::RunTask.name()
        } else {
            operation.map_or("?", |o| o.name())
        };
        WorkerHangState {
            worker,
            iterations: p.iterations,
            tasks_run: p.tasks_run,
            last_operation: last_operation.to_string(),
            task_tag,
            since_progress,
            idle: p.state == 1,
            exited: p.state == 2,
            // u64::MAX: the run has no public queues (kernel-per-level, static).
            queue_word: if queue_word == u64::MAX {
                "none".into()
            } else {
                format!(
                    "steals={} locked={} epoch={} initial={} tail={}",
                    w.steals(),
                    w.locked(),
                    w.epoch(),
                    w.initial(),
                    w.tail()
                )
            },
        }
    }
}

/// Everything the watchdog knew when it stopped a run.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct HangReport {
    /// How long no worker had made progress.
    pub stalled_for: Duration,
    /// The idle-worker counter of the termination protocol.
    pub idle_counter: u64,
    /// Home ranges of initial tasks claimed to their end.
    pub initial_ranges_done: u64,
    /// Home ranges that hold initial tasks (one per public queue, fewer when there are fewer
    /// tasks than queues).
    pub initial_ranges: u64,
    /// Every worker's state.
    pub workers: Vec<WorkerHangState>,
}

impl fmt::Display for HangReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "idle counter {}, initial task ranges claimed to their end: {} of {}",
            self.idle_counter, self.initial_ranges_done, self.initial_ranges
        )?;
        for w in &self.workers {
            let tag = w.task_tag.map_or("-".to_string(), |t| t.to_string());
            writeln!(
                f,
                "  worker {:>4}: op={:<12} tag={:<5} no progress for {}ms, idle={} exited={} \
                 iterations={} tasks={} queue[{}]",
                w.worker,
                w.last_operation,
                tag,
                w.since_progress.as_millis(),
                w.idle,
                w.exited,
                w.iterations,
                w.tasks_run,
                w.queue_word
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_share_needs_every_worker_idle_time() {
        let worker = |w: u32, idle_ns: Option<u64>| WorkerReport {
            worker: w,
            idle_ns,
            ..WorkerReport::default()
        };
        let mut r = RunReport {
            backend: "cpu".into(),
            workers: 3,
            lanes: 1,
            setup_s: 0.0,
            setup: SetupTimes::default(),
            elapsed_s: 3e-3,
            finish_s: 0.0,
            wall_s: 3e-3,
            tasks_run: 0,
            per_worker: vec![
                worker(0, Some(300_000)),
                worker(1, Some(0)),
                worker(2, Some(600_000)),
            ],
            cpu_workers_left_out: None,
        };
        // A mean of 0.3 ms of 3 ms.
        assert!((r.idle_share().unwrap() - 0.1).abs() < 1e-12);
        r.per_worker[1].idle_ns = None;
        assert_eq!(r.idle_share(), None);
        r.per_worker.clear();
        assert_eq!(r.idle_share(), None);
    }
}
