//! UTS: expands an implicit unbalanced tree, one task per node, and checks the counts.
//!
//! Every run is verified: against the published counts when the parameters are those of a
//! published tree (default, T1, T5, T3), otherwise against a parallel host traversal that the
//! run performs itself (its time is reported for the speedup).

use std::time::Instant;

use mgws_tasks::workloads::uts::{self, descriptors, UtsCounts, UtsParams, UtsTask};
use mgws_tasks::{TaskStruct, UtsTasks};
use serde::Serialize;

use super::Outcome;
use mgws::backend::Backend;
use mgws::error::{Error, Result};
use mgws::job::{u64_bytes_mut, AreaBytes, Job};
use mgws::report::RunReport;
use mgws::scheduler::Scheduler;

/// Tree types (UTS `-t`: 0, 1, 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
pub enum TreeType {
    /// Binomial (`-t 0`).
    #[value(alias = "0", alias = "binomial")]
    Bin,
    /// Geometric (`-t 1`).
    #[value(alias = "1", alias = "geometric")]
    Geo,
    /// Geometric above `shift * d`, binomial below (`-t 2`).
    #[value(alias = "2")]
    Hybrid,
}

/// Geometric shapes (UTS `-a`: 0..3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
pub enum Shape {
    #[value(alias = "0")]
    Linear,
    #[value(alias = "1")]
    Expdec,
    #[value(alias = "2")]
    Cyclic,
    #[value(alias = "3")]
    Fixed,
}

/// Named trees of the UTS distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// -t 1 -a 0 -d 6 -b 4 -r 0 (1,732 nodes)
    #[value(name = "default")]
    Default,
    /// -t 1 -a 3 -d 10 -b 4 -r 19 (4,130,071 nodes)
    #[value(name = "T1", alias = "t1")]
    T1,
    /// -t 1 -a 0 -d 20 -b 4 -r 34 (4,147,582 nodes)
    #[value(name = "T5", alias = "t5")]
    T5,
    /// -t 0 -b 2000 -q 0.124875 -m 8 -r 42 (4,112,897 nodes)
    #[value(name = "T3", alias = "t3")]
    T3,
    /// -t 1 -a 3 -d 13 -b 4 -r 29 (102,181,082 nodes)
    #[value(name = "T1L", alias = "t1l")]
    T1L,
    /// -t 1 -a 2 -d 23 -b 7 -r 220 (96,793,510 nodes)
    #[value(name = "T2L", alias = "t2l")]
    T2L,
    /// -t 0 -b 2000 -q 0.200014 -m 5 -r 7 (111,345,631 nodes; -q * -m > 1, a finite tree)
    #[value(name = "T3L", alias = "t3l")]
    T3L,
}

/// The parameters of a UTS tree, as the UTS flags give them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct UtsConfig {
    pub tree: TreeType,
    pub shape: Shape,
    /// `-b`
    pub b0: f64,
    /// `-d`
    pub depth: u32,
    /// `-q`
    pub q: f64,
    /// `-m`
    pub m: u32,
    /// `-r`
    pub seed: u32,
    /// `-f`
    pub shift: f64,
    /// `--max-nodes`: the most nodes one worker may expand (see [`UtsParams::max_nodes`]).
    pub max_nodes: u64,
}

/// The default `--max-nodes`: far above every published tree, low enough that a tree that is
/// infinite stops within hours rather than never.
pub const DEFAULT_MAX_NODES: u64 = 1 << 33;

impl Default for UtsConfig {
    /// UTS's defaults: `-t 1 -a 0 -d 6 -b 4 -q 0.234375 -m 4 -r 0 -f 0.5`.
    fn default() -> Self {
        UtsConfig {
            tree: TreeType::Geo,
            shape: Shape::Linear,
            b0: 4.0,
            depth: 6,
            q: 15.0 / 64.0,
            m: 4,
            seed: 0,
            shift: 0.5,
            max_nodes: DEFAULT_MAX_NODES,
        }
    }
}

/// The published trees with their (nodes, leaves, depth). T1L's counts are those of the UTS
/// distribution's sample trees; our traversal reproduces them too.
const PUBLISHED: [(&str, Preset, UtsCounts); 7] = [
    (
        "default",
        Preset::Default,
        UtsCounts {
            nodes: 1_732,
            leaves: 1_050,
            depth: 6,
        },
    ),
    (
        "T1",
        Preset::T1,
        UtsCounts {
            nodes: 4_130_071,
            leaves: 3_305_118,
            depth: 10,
        },
    ),
    (
        "T5",
        Preset::T5,
        UtsCounts {
            nodes: 4_147_582,
            leaves: 2_181_318,
            depth: 20,
        },
    ),
    (
        "T3",
        Preset::T3,
        UtsCounts {
            nodes: 4_112_897,
            leaves: 3_599_034,
            depth: 1572,
        },
    ),
    (
        "T1L",
        Preset::T1L,
        UtsCounts {
            nodes: 102_181_082,
            leaves: 81_746_377,
            depth: 13,
        },
    ),
    (
        "T2L",
        Preset::T2L,
        UtsCounts {
            nodes: 96_793_510,
            leaves: 53_791_152,
            depth: 67,
        },
    ),
    (
        "T3L",
        Preset::T3L,
        UtsCounts {
            nodes: 111_345_631,
            leaves: 89_076_904,
            depth: 17_844,
        },
    ),
];

/// The largest `-b` accepted (the binomial root has `floor(b)` children).
pub const MAX_B0: f64 = 1e6;
/// The largest `-d` accepted.
pub const MAX_DEPTH: u32 = 1 << 20;

impl UtsConfig {
    /// The parameters of a named tree.
    pub fn preset(p: Preset) -> UtsConfig {
        let d = UtsConfig::default();
        match p {
            Preset::Default => d,
            Preset::T1 => UtsConfig {
                shape: Shape::Fixed,
                depth: 10,
                seed: 19,
                ..d
            },
            Preset::T5 => UtsConfig {
                depth: 20,
                seed: 34,
                ..d
            },
            Preset::T3 => UtsConfig {
                tree: TreeType::Bin,
                b0: 2000.0,
                q: 0.124875,
                m: 8,
                seed: 42,
                ..d
            },
            Preset::T1L => UtsConfig {
                shape: Shape::Fixed,
                depth: 13,
                seed: 29,
                ..d
            },
            Preset::T2L => UtsConfig {
                shape: Shape::Cyclic,
                depth: 23,
                b0: 7.0,
                seed: 220,
                ..d
            },
            Preset::T3L => UtsConfig {
                tree: TreeType::Bin,
                b0: 2000.0,
                q: 0.200014,
                m: 5,
                seed: 7,
                ..d
            },
        }
    }

    /// Checks that the parameters describe a finite tree this implementation can expand.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Input(format!("UTS parameters out of range: {m}")));
        if !(self.b0.is_finite() && self.b0 > 0.0 && self.b0 <= MAX_B0) {
            return bad(format!(
                "-b (branching factor) must be in (0, {MAX_B0}], not {}",
                self.b0
            ));
        }
        let geometric = self.tree != TreeType::Bin;
        if geometric {
            let min = if self.shape == Shape::Expdec { 2 } else { 1 };
            if self.depth < min || self.depth > MAX_DEPTH {
                return bad(format!(
                    "-d (depth limit) must be in {min}..={MAX_DEPTH} for a {:?} tree of shape {:?}, not {}",
                    self.tree, self.shape, self.depth
                ));
            }
        }
        if self.tree != TreeType::Geo {
            if !(0.0..=1.0).contains(&self.q) {
                return bad(format!(
                    "-q (non-leaf probability) must be in [0, 1], not {}",
                    self.q
                ));
            }
            if self.m > uts::MAX_CHILDREN {
                return bad(format!(
                    "-m (children of a non-leaf) must be at most {}, not {}",
                    uts::MAX_CHILDREN,
                    self.m
                ));
            }
        }
        if self.max_nodes == 0 {
            return bad("--max-nodes must be at least 1".into());
        }
        if self.tree == TreeType::Hybrid && !(0.0..=1.0).contains(&self.shift) {
            return bad(format!(
                "-f (hybrid shift depth) must be in [0, 1], not {}",
                self.shift
            ));
        }
        Ok(())
    }

    /// A warning about these parameters, if any: a binomial part with `-q * -m > 1` may be
    /// infinite (each node has more than one child on average), so the run relies on
    /// `--max-nodes`.
    pub fn warning(&self) -> Option<String> {
        let mean = self.q * self.m as f64;
        (self.tree != TreeType::Geo && mean > 1.0).then(|| {
            format!(
                "-q {} * -m {} = {mean} > 1: each binomial node has more than one child on \
                 average, so the tree may be infinite{}; the run stops with an error once a \
                 worker has expanded --max-nodes {} nodes",
                self.q,
                self.m,
                if self.published().is_some() {
                    " (this published one is finite)"
                } else {
                    ""
                },
                self.max_nodes
            )
        })
    }

    /// The overflow stack this tree needs beyond the default, if it is known to: T3L's deepest
    /// path (17,844 levels of up to 5 children) leaves about 90,000 nodes pending on one worker.
    pub fn spill_hint(&self) -> Option<u32> {
        (self.published().map(|(name, _)| name) == Some("T3L")).then_some(1 << 17)
    }

    /// The parameters the tasks read.
    pub fn params(&self) -> UtsParams {
        UtsParams::new(
            match self.tree {
                TreeType::Bin => uts::BINOMIAL,
                TreeType::Geo => uts::GEOMETRIC,
                TreeType::Hybrid => uts::HYBRID,
            },
            match self.shape {
                Shape::Linear => uts::LINEAR,
                Shape::Expdec => uts::EXPDEC,
                Shape::Cyclic => uts::CYCLIC,
                Shape::Fixed => uts::FIXED,
            },
            self.b0,
            self.depth,
            self.q,
            self.m,
            self.seed,
            self.shift,
        )
        .with_max_nodes(self.max_nodes)
    }

    /// Whether `other` describes the same tree (only the parameters the tree type uses count).
    pub fn same_tree(&self, other: &UtsConfig) -> bool {
        let geo = |c: &UtsConfig| (c.shape, c.depth);
        let bin = |c: &UtsConfig| (c.q.to_bits(), c.m);
        self.tree == other.tree
            && self.b0 == other.b0
            && self.seed == other.seed
            && match self.tree {
                TreeType::Geo => geo(self) == geo(other),
                TreeType::Bin => bin(self) == bin(other),
                TreeType::Hybrid => {
                    geo(self) == geo(other) && bin(self) == bin(other) && self.shift == other.shift
                }
            }
    }

    /// The published counts of this tree, if it is a published one.
    pub fn published(&self) -> Option<(&'static str, UtsCounts)> {
        PUBLISHED
            .iter()
            .find(|(_, p, _)| self.same_tree(&UtsConfig::preset(*p)))
            .map(|(name, _, c)| (*name, *c))
    }

    /// The UTS command-line flags of this tree.
    pub fn flags(&self) -> String {
        let t = match self.tree {
            TreeType::Bin => 0,
            TreeType::Geo => 1,
            TreeType::Hybrid => 2,
        };
        let mut s = format!("-t {t} -b {} -r {}", self.b0, self.seed);
        if self.tree != TreeType::Bin {
            s += &format!(" -a {} -d {}", self.shape as u32, self.depth);
        }
        if self.tree != TreeType::Geo {
            s += &format!(" -q {} -m {}", self.q, self.m);
        }
        if self.tree == TreeType::Hybrid {
            s += &format!(" -f {}", self.shift);
        }
        s
    }
}

/// The parameter area: `UtsParams` in 8-byte aligned words.
fn params_words(p: &UtsParams) -> Vec<u64> {
    const WORDS: usize = std::mem::size_of::<UtsParams>().div_ceil(8);
    let mut words = vec![0u64; WORDS];
    // SAFETY: the buffer holds at least size_of::<UtsParams>() bytes, 8-byte aligned.
    unsafe { (words.as_mut_ptr() as *mut UtsParams).write(*p) };
    words
}

/// One run of the tree on `backend`: the summed result rows and the run report.
pub fn run_once(
    sched: &Scheduler,
    backend: &Backend,
    params: &UtsParams,
) -> Result<(UtsCounts, RunReport)> {
    let workers = super::result_rows(sched, backend);
    let mut param_words = params_words(params);
    let mut rows = super::ResultRows::new(workers);
    let [pd, rd] = descriptors(0, 1, workers);
    let root: TaskStruct = UtsTasks::task(&UtsTask::of(&params.root()))
        .with_data(0, pd)
        .with_data(1, rd);
    let initial = [root];
    let report = backend.run(
        sched,
        &UtsTasks,
        Job::new(&initial)
            .area(0, AreaBytes::Read(u64_bytes_mut(&mut param_words)))
            .area(1, rows.area()),
    )?;
    Ok((UtsCounts::from_rows(rows.words()), report))
}

/// The JSON result of a UTS run.
pub fn result_json(c: &UtsCounts) -> serde_json::Value {
    serde_json::json!({ "nodes": c.nodes, "leaves": c.leaves, "depth": c.depth })
}

/// Expands the tree `cfg` on `backend` and verifies the counts.
pub fn run(sched: &Scheduler, backend: &Backend, cfg: &UtsConfig) -> Result<Outcome> {
    cfg.validate()?;
    if let Some(w) = cfg.warning() {
        eprintln!("mgws: warning: {w}");
    }
    let params = cfg.params();
    let (counts, report) = run_once(sched, backend, &params).map_err(|e| node_limit(cfg, e))?;
    if counts.nodes > cfg.max_nodes {
        return Err(node_limit_error(cfg, counts.nodes));
    }
    let (expected, source) = match cfg.published() {
        Some((name, c)) => (c, format!("the published counts of {name}")),
        None => {
            let t = Instant::now();
            let (c, earlier) = crate::baseline::uts::reference(&params);
            let s = t.elapsed().as_secs_f64();
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let when = if earlier {
                "earlier in this process".to_string()
            } else {
                format!("{s:.4} s")
            };
            (
                c,
                format!("a traversal on the host's {cores} cores ({when})"),
            )
        }
    };
    let verified = counts == expected && report.tasks_run == counts.nodes;
    Ok(Outcome {
        workload: "uts".into(),
        result: result_json(&counts),
        verified,
        check: format!(
            "{}: nodes {} / leaves {} / depth {} against {source}: {} / {} / {}; {} tasks ran",
            cfg.flags(),
            counts.nodes,
            counts.leaves,
            counts.depth,
            expected.nodes,
            expected.leaves,
            expected.depth,
            report.tasks_run
        ),
        report,
    })
}

/// `e`, or, for a task that met `--max-nodes`, the error that names the bound.
pub fn node_limit(cfg: &UtsConfig, e: Error) -> Error {
    match e {
        Error::TaskFailed { code, .. } if code == uts::UTS_NODE_LIMIT => {
            node_limit_error(cfg, cfg.max_nodes)
        }
        other => other,
    }
}

fn node_limit_error(cfg: &UtsConfig, nodes: u64) -> Error {
    Error::Input(format!(
        "the tree {} grew past --max-nodes {} ({nodes} nodes expanded): it may be infinite; \
         raise --max-nodes if it is finite",
        cfg.flags(),
        cfg.max_nodes
    ))
}
