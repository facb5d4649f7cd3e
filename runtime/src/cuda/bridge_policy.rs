//! Whether the CPU workers a backend names run beside its GPUs ([`CudaBackend::cpu_workers`]),
//! decided per job by measurement ([`BridgePolicy::Measured`]).
//!
//! A bridged run costs the GPUs something (their bridged kernel entry, the bridge worker's serving
//! between tasks), and a fast GPU may leave the CPU workers too few tasks to pay for it
//! (docs/results.md measures both). The process keeps, for each job it ran, the fastest run beside
//! the CPU workers and the fastest on the GPUs alone, with the CPU workers' share of the tasks:
//! - a job not run before runs beside the CPU workers, as asked;
//! - if the CPU workers then ran under [`MIN_CPU_SHARE`] of its tasks, they cannot have saved
//!   what the bridge costs: the job runs on the GPUs alone from then on;
//! - otherwise it runs once on the GPUs alone, and then the faster of the two, by its best time.
//!
//! A job is known by everything that decides its schedule: the GPUs, the scheduler's settings,
//! the CPU workers asked for, its initial tasks (their count and up to [`SAMPLED_TASKS`] of them)
//! and its data areas' kinds and sizes.

use std::hash::{Hash, Hasher};
use std::sync::{Mutex, PoisonError};

use super::CudaBackend;
use crate::job::{AreaBytes, Job};
use crate::report::RunReport;
use crate::scheduler::Scheduler;

/// When the CPU workers a [`CudaBackend`] names run beside its GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum BridgePolicy {
    /// By measurement, per job in this process (the module's documentation): a job whose CPU
    /// workers did not pay for the bridge runs on the GPUs alone from then on.
    #[default]
    Measured,
    /// Always, whatever they add: for comparisons.
    Always,
}

/// The least share of a run's tasks that the CPU workers must run for the run beside them to be
/// compared with the GPUs alone. Below it they saved less than the GPUs' time for that share of
/// the tasks, less than the bridged kernel costs the GPUs (docs/results.md).
pub const MIN_CPU_SHARE: f64 = 0.01;

/// Initial tasks a job's key reads, evenly spaced (all of a smaller job's): keying a job of
/// millions of initial tasks costs no measurable time.
const SAMPLED_TASKS: usize = 64;

/// Jobs the process remembers; the oldest is forgotten first.
const REMEMBERED_JOBS: usize = 1024;

/// What the process measured of one job.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Record {
    /// The fastest run beside the CPU workers.
    beside: Option<Sample>,
    /// The fastest run on the GPUs alone.
    alone: Option<Sample>,
}

/// One way of running a job, measured.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    /// The best scheduling phase ([`RunReport::elapsed_s`]) so far.
    best_s: f64,
    /// The CPU workers' share of the tasks in the run that took `best_s` (0 on the GPUs alone);
    /// `None` where the run kept no per-worker statistics.
    cpu_share: Option<f64>,
}

/// How a job runs next.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Choice {
    /// Beside the CPU workers.
    Beside,
    /// On the GPUs alone, for the reason given (a sentence for the run's report).
    Alone(String),
}

/// The job's key: a digest of what decides its schedule (the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JobKey(u64);

impl JobKey {
    /// The key of `job` run by `b` with `sched`.
    pub(crate) fn of(b: &CudaBackend, sched: &Scheduler, job: &Job<'_>) -> Self {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        b.device_list().hash(&mut h);
        b.cpu_workers.hash(&mut h);
        b.placement.hash(&mut h);
        b.tasks_in.hash(&mut h);
        b.area_layout.hash(&mut h);
        b.max_registers.hash(&mut h);
        b.ptx.hash(&mut h);
        // The configuration is plain data without `Hash`; its debug form names every field.
        format!("{:?}", sched.config).hash(&mut h);
        sched.lanes.hash(&mut h);
        let tasks = job.tasks;
        tasks.len().hash(&mut h);
        let step = tasks.len().div_ceil(SAMPLED_TASKS).max(1);
        for t in tasks.iter().step_by(step) {
            (t.tag, t.flags, t.params).hash(&mut h);
        }
        for (index, bytes) in &job.areas {
            let read_write = matches!(bytes, AreaBytes::ReadWrite(_));
            (index, read_write, bytes.len()).hash(&mut h);
        }
        job.layouts.hash(&mut h);
        JobKey(h.finish())
    }
}

/// Every job the process ran under [`BridgePolicy::Measured`], newest last.
static LEDGER: Mutex<Vec<(JobKey, Record)>> = Mutex::new(Vec::new());

/// How the job of `key` runs next.
pub(crate) fn choose(key: JobKey) -> Choice {
    decide(&lookup(key))
}

/// Notes a finished run of the job of `key`: beside `cpu_workers` CPU workers (the last workers
/// of `report`), or on the GPUs alone where `cpu_workers` is 0.
pub(crate) fn note(key: JobKey, report: &RunReport, cpu_workers: u32) {
    let mut ledger = LEDGER.lock().unwrap_or_else(PoisonError::into_inner);
    let at = match ledger.iter().position(|(k, _)| *k == key) {
        Some(at) => at,
        None => {
            if ledger.len() == REMEMBERED_JOBS {
                ledger.remove(0);
            }
            ledger.push((key, Record::default()));
            ledger.len() - 1
        }
    };
    ledger[at].1.note(report, cpu_workers);
}

/// What the process measured of the job of `key`.
fn lookup(key: JobKey) -> Record {
    let ledger = LEDGER.lock().unwrap_or_else(PoisonError::into_inner);
    ledger
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, r)| *r)
        .unwrap_or_default()
}

impl Record {
    /// Adds a finished run (see [`note`]).
    fn note(&mut self, report: &RunReport, cpu_workers: u32) {
        let first_cpu = report.workers.saturating_sub(cpu_workers);
        let cpu_tasks: u64 = report
            .per_worker
            .iter()
            .filter(|w| cpu_workers > 0 && w.worker >= first_cpu)
            .map(|w| w.tasks_run)
            .sum();
        let sample = Sample {
            best_s: report.elapsed_s,
            cpu_share: (!report.per_worker.is_empty())
                .then(|| cpu_tasks as f64 / report.tasks_run.max(1) as f64),
        };
        let slot = if cpu_workers > 0 {
            &mut self.beside
        } else {
            &mut self.alone
        };
        if slot.is_none_or(|s| sample.best_s < s.best_s) {
            *slot = Some(sample);
        }
    }
}

/// The rule of the module's documentation.
fn decide(record: &Record) -> Choice {
    let Some(beside) = record.beside else {
        return Choice::Beside;
    };
    if let Some(share) = beside.cpu_share.filter(|&s| s < MIN_CPU_SHARE) {
        return Choice::Alone(format!(
            "CPU workers left out: beside the GPUs they ran {:.3}% of this job's tasks, less \
             than the {:.0}% that could pay for the bridge",
            100.0 * share,
            100.0 * MIN_CPU_SHARE
        ));
    }
    match record.alone {
        None => Choice::Alone(format!(
            "CPU workers left out once, to time the GPUs alone: beside them this job took \
             {:.6} s at best",
            beside.best_s
        )),
        Some(alone) if alone.best_s < beside.best_s => Choice::Alone(format!(
            "CPU workers left out: this job took {:.6} s at best on the GPUs alone, {:.6} s \
             beside them",
            alone.best_s, beside.best_s
        )),
        Some(_) => Choice::Beside,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{SetupTimes, WorkerReport};

    /// A report of `tasks` per worker over `elapsed_s`.
    fn report(elapsed_s: f64, tasks: &[u64]) -> RunReport {
        let per_worker: Vec<WorkerReport> = tasks
            .iter()
            .enumerate()
            .map(|(w, &t)| WorkerReport {
                tasks_run: t,
                ..WorkerReport::from_stats(w as u32, &Default::default())
            })
            .collect();
        RunReport {
            backend: "test".into(),
            workers: tasks.len() as u32,
            lanes: 32,
            setup_s: 0.0,
            setup: SetupTimes::default(),
            elapsed_s,
            finish_s: 0.0,
            wall_s: elapsed_s,
            tasks_run: tasks.iter().sum(),
            per_worker,
            cpu_workers_left_out: None,
        }
    }

    #[test]
    fn a_new_job_runs_beside_the_cpu_workers() {
        assert_eq!(decide(&Record::default()), Choice::Beside);
    }

    #[test]
    fn cpu_workers_that_ran_too_few_tasks_are_left_out_at_once() {
        let mut r = Record::default();
        // 3 GPU workers, 1 CPU worker with 5 of 1,005 tasks (0.5%).
        r.note(&report(1.0, &[400, 300, 300, 5]), 1);
        let Choice::Alone(why) = decide(&r) else {
            panic!("left in: {r:?}");
        };
        assert!(why.contains("0.498%"), "{why}");
        // However fast the run beside them was: no comparison is needed.
        assert!(r.alone.is_none());
    }

    #[test]
    fn cpu_workers_that_ran_enough_tasks_are_compared_with_the_gpus_alone() {
        let mut r = Record::default();
        // The CPU worker ran 100 of 1,000 tasks.
        r.note(&report(1.0, &[300, 300, 300, 100]), 1);
        assert!(matches!(decide(&r), Choice::Alone(why) if why.contains("once")));
        // The GPUs alone were slower: the CPU workers stay.
        r.note(&report(1.2, &[400, 300, 300]), 0);
        assert_eq!(decide(&r), Choice::Beside);
        // A faster run alone later (a record on either side keeps its best) turns it around.
        r.note(&report(0.9, &[400, 300, 300]), 0);
        assert!(matches!(decide(&r), Choice::Alone(why) if why.contains("0.900000 s")));
        // A slower run beside them keeps the best one's time.
        r.note(&report(2.0, &[300, 300, 300, 100]), 1);
        assert_eq!(r.beside.map(|s| s.best_s), Some(1.0));
    }

    #[test]
    fn a_run_without_statistics_is_compared_by_time() {
        let mut r = Record::default();
        let mut beside = report(1.0, &[500, 500, 0]);
        beside.per_worker.clear();
        r.note(&beside, 1);
        assert!(matches!(decide(&r), Choice::Alone(why) if why.contains("once")));
        r.note(&report(1.1, &[500, 500]), 0);
        assert_eq!(decide(&r), Choice::Beside);
    }

    #[test]
    fn the_process_remembers_each_job_apart() {
        let (a, b) = (JobKey(u64::MAX - 1), JobKey(u64::MAX - 2));
        note(a, &report(1.0, &[500, 500, 0]), 1);
        assert!(matches!(choose(a), Choice::Alone(_)));
        assert_eq!(choose(b), Choice::Beside);
    }

    #[test]
    fn a_job_is_known_by_its_tasks_areas_gpus_and_cpu_workers() {
        let sched = Scheduler::builder().workers(4).build().unwrap();
        let root = [mgws_tasks::TaskStruct::new(1, &[7u64])];
        let other = [mgws_tasks::TaskStruct::new(1, &[8u64])];
        let mut area = vec![0u8; 64];
        let b = CudaBackend {
            cpu_workers: 2,
            ..CudaBackend::default()
        };
        let key = |b: &CudaBackend, tasks, area: Option<&mut [u8]>| {
            let mut job = Job::new(tasks);
            if let Some(a) = area {
                job = job.area(3, AreaBytes::ReadWrite(a));
            }
            JobKey::of(b, &sched, &job)
        };
        let base = key(&b, &root, None);
        assert_eq!(base, key(&b, &root, None));
        assert_ne!(base, key(&b, &other, None));
        assert_ne!(base, key(&b, &root, Some(&mut area)));
        let more_cpu = CudaBackend {
            cpu_workers: 3,
            ..b.clone()
        };
        assert_ne!(base, key(&more_cpu, &root, None));
        let two_gpus = CudaBackend {
            devices: vec![0, 1],
            ..b.clone()
        };
        assert_ne!(base, key(&two_gpus, &root, None));
    }
}
