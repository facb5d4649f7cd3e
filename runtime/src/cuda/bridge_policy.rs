//! Whether the CPU workers a backend names run beside its GPUs ([`CudaBackend::cpu_workers`]),
//! decided per job by measurement ([`BridgePolicy::Measured`]).
//!
//! A bridged run costs the GPUs something (their bridged kernel entry, the bridge worker's serving
//! between tasks), and a fast GPU may leave the CPU workers too few tasks to pay for it
//! (docs/results.md measures both). What was measured of each job is kept, in the process and in
//! the cache directory ([`crate::disk_cache`], file [`LEDGER_FILE`]) for later processes: the
//! fastest run beside the CPU workers and the fastest on the GPUs alone, with the CPU workers'
//! share of the tasks.
//! - A job not measured before runs beside **one** CPU worker (a probe: many CPU workers can hold
//!   a short run with the heavy tasks they took, one costs the GPUs little).
//! - If that worker ran under [`MIN_CPU_SHARE`] of its tasks divided by the workers asked for,
//!   they all together would have saved less than the bridge costs: the job runs on the GPUs
//!   alone from then on. Otherwise it runs beside all of them.
//! - If they all then ran under [`MIN_CPU_SHARE`] of its tasks, the same holds. Otherwise (or
//!   where the run kept no per-worker statistics to tell) it runs once on the GPUs alone, and then
//!   the faster of the two, by its best time.
//!
//! A job is known by everything that decides its schedule: the GPUs (ordinals and names), the
//! scheduler's settings, the backend's options, the CPU workers asked for, its initial tasks
//! (their count and up to [`SAMPLED_TASKS`] of them), its data areas' kinds and sizes, and the
//! kernel (the running program and a PTX file it names, by size and modification time), so that
//! a rebuilt program or kernel is measured again.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::CudaBackend;
use crate::job::{AreaBytes, Job};
use crate::report::RunReport;
use crate::scheduler::Scheduler;

/// When the CPU workers a [`CudaBackend`] names run beside its GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum BridgePolicy {
    /// By measurement, per job, in this process and in later ones (the module's documentation):
    /// a job whose CPU workers did not pay for the bridge runs on the GPUs alone from then on.
    #[default]
    Measured,
    /// Always, whatever they add: for comparisons.
    Always,
}

/// The least share of a run's tasks that the CPU workers must run (or, from a probe, would run)
/// for the run beside them to be compared with the GPUs alone. Below it they saved less than the
/// GPUs' time for that share of the tasks, less than the bridged kernel costs the GPUs
/// (docs/results.md).
pub const MIN_CPU_SHARE: f64 = 0.01;

/// Initial tasks a job's key reads, evenly spaced (all of a smaller job's): keying a job of
/// millions of initial tasks costs no measurable time.
const SAMPLED_TASKS: usize = 64;

/// Jobs the process and the ledger file remember; the one measured longest ago is forgotten first.
const REMEMBERED_JOBS: usize = 1024;

/// The ledger's file in the cache directory: one line per job,
/// `key probe_s probe_share beside_s beside_share alone_s` (hex, then seconds and shares, `-` where
/// not measured).
pub const LEDGER_FILE: &str = "bridge-ledger.txt";

/// What the process measured of one job.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Record {
    /// The fastest run beside one CPU worker, where more were asked for.
    probe: Option<Sample>,
    /// The fastest run beside the CPU workers.
    beside: Option<Sample>,
    /// The best scheduling phase ([`RunReport::elapsed_s`]) on the GPUs alone.
    alone_s: Option<f64>,
}

/// One way of running a job, measured.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    /// The best scheduling phase ([`RunReport::elapsed_s`]) so far.
    best_s: f64,
    /// The CPU workers' share of the tasks in the run that took `best_s`; `None` where the run
    /// kept no per-worker statistics.
    cpu_share: Option<f64>,
}

/// How a job runs next, or ran.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Choice {
    /// Beside one CPU worker, to estimate what all of them would add.
    Probe,
    /// Beside the CPU workers.
    Beside,
    /// On the GPUs alone, for the reason given (a sentence for the run's report).
    Alone(String),
}

/// The job's key: a digest of what decides its schedule (the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JobKey(u64);

impl JobKey {
    /// The key of `job` run by `b` with `sched` on GPUs named `gpus`.
    pub(crate) fn of(b: &CudaBackend, sched: &Scheduler, job: &Job<'_>, gpus: &[String]) -> Self {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (b.device_list(), gpus).hash(&mut h);
        (
            b.cpu_workers,
            b.placement,
            b.tasks_in,
            b.area_layout,
            b.max_registers,
        )
            .hash(&mut h);
        let ptx = b
            .ptx
            .clone()
            .or_else(|| std::env::var_os("MGWS_PTX").map(PathBuf::from));
        let program = std::env::current_exe().ok();
        for file in [ptx, program].iter().flatten() {
            (file, crate::disk_cache::file_stamp(file)).hash(&mut h);
        }
        // The configuration is plain data without `Hash`; its debug form names every field.
        (format!("{:?}", sched.config), sched.lanes).hash(&mut h);
        let tasks = job.initial.len();
        tasks.hash(&mut h);
        let step = tasks.div_ceil(SAMPLED_TASKS as u64).max(1);
        for t in (0..tasks)
            .step_by(step as usize)
            .filter_map(|i| job.initial.get(i))
        {
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

/// What the process measured (or read from the ledger file) of each job, newest last.
static LEDGER: Mutex<Vec<(JobKey, Record)>> = Mutex::new(Vec::new());

/// How the job of `key` runs next with `cpu_workers` CPU workers asked for (from what this
/// process, or one before it, measured).
pub(crate) fn choose(key: JobKey, cpu_workers: u32) -> Choice {
    decide(&known(key).unwrap_or_default(), cpu_workers)
}

/// Notes a finished run of the job of `key`, run as `ran` says (the CPU workers, where there were
/// any, are the last workers of `report`: one for a probe, else `cpu_workers`). The ledger file
/// gets the job's record too (a failure to write it costs a later process one measurement,
/// nothing else).
pub(crate) fn note(key: JobKey, report: &RunReport, ran: &Choice, cpu_workers: u32) {
    let mut record = known(key).unwrap_or_default();
    record.note(report, ran, cpu_workers);
    remember(
        &mut LEDGER.lock().unwrap_or_else(PoisonError::into_inner),
        (key, record),
    );
    if let Some(path) = ledger_path() {
        if let Err(e) = write_through(&path, (key, record)) {
            tracing::debug!("the ledger {} was not written: {e}", path.display());
        }
    }
}

/// What this process measured of the job of `key`, else what the ledger file holds of it (which
/// the process then keeps).
fn known(key: JobKey) -> Option<Record> {
    lookup(key).or_else(|| {
        let from_file = read_ledger(&ledger_path()?)
            .into_iter()
            .find(|(k, _)| *k == key)?;
        remember(
            &mut LEDGER.lock().unwrap_or_else(PoisonError::into_inner),
            from_file,
        );
        Some(from_file.1)
    })
}

/// What the process measured of the job of `key`.
fn lookup(key: JobKey) -> Option<Record> {
    let ledger = LEDGER.lock().unwrap_or_else(PoisonError::into_inner);
    ledger.iter().find(|(k, _)| *k == key).map(|(_, r)| *r)
}

/// Puts `entry` last in `ledger` (the newest), forgetting the oldest beyond [`REMEMBERED_JOBS`].
fn remember(ledger: &mut Vec<(JobKey, Record)>, entry: (JobKey, Record)) {
    ledger.retain(|(k, _)| *k != entry.0);
    ledger.push(entry);
    let excess = ledger.len().saturating_sub(REMEMBERED_JOBS);
    ledger.drain(..excess);
}

/// The ledger file, if a cache directory can be named (none in unit tests, which must not touch
/// the user's cache; the CLI's tests name a directory of their own).
fn ledger_path() -> Option<PathBuf> {
    if cfg!(test) {
        return None;
    }
    crate::disk_cache::dir().map(|d| d.join(LEDGER_FILE))
}

/// The entries of the ledger file at `path`, oldest first; a line that does not parse (or a file
/// that cannot be read) is left out.
fn read_ledger(path: &Path) -> Vec<(JobKey, Record)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter_map(parse_line).collect()
}

/// Writes `entry` into the ledger file at `path` as its newest line, keeping the other
/// processes' lines: the file is read again, and replaced in one rename.
fn write_through(path: &Path, entry: (JobKey, Record)) -> std::io::Result<()> {
    let mut entries = read_ledger(path);
    remember(&mut entries, entry);
    let text: String = entries.iter().map(|e| format_line(e) + "\n").collect();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let partial = path.with_extension(format!("{}.partial", std::process::id()));
    std::fs::write(&partial, text)?;
    std::fs::rename(&partial, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&partial);
    })
}

/// One line of the ledger file.
fn format_line((key, record): &(JobKey, Record)) -> String {
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:e}"));
    let sample = |s: Option<Sample>| {
        format!(
            "{} {}",
            opt(s.map(|s| s.best_s)),
            opt(s.and_then(|s| s.cpu_share))
        )
    };
    format!(
        "{:016x} {} {} {}",
        key.0,
        sample(record.probe),
        sample(record.beside),
        opt(record.alone_s)
    )
}

/// The entry of one line of the ledger file.
fn parse_line(line: &str) -> Option<(JobKey, Record)> {
    let mut fields = line.split_whitespace();
    let key = JobKey(u64::from_str_radix(fields.next()?, 16).ok()?);
    let mut value = || -> Option<Option<f64>> {
        match fields.next()? {
            "-" => Some(None),
            v => v
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .map(Some),
        }
    };
    let mut sample = || -> Option<Option<Sample>> {
        let (best_s, cpu_share) = (value()?, value()?);
        Some(best_s.map(|best_s| Sample { best_s, cpu_share }))
    };
    let (probe, beside) = (sample()?, sample()?);
    let alone_s = value()?;
    if fields.next().is_some() {
        return None;
    }
    let record = Record {
        probe,
        beside,
        alone_s,
    };
    Some((key, record))
}

impl Record {
    /// Adds a finished run (see [`note`]).
    fn note(&mut self, report: &RunReport, ran: &Choice, cpu_workers: u32) {
        let (slot, cpu_workers) = match ran {
            Choice::Probe => (&mut self.probe, 1),
            Choice::Beside => (&mut self.beside, cpu_workers),
            Choice::Alone(_) => {
                if self.alone_s.is_none_or(|s| report.elapsed_s < s) {
                    self.alone_s = Some(report.elapsed_s);
                }
                return;
            }
        };
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
        if slot.is_none_or(|s| sample.best_s < s.best_s) {
            *slot = Some(sample);
        }
    }
}

/// The rule of the module's documentation, for `cpu_workers` CPU workers asked for.
fn decide(record: &Record, cpu_workers: u32) -> Choice {
    let Some(beside) = record.beside else {
        let Some(probe) = record.probe.filter(|_| cpu_workers > 1) else {
            return if cpu_workers > 1 {
                Choice::Probe
            } else {
                Choice::Beside
            };
        };
        let estimate = probe.cpu_share.map(|s| s * f64::from(cpu_workers));
        return match estimate.filter(|&e| e < MIN_CPU_SHARE) {
            Some(e) => Choice::Alone(format!(
                "CPU workers left out: one beside the GPUs ran {:.3}% of this job's tasks, so \
                 {cpu_workers} would run about {:.3}%, less than the {:.0}% that could pay for \
                 the bridge",
                100.0 * probe.cpu_share.unwrap_or(0.0),
                100.0 * e,
                100.0 * MIN_CPU_SHARE
            )),
            None => Choice::Beside,
        };
    };
    if let Some(share) = beside.cpu_share.filter(|&s| s < MIN_CPU_SHARE) {
        return Choice::Alone(format!(
            "CPU workers left out: beside the GPUs they ran {:.3}% of this job's tasks, less \
             than the {:.0}% that could pay for the bridge",
            100.0 * share,
            100.0 * MIN_CPU_SHARE
        ));
    }
    match record.alone_s {
        None => Choice::Alone(format!(
            "CPU workers left out once, to time the GPUs alone: beside them this job took \
             {:.6} s at best",
            beside.best_s
        )),
        Some(alone_s) if alone_s < beside.best_s => Choice::Alone(format!(
            "CPU workers left out: this job took {:.6} s at best on the GPUs alone, {:.6} s \
             beside them",
            alone_s, beside.best_s
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

    const ALONE: Choice = Choice::Alone(String::new());

    #[test]
    fn a_new_job_runs_beside_one_cpu_worker_first_or_the_only_one() {
        assert_eq!(decide(&Record::default(), 14), Choice::Probe);
        assert_eq!(decide(&Record::default(), 1), Choice::Beside);
    }

    #[test]
    fn the_probe_leaves_the_cpu_workers_out_where_all_of_them_would_not_pay() {
        // 3 GPU workers and the probe's CPU worker, with 5 of 10,005 tasks (0.05%).
        let mut r = Record::default();
        r.note(&report(1.0, &[4000, 3000, 3000, 5]), &Choice::Probe, 14);
        // 14 workers would run about 0.7%: left out.
        let Choice::Alone(why) = decide(&r, 14) else {
            panic!("left in: {r:?}");
        };
        assert!(
            why.contains("0.050%") && why.contains("14 would run about 0.700%"),
            "{why}"
        );
        // 30 would run about 1.5%: all of them run next.
        assert_eq!(decide(&r, 30), Choice::Beside);
        // No comparison with the GPUs alone is needed, nor a run of all of them.
        assert!(r.alone_s.is_none() && r.beside.is_none());
    }

    #[test]
    fn cpu_workers_that_ran_too_few_tasks_are_left_out_at_once() {
        let mut r = Record::default();
        // 3 GPU workers, 2 CPU workers with 5 of 1,005 tasks (0.5%).
        r.note(&report(1.0, &[400, 300, 300, 3, 2]), &Choice::Beside, 2);
        let Choice::Alone(why) = decide(&r, 2) else {
            panic!("left in: {r:?}");
        };
        assert!(why.contains("0.498%"), "{why}");
        // However fast the run beside them was: no comparison is needed.
        assert!(r.alone_s.is_none());
    }

    #[test]
    fn cpu_workers_that_ran_enough_tasks_are_compared_with_the_gpus_alone() {
        let mut r = Record::default();
        // The CPU worker ran 100 of 1,000 tasks.
        r.note(&report(1.0, &[300, 300, 300, 100]), &Choice::Beside, 1);
        assert!(matches!(decide(&r, 1), Choice::Alone(why) if why.contains("once")));
        // The GPUs alone were slower: the CPU workers stay.
        r.note(&report(1.2, &[400, 300, 300]), &ALONE, 1);
        assert_eq!(decide(&r, 1), Choice::Beside);
        // A faster run alone later (a record on either side keeps its best) turns it around.
        r.note(&report(0.9, &[400, 300, 300]), &ALONE, 1);
        assert!(matches!(decide(&r, 1), Choice::Alone(why) if why.contains("0.900000 s")));
        // A slower run beside them keeps the best one's time.
        r.note(&report(2.0, &[300, 300, 300, 100]), &Choice::Beside, 1);
        assert_eq!(r.beside.map(|s| s.best_s), Some(1.0));
    }

    #[test]
    fn a_run_without_statistics_is_compared_by_time() {
        let mut r = Record::default();
        let mut probe = report(1.0, &[500, 500, 0]);
        probe.per_worker.clear();
        // A probe that cannot tell: all the CPU workers run, and then the GPUs alone.
        r.note(&probe, &Choice::Probe, 4);
        assert_eq!(decide(&r, 4), Choice::Beside);
        let mut beside = report(1.0, &[500, 500, 0, 0, 0, 0]);
        beside.per_worker.clear();
        r.note(&beside, &Choice::Beside, 4);
        assert!(matches!(decide(&r, 4), Choice::Alone(why) if why.contains("once")));
        r.note(&report(1.1, &[500, 500]), &ALONE, 4);
        assert_eq!(decide(&r, 4), Choice::Beside);
    }

    #[test]
    fn the_process_remembers_each_job_apart() {
        let (a, b) = (JobKey(u64::MAX - 1), JobKey(u64::MAX - 2));
        note(a, &report(1.0, &[500, 500, 0]), &Choice::Probe, 8);
        assert!(matches!(choose(a, 8), Choice::Alone(_)));
        assert_eq!(choose(b, 8), Choice::Probe);
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
        let h200 = ["H200".to_string()];
        let key = |b: &CudaBackend, tasks, area: Option<&mut [u8]>, gpus: &[String]| {
            let mut job = Job::new(tasks);
            if let Some(a) = area {
                job = job.area(3, AreaBytes::ReadWrite(a));
            }
            JobKey::of(b, &sched, &job, gpus)
        };
        let base = key(&b, &root, None, &h200);
        assert_eq!(base, key(&b, &root, None, &h200));
        assert_ne!(base, key(&b, &other, None, &h200));
        assert_ne!(base, key(&b, &root, Some(&mut area), &h200));
        assert_ne!(base, key(&b, &root, None, &["H100".to_string()]));
        let more_cpu = CudaBackend {
            cpu_workers: 3,
            ..b.clone()
        };
        assert_ne!(base, key(&more_cpu, &root, None, &h200));
        let two_gpus = CudaBackend {
            devices: vec![0, 1],
            ..b.clone()
        };
        assert_ne!(base, key(&two_gpus, &root, None, &h200));
    }

    #[test]
    fn the_ledger_file_keeps_every_processs_jobs_newest_last_and_skips_bad_lines() {
        let dir = std::env::temp_dir().join(format!("mgws-ledger-test-{}", std::process::id()));
        let path = dir.join(LEDGER_FILE);
        let _ = std::fs::remove_file(&path);
        let mut beside = Record::default();
        beside.note(&report(2e-3, &[500, 500, 1]), &Choice::Probe, 4);
        beside.note(&report(1.5e-3, &[500, 500, 2]), &Choice::Beside, 1);
        let mut alone = Record::default();
        alone.note(&report(1.0, &[400, 300, 300]), &ALONE, 1);
        write_through(&path, (JobKey(1), beside)).unwrap();
        write_through(&path, (JobKey(2), alone)).unwrap();
        // Another process's garbage and a line with a field too many are left out.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("zz 1 2 3 4 5\n0000000000000003 - - - - 1 9\n0000000000000004 - - 1\n");
        std::fs::write(&path, text).unwrap();
        let entries = read_ledger(&path);
        assert_eq!(entries, vec![(JobKey(1), beside), (JobKey(2), alone)]);
        assert!(matches!(decide(&entries[0].1, 1), Choice::Alone(why) if why.contains("0.200%")));
        // Writing job 1 again moves it last, and the file never holds more than the bound.
        write_through(&path, (JobKey(1), beside)).unwrap();
        let keys: Vec<u64> = read_ledger(&path).iter().map(|(k, _)| k.0).collect();
        assert_eq!(keys, [2, 1]);
        // Lines another process wrote, beyond the bound, are cut from the oldest on the next write.
        let mut text = std::fs::read_to_string(&path).unwrap();
        for k in 10..10 + REMEMBERED_JOBS as u64 {
            text.push_str(&(format_line(&(JobKey(k), alone)) + "\n"));
        }
        std::fs::write(&path, text).unwrap();
        write_through(&path, (JobKey(5), alone)).unwrap();
        let entries = read_ledger(&path);
        assert_eq!(entries.len(), REMEMBERED_JOBS);
        assert_eq!(
            (entries[0].0, entries.last().unwrap().0),
            (JobKey(11), JobKey(5))
        );
        // A ledger that cannot be written is an error for the caller to pass over (here a
        // directory stands where the file should be): it reads as empty, and no partial file is
        // left beside it.
        let blocked = dir.join("blocked").join(LEDGER_FILE);
        std::fs::create_dir_all(&blocked).unwrap();
        assert!(write_through(&blocked, (JobKey(1), alone)).is_err());
        assert!(read_ledger(&blocked).is_empty());
        let beside_it = std::fs::read_dir(dir.join("blocked")).unwrap().count();
        assert_eq!(beside_it, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
