//! CONTAINS: counts the articles of a corpus that contain a word, one task per article, and checks
//! the count against a plain sequential scan on every run.

use mgws_tasks::workloads::contains::{
    corpus_descriptor, word_descriptor, ContainsTask, COL_MATCHES,
};
use mgws_tasks::workloads::rows::{column_sum, PackedTable, ROW_BYTES};
use mgws_tasks::{ContainsTasks, TaskStruct};

use super::Outcome;
use crate::corpus::Corpus;
use mgws::backend::Backend;
use mgws::error::{Error, Result};
use mgws::job::{AreaBytes, Job};
use mgws::report::RunReport;
use mgws::scheduler::Scheduler;

/// Data areas of a CONTAINS job.
pub const CORPUS_AREA: u8 = 0;
pub const WORD_AREA: u8 = 1;
pub const ROWS_AREA: u8 = 2;

/// Checks the inputs: a non-empty word, a non-empty corpus that fits one descriptor.
pub fn check_input(corpus: &Corpus, word: &[u8]) -> Result<()> {
    if word.is_empty() {
        return Err(Error::Input("the word to search for is empty".into()));
    }
    if word.len() > u32::MAX as usize {
        return Err(Error::Input("the word is longer than 4 GiB".into()));
    }
    if corpus.is_empty() {
        return Err(Error::Input("the corpus has no articles".into()));
    }
    if corpus.bytes.len() > u32::MAX as usize {
        return Err(Error::Input(format!(
            "the corpus has {} bytes, more than the 4 GiB one data descriptor can span: pass --limit",
            corpus.bytes.len()
        )));
    }
    Ok(())
}

/// The initial tasks: one per article, with the result table for `workers` workers.
pub fn tasks(corpus: &Corpus, word: &[u8], workers: u32) -> Result<Vec<TaskStruct>> {
    check_input(corpus, word)?;
    let results = PackedTable::new(ROWS_AREA, 0, workers)
        .ok_or_else(|| Error::Config(format!("{workers} workers are too many for CONTAINS")))?;
    let cd = corpus_descriptor(CORPUS_AREA, corpus.bytes.len() as u32);
    let wd = word_descriptor(WORD_AREA, word.len() as u32);
    Ok(corpus
        .articles
        .iter()
        .map(|&(offset, len)| {
            ContainsTasks::task(&ContainsTask {
                offset,
                len,
                results,
            })
            .with_data(0, cd)
            .with_data(1, wd)
        })
        .collect())
}

/// One run of prepared `tasks` on `backend`: the number of matches and the run report.
pub fn run_once(
    sched: &Scheduler,
    backend: &Backend,
    corpus: &Corpus,
    word: &[u8],
    tasks: &[TaskStruct],
) -> Result<(u64, RunReport)> {
    let rows_needed = super::result_rows(sched, backend);
    let table: PackedTable = tasks
        .first()
        .map_or(PackedTable(0), |t| t.params_as::<ContainsTask>().results);
    if table.descriptor().size < rows_needed * ROW_BYTES as u32 {
        return Err(Error::Input(format!(
            "the CONTAINS tasks were built for fewer result rows than {rows_needed}: build them with `tasks(.., result_rows(..))`"
        )));
    }
    let mut rows = super::ResultRows::new(rows_needed);
    let report = backend.run(
        sched,
        &ContainsTasks,
        Job::new(tasks)
            .area(CORPUS_AREA, AreaBytes::Read(&corpus.bytes))
            .area(WORD_AREA, AreaBytes::Read(word))
            .area(ROWS_AREA, rows.area()),
    )?;
    Ok((column_sum(rows.words(), COL_MATCHES), report))
}

/// The plain sequential scan every run is checked against (independent of the task's code).
pub fn reference_count(corpus: &Corpus, word: &[u8]) -> u64 {
    corpus
        .iter()
        .filter(|a| a.windows(word.len()).any(|w| w == word))
        .count() as u64
}

/// The JSON result of a CONTAINS run.
pub fn result_json(matches: u64, articles: usize) -> serde_json::Value {
    serde_json::json!({ "matches": matches, "articles": articles })
}

/// Counts the articles of `corpus` containing `word` on `backend` and verifies the count.
pub fn run(sched: &Scheduler, backend: &Backend, corpus: &Corpus, word: &[u8]) -> Result<Outcome> {
    let initial = tasks(corpus, word, super::result_rows(sched, backend))?;
    let (matches, report) = run_once(sched, backend, corpus, word, &initial)?;
    let expected = reference_count(corpus, word);
    let verified = matches == expected && report.tasks_run == corpus.len() as u64;
    Ok(Outcome {
        workload: "contains".into(),
        result: result_json(matches, corpus.len()),
        verified,
        check: format!(
            "{matches} of {} articles contain {:?}; a sequential scan found {expected}; {} tasks ran",
            corpus.len(),
            String::from_utf8_lossy(word),
            report.tasks_run
        ),
        report,
    })
}
