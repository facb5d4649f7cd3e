//! `mgws bench gpu`: every workload on one GPU against its baselines over a sweep of workers per
//! SM, in one process: mgws, the lean static kernel (workloads with many initial tasks: MEMSET,
//! SKEW), kernel-per-level (the spawning ones) and, for MEMSET, the hand-written CUDA reference
//! (`cli/reference/static_memset.cu`, compiled with nvcc when nvcc is found): block-per-task over
//! the same workers (`reference`) and flat thread-per-task, one launch whatever the workers,
//! reading each task (`reference-flat`) or making it from a template as mgws's workers make
//! MEMSET's indexed tasks (`reference-flat-indexed`), each once per repetition, at workers 0 in
//! the CSV and in every row of the table. Every run is verified; repetitions are interleaved, and a ratio is the median over
//! repetitions of mgws's rate over the baseline's in the same repetition.
//!
//! `mgws bench skew`: the SKEW workload over its knob `k` on the CPU or a GPU: mgws against static
//! assignment, with the static run's idle share.
//!
//! Both write the runs as CSV and plots as SVG.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;
use plotters::prelude::*;

use crate::args::{DeviceArg, MethodArg, SchedArgs};
use crate::workload::skew::SkewConfig;
use crate::workload::uts::{Preset, UtsConfig};
use crate::workload::{fib, memset, skew, uts, Outcome};
use mgws::error::{Error, Result};

/// The CUDA source of the hand-written reference, embedded so that the bench needs only nvcc.
const REFERENCE_CU: &str = include_str!("../../reference/static_memset.cu");

/// Options of `mgws bench gpu`.
#[derive(Args, Debug, Clone)]
pub struct GpuBenchOpts {
    /// Workers per SM to sweep (workers = SMs x this), comma-separated (22: where the lean
    /// static MEMSET kernel peaked on an H200, and at most 23 of MEMSET's mgws workers fit).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,22,24,32")]
    pub workers_per_sm: Vec<u32>,
    /// Workloads, comma-separated: memset, uts-t1l, uts-t1, uts-t3, uts-t5, fib, skew.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "memset,uts-t1l,uts-t3,fib,skew"
    )]
    pub workloads: Vec<String>,
    /// Measured repetitions of each run.
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// MEMSET tasks.
    #[arg(long, default_value_t = 1 << 26)]
    pub memset_tasks: u64,
    /// FIB's n.
    #[arg(long, default_value_t = 30)]
    pub fib_n: u64,
    /// SKEW: tasks, k and bits.
    #[arg(long, default_value_t = 1 << 18)]
    pub skew_tasks: u64,
    #[arg(long, default_value_t = 3)]
    pub skew_k: u32,
    #[arg(long, default_value_t = 12)]
    pub skew_bits: u32,
    /// Directory for the CSV and the SVG plots.
    #[arg(long, default_value = "target/bench-gpu")]
    pub out: PathBuf,
}

/// Options of `mgws bench skew`.
#[derive(Args, Debug, Clone)]
pub struct SkewBenchOpts {
    /// Values of the knob k, comma-separated.
    #[arg(long = "k", value_delimiter = ',', default_value = "0,1,2,3,4,5,6")]
    pub ks: Vec<u32>,
    /// Tasks per run.
    #[arg(long, default_value_t = 1 << 16)]
    pub tasks: u64,
    /// Bits of a cost word.
    #[arg(long, default_value_t = 12)]
    pub bits: u32,
    /// Measured repetitions per k.
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// Directory for the CSV and the SVG plot.
    #[arg(long, default_value = "target/bench-skew")]
    pub out: PathBuf,
}

/// One measured run.
#[derive(Clone, Debug)]
struct Row {
    workload: String,
    method: &'static str,
    /// Workers per SM (GPU sweep) or k (skew study).
    x: u32,
    workers: u32,
    rep: u32,
    tasks_per_s: f64,
    idle_share: Option<f64>,
    verified: bool,
}

/// The methods of the GPU sweep, each a kernel of the CUDA backend.
const KERNELS: [(&str, MethodArg); 3] = [
    ("mgws", MethodArg::Mgws),
    ("static", MethodArg::Static),
    ("levels", MethodArg::Levels),
];

/// The flat thread-per-task reference: one run per repetition, the same at every x.
const FLAT: &str = "reference-flat";

/// The flat reference making task `i` from a template, as mgws's workers make an indexed job's
/// (MEMSET's): one run per repetition, the same at every x.
const FLAT_INDEXED: &str = "reference-flat-indexed";

/// Whether `method` runs once per repetition, whatever the workers (the flat references).
fn once_per_rep(method: &str) -> bool {
    method == FLAT || method == FLAT_INDEXED
}

/// The baselines mgws is compared with, in the table's order.
const BASELINES: [&str; 5] = ["static", "levels", "reference", FLAT, FLAT_INDEXED];

/// Whether the sweep runs `kernel` on `workload`. MEMSET spawns nothing, so its one level is the
/// static split. UTS and FIB start from one root task, which the static split gives to one block:
/// it would run the whole tree alone (T1L for minutes), and compares nothing.
fn method_applies(workload: &str, kernel: MethodArg) -> bool {
    match kernel {
        MethodArg::Levels => workload != "memset",
        MethodArg::Static => !(workload.starts_with("uts-") || workload == "fib"),
        MethodArg::Mgws => true,
    }
}

/// Runs `workload` once with the flags `a`.
fn run_workload(name: &str, a: &SchedArgs, o: &GpuBenchOpts) -> Result<Outcome> {
    use mgws_tasks::{FibTasks, MemsetTasks, SkewTasks, UtsTasks};
    let preset = UtsConfig::preset;
    match name {
        "memset" => memset::run(
            &a.scheduler::<MemsetTasks>()?,
            &a.backend::<MemsetTasks>()?,
            o.memset_tasks,
        ),
        "uts-t1l" | "uts-t1" | "uts-t3" | "uts-t5" => {
            let cfg = preset(match name {
                "uts-t1l" => Preset::T1L,
                "uts-t1" => Preset::T1,
                "uts-t3" => Preset::T3,
                _ => Preset::T5,
            });
            uts::run(&a.scheduler::<UtsTasks>()?, &a.backend::<UtsTasks>()?, &cfg)
        }
        "fib" => fib::run(
            &a.scheduler::<FibTasks>()?,
            &a.backend::<FibTasks>()?,
            o.fib_n,
        ),
        "skew" => skew::run(
            &a.scheduler::<SkewTasks>()?,
            &a.backend::<SkewTasks>()?,
            &SkewConfig {
                tasks: o.skew_tasks,
                k: o.skew_k,
                bits: o.skew_bits,
                seed: 1,
            },
        ),
        other => Err(Error::Config(format!(
            "unknown workload `{other}` for mgws bench gpu; expected memset, uts-t1l, uts-t1, \
             uts-t3, uts-t5, fib or skew"
        ))),
    }
}

/// Whether the error says that the workers do not all fit on the GPU at once.
fn does_not_fit(e: &Error) -> bool {
    matches!(e, Error::Config(m) if m.contains("do not fit"))
}

/// `mgws bench gpu`.
pub fn gpu(opts: &GpuBenchOpts, sched: &SchedArgs) -> Result<i32> {
    if opts.reps == 0 || opts.workers_per_sm.is_empty() || opts.workers_per_sm.contains(&0) {
        return Err(Error::Config(
            "--reps and every --workers-per-sm must be at least 1".into(),
        ));
    }
    let cuda = sched.cuda()?;
    let sms = cuda.sm_count().map_err(|e| match e {
        Error::BackendUnavailable(m) | Error::Cuda(m) => {
            Error::BackendUnavailable(format!("mgws bench gpu needs a CUDA GPU: {m}"))
        }
        other => other,
    })?;
    let (major, minor) = cuda.compute_capability()?;
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| Error::Input(format!("creating {}: {e}", opts.out.display())))?;
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for workload in &opts.workloads {
        for &per_sm in &opts.workers_per_sm {
            let workers = sms * per_sm;
            for rep in 0..opts.reps {
                for (method, kernel) in KERNELS {
                    if !method_applies(workload, kernel) {
                        continue;
                    }
                    let mut a = sched.clone();
                    a.device = DeviceArg::Cuda;
                    a.method = kernel;
                    a.workers = Some(workers);
                    match run_workload(workload, &a, opts) {
                        Ok(o) => {
                            if !o.verified {
                                return Err(Error::Verification(format!(
                                    "{workload} with {method} at {workers} workers: {}",
                                    o.check
                                )));
                            }
                            rows.push(Row {
                                workload: workload.clone(),
                                method,
                                x: per_sm,
                                workers,
                                rep,
                                tasks_per_s: o.report.tasks_per_s(),
                                idle_share: o.report.idle_share(),
                                verified: true,
                            });
                        }
                        Err(e @ Error::Verification(_)) => return Err(e),
                        Err(e) => {
                            // A configuration this kernel cannot run (too many workers for its
                            // registers, a frontier beyond memory): a note, and the sweep goes on.
                            if rep == 0 {
                                let why = if does_not_fit(&e) {
                                    "does not fit"
                                } else {
                                    "failed"
                                };
                                notes.push(format!(
                                    "{workload}: {method} at {per_sm} per SM: {why}: {e}"
                                ));
                            }
                        }
                    }
                }
            }
        }
        if workload == "memset" {
            let list: Vec<u32> = opts.workers_per_sm.iter().map(|p| p * sms).collect();
            match reference(
                &opts.out,
                (major, minor),
                opts.memset_tasks,
                &list,
                opts.reps,
            ) {
                Ok(runs) => {
                    for (method, rep, workers, rate, bad) in runs {
                        if bad != 0 {
                            return Err(Error::Verification(if once_per_rep(method) {
                                format!("{method} lost or duplicated {bad} slots")
                            } else {
                                format!(
                                    "the reference lost or duplicated {bad} slots at {workers} \
                                     workers"
                                )
                            }));
                        }
                        rows.push(Row {
                            workload: workload.clone(),
                            method,
                            x: workers / sms,
                            workers,
                            rep,
                            tasks_per_s: rate,
                            idle_share: None,
                            verified: true,
                        });
                    }
                }
                Err(why) => {
                    eprintln!("mgws: bench gpu: reference: not run: {why}");
                    notes.push(format!("reference: not run: {why}"));
                }
            }
        }
    }
    let table = table(&rows, &notes, "workers/SM") + &best_against_best(&rows);
    let mut written = vec![write_csv(&opts.out.join("gpu-runs.csv"), &rows)?];
    std::fs::write(opts.out.join("gpu-table.txt"), &table)
        .map_err(|e| Error::Input(format!("writing {}: {e}", opts.out.display())))?;
    for workload in &opts.workloads {
        let mine: Vec<Row> = rows
            .iter()
            .filter(|r| &r.workload == workload)
            .cloned()
            .collect();
        if mine.is_empty() {
            continue;
        }
        written.push(plot_rates(&opts.out, workload, &mine, "workers per SM")?);
        written.push(plot_speedups(&opts.out, workload, &mine, "workers per SM")?);
    }
    super::finish(sched.json, "gpu", &table, rows_json(&rows), &written)
}

/// The rows of a GPU sweep or skew study as JSON.
fn rows_json(rows: &[Row]) -> serde_json::Value {
    rows.iter()
        .map(|r| {
            serde_json::json!({
                "workload": r.workload,
                "method": r.method,
                "x": r.x,
                "workers": r.workers,
                "rep": r.rep,
                "tasks_per_s": r.tasks_per_s,
                "idle_share": r.idle_share,
                "verified": r.verified,
            })
        })
        .collect::<Vec<_>>()
        .into()
}

/// `mgws bench skew`: mgws against static assignment over k, on the backend of `sched` (the CPU
/// unless `--device cuda`).
pub fn skew_study(opts: &SkewBenchOpts, sched: &SchedArgs) -> Result<i32> {
    use mgws_tasks::SkewTasks;
    if opts.reps == 0 || opts.ks.is_empty() {
        return Err(Error::Config(
            "--reps and --k need at least one value".into(),
        ));
    }
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| Error::Input(format!("creating {}: {e}", opts.out.display())))?;
    let on_gpu = sched.device == DeviceArg::Cuda;
    let mut rows = Vec::new();
    for &k in &opts.ks {
        let cfg = SkewConfig {
            tasks: opts.tasks,
            k,
            bits: opts.bits,
            seed: 1,
        };
        cfg.check()?;
        for rep in 0..opts.reps {
            for (method, kernel) in [("mgws", MethodArg::Mgws), ("static", MethodArg::Static)] {
                let mut a = sched.clone();
                a.method = kernel;
                if !on_gpu {
                    a.device = DeviceArg::Cpu;
                    if kernel == MethodArg::Static {
                        // The CPU's static baseline runs in this one process.
                        a.processes = None;
                    }
                }
                let s = a.scheduler::<SkewTasks>()?;
                let o = skew::run(&s, &a.backend::<SkewTasks>()?, &cfg)?;
                if !o.verified {
                    return Err(Error::Verification(format!(
                        "skew k={k} {method}: {}",
                        o.check
                    )));
                }
                rows.push(Row {
                    workload: "skew".into(),
                    method,
                    x: k,
                    workers: s.workers(),
                    rep,
                    tasks_per_s: o.report.tasks_per_s(),
                    idle_share: o.report.idle_share(),
                    verified: true,
                });
            }
        }
    }
    let table = table(&rows, &[], "k");
    let device = if on_gpu { "gpu" } else { "cpu" };
    let mut written = vec![write_csv(
        &opts.out.join(format!("skew-{device}-runs.csv")),
        &rows,
    )?];
    written.push(plot_skew(
        &opts.out.join(format!("skew-{device}.svg")),
        device,
        &rows,
    )?);
    super::finish(sched.json, "skew", &table, rows_json(&rows), &written)
}

/// One run of the reference: `(method, rep, workers, tasks/s, bad slots)`.
type RefRun = (&'static str, u32, u32, f64, u64);

/// Builds and runs the hand-written reference.
fn reference(
    out: &Path,
    cc: (i32, i32),
    tasks: u64,
    workers: &[u32],
    reps: u32,
) -> std::result::Result<Vec<RefRun>, String> {
    let nvcc = find_nvcc().ok_or("nvcc not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)")?;
    let src = out.join("static_memset.cu");
    let bin = out.join("static_memset");
    std::fs::write(&src, REFERENCE_CU).map_err(|e| format!("writing {}: {e}", src.display()))?;
    let arch = format!("-arch=sm_{}{}", cc.0, cc.1);
    let built = Command::new(&nvcc)
        .args(["-O3", &arch, "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .map_err(|e| format!("running {}: {e}", nvcc.display()))?;
    if !built.status.success() {
        return Err(format!(
            "nvcc failed: {}",
            String::from_utf8_lossy(&built.stderr).trim()
        ));
    }
    let list: Vec<String> = workers.iter().map(u32::to_string).collect();
    let ran = Command::new(&bin)
        .arg(tasks.to_string())
        .arg(list.join(","))
        .arg(reps.to_string())
        .output()
        .map_err(|e| format!("running {}: {e}", bin.display()))?;
    if !ran.status.success() {
        return Err(format!(
            "the reference failed: {}",
            String::from_utf8_lossy(&ran.stderr).trim()
        ));
    }
    Ok(parse_reference(&String::from_utf8_lossy(&ran.stdout)))
}

/// The blockwise (`reference`) and flat (`reference-flat`, workers 0) runs of the reference's
/// output, numbering repetitions by the order in which each method and worker count recurs.
/// Skipped runs are left out.
fn parse_reference(text: &str) -> Vec<RefRun> {
    let mut seen: Vec<(&str, u32, u32)> = Vec::new();
    let mut runs = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.trim().split(',').collect();
        if f.len() != 5 || f[0] != "reference" {
            continue;
        }
        let method = match f[1] {
            "blockwise" => "reference",
            "flat" => FLAT,
            "flat-indexed" => FLAT_INDEXED,
            _ => continue,
        };
        let (Ok(workers), Ok(rate), Ok(bad)) = (
            f[2].parse::<u32>(),
            f[3].parse::<f64>(),
            f[4].parse::<u64>(),
        ) else {
            continue;
        };
        let rep = match seen
            .iter_mut()
            .find(|(m, w, _)| *m == method && *w == workers)
        {
            Some((_, _, n)) => {
                *n += 1;
                *n - 1
            }
            None => {
                seen.push((method, workers, 1));
                0
            }
        };
        runs.push((method, rep, workers, rate, bad));
    }
    runs
}

fn find_nvcc() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("CUDA_HOME") {
        dirs.push(PathBuf::from(home).join("bin"));
    }
    dirs.push("/usr/local/cuda/bin".into());
    dirs.into_iter()
        .map(|d| d.join("nvcc"))
        .find(|p| p.is_file())
}

pub(super) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Whether `r` counts at `x`: its own x, or every x for the flat reference.
fn at(r: &Row, x: u32) -> bool {
    r.x == x || once_per_rep(r.method)
}

/// Median tasks/s of `method` at `x`.
fn rate(rows: &[Row], workload: &str, method: &str, x: u32) -> Option<f64> {
    median(
        rows.iter()
            .filter(|r| r.workload == workload && r.method == method && at(r, x))
            .map(|r| r.tasks_per_s)
            .collect(),
    )
}

/// Median over repetitions of mgws's rate over `baseline`'s in the same repetition.
fn paired(rows: &[Row], workload: &str, baseline: &str, x: u32) -> Option<f64> {
    let of = |m: &str, rep: u32| {
        rows.iter()
            .find(|r| r.workload == workload && r.method == m && at(r, x) && r.rep == rep)
            .map(|r| r.tasks_per_s)
    };
    median(
        rows.iter()
            .filter(|r| r.workload == workload && r.method == "mgws" && r.x == x)
            .filter_map(|r| Some(r.tasks_per_s / of(baseline, r.rep)?))
            .collect(),
    )
}

/// The workloads of `rows`, in the order they ran.
fn workloads(rows: &[Row]) -> Vec<&str> {
    let mut workloads: Vec<&str> = rows.iter().map(|r| r.workload.as_str()).collect();
    workloads.dedup();
    workloads
}

fn xs(rows: &[Row], workload: &str) -> Vec<u32> {
    let mut xs: Vec<u32> = rows
        .iter()
        .filter(|r| r.workload == workload && !once_per_rep(r.method))
        .map(|r| r.x)
        .collect();
    xs.sort_unstable();
    xs.dedup();
    xs
}

/// The table: median tasks/s per method and the paired ratios of mgws.
fn table(rows: &[Row], notes: &[String], x_name: &str) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        concat!(
            "{:<9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            " {:>9} {:>9} {:>9} {:>9} {:>10} {:>11}"
        ),
        "workload",
        x_name,
        "mgws",
        "static",
        "levels",
        "reference",
        "ref-flat",
        "ref-index",
        "static idle",
        "/static",
        "/levels",
        "/ref",
        "/ref-flat",
        "/ref-index",
        "workers"
    );
    for w in workloads(rows) {
        for x in xs(rows, w) {
            let cell = |m| rate(rows, w, m, x).map_or("-".into(), |r| format!("{r:.3e}"));
            let ratio = |b| paired(rows, w, b, x).map_or("-".into(), |r| format!("{r:.2}x"));
            let idle = median(
                rows.iter()
                    .filter(|r| r.workload == w && r.method == "static" && r.x == x)
                    .filter_map(|r| r.idle_share)
                    .collect(),
            )
            .map_or("-".into(), |i| format!("{:.1}%", i * 100.0));
            let workers = rows
                .iter()
                .find(|r| r.workload == w && r.x == x)
                .map_or(0, |r| r.workers);
            let _ = writeln!(
                t,
                concat!(
                    "{:<9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
                    " {:>9} {:>9} {:>9} {:>9} {:>10} {:>11}"
                ),
                w,
                x,
                cell("mgws"),
                cell("static"),
                cell("levels"),
                cell("reference"),
                cell(FLAT),
                cell(FLAT_INDEXED),
                idle,
                ratio("static"),
                ratio("levels"),
                ratio("reference"),
                ratio(FLAT),
                ratio(FLAT_INDEXED),
                workers
            );
        }
    }
    for n in notes {
        let _ = writeln!(t, "note: {n}");
    }
    t
}

/// One line per workload: each method's fastest median over the sweep and where, and mgws's over
/// each baseline's. The methods peak at different workers per SM (the lean static MEMSET kernel
/// ran fastest at 22 of 32, docs/results.md), so a ratio at one count can flatter either side.
fn best_against_best(rows: &[Row]) -> String {
    let mut t = String::new();
    for w in workloads(rows) {
        // (median rate, workers per SM) at the method's fastest count; the flat reference runs
        // once per repetition whatever the count.
        let best = |m: &str| {
            xs(rows, w)
                .into_iter()
                .filter_map(|x| Some((rate(rows, w, m, x)?, x)))
                .max_by(|a, b| a.0.total_cmp(&b.0))
        };
        let Some((mine, at_x)) = best("mgws") else {
            continue;
        };
        let mut line = format!("best: {w}: mgws {mine:.3e} at {at_x}");
        for m in BASELINES {
            if let Some((theirs, x)) = best(m) {
                let place = if once_per_rep(m) {
                    String::new()
                } else {
                    format!(" at {x}")
                };
                let _ = write!(line, "; {m} {theirs:.3e}{place} ({:.2}x)", mine / theirs);
            }
        }
        let _ = writeln!(t, "{line}");
    }
    t
}

fn write_csv(path: &Path, rows: &[Row]) -> Result<PathBuf> {
    let mut s = String::from("workload,method,x,workers,rep,tasks_per_s,idle_share,verified\n");
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{:.6e},{},{}",
            r.workload,
            r.method,
            r.x,
            r.workers,
            r.rep,
            r.tasks_per_s,
            r.idle_share.map_or(String::new(), |i| format!("{i:.4}")),
            r.verified
        );
    }
    std::fs::write(path, s)
        .map_err(|e| Error::Input(format!("writing {}: {e}", path.display())))?;
    Ok(path.to_path_buf())
}

fn color(method: &str) -> RGBColor {
    match method {
        "mgws" => RGBColor(0xd6, 0x27, 0x28),
        "static" => RGBColor(0x1f, 0x77, 0xb4),
        "levels" => RGBColor(0xff, 0x7f, 0x0e),
        FLAT => RGBColor(0x94, 0x67, 0xbd),
        FLAT_INDEXED => RGBColor(0x2c, 0xa0, 0x2c),
        _ => RGBColor(0x55, 0x55, 0x55),
    }
}

/// A named, coloured line of (x, y) points.
pub(super) type Series = (String, RGBColor, Vec<(f64, f64)>);

/// One line chart of `series`.
pub(super) fn lines(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
) -> Result<PathBuf> {
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error>> {
        let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.2.iter().copied()).collect();
        let xmax = all.iter().map(|p| p.0).fold(1.0, f64::max);
        let ymax = all.iter().map(|p| p.1).fold(0.0, f64::max) * 1.1;
        let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(90)
            .build_cartesian_2d(0.0..xmax * 1.05, 0.0..ymax.max(1e-9))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            // Rates in scientific notation, ratios and speedups plainly.
            .y_label_formatter(&|y| {
                if ymax < 1000.0 {
                    format!("{y:.2}")
                } else {
                    format!("{y:.2e}")
                }
            })
            .draw()?;
        for (name, c, pts) in series {
            let c = *c;
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| Error::Input(format!("drawing {}: {e}", path.display())))?;
    Ok(path.to_path_buf())
}

fn plot_rates(out: &Path, workload: &str, rows: &[Row], x_desc: &str) -> Result<PathBuf> {
    let series = std::iter::once("mgws")
        .chain(BASELINES)
        .map(|m| {
            let pts = xs(rows, workload)
                .into_iter()
                .filter_map(|x| Some((x as f64, rate(rows, workload, m, x)?)))
                .collect();
            (m.to_string(), color(m), pts)
        })
        .filter(|s: &Series| !s.2.is_empty())
        .collect::<Vec<_>>();
    lines(
        &out.join(format!("gpu-{workload}-rate.svg")),
        &format!("{workload}: tasks/s"),
        x_desc,
        "tasks/s",
        &series,
    )
}

fn plot_speedups(out: &Path, workload: &str, rows: &[Row], x_desc: &str) -> Result<PathBuf> {
    let series = BASELINES
        .into_iter()
        .map(|b| {
            let pts = xs(rows, workload)
                .into_iter()
                .filter_map(|x| Some((x as f64, paired(rows, workload, b, x)?)))
                .collect();
            (format!("mgws / {b}"), color(b), pts)
        })
        .filter(|s: &Series| !s.2.is_empty())
        .collect::<Vec<_>>();
    lines(
        &out.join(format!("gpu-{workload}-speedup.svg")),
        &format!("{workload}: speedup of mgws"),
        x_desc,
        "ratio",
        &series,
    )
}

fn plot_skew(path: &Path, device: &str, rows: &[Row]) -> Result<PathBuf> {
    let ks = xs(rows, "skew");
    let ratio: Vec<(f64, f64)> = ks
        .iter()
        .filter_map(|&k| Some((k as f64, paired(rows, "skew", "static", k)?)))
        .collect();
    let idle: Vec<(f64, f64)> = ks
        .iter()
        .filter_map(|&k| {
            let i = median(
                rows.iter()
                    .filter(|r| r.method == "static" && r.x == k)
                    .filter_map(|r| r.idle_share)
                    .collect(),
            )?;
            Some((k as f64, 1.0 / (1.0 - i).max(1e-9)))
        })
        .collect();
    lines(
        path,
        &format!("skew on the {device}: mgws / static, and 1 / (1 - static idle share)"),
        "k (ANDs)",
        "ratio",
        &[
            ("mgws / static".into(), color("mgws"), ratio),
            ("1 / (1 - static idle share)".into(), color("static"), idle),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_references_output_is_parsed_with_repetitions_numbered() {
        let out = "reference,flat,0,2.9e10,0\nreference,blockwise,132,2.95e8,0\n\
                   reference,blockwise,4224,skipped,0\nnoise\nreference,flat,0,skipped,0\n\
                   reference,other,0,1e9,0\nreference,flat,0,3.1e10,2\n\
                   reference,blockwise,132,3.0e8,1\nreference,flat-indexed,0,6e10,0\n";
        assert_eq!(
            parse_reference(out),
            vec![
                (FLAT, 0, 0, 2.9e10, 0),
                ("reference", 0, 132, 2.95e8, 0),
                (FLAT, 1, 0, 3.1e10, 2),
                ("reference", 1, 132, 3.0e8, 1),
                (FLAT_INDEXED, 0, 0, 6e10, 0),
            ]
        );
    }

    fn row(method: &'static str, x: u32, rep: u32, rate: f64) -> Row {
        Row {
            workload: "w".into(),
            method,
            x,
            workers: x * 132,
            rep,
            tasks_per_s: rate,
            idle_share: (method == "static").then_some(0.25),
            verified: true,
        }
    }

    #[test]
    fn each_workload_runs_the_baselines_that_compare_something() {
        use MethodArg::{Levels, Mgws, Static};
        for w in [
            "memset", "uts-t1l", "uts-t1", "uts-t3", "uts-t5", "fib", "skew",
        ] {
            assert!(method_applies(w, Mgws), "{w}");
        }
        // Many initial tasks: the static split is the baseline.
        assert!(method_applies("memset", Static) && method_applies("skew", Static));
        // One root task: one block would run the whole tree; the level kernel is the baseline.
        for w in ["uts-t1l", "uts-t1", "uts-t3", "uts-t5", "fib"] {
            assert!(!method_applies(w, Static), "{w}");
            assert!(method_applies(w, Levels), "{w}");
        }
        assert!(!method_applies("memset", Levels) && method_applies("skew", Levels));
    }

    #[test]
    fn ratios_pair_repetitions_and_files_are_written() {
        let rows = vec![
            row("mgws", 1, 0, 4.0),
            row("static", 1, 0, 2.0),
            row("mgws", 1, 1, 9.0),
            row("static", 1, 1, 3.0),
        ];
        assert_eq!(paired(&rows, "w", "static", 1), Some(2.5));
        assert_eq!(rate(&rows, "w", "mgws", 1), Some(6.5));
        let t = table(&rows, &["a note".into()], "workers/SM");
        assert!(
            t.contains("2.50x") && t.contains("25.0%") && t.contains("note: a note"),
            "{t}"
        );
        let dir = std::env::temp_dir().join(format!("mgws-gpu-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = write_csv(&dir.join("r.csv"), &rows).unwrap();
        assert_eq!(std::fs::read_to_string(csv).unwrap().lines().count(), 5);
        let svg = plot_speedups(&dir, "w", &rows, "workers per SM").unwrap();
        assert!(std::fs::read_to_string(svg).unwrap().contains("<svg"));
        assert!(write_csv(Path::new("/nonexistent/dir/r.csv"), &rows).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_flat_reference_counts_at_every_x() {
        let rows = vec![
            row("mgws", 1, 0, 4.0),
            row("mgws", 2, 0, 8.0),
            row(FLAT, 0, 0, 2.0),
            row("mgws", 1, 1, 6.0),
            row("mgws", 2, 1, 9.0),
            row(FLAT, 0, 1, 3.0),
        ];
        assert_eq!(xs(&rows, "w"), vec![1, 2]);
        assert_eq!(rate(&rows, "w", FLAT, 2), Some(2.5));
        assert_eq!(paired(&rows, "w", FLAT, 1), Some(2.0));
        assert_eq!(paired(&rows, "w", FLAT, 2), Some(3.5));
        let t = table(&rows, &[], "workers/SM");
        assert!(t.contains("ref-flat") && t.contains("3.50x"), "{t}");
    }

    #[test]
    fn each_method_is_compared_at_its_own_fastest_count() {
        let rows = vec![
            row("mgws", 16, 0, 3.0),
            row("mgws", 22, 0, 4.0),
            row("static", 16, 0, 5.0),
            row("static", 22, 0, 6.0),
            row("static", 32, 0, 5.5),
            row(FLAT, 0, 0, 5.0),
        ];
        let t = best_against_best(&rows);
        assert_eq!(
            t.trim(),
            "best: w: mgws 4.000e0 at 22; static 6.000e0 at 22 (0.67x); reference-flat 5.000e0 \
             (0.80x)"
        );
        // At one count alone mgws would compare with static's 32, not its best.
        assert_eq!(paired(&rows, "w", "static", 32), None);
        assert_eq!(best_against_best(&[row("static", 1, 0, 1.0)]), "");
    }
}
