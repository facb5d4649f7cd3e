//! `mgws bench`: one workload with mgws, static assignment, rayon and sequentially, for several
//! worker counts, in one process. Every run is verified. Prints a table of tasks/s (min, median
//! and max over the repetitions) with ratios, and writes the samples and the summary as CSV and a
//! plot of tasks/s against workers as SVG.

mod gpu;
mod multi;
mod plot;

pub use gpu::{GpuBenchOpts, SkewBenchOpts};
pub use multi::MultiBenchOpts;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, Subcommand, ValueEnum};
use mgws_tasks::workloads::fib as fib_task;
use mgws_tasks::workloads::uts::{UtsCounts, UtsParams};
use mgws_tasks::TaskStruct;

use crate::baseline;

/// The static-assignment baseline on CPU threads.
const CPU_STATIC: mgws::Backend = mgws::Backend::cpu().method(mgws::Method::Static);
use crate::args::SchedArgs;
use crate::corpus::Corpus;
use crate::workload::args::{ContainsArgs, FibArgs, UtsArgs};
use crate::workload::uts::UtsConfig;
use crate::workload::{contains, fib, uts};
use mgws::error::{Error, Result};
use mgws::report::RunReport;
use mgws::scheduler::Scheduler;

/// The workloads `mgws bench` measures. `--workers` takes a list here; the other scheduler flags
/// are those of `mgws run`.
#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// CONTAINS on a corpus.
    #[command(mut_arg("workers", |a| a.long("sched-workers").hide(true)))]
    Contains {
        #[command(flatten)]
        args: ContainsArgs,
        #[command(flatten)]
        bench: BenchOpts,
        #[command(flatten)]
        sched: SchedArgs,
    },
    /// UTS on a tree.
    #[command(mut_arg("workers", |a| a.long("sched-workers").hide(true)))]
    Uts {
        #[command(flatten)]
        args: UtsArgs,
        #[command(flatten)]
        bench: BenchOpts,
        #[command(flatten)]
        sched: SchedArgs,
    },
    /// FIB(n).
    #[command(mut_arg("workers", |a| a.long("sched-workers").hide(true)))]
    Fib {
        #[command(flatten)]
        args: FibArgs,
        #[command(flatten)]
        bench: BenchOpts,
        #[command(flatten)]
        sched: SchedArgs,
    },
    /// Every workload on one GPU over a sweep of workers per SM: mgws, the lean static kernel
    /// (MEMSET, SKEW), kernel-per-level (UTS, FIB, SKEW) and (MEMSET, with nvcc) the hand-written
    /// CUDA reference; paired ratios, CSV and SVG plots.
    #[command(mut_arg("workers", |a| a.long("sched-workers").hide(true)))]
    Gpu {
        #[command(flatten)]
        opts: GpuBenchOpts,
        #[command(flatten)]
        sched: SchedArgs,
    },
    /// Every workload on 1, 2, 4, ... GPUs, in one process and as GPU PEs: speedups over one GPU
    /// in the same call, PEs against one process, CSV and SVG plots.
    #[command(mut_arg("workers", |a| a.long("sched-workers").hide(true)))]
    Multi {
        #[command(flatten)]
        opts: MultiBenchOpts,
        #[command(flatten)]
        sched: SchedArgs,
    },
    /// SKEW over its knob k: mgws against static assignment with the static run's idle share, on
    /// the CPU (default) or a GPU (`--device cuda`); CSV and an SVG plot.
    Skew {
        #[command(flatten)]
        opts: SkewBenchOpts,
        #[command(flatten)]
        sched: SchedArgs,
    },
    /// Redraw the SVG plot of a `<name>-summary.csv` written by an earlier `mgws bench`.
    Replot {
        /// The summary CSV.
        summary: PathBuf,
        /// The plot's title (default: the workload name in the CSV).
        #[arg(long)]
        title: Option<String>,
        /// The SVG to write (default: the CSV's path with `-summary.csv` replaced by `.svg`).
        #[arg(long)]
        svg: Option<PathBuf>,
    },
}

/// Reads a summary CSV written by [`BenchResult::write`]; returns the workload name and rows.
pub fn read_summary(path: &Path) -> Result<(String, Vec<Summary>)> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
        path: path.display().to_string(),
        source: e,
    })?;
    let bad =
        |line: usize, what: &str| Error::Input(format!("{} line {line}: {what}", path.display()));
    let mut name = String::new();
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 8 {
            return Err(bad(i + 1, "expected 8 comma-separated fields"));
        }
        let method = Method::from_str(f[1], true).map_err(|_| bad(i + 1, "unknown method"))?;
        let num = |k: usize| f[k].parse::<f64>().map_err(|_| bad(i + 1, "not a number"));
        name = f[0].to_string();
        rows.push(Summary {
            method,
            workers: num(2)? as u32,
            reps: num(4)? as usize,
            min: num(5)?,
            median: num(6)?,
            max: num(7)?,
        });
    }
    if rows.is_empty() {
        return Err(bad(1, "no rows"));
    }
    Ok((name, rows))
}

/// How a run is scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum)]
pub enum Method {
    /// The mgws worker loop.
    Mgws,
    /// Baseline static: contiguous shares of the initial tasks, depth-first, no stealing.
    Static,
    /// A rayon pool of the same size (`rayon::join` over the same task functions).
    Rayon,
    /// One thread, no scheduler.
    Sequential,
    /// Baseline levels: level by level, each frontier split evenly over the workers.
    Levels,
}

impl Method {
    /// The method's name in tables and CSV files.
    pub fn name(self) -> &'static str {
        match self {
            Method::Mgws => "mgws",
            Method::Static => "static",
            Method::Rayon => "rayon",
            Method::Sequential => "sequential",
            Method::Levels => "levels",
        }
    }
}

/// Options of `mgws bench`.
#[derive(Args, Debug, Clone)]
pub struct BenchOpts {
    /// Worker counts (threads for static and rayon), comma-separated.
    #[arg(
        long = "workers",
        id = "worker_counts",
        value_delimiter = ',',
        default_value = "1,2"
    )]
    pub workers: Vec<u32>,
    /// Measured repetitions per method and worker count.
    #[arg(long, default_value_t = 5)]
    pub reps: u32,
    /// Unmeasured warm-up repetitions.
    #[arg(long, default_value_t = 1)]
    pub warmup: u32,
    /// Methods to run, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "mgws,static,rayon,sequential"
    )]
    pub methods: Vec<Method>,
    /// Directory for the CSV files and the SVG plot.
    #[arg(long, default_value = "target/bench")]
    pub out: PathBuf,
    /// Name of the output files (default: the workload and its parameters).
    #[arg(long)]
    pub name: Option<String>,
}

/// A workload prepared for repeated runs, with its expected result.
pub enum Prepared {
    Contains {
        corpus: Corpus,
        word: Vec<u8>,
        /// Task structs per worker count (their result table has one row per worker).
        tasks: BTreeMap<u32, Vec<TaskStruct>>,
        expected: u64,
    },
    Uts {
        cfg: UtsConfig,
        /// Boxed: with its table of children the parameters take 12.9 KB.
        params: Box<UtsParams>,
        expected: UtsCounts,
    },
    Fib {
        n: u64,
    },
}

impl Prepared {
    /// The tasks one run executes.
    pub fn tasks(&self) -> u64 {
        match self {
            Prepared::Contains { corpus, .. } => corpus.len() as u64,
            Prepared::Uts { expected, .. } => expected.nodes,
            Prepared::Fib { n } => fib_task::tree_nodes(*n),
        }
    }

    /// A short name for files and titles.
    pub fn name(&self) -> String {
        match self {
            Prepared::Contains { word, corpus, .. } => format!(
                "contains-{}-{}",
                String::from_utf8_lossy(word)
                    .chars()
                    .filter(|c| c.is_alphanumeric())
                    .collect::<String>(),
                corpus.len()
            ),
            Prepared::Uts { cfg, .. } => match cfg.published() {
                Some((name, _)) => format!("uts-{name}"),
                None => format!("uts-{}", cfg.flags().replace(' ', "").replace('-', "_")),
            },
            Prepared::Fib { n } => format!("fib-{n}"),
        }
    }

    /// A one-line description.
    pub fn describe(&self) -> String {
        match self {
            Prepared::Contains {
                corpus,
                word,
                expected,
                ..
            } => format!(
                "CONTAINS {:?}: {} articles, {} bytes, {expected} matches",
                String::from_utf8_lossy(word),
                corpus.len(),
                corpus.bytes.len()
            ),
            Prepared::Uts { cfg, expected, .. } => format!(
                "UTS {}: {} nodes, {} leaves, depth {}",
                cfg.flags(),
                expected.nodes,
                expected.leaves,
                expected.depth
            ),
            Prepared::Fib { n } => format!(
                "FIB({n}) = {}: {} calls",
                fib_task::fib(*n),
                fib_task::tree_nodes(*n)
            ),
        }
    }

    /// Prepares CONTAINS: loads nothing, builds the task structs for every worker count.
    pub fn contains(corpus: Corpus, word: &[u8], workers: &[u32]) -> Result<Prepared> {
        contains::check_input(&corpus, word)?;
        let mut tasks = BTreeMap::new();
        for &w in workers.iter().chain(std::iter::once(&1)) {
            tasks.insert(w, contains::tasks(&corpus, word, w)?);
        }
        let expected = contains::reference_count(&corpus, word);
        Ok(Prepared::Contains {
            corpus,
            word: word.to_vec(),
            tasks,
            expected,
        })
    }

    /// Prepares UTS: the published counts, or a host traversal's.
    pub fn uts(cfg: UtsConfig) -> Result<Prepared> {
        cfg.validate()?;
        let params = cfg.params();
        let expected = match cfg.published() {
            Some((_, c)) => c,
            None => baseline::uts::reference(&params).0,
        };
        Ok(Prepared::Uts {
            cfg,
            params: Box::new(params),
            expected,
        })
    }

    /// Prepares FIB.
    pub fn fib(n: u64) -> Result<Prepared> {
        fib::check_n(n)?;
        Ok(Prepared::Fib { n })
    }

    /// One verified run; returns its time in seconds. `sched` must have `workers` workers.
    ///
    /// `level_capacity` sizes the levels baseline's frontier buffers (`None`: from the memory
    /// available); `cpu_mgws` is the backend of the mgws method (`SchedArgs::cpu_mgws_backend`).
    pub fn run(
        &self,
        method: Method,
        workers: u32,
        sched: &Scheduler,
        pool: &rayon::ThreadPool,
        level_capacity: Option<u64>,
        cpu_mgws: &mgws::Backend,
    ) -> Result<Timing> {
        let cpu_levels = mgws::Backend::cpu().method(mgws::Method::Levels { level_capacity });
        let mismatch = |what: String| {
            Err(Error::Verification(format!(
                "{} with {workers} workers: {what}",
                method.name()
            )))
        };
        match self {
            Prepared::Contains {
                corpus,
                word,
                tasks,
                expected,
            } => {
                let tasks = &tasks[&workers];
                let t = Instant::now();
                let (got, report) = match method {
                    Method::Mgws => {
                        let (m, r) = contains::run_once(sched, cpu_mgws, corpus, word, tasks)?;
                        (m, Some(r))
                    }
                    Method::Static => {
                        let (m, r) = contains::run_once(sched, &CPU_STATIC, corpus, word, tasks)?;
                        (m, Some(r))
                    }
                    Method::Rayon => (baseline::contains::rayon(corpus, word, tasks, pool), None),
                    Method::Sequential => {
                        (baseline::contains::sequential(corpus, word, tasks), None)
                    }
                    Method::Levels => {
                        let (m, r) = contains::run_once(sched, &cpu_levels, corpus, word, tasks)?;
                        (m, Some(r))
                    }
                };
                let timing = Timing::of(report.as_ref(), t);
                if got != *expected {
                    return mismatch(format!("{got} matches, expected {expected}"));
                }
                Ok(timing)
            }
            Prepared::Uts {
                params, expected, ..
            } => {
                let t = Instant::now();
                let (got, report) = match method {
                    Method::Mgws => {
                        let (c, r) = uts::run_once(sched, cpu_mgws, params)?;
                        (c, Some(r))
                    }
                    Method::Static => {
                        let (c, r) = uts::run_once(sched, &CPU_STATIC, params)?;
                        (c, Some(r))
                    }
                    Method::Rayon => (baseline::uts::rayon(params, pool), None),
                    Method::Sequential => (baseline::uts::sequential(params), None),
                    Method::Levels => {
                        let (c, r) = uts::run_once(sched, &cpu_levels, params)?;
                        (c, Some(r))
                    }
                };
                let timing = Timing::of(report.as_ref(), t);
                if got != *expected {
                    return mismatch(format!("{got:?}, expected {expected:?}"));
                }
                Ok(timing)
            }
            Prepared::Fib { n } => {
                let t = Instant::now();
                let (got, report) = match method {
                    Method::Mgws => {
                        let (c, r) = fib::run_once(sched, cpu_mgws, *n)?;
                        (c, Some(r))
                    }
                    Method::Static => {
                        let (c, r) = fib::run_once(sched, &CPU_STATIC, *n)?;
                        (c, Some(r))
                    }
                    Method::Rayon => (baseline::fib::rayon(*n, pool), None),
                    Method::Sequential => (baseline::fib::sequential(*n), None),
                    Method::Levels => {
                        let (c, r) = fib::run_once(sched, &cpu_levels, *n)?;
                        (c, Some(r))
                    }
                };
                let timing = Timing::of(report.as_ref(), t);
                let expected = (fib_task::fib(*n), fib_task::tree_nodes(*n));
                if got != expected {
                    return mismatch(format!("{got:?}, expected {expected:?}"));
                }
                Ok(timing)
            }
        }
    }
}

/// How long one run took, and how well it balanced its workers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub seconds: f64,
    /// [`RunReport::idle_share`]: recorded by the static and levels baselines.
    pub idle_share: Option<f64>,
}

impl Timing {
    /// The backend's own timing when it ran the work (`report`), else the wall time since `t`.
    fn of(report: Option<&RunReport>, t: Instant) -> Timing {
        match report {
            Some(r) => Timing {
                seconds: r.elapsed_s,
                idle_share: r.idle_share(),
            },
            None => Timing {
                seconds: t.elapsed().as_secs_f64(),
                idle_share: None,
            },
        }
    }
}

/// Runs shorter than this are too short to time: `mgws bench` warns about them.
pub const MIN_TIMED_S: f64 = 1e-3;

/// One measured run.
#[derive(Clone, Debug)]
pub struct Sample {
    pub method: Method,
    pub workers: u32,
    pub rep: u32,
    pub seconds: f64,
    pub tasks: u64,
    /// [`Timing::idle_share`].
    pub idle_share: Option<f64>,
}

impl Sample {
    pub fn tasks_per_s(&self) -> f64 {
        self.tasks as f64 / self.seconds.max(1e-12)
    }
}

/// Min, median and max of the tasks/s of one method at one worker count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub method: Method,
    pub workers: u32,
    pub reps: usize,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

/// Summarises samples per (method, workers).
pub fn summarize(samples: &[Sample]) -> Vec<Summary> {
    let mut groups: BTreeMap<(Method, u32), Vec<f64>> = BTreeMap::new();
    for s in samples {
        groups
            .entry((s.method, s.workers))
            .or_default()
            .push(s.tasks_per_s());
    }
    groups
        .into_iter()
        .map(|((method, workers), mut v)| {
            v.sort_by(f64::total_cmp);
            Summary {
                method,
                workers,
                reps: v.len(),
                min: v[0],
                median: median_of_sorted(&v),
                max: v[v.len() - 1],
            }
        })
        .collect()
}

/// The median of a sorted, non-empty slice.
fn median_of_sorted(v: &[f64]) -> f64 {
    if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    }
}

/// The median over repetitions of `method`'s tasks/s divided by `baseline`'s in the same
/// repetition, at `workers` workers; `None` without a common repetition. The repetitions of all
/// methods are interleaved, so each pair ran a few milliseconds apart: on a machine whose speed
/// drifts, this ratio is steadier than the ratio of the two medians.
pub fn paired_ratio(
    samples: &[Sample],
    method: Method,
    baseline: Method,
    workers: u32,
) -> Option<f64> {
    let rate = |m: Method, rep: u32| {
        samples
            .iter()
            .find(|s| s.method == m && s.workers == workers && s.rep == rep)
            .map(Sample::tasks_per_s)
    };
    let mut ratios: Vec<f64> = samples
        .iter()
        .filter(|s| s.method == method && s.workers == workers)
        .filter_map(|s| Some(s.tasks_per_s() / rate(baseline, s.rep).filter(|b| *b > 0.0)?))
        .collect();
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    Some(median_of_sorted(&ratios))
}

/// The median over repetitions of [`Sample::idle_share`] of `method` at `workers` workers;
/// `None` where no run recorded it.
pub fn median_idle_share(samples: &[Sample], method: Method, workers: u32) -> Option<f64> {
    let mut v: Vec<f64> = samples
        .iter()
        .filter(|s| s.method == method && s.workers == workers)
        .filter_map(|s| s.idle_share)
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(median_of_sorted(&v))
}

/// The measurements of one `mgws bench` invocation.
pub struct BenchResult {
    pub name: String,
    pub title: String,
    pub lanes: u32,
    pub samples: Vec<Sample>,
    pub summary: Vec<Summary>,
    /// Methods left out, and why.
    pub notes: Vec<String>,
}

/// Runs the benchmark: `reps` measured repetitions (after `warmup` ones) of every method at every
/// worker count, interleaved so that slow drifts of the machine hit all methods alike.
pub fn measure(work: &Prepared, opts: &BenchOpts, sched_args: &SchedArgs) -> Result<BenchResult> {
    if opts.workers.is_empty() || opts.workers.contains(&0) {
        return Err(Error::Config(
            "--workers needs a list of positive worker counts".into(),
        ));
    }
    if opts.reps == 0 {
        return Err(Error::Config("--reps must be at least 1".into()));
    }
    // Every method runs on the CPU. `auto` means the CPU here even where a GPU is usable:
    // resolved to CUDA, the defaults would be the GPU's (32 lanes per worker, that is 32 threads
    // per CPU worker).
    let mut sched_args = sched_args.clone();
    sched_args.device = crate::args::DeviceArg::Cpu;
    let cpu_mgws = sched_args.cpu_mgws_backend();
    let mut setups = Vec::new();
    for &w in &opts.workers {
        let mut a = sched_args.clone();
        a.workers = Some(w);
        // On the CPU the defaults left open do not depend on the registry.
        let sched = a.scheduler::<mgws_tasks::MemsetTasks>()?;
        // The static baseline runs one thread per worker, whatever the mgws lanes.
        a.lanes = Some(1);
        let one_lane = a.scheduler::<mgws_tasks::MemsetTasks>()?;
        let pool = baseline::rayon_pool(w, sched.pin_threads())?;
        setups.push((w, sched, one_lane, pool));
    }
    let lanes = setups[0].1.lanes();
    let per_rep: u64 = opts
        .methods
        .iter()
        .map(|&m| {
            if m == Method::Sequential {
                1
            } else {
                setups.len() as u64
            }
        })
        .sum();
    let total = per_rep * (opts.reps + opts.warmup) as u64;
    let bar = indicatif::ProgressBar::new(total);
    let mut warned_short = false;
    let mut skipped: BTreeMap<Method, String> = BTreeMap::new();
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs, eta {eta} {msg}",
        )
        .expect("a valid progress template"),
    );
    let mut samples = Vec::new();
    for rep in 0..opts.warmup + opts.reps {
        let measured = rep >= opts.warmup;
        for &method in &opts.methods {
            for (i, (w, sched, one_lane, pool)) in setups.iter().enumerate() {
                if method == Method::Sequential && i > 0 {
                    continue;
                }
                if skipped.contains_key(&method) {
                    continue;
                }
                let w = if method == Method::Sequential { 1 } else { *w };
                bar.set_message(format!(
                    "{} x{w}{}",
                    method.name(),
                    if measured { "" } else { " (warm-up)" }
                ));
                let sched = if matches!(method, Method::Static | Method::Levels) {
                    one_lane
                } else {
                    sched
                };
                let capacity = sched_args.level_capacity;
                let timing = match work.run(method, w, sched, pool, capacity, &cpu_mgws) {
                    Ok(t) => t,
                    // A baseline that cannot hold this workload (the levels baseline's frontier
                    // buffers, sized from the memory there is) is left out, with the reason;
                    // mgws failing fails the bench.
                    Err(e @ (Error::Input(_) | Error::OutOfMemory { .. } | Error::Config(_)))
                        if matches!(method, Method::Levels | Method::Static) =>
                    {
                        let why = format!("{} not measured: {e}", method.name());
                        bar.suspend(|| eprintln!("mgws: warning: bench: {why}"));
                        skipped.insert(method, why);
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                bar.inc(1);
                if measured && timing.seconds < MIN_TIMED_S && !warned_short {
                    // Once per bench: every shorter run is as untrustworthy.
                    warned_short = true;
                    bar.suspend(|| {
                        eprintln!(
                            "mgws: warning: bench: {} at {w} workers ran {:.0} µs, too short to \
                             time reliably (under 1 ms); use a larger workload",
                            method.name(),
                            timing.seconds * 1e6
                        )
                    });
                }
                if measured {
                    samples.push(Sample {
                        method,
                        workers: w,
                        rep: rep - opts.warmup,
                        seconds: timing.seconds,
                        tasks: work.tasks(),
                        idle_share: timing.idle_share,
                    });
                }
            }
        }
    }
    bar.finish_and_clear();
    let summary = summarize(&samples);
    Ok(BenchResult {
        name: opts.name.clone().unwrap_or_else(|| work.name()),
        title: match sched_args.processes {
            Some(p) => format!("{}, mgws over {p} PE processes", work.describe()),
            None => work.describe(),
        },
        lanes,
        samples,
        summary,
        notes: skipped.into_values().collect(),
    })
}

impl BenchResult {
    fn find(&self, method: Method, workers: u32) -> Option<&Summary> {
        self.summary
            .iter()
            .find(|s| s.method == method && s.workers == workers)
    }

    /// The table `mgws bench` prints.
    pub fn table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "{} (lanes per mgws worker: {}; tasks/s over {} reps)",
            self.title,
            self.lanes,
            self.summary.first().map_or(0, |s| s.reps)
        );
        let _ = writeln!(
            t,
            "{:>7}  {:<10}  {:>11}  {:>11}  {:>11}  {:>9}  {:>9}  {:>9}",
            "workers", "method", "min", "median", "max", "/static", "/rayon", "speedup"
        );
        let seq = self
            .summary
            .iter()
            .find(|s| s.method == Method::Sequential)
            .map(|s| s.median);
        let ratio = |a: f64, b: Option<f64>| match b {
            Some(b) if b > 0.0 => format!("{:.2}", a / b),
            _ => "-".into(),
        };
        for s in &self.summary {
            let (vs_static, vs_rayon) = if s.method == Method::Mgws {
                (
                    ratio(
                        s.median,
                        self.find(Method::Static, s.workers).map(|x| x.median),
                    ),
                    ratio(
                        s.median,
                        self.find(Method::Rayon, s.workers).map(|x| x.median),
                    ),
                )
            } else {
                ("".into(), "".into())
            };
            let _ = writeln!(
                t,
                "{:>7}  {:<10}  {:>11.4e}  {:>11.4e}  {:>11.4e}  {:>9}  {:>9}  {:>9}",
                if s.method == Method::Sequential {
                    "-".to_string()
                } else {
                    s.workers.to_string()
                },
                s.method.name(),
                s.min,
                s.median,
                s.max,
                vs_static,
                vs_rayon,
                ratio(s.median, seq)
            );
        }
        for baseline in [Method::Static, Method::Rayon] {
            let paired: Vec<String> = self
                .summary
                .iter()
                .filter(|s| s.method == Method::Mgws)
                .filter_map(|s| {
                    paired_ratio(&self.samples, Method::Mgws, baseline, s.workers)
                        .map(|r| format!("{} workers {r:.3}", s.workers))
                })
                .collect();
            if !paired.is_empty() {
                let _ = writeln!(
                    t,
                    "mgws/{}, median of per-repetition ratios: {}",
                    baseline.name(),
                    paired.join(", ")
                );
            }
        }
        for (method, wait) in [
            (
                Method::Static,
                "after their share until the last one finished",
            ),
            (Method::Levels, "at the level barriers"),
        ] {
            let balance: Vec<String> = self
                .summary
                .iter()
                .filter(|s| s.workers > 1 && s.method == method)
                .filter_map(|s| {
                    median_idle_share(&self.samples, s.method, s.workers)
                        .map(|f| format!("{} workers {f:.3}", s.workers))
                })
                .collect();
            if !balance.is_empty() {
                let _ = writeln!(
                    t,
                    "{}: workers' mean wait {wait}, median share of the run (0 = balanced): {}",
                    method.name(),
                    balance.join(", ")
                );
            }
        }
        for note in &self.notes {
            let _ = writeln!(t, "note: {note}");
        }
        t
    }

    /// Writes `<name>-samples.csv`, `<name>-summary.csv` and `<name>.svg` to `dir`; returns the
    /// paths written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let io = |p: &Path, e: std::io::Error| Error::Io {
            path: p.display().to_string(),
            source: e,
        };
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let samples_path = dir.join(format!("{}-samples.csv", self.name));
        let mut csv = String::from(
            "workload,method,workers,lanes,rep,seconds,tasks,tasks_per_s,idle_share\n",
        );
        for s in &self.samples {
            let _ = writeln!(
                csv,
                "{},{},{},{},{},{:.6},{},{:.1},{}",
                self.name,
                s.method.name(),
                s.workers,
                self.lanes,
                s.rep,
                s.seconds,
                s.tasks,
                s.tasks_per_s(),
                s.idle_share.map_or(String::new(), |f| format!("{f:.4}"))
            );
        }
        std::fs::write(&samples_path, csv).map_err(|e| io(&samples_path, e))?;
        let summary_path = dir.join(format!("{}-summary.csv", self.name));
        let mut csv = String::from(
            "workload,method,workers,lanes,reps,min_tasks_per_s,median_tasks_per_s,max_tasks_per_s\n",
        );
        for s in &self.summary {
            let _ = writeln!(
                csv,
                "{},{},{},{},{},{:.1},{:.1},{:.1}",
                self.name,
                s.method.name(),
                s.workers,
                self.lanes,
                s.reps,
                s.min,
                s.median,
                s.max
            );
        }
        std::fs::write(&summary_path, csv).map_err(|e| io(&summary_path, e))?;
        let svg_path = dir.join(format!("{}.svg", self.name));
        plot::tasks_per_s(&svg_path, &self.title, &self.summary)
            .map_err(|e| Error::Input(format!("drawing {}: {e}", svg_path.display())))?;
        Ok(vec![samples_path, summary_path, svg_path])
    }
}

/// `mgws bench ...`: returns the exit code.
pub fn main(cmd: BenchCmd) -> Result<i32> {
    let (work, opts, sched) = match cmd {
        BenchCmd::Contains { args, bench, sched } => {
            let corpus = args.load()?;
            (
                Prepared::contains(corpus, args.word.as_bytes(), &bench.workers)?,
                bench,
                sched,
            )
        }
        BenchCmd::Uts { args, bench, sched } => (Prepared::uts(args.config()?)?, bench, sched),
        BenchCmd::Fib { args, bench, sched } => (Prepared::fib(args.n)?, bench, sched),
        BenchCmd::Gpu { opts, sched } => return gpu::gpu(&opts, &sched),
        BenchCmd::Skew { opts, sched } => return gpu::skew_study(&opts, &sched),
        BenchCmd::Multi { opts, sched } => return multi::multi(&opts, &sched),
        BenchCmd::Replot {
            summary,
            title,
            svg,
        } => {
            let (name, rows) = read_summary(&summary)?;
            let svg = svg.unwrap_or_else(|| {
                let s = summary.display().to_string();
                PathBuf::from(s.strip_suffix("-summary.csv").unwrap_or(&s).to_string() + ".svg")
            });
            plot::tasks_per_s(&svg, title.as_deref().unwrap_or(&name), &rows)
                .map_err(|e| Error::Input(format!("drawing {}: {e}", svg.display())))?;
            return finish(false, &name, "", serde_json::Value::Null, &[svg]);
        }
    };
    if !matches!(
        sched.device,
        crate::args::DeviceArg::Cpu | crate::args::DeviceArg::Auto
    ) {
        return Err(Error::BackendUnavailable(
            "mgws bench measures the CPU backend only".into(),
        ));
    }
    if sched.method != crate::args::MethodArg::Mgws {
        return Err(Error::Config(
            "mgws bench runs every method itself (mgws, static, levels): --method does not apply"
                .into(),
        ));
    }
    // An output directory that cannot be made fails now, not after the measurements.
    std::fs::create_dir_all(&opts.out).map_err(|e| Error::Io {
        path: opts.out.display().to_string(),
        source: e,
    })?;
    let result = measure(&work, &opts, &sched)?;
    let written = result.write(&opts.out)?;
    let rows: Vec<serde_json::Value> = result
        .summary
        .iter()
        .map(|s| {
            serde_json::json!({
                "method": s.method.name(),
                "workers": s.workers,
                "reps": s.reps,
                "tasks_per_s": { "min": s.min, "median": s.median, "max": s.max },
            })
        })
        .collect();
    finish(
        sched.json,
        &result.name,
        &result.table(),
        rows.into(),
        &written,
    )
}

/// Prints a bench's result: its table and the files written as text, or under `--json` one
/// object `{"bench", "rows", "files"}`. Returns the exit code.
pub(crate) fn finish(
    json: bool,
    name: &str,
    table: &str,
    rows: serde_json::Value,
    written: &[PathBuf],
) -> Result<i32> {
    let files: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    if json {
        crate::output::json(&serde_json::json!({
            "bench": name,
            "rows": rows,
            "files": files,
        }))?;
    } else {
        let mut text = table.to_string();
        for f in &files {
            text += &format!("wrote {f}\n");
        }
        crate::output::emit(&text)?;
    }
    Ok(crate::output::EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(method: Method, workers: u32, rep: u32, seconds: f64) -> Sample {
        Sample {
            method,
            workers,
            rep,
            seconds,
            tasks: 1000,
            idle_share: None,
        }
    }

    #[test]
    fn balance_is_the_median_idle_share() {
        let mut samples = Vec::new();
        for (rep, f) in [(0, 0.5), (1, 0.1), (2, 0.2)] {
            samples.push(Sample {
                idle_share: Some(f),
                ..sample(Method::Static, 2, rep, 1.0)
            });
            samples.push(sample(Method::Rayon, 2, rep, 1.0));
        }
        assert_eq!(median_idle_share(&samples, Method::Static, 2), Some(0.2));
        assert_eq!(median_idle_share(&samples, Method::Rayon, 2), None);
        let result = BenchResult {
            name: "t".into(),
            title: "T".into(),
            lanes: 1,
            summary: summarize(&samples),
            samples,
            notes: Vec::new(),
        };
        assert!(
            result
                .table()
                .contains("median share of the run (0 = balanced): 2 workers 0.200\n"),
            "{}",
            result.table()
        );
    }

    #[test]
    fn paired_ratios_compare_each_repetition_with_its_own_baseline_run() {
        // The machine halves its speed after rep 1: mgws is 10% faster in every repetition, but
        // the medians alone would mix fast and slow repetitions.
        let mut samples = Vec::new();
        for (rep, slow) in [(0, 1.0), (1, 1.0), (2, 2.0), (3, 2.0), (4, 2.0)] {
            samples.push(sample(Method::Mgws, 2, rep, 1.0 * slow / 1.1));
            samples.push(sample(Method::Static, 2, rep, 1.0 * slow));
        }
        let r = paired_ratio(&samples, Method::Mgws, Method::Static, 2).unwrap();
        assert!((r - 1.1).abs() < 1e-9, "{r}");
        // No rayon samples, and no samples at 1 worker: nothing to pair.
        assert_eq!(paired_ratio(&samples, Method::Mgws, Method::Rayon, 2), None);
        assert_eq!(
            paired_ratio(&samples, Method::Mgws, Method::Static, 1),
            None
        );
        // An even number of ratios (five of 1.1, one of 2.0): the middle two are 1.1.
        samples.push(sample(Method::Mgws, 2, 5, 1.0));
        samples.push(sample(Method::Static, 2, 5, 2.0));
        let r = paired_ratio(&samples, Method::Mgws, Method::Static, 2).unwrap();
        assert!((r - 1.1).abs() < 1e-9, "{r}");
    }
}
