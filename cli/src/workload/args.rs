//! Command-line arguments of the CONTAINS, UTS and FIB workloads (shared by `run` and `bench`).

use std::path::PathBuf;

use clap::Args;

use super::uts::{Preset, Shape, TreeType, UtsConfig};
use crate::corpus::{self, Corpus, Format};
use mgws::error::{Error, Result};

/// CONTAINS: `--corpus PATH --word W [--format auto|xml|jsonl|dir] [--limit N]`.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Workload")]
pub struct ContainsArgs {
    /// The corpus: a MediaWiki XML dump (.xml), JSON Lines with a "text" field, or a directory
    /// with one document per file (e.g. /usr/share/man/de); files ending .bz2 or .gz are
    /// decompressed.
    #[arg(long)]
    pub corpus: PathBuf,
    /// The word to search for (exact, case-sensitive bytes).
    #[arg(long)]
    pub word: String,
    #[arg(long, value_enum, default_value_t = Format::Auto)]
    pub format: Format,
    /// Read at most this many articles.
    #[arg(long)]
    pub limit: Option<u64>,
    /// A directory corpus: follow symbolic links (also into other trees); each file still counts
    /// once. By default links are skipped, since in a tree such as /usr/share/man/de they are
    /// aliases of files already counted.
    #[arg(long)]
    pub follow_links: bool,
}

impl ContainsArgs {
    /// Loads the corpus; checks the word.
    pub fn load(&self) -> Result<Corpus> {
        if self.word.is_empty() {
            return Err(mgws::Error::Input(
                "the word to search for (--word) is empty".into(),
            ));
        }
        if self.follow_links && !self.corpus.is_dir() {
            return Err(mgws::Error::Config(
                "--follow-links applies to a directory corpus".into(),
            ));
        }
        corpus::load_with(&self.corpus, self.format, self.limit, self.follow_links)
    }
}

/// UTS: a named tree (`--preset`) and/or the UTS flags, which override the preset's values.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Workload")]
pub struct UtsArgs {
    /// A named tree; the flags below override its parameters.
    #[arg(long, id = "uts_preset", value_name = "NAME", value_enum)]
    pub preset: Option<Preset>,
    /// Tree type (UTS -t: 0 = bin, 1 = geo, 2 = hybrid).
    #[arg(
        short = 't',
        long = "tree-type",
        id = "uts_tree",
        value_name = "TYPE",
        value_enum
    )]
    pub tree: Option<TreeType>,
    /// Shape of geometric trees (UTS -a: 0 = linear, 1 = expdec, 2 = cyclic, 3 = fixed).
    #[arg(short = 'a', long, id = "uts_shape", value_name = "SHAPE", value_enum)]
    pub shape: Option<Shape>,
    /// Root branching factor (UTS -b).
    #[arg(
        short = 'b',
        long = "branching",
        id = "uts_branching",
        value_name = "B"
    )]
    pub b0: Option<f64>,
    /// Depth limit of geometric trees (UTS -d).
    #[arg(short = 'd', long = "depth", id = "uts_depth", value_name = "D")]
    pub depth: Option<u32>,
    /// Probability that a binomial node has children (UTS -q).
    #[arg(
        short = 'q',
        long = "non-leaf-prob",
        id = "uts_non_leaf_prob",
        value_name = "Q"
    )]
    pub q: Option<f64>,
    /// Children of a binomial node that has any (UTS -m).
    #[arg(
        short = 'm',
        long = "non-leaf-children",
        id = "uts_non_leaf_children",
        value_name = "M"
    )]
    pub m: Option<u32>,
    /// Root seed (UTS -r).
    #[arg(
        short = 'r',
        long = "root-seed",
        id = "uts_root_seed",
        value_name = "SEED"
    )]
    pub seed: Option<u32>,
    /// Hybrid trees switch from geometric to binomial at this fraction of -d (UTS -f).
    #[arg(short = 'f', long = "shift", id = "uts_shift", value_name = "F")]
    pub shift: Option<f64>,
    /// The most nodes one worker may expand before the run stops with an error: the bound on a
    /// tree that may be infinite (`-q * -m > 1`). After the run, the total is held to it too.
    #[arg(long, value_name = "N", default_value_t = crate::workload::uts::DEFAULT_MAX_NODES)]
    pub max_nodes: u64,
}

impl UtsArgs {
    /// The tree these flags describe (validated).
    pub fn config(&self) -> Result<UtsConfig> {
        let mut c = self
            .preset
            .map_or_else(UtsConfig::default, UtsConfig::preset);
        if let Some(v) = self.tree {
            c.tree = v;
        }
        if let Some(v) = self.shape {
            c.shape = v;
        }
        if let Some(v) = self.b0 {
            c.b0 = v;
        }
        if let Some(v) = self.depth {
            c.depth = v;
        }
        if let Some(v) = self.q {
            c.q = v;
        }
        if let Some(v) = self.m {
            c.m = v;
        }
        if let Some(v) = self.seed {
            c.seed = v;
        }
        if let Some(v) = self.shift {
            c.shift = v;
        }
        c.max_nodes = self.max_nodes;
        // Flags the tree type does not read would be ignored silently: refuse them.
        let given = |set: bool, flag: &str, applies: &str, types: &[TreeType]| {
            if set && !types.contains(&c.tree) {
                return Err(Error::Config(format!(
                    "{flag} applies to {applies} trees, not to this {:?} tree (-t)",
                    c.tree
                )));
            }
            Ok(())
        };
        let binomial = [TreeType::Bin, TreeType::Hybrid];
        let geometric = [TreeType::Geo, TreeType::Hybrid];
        given(self.q.is_some(), "-q", "binomial and hybrid", &binomial)?;
        given(self.m.is_some(), "-m", "binomial and hybrid", &binomial)?;
        given(
            self.shape.is_some(),
            "-a",
            "geometric and hybrid",
            &geometric,
        )?;
        given(
            self.depth.is_some(),
            "-d",
            "geometric and hybrid",
            &geometric,
        )?;
        given(self.shift.is_some(), "-f", "hybrid", &[TreeType::Hybrid])?;
        c.validate()?;
        Ok(c)
    }
}

/// FIB: `-n N`.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Workload")]
pub struct FibArgs {
    /// Compute fib(n) by naive recursion, one task per call.
    #[arg(short = 'n', long, default_value_t = 30)]
    pub n: u64,
}
