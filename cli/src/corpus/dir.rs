//! A directory of documents: every regular file below it (recursively, in sorted path order) is
//! one article, taken as raw bytes. Hidden files and directories (names starting with `.`) are
//! skipped. A file named `*.gz` or `*.bz2` is one article too, decompressed (a manual-page tree
//! such as `/usr/share/man/de` holds gzipped pages); a corrupt one is an error naming it.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::{io_err, read_err, Corpus};
use mgws::error::{Error, Result};

/// Reads up to `limit` articles.
pub fn read(path: &Path, limit: u64) -> Result<Corpus> {
    if !path.is_dir() {
        return Err(Error::Input(format!(
            "{} is not a directory (--format dir)",
            path.display()
        )));
    }
    let mut files = Vec::new();
    collect(path, &mut files)?;
    files.sort();
    let mut corpus = Corpus::default();
    for f in files
        .into_iter()
        .take(limit.min(usize::MAX as u64) as usize)
    {
        let mut bytes = Vec::new();
        super::open(&f)?
            .read_to_end(&mut bytes)
            .map_err(|e| read_err(&f, e, ""))?;
        corpus.push(&bytes);
    }
    Ok(corpus)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| io_err(&path, e))?;
        if kind.is_dir() {
            collect(&path, out)?;
        } else if kind.is_file() || (kind.is_symlink() && path.is_file()) {
            out.push(path);
        }
    }
    Ok(())
}
