//! A directory of documents: every regular file below it (recursively, in sorted path order) is
//! one article, taken as raw bytes. Hidden files and directories (names starting with `.`) are
//! skipped. A file named `*.gz` or `*.bz2` is one article too, decompressed (a manual-page tree
//! such as `/usr/share/man/de` holds gzipped pages); a corrupt one is an error naming it.
//!
//! Symbolic links are skipped by default: in a tree such as a manual-page directory they are
//! aliases of files that are already counted. With `follow_links` they are followed (into other
//! trees too), and every file and directory is still visited once, by its device and inode.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::{io_err, read_err, Corpus};
use mgws::error::{Error, Result};

/// Reads up to `limit` articles; `follow_links` follows symbolic links.
pub fn read(path: &Path, limit: u64, follow_links: bool) -> Result<Corpus> {
    if !path.is_dir() {
        return Err(Error::Input(format!(
            "{} is not a directory (--format dir)",
            path.display()
        )));
    }
    let mut files = Vec::new();
    let mut seen = Seen::default();
    seen.first_visit(path)?;
    collect(path, follow_links, &mut seen, &mut files)?;
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

/// The files and directories already visited, by device and inode.
#[derive(Default)]
struct Seen(std::collections::HashSet<(u64, u64)>);

impl Seen {
    /// Whether `path` (its target, for a link) is visited for the first time.
    #[cfg(unix)]
    fn first_visit(&mut self, path: &Path) -> Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).map_err(|e| io_err(path, e))?;
        Ok(self.0.insert((m.dev(), m.ino())))
    }

    /// Elsewhere paths stand for files (links are not followed there by default).
    #[cfg(not(unix))]
    fn first_visit(&mut self, _path: &Path) -> Result<bool> {
        Ok(true)
    }
}

fn collect(dir: &Path, follow_links: bool, seen: &mut Seen, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        if !entry.file_name().to_string_lossy().starts_with('.') {
            entries.push(entry);
        }
    }
    // Sorted, so that which of two names of one file counts does not depend on the directory's
    // order.
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let mut kind = entry.file_type().map_err(|e| io_err(&path, e))?;
        if kind.is_symlink() {
            if !follow_links {
                continue;
            }
            match std::fs::metadata(&path) {
                Ok(target) => kind = target.file_type(),
                // A dangling link names nothing to read.
                Err(_) => continue,
            }
        }
        if !(kind.is_dir() || kind.is_file()) || !seen.first_visit(&path)? {
            continue;
        }
        if kind.is_dir() {
            collect(&path, follow_links, seen, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}
