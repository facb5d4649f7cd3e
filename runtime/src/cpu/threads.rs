//! The CPU backend's threads: created on a scheduler's first run and reused by every later run
//! of that scheduler (and of its clones), as rayon's and tokio's pools keep theirs. Spawning a
//! thread costs 0.3-3 ms on some virtual machines, as much as a whole short run; a benchmark's
//! repetitions would otherwise measure thread creation.
//!
//! A run takes a set of exactly as many threads as it needs at once (every lane of every worker,
//! plus the supervisor) and runs one closure on each of them with `rayon::ThreadPool::broadcast`:
//! each thread of the set runs it exactly once, all of them concurrently (the set is dedicated to
//! the run, so no thread is busy elsewhere), and the call returns when all have finished.

use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

/// Thread sets of one scheduler, by size.
#[derive(Debug, Default)]
pub struct ThreadSets {
    sets: Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>>,
}

impl ThreadSets {
    /// The set of `threads` threads named `{name}-{i}`, created on first use.
    pub fn get(&self, threads: usize, name: &'static str) -> Result<Arc<rayon::ThreadPool>> {
        let mut sets = self.sets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, set)) = sets.iter().find(|(n, _)| *n == threads) {
            return Ok(set.clone());
        }
        let set = Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(move |i| format!("{name}-{i}"))
                .build()
                .map_err(|e| Error::Config(format!("cannot start {threads} CPU threads: {e}")))?,
        );
        sets.push((threads, set.clone()));
        Ok(set)
    }
}
