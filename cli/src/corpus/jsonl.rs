//! JSON Lines: one JSON object per line with a string field `"text"` (other fields are ignored,
//! blank lines skipped). A `.bz2` or `.gz` file is decompressed on the fly.

use std::io::BufRead;
use std::path::Path;

use super::{open, read_err, Corpus};
use mgws::error::{Error, Result};

#[derive(serde::Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    text: std::borrow::Cow<'a, str>,
}

/// Reads up to `limit` articles.
pub fn read(path: &Path, limit: u64) -> Result<Corpus> {
    read_from(open(path)?, path, limit)
}

/// Reads up to `limit` articles from `r`, the (decompressed) content of `path`.
pub fn read_from(mut r: impl BufRead, path: &Path, limit: u64) -> Result<Corpus> {
    let mut corpus = Corpus::default();
    let mut line = Vec::new();
    let mut number = 0u64;
    while (corpus.len() as u64) < limit {
        line.clear();
        let n = r
            .read_until(b'\n', &mut line)
            .map_err(|e| read_err(path, e, &format!(" after line {number}")))?;
        if n == 0 {
            break;
        }
        number += 1;
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let parsed: Line = serde_json::from_slice(&line).map_err(|e| {
            Error::Input(format!(
                "{} line {number}: not a JSON object with a string \"text\" field: {e}",
                path.display()
            ))
        })?;
        corpus.push(parsed.text.as_bytes());
    }
    Ok(corpus)
}
