//! `mgws bench multi`: every workload on 1, 2, 4, ... GPUs of this machine, in one process and as
//! GPU PEs (one process per GPU over NVSHMEM), in one call. Every run is verified; repetitions are
//! interleaved, and a speedup is the median over repetitions of the rate on n GPUs over the rate
//! on 1 GPU in the same repetition and mode. Writes the runs as CSV, the table as text and one
//! speedup plot (SVG) per workload.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::gpu::{lines, median, Series};
use crate::args::{DeviceArg, SchedArgs};
use crate::corpus::Corpus;
use crate::workload::uts::{Preset, UtsConfig};
use crate::workload::{contains, fib, memset, uts, Outcome};
use mgws::error::{Error, Result};

/// How the GPUs of a run are joined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// One process, one persistent kernel per GPU, peers over NVLink.
    Process,
    /// One PE process per GPU, joined by NVSHMEM (`--processes n`).
    Pes,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Process => "process",
            Mode::Pes => "pes",
        }
    }
}

/// Options of `mgws bench multi`.
#[derive(Args, Debug, Clone)]
pub struct MultiBenchOpts {
    /// GPU counts, comma-separated: n runs on GPUs 0..n. 1 is the baseline of every ratio.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub gpus: Vec<u32>,
    /// Workloads, comma-separated: memset, fib, uts-t1l, uts-t2l, uts-t3l, uts-big, contains.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "memset,fib,uts-t1l,uts-t2l,uts-t3l,uts-big,contains"
    )]
    pub workloads: Vec<String>,
    /// How the GPUs are joined, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "process,pes")]
    pub modes: Vec<Mode>,
    /// Measured repetitions of each run.
    #[arg(long, default_value_t = 2)]
    pub reps: u32,
    /// MEMSET tasks.
    #[arg(long, default_value_t = 1 << 28)]
    pub memset_tasks: u64,
    /// FIB's n.
    #[arg(long, default_value_t = 44)]
    pub fib_n: u64,
    /// uts-big: T1L's geometric tree with this depth (15: 1.6e9 nodes, checked by a traversal on
    /// every host core).
    #[arg(long, default_value_t = 15)]
    pub big_depth: u32,
    /// CONTAINS: the corpus (default: a generated one of --contains-articles articles).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// CONTAINS: the word to look for.
    #[arg(long, default_value = "zwischen")]
    pub word: String,
    /// CONTAINS: articles of the generated corpus (2^22: about 2.9 GB; 2^18 was too short a run
    /// on one GPU to spread over several).
    #[arg(long, default_value_t = 1 << 22)]
    pub contains_articles: u64,
    /// Directory for the CSV, the table and the SVG plots.
    #[arg(long, default_value = "target/bench-multi")]
    pub out: PathBuf,
}

/// One measured run.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    workload: String,
    mode: Mode,
    gpus: u32,
    rep: u32,
    tasks_per_s: f64,
    setup_s: f64,
}

/// A corpus of `n` articles of 1 to 256 words from a small vocabulary (deterministic), about one
/// in eight of which contains the word "zwischen".
pub fn generated_corpus(n: u64) -> Corpus {
    const WORDS: [&str; 8] = [
        "und", "der", "zwischen", "die", "welt", "haus", "nacht", "stern",
    ];
    let mut c = Corpus::default();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut text = Vec::new();
    for _ in 0..n {
        text.clear();
        let words = 1 + next() % 256;
        for _ in 0..words {
            // "zwischen" (index 2) only from the second draw on: rarer than the others.
            let w = match next() % 64 {
                0 => 2,
                r => [0, 1, 3, 4, 5, 6, 7][(r % 7) as usize],
            };
            text.extend_from_slice(WORDS[w].as_bytes());
            text.push(b' ');
        }
        c.push(&text);
    }
    c
}

/// Runs `workload` once with the flags `a`.
fn run_workload(name: &str, a: &SchedArgs, o: &MultiBenchOpts, corpus: &Corpus) -> Result<Outcome> {
    use mgws_tasks::{ContainsTasks, FibTasks, MemsetTasks, UtsTasks};
    match name {
        "memset" => memset::run(
            &a.scheduler::<MemsetTasks>()?,
            &a.backend::<MemsetTasks>()?,
            o.memset_tasks,
        ),
        "fib" => fib::run(
            &a.scheduler::<FibTasks>()?,
            &a.backend::<FibTasks>()?,
            o.fib_n,
        ),
        "uts-t1l" | "uts-t2l" | "uts-t3l" | "uts-big" => {
            let mut cfg = UtsConfig::preset(match name {
                "uts-t2l" => Preset::T2L,
                "uts-t3l" => Preset::T3L,
                _ => Preset::T1L,
            });
            if name == "uts-big" {
                cfg.depth = o.big_depth;
            }
            uts::run(&a.scheduler::<UtsTasks>()?, &a.backend::<UtsTasks>()?, &cfg)
        }
        "contains" => contains::run(
            &a.scheduler::<ContainsTasks>()?,
            &a.backend::<ContainsTasks>()?,
            corpus,
            o.word.as_bytes(),
        ),
        other => Err(Error::Config(format!(
            "unknown workload `{other}` for mgws bench multi; expected memset, fib, uts-t1l, \
             uts-t2l, uts-t3l, uts-big or contains"
        ))),
    }
}

/// `mgws bench multi`.
pub fn multi(opts: &MultiBenchOpts, sched: &SchedArgs) -> Result<i32> {
    if opts.reps == 0 || opts.gpus.is_empty() || opts.gpus.contains(&0) || opts.modes.is_empty() {
        return Err(Error::Config(
            "--reps, --modes and every --gpus must be at least 1".into(),
        ));
    }
    if !opts.gpus.contains(&1) {
        return Err(Error::Config(
            "--gpus must include 1: every speedup is a ratio to one GPU in the same call".into(),
        ));
    }
    let cuda = sched.cuda()?;
    let visible = cuda.visible_gpus().map_err(|e| match e {
        Error::BackendUnavailable(m) | Error::Cuda(m) => {
            Error::BackendUnavailable(format!("mgws bench multi needs CUDA GPUs: {m}"))
        }
        other => other,
    })?;
    let most = opts.gpus.iter().copied().max().unwrap_or(1);
    if most > visible {
        return Err(Error::Config(format!(
            "--gpus asks for {most} GPUs, but {visible} are visible"
        )));
    }
    let corpus = if !opts.workloads.iter().any(|w| w == "contains") {
        Corpus::default()
    } else if let Some(path) = &opts.corpus {
        crate::corpus::load_with(path, crate::corpus::Format::Auto, None, false)?
    } else {
        generated_corpus(opts.contains_articles)
    };
    std::fs::create_dir_all(&opts.out)
        .map_err(|e| Error::Input(format!("creating {}: {e}", opts.out.display())))?;
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for rep in 0..opts.reps {
        for workload in &opts.workloads {
            for &gpus in &opts.gpus {
                for &mode in &opts.modes {
                    let mut a = sched.clone();
                    a.device = DeviceArg::Cuda;
                    a.devices = Some(
                        (0..gpus)
                            .map(|d| d.to_string())
                            .collect::<Vec<_>>()
                            .join(","),
                    );
                    a.processes = (mode == Mode::Pes).then_some(gpus);
                    let label = format!("{workload} on {gpus} GPUs ({})", mode.name());
                    match run_workload(workload, &a, opts, &corpus) {
                        Ok(o) if !o.verified => {
                            return Err(Error::Verification(format!("{label}: {}", o.check)))
                        }
                        Ok(o) => rows.push(Row {
                            workload: workload.clone(),
                            mode,
                            gpus,
                            rep,
                            tasks_per_s: o.report.tasks_per_s(),
                            setup_s: o.report.setup_s,
                        }),
                        Err(e @ Error::Verification(_)) => return Err(e),
                        Err(e) => notes.push(format!("{label}, repetition {rep}: not run: {e}")),
                    }
                }
            }
        }
    }
    let table = table(&rows, &notes);
    let mut written = vec![write_csv(&opts.out.join("multi-runs.csv"), &rows)?];
    let path = opts.out.join("multi-table.txt");
    std::fs::write(&path, &table)
        .map_err(|e| Error::Input(format!("writing {}: {e}", path.display())))?;
    written.push(path);
    for workload in &opts.workloads {
        if rows.iter().any(|r| &r.workload == workload) {
            written.push(plot(&opts.out, workload, &rows, &opts.modes)?);
        }
    }
    super::finish(sched.json, "multi", &table, rows_json(&rows), &written)
}

/// Median tasks/s of `workload` in `mode` on `gpus` GPUs.
fn rate(rows: &[Row], workload: &str, mode: Mode, gpus: u32) -> Option<f64> {
    median(
        rows.iter()
            .filter(|r| r.workload == workload && r.mode == mode && r.gpus == gpus)
            .map(|r| r.tasks_per_s)
            .collect(),
    )
}

/// Median over repetitions of the rate of (`mode`, `gpus`) over that of (`base`, `base_gpus`)
/// in the same repetition.
fn paired(
    rows: &[Row],
    workload: &str,
    (mode, gpus): (Mode, u32),
    base: (Mode, u32),
) -> Option<f64> {
    let of = |(m, g): (Mode, u32), rep: u32| {
        rows.iter()
            .find(|r| r.workload == workload && r.mode == m && r.gpus == g && r.rep == rep)
            .map(|r| r.tasks_per_s)
    };
    median(
        rows.iter()
            .filter(|r| r.workload == workload && r.mode == mode && r.gpus == gpus)
            .filter_map(|r| Some(r.tasks_per_s / of(base, r.rep)?))
            .collect(),
    )
}

/// The table: median tasks/s, the speedup over 1 GPU in the same mode and, for PEs, the ratio to
/// one process on the same GPUs.
fn table(rows: &[Row], notes: &[String]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:<9} {:<8} {:>5} {:>11} {:>9} {:>10} {:>8}",
        "workload", "mode", "GPUs", "tasks/s", "speedup", "/process", "setup s"
    );
    // In the order first run (rows come repetition by repetition).
    let mut workloads: Vec<&str> = Vec::new();
    for r in rows {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    let mut gpus: Vec<u32> = rows.iter().map(|r| r.gpus).collect();
    gpus.sort_unstable();
    gpus.dedup();
    for w in workloads {
        for mode in [Mode::Process, Mode::Pes] {
            for &g in &gpus {
                let Some(r) = rate(rows, w, mode, g) else {
                    continue;
                };
                let speedup = paired(rows, w, (mode, g), (mode, 1))
                    .map_or("-".into(), |s| format!("{s:.2}x"));
                let to_process = match mode {
                    Mode::Pes => paired(rows, w, (mode, g), (Mode::Process, g))
                        .map_or("-".into(), |s| format!("{s:.2}x")),
                    Mode::Process => String::new(),
                };
                let setup = median(
                    rows.iter()
                        .filter(|x| x.workload == w && x.mode == mode && x.gpus == g)
                        .map(|x| x.setup_s)
                        .collect(),
                )
                .unwrap_or(0.0);
                let _ = writeln!(
                    t,
                    "{:<9} {:<8} {:>5} {:>11.3e} {:>9} {:>10} {:>8.2}",
                    w,
                    mode.name(),
                    g,
                    r,
                    speedup,
                    to_process,
                    setup
                );
            }
        }
    }
    for n in notes {
        let _ = writeln!(t, "note: {n}");
    }
    t
}

fn write_csv(path: &Path, rows: &[Row]) -> Result<PathBuf> {
    let mut s = String::from("workload,mode,gpus,rep,tasks_per_s,setup_s\n");
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{:.6e},{:.4}",
            r.workload,
            r.mode.name(),
            r.gpus,
            r.rep,
            r.tasks_per_s,
            r.setup_s
        );
    }
    std::fs::write(path, s)
        .map_err(|e| Error::Input(format!("writing {}: {e}", path.display())))?;
    Ok(path.to_path_buf())
}

fn rows_json(rows: &[Row]) -> serde_json::Value {
    rows.iter()
        .map(|r| {
            serde_json::json!({
                "workload": r.workload,
                "mode": r.mode.name(),
                "gpus": r.gpus,
                "rep": r.rep,
                "tasks_per_s": r.tasks_per_s,
                "setup_s": r.setup_s,
            })
        })
        .collect::<Vec<_>>()
        .into()
}

/// Speedup over 1 GPU against GPUs, one line per mode and the ideal line.
fn plot(out: &Path, workload: &str, rows: &[Row], modes: &[Mode]) -> Result<PathBuf> {
    use plotters::style::RGBColor;
    let mut gpus: Vec<u32> = rows
        .iter()
        .filter(|r| r.workload == workload)
        .map(|r| r.gpus)
        .collect();
    gpus.sort_unstable();
    gpus.dedup();
    let mut series: Vec<Series> = vec![(
        "linear".into(),
        RGBColor(0x99, 0x99, 0x99),
        gpus.iter().map(|&g| (g as f64, g as f64)).collect(),
    )];
    for &mode in modes {
        let pts: Vec<(f64, f64)> = gpus
            .iter()
            .filter_map(|&g| Some((g as f64, paired(rows, workload, (mode, g), (mode, 1))?)))
            .collect();
        let color = match mode {
            Mode::Process => RGBColor(0xd6, 0x27, 0x28),
            Mode::Pes => RGBColor(0x1f, 0x77, 0xb4),
        };
        if !pts.is_empty() {
            series.push((format!("mgws, {}", mode.name()), color, pts));
        }
    }
    lines(
        &out.join(format!("multi-{workload}-speedup.svg")),
        &format!("{workload}: speedup over 1 GPU"),
        "GPUs",
        "speedup",
        &series,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(workload: &str, mode: Mode, gpus: u32, rep: u32, rate: f64) -> Row {
        Row {
            workload: workload.into(),
            mode,
            gpus,
            rep,
            tasks_per_s: rate,
            setup_s: 0.5,
        }
    }

    #[test]
    fn speedups_pair_repetitions_and_pes_compare_with_one_process() {
        // Rep 1 runs at half speed throughout: the speedups stay 2x and 4x, PEs 0.9x.
        let mut rows = Vec::new();
        for (rep, s) in [(0, 1.0), (1, 0.5)] {
            for (g, f) in [(1, 1.0), (2, 2.0), (4, 4.0)] {
                rows.push(row("fib", Mode::Process, g, rep, 100.0 * s * f));
                rows.push(row("fib", Mode::Pes, g, rep, 90.0 * s * f));
            }
        }
        let sp = |m, g| paired(&rows, "fib", (m, g), (m, 1)).unwrap();
        assert!((sp(Mode::Process, 4) - 4.0).abs() < 1e-9);
        assert!((sp(Mode::Pes, 2) - 2.0).abs() < 1e-9);
        let pe = paired(&rows, "fib", (Mode::Pes, 4), (Mode::Process, 4)).unwrap();
        assert!((pe - 0.9).abs() < 1e-9);
        let t = table(&rows, &["x: not run".into()]);
        assert!(t.contains("fib       process      4"), "{t}");
        assert!(t.contains("4.00x"), "{t}");
        assert!(t.contains("0.90x"), "{t}");
        assert!(t.contains("note: x: not run"), "{t}");
        // Two repetitions, one line per workload, mode and GPU count.
        assert_eq!(t.matches("fib       process      4").count(), 1, "{t}");
        let dir = std::env::temp_dir().join(format!("mgws-multi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let svg = plot(&dir, "fib", &rows, &[Mode::Process, Mode::Pes]).unwrap();
        assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
        let csv = std::fs::read_to_string(write_csv(&dir.join("r.csv"), &rows).unwrap()).unwrap();
        assert_eq!(csv.lines().count(), 1 + rows.len());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_generated_corpus_is_deterministic_and_has_matches_and_misses() {
        let a = generated_corpus(2000);
        assert_eq!(a.len(), 2000);
        assert_eq!(a.bytes, generated_corpus(2000).bytes);
        let with = a
            .iter()
            .filter(|t| t.windows(8).any(|w| w == b"zwischen"))
            .count();
        assert!((200..1800).contains(&with), "{with}");
    }
}
