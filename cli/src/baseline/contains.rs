//! CONTAINS baselines over the same task structs mgws runs, built on `article_contains`.

use mgws_tasks::workloads::contains::{article_contains, ContainsTask};
use mgws_tasks::TaskStruct;
use rayon::prelude::*;

use crate::corpus::Corpus;

#[inline]
fn run_task(corpus: &Corpus, word: &[u8], task: &TaskStruct) -> bool {
    let t: ContainsTask = task.params_as();
    let text = &corpus.bytes[t.offset as usize..(t.offset + t.len) as usize];
    article_contains(text, word)
}

/// One thread over all tasks.
pub fn sequential(corpus: &Corpus, word: &[u8], tasks: &[TaskStruct]) -> u64 {
    tasks.iter().filter(|t| run_task(corpus, word, t)).count() as u64
}

/// rayon's `par_iter` over the tasks.
pub fn rayon(corpus: &Corpus, word: &[u8], tasks: &[TaskStruct], pool: &rayon::ThreadPool) -> u64 {
    pool.install(|| {
        tasks
            .par_iter()
            .filter(|t| run_task(corpus, word, t))
            .count() as u64
    })
}
