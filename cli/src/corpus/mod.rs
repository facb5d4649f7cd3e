//! Text corpora for CONTAINS: articles packed into one contiguous buffer with an offset index.
//!
//! Readers for what a user really has:
//! - a MediaWiki XML dump (`.xml`, or `.xml.bz2` such as
//!   `dewiki-*-pages-articles-multistream.xml.bz2`), streamed: [`xml`];
//! - JSON Lines with a `"text"` field per line: [`jsonl`];
//! - a directory with one document per file, such as `/usr/share/man/de`: [`dir`].
//!
//! A file whose name ends in `.bz2` or `.gz` is decompressed on the fly ([`Compression`]), the
//! documents of a directory too.
//!
//! Every reader stops after `limit` articles and reports bad input as [`Error::Input`] or
//! [`Error::Io`] naming the file (and line, for JSON Lines).

pub mod dir;
pub mod jsonl;
pub mod xml;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use mgws::error::{Error, Result};

/// The input formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// By the path: a directory, `.xml`, `.jsonl`/`.ndjson`/`.json` (each optionally `.bz2` or
    /// `.gz`), else by content.
    Auto,
    Xml,
    Jsonl,
    Dir,
}

/// Articles in one buffer: article `i` is `bytes[offsets[i].0 ..][.. offsets[i].1]`.
#[derive(Clone, Debug, Default)]
pub struct Corpus {
    pub bytes: Vec<u8>,
    /// (offset, length) of every article.
    pub articles: Vec<(u64, u64)>,
}

impl Corpus {
    /// Appends one article.
    pub fn push(&mut self, text: &[u8]) {
        self.articles
            .push((self.bytes.len() as u64, text.len() as u64));
        self.bytes.extend_from_slice(text);
    }

    /// The number of articles.
    pub fn len(&self) -> usize {
        self.articles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.articles.is_empty()
    }

    /// Article `i`.
    pub fn article(&self, i: usize) -> &[u8] {
        let (o, l) = self.articles[i];
        &self.bytes[o as usize..(o + l) as usize]
    }

    /// Every article, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.len()).map(|i| self.article(i))
    }
}

/// An I/O error on `path`.
pub(crate) fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// How a corpus file is compressed, by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    /// `.bz2`, multistream too (Wikipedia's `*-multistream.xml.bz2`).
    Bzip2,
    /// `.gz`, several members too (what `gzip` writes for concatenated files).
    Gzip,
}

impl Compression {
    /// The compression `path`'s name says (its extension, in any case).
    pub fn of(path: &Path) -> Compression {
        match path.extension().map(|e| e.to_ascii_lowercase()) {
            Some(e) if e == "bz2" => Compression::Bzip2,
            Some(e) if e == "gz" => Compression::Gzip,
            _ => Compression::None,
        }
    }

    /// Whether the file is compressed.
    pub fn is_compressed(self) -> bool {
        self != Compression::None
    }

    /// `name` (lower case) without this compression's suffix.
    fn strip(self, name: &str) -> &str {
        let suffix = match self {
            Compression::None => return name,
            Compression::Bzip2 => ".bz2",
            Compression::Gzip => ".gz",
        };
        name.strip_suffix(suffix).unwrap_or(name)
    }
}

/// A failed read of `path`, `after` what was read so far (e.g. " after line 7"). A compressed
/// file fails this way when it is truncated or corrupt, which the message suggests.
pub(crate) fn read_err(path: &Path, source: std::io::Error, after: &str) -> Error {
    let suffix = match Compression::of(path) {
        Compression::None => return io_err(path, source),
        Compression::Bzip2 => "bz2",
        Compression::Gzip => "gz",
    };
    Error::Input(format!(
        "reading {} failed{after}: {source} (a truncated or corrupt .{suffix} file?)",
        path.display()
    ))
}

/// Why the corpus at `path` cannot be read: a missing one says where to get corpora.
fn corpus_error(path: &Path, e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::NotFound {
        Error::Input(format!(
            "the corpus {} does not exist; scripts/fetch-corpus.sh fetches real ones into data/ \
             (e.g. `scripts/fetch-corpus.sh en`, then --corpus data/wiki-en.jsonl)",
            path.display()
        ))
    } else {
        io_err(path, e)
    }
}

/// Opens `path`, decompressing it on the fly as its name says ([`Compression::of`]).
pub(crate) fn open(path: &Path) -> Result<Box<dyn BufRead>> {
    let file = File::open(path).map_err(|e| corpus_error(path, e))?;
    Ok(decompressing(file, path))
}

/// `raw` (the bytes of a file named `path`), decompressed on the fly as the name says.
pub(crate) fn decompressing<'a>(raw: impl Read + 'a, path: &Path) -> Box<dyn BufRead + 'a> {
    let file = BufReader::with_capacity(1 << 16, raw);
    match Compression::of(path) {
        Compression::None => Box::new(file),
        Compression::Bzip2 => Box::new(BufReader::with_capacity(
            1 << 16,
            bzip2::bufread::MultiBzDecoder::new(file),
        )),
        Compression::Gzip => Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::bufread::MultiGzDecoder::new(file),
        )),
    }
}

/// Reads up to `limit` articles of a JSON Lines or XML corpus held in memory, as if read from a
/// file named `name` (whose extension says the compression; errors name it): the entry point
/// of the fuzz targets and the property tests, which feed arbitrary bytes and must get a corpus
/// or a typed error, never a panic.
pub fn load_bytes(bytes: &[u8], name: &Path, format: Format, limit: u64) -> Result<Corpus> {
    let r = decompressing(bytes, name);
    match format {
        Format::Jsonl => jsonl::read_from(r, name, limit),
        Format::Xml => xml::read_from(r, name, limit),
        Format::Auto | Format::Dir => Err(Error::Input(
            "load_bytes reads JSON Lines or XML, not a directory or an undetected format".into(),
        )),
    }
}

/// The format `auto` stands for at `path`.
pub fn detect(path: &Path) -> Result<Format> {
    let meta = std::fs::metadata(path).map_err(|e| corpus_error(path, e))?;
    if meta.is_dir() {
        return Ok(Format::Dir);
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let name = Compression::of(path).strip(&name);
    if name.ends_with(".xml") {
        return Ok(Format::Xml);
    }
    if name.ends_with(".jsonl") || name.ends_with(".ndjson") || name.ends_with(".json") {
        return Ok(Format::Jsonl);
    }
    // Sniff the first non-blank byte.
    let mut r = open(path)?;
    let mut head = [0u8; 512];
    let n = read_up_to(&mut r, &mut head).map_err(|e| io_err(path, e))?;
    match head[..n].iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'<') => Ok(Format::Xml),
        Some(b'{') => Ok(Format::Jsonl),
        _ => Err(Error::Input(format!(
            "cannot tell the format of {}: pass --format xml, jsonl or dir",
            path.display()
        ))),
    }
}

fn read_up_to(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Reads up to `limit` articles of the corpus at `path`, not following symbolic links in a
/// directory corpus. An empty corpus is an error.
pub fn load(path: &Path, format: Format, limit: Option<u64>) -> Result<Corpus> {
    load_with(path, format, limit, false)
}

/// [`load`], following symbolic links in a directory corpus when `follow_links` is set (each
/// file still counts once).
pub fn load_with(
    path: &Path,
    format: Format,
    limit: Option<u64>,
    follow_links: bool,
) -> Result<Corpus> {
    if limit == Some(0) {
        return Err(Error::Input("--limit must be at least 1".into()));
    }
    let format = match format {
        Format::Auto => detect(path)?,
        f => f,
    };
    let limit = limit.unwrap_or(u64::MAX);
    let corpus = match format {
        Format::Xml => xml::read(path, limit)?,
        Format::Jsonl => jsonl::read(path, limit)?,
        Format::Dir => dir::read(path, limit, follow_links)?,
        Format::Auto => unreachable!(),
    };
    if corpus.is_empty() {
        return Err(Error::Input(format!(
            "the corpus {} has no articles",
            path.display()
        )));
    }
    Ok(corpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_articles_contiguously() {
        let mut c = Corpus::default();
        c.push(b"abc");
        c.push(b"");
        c.push(b"de");
        assert_eq!(c.bytes, b"abcde");
        assert_eq!(c.articles, vec![(0, 3), (3, 0), (3, 2)]);
        assert_eq!(c.article(2), b"de");
        assert_eq!(c.iter().count(), 3);
    }
}
