//! MediaWiki XML dumps (`<mediawiki><page><ns>0</ns>...<revision><text>...</text>`), streamed.
//!
//! An article is a page in the main namespace (`<ns>0</ns>`, or no `<ns>` at all) that is not a
//! redirect; its text is the (unescaped) content of its last `<text>` element. A `.bz2` (multistream
//! dumps included) or `.gz` file is decompressed on the fly.

use std::path::Path;

use quick_xml::events::Event;
use quick_xml::Reader;

use super::{open, read_err, Compression, Corpus};
use mgws::error::{Error, Result};

/// Reads up to `limit` articles.
pub fn read(path: &Path, limit: u64) -> Result<Corpus> {
    read_from(open(path)?, path, limit)
}

/// Reads up to `limit` articles from `r`, the (decompressed) content of `path`.
pub fn read_from(r: impl std::io::BufRead, path: &Path, limit: u64) -> Result<Corpus> {
    let mut reader = Reader::from_reader(r);
    reader.config_mut().check_end_names = true;
    let mut buf = Vec::with_capacity(1 << 16);
    let mut corpus = Corpus::default();
    let mut open_elements = 0usize;
    let mut saw_root = false;
    let mut page = Page::default();
    let mut field = Field::None;

    let fail = |reader: &Reader<_>, what: String| -> Error {
        Error::Input(format!(
            "{} is not a valid MediaWiki XML dump: {what} (near byte {} of the {}XML)",
            path.display(),
            reader.buffer_position(),
            if Compression::of(path).is_compressed() {
                "decompressed "
            } else {
                ""
            }
        ))
    };

    loop {
        let event = match reader.read_event_into(&mut buf) {
            Ok(e) => e,
            Err(quick_xml::Error::Io(e)) => {
                // quick-xml shares the I/O error (an Arc): keep its kind and message.
                let e = std::io::Error::new(e.kind(), e.to_string());
                return Err(read_err(path, e, ""));
            }
            Err(e) => return Err(fail(&reader, e.to_string())),
        };
        match event {
            Event::Start(e) => {
                let name = e.local_name();
                let name = name.as_ref();
                if open_elements == 0 {
                    if name != b"mediawiki" {
                        return Err(fail(
                            &reader,
                            format!(
                                "the root element is <{}>, not <mediawiki>",
                                String::from_utf8_lossy(name)
                            ),
                        ));
                    }
                    saw_root = true;
                }
                open_elements += 1;
                match name {
                    b"page" => page = Page::default(),
                    b"ns" => field = Field::Ns,
                    b"text" => {
                        field = Field::Text;
                        page.text.clear();
                    }
                    b"redirect" => page.redirect = true,
                    _ => {}
                }
            }
            Event::Empty(e) => match e.local_name().as_ref() {
                b"redirect" => page.redirect = true,
                b"text" => page.text.clear(),
                b"mediawiki" if open_elements == 0 => saw_root = true,
                _ => {}
            },
            Event::End(e) => {
                open_elements = open_elements.saturating_sub(1);
                field = Field::None;
                if e.local_name().as_ref() == b"page" {
                    if (page.ns.trim() == "0" || page.ns.is_empty()) && !page.redirect {
                        corpus.push(&page.text);
                    }
                    if corpus.len() as u64 >= limit {
                        break;
                    }
                }
            }
            Event::Text(t) => match field {
                Field::Text => {
                    let s = t.unescape().map_err(|e| fail(&reader, e.to_string()))?;
                    page.text.extend_from_slice(s.as_bytes());
                }
                Field::Ns => {
                    let s = t.unescape().map_err(|e| fail(&reader, e.to_string()))?;
                    page.ns.push_str(&s);
                }
                Field::None => {}
            },
            Event::CData(t) if field == Field::Text => {
                page.text.extend_from_slice(&t.into_inner());
            }
            Event::Eof => {
                if !saw_root {
                    return Err(fail(&reader, "it has no <mediawiki> element".into()));
                }
                if open_elements > 0 {
                    return Err(fail(
                        &reader,
                        "the file ends inside an element (truncated?)".into(),
                    ));
                }
                break;
            }
            _ => {}
        }
        buf.clear();
    }
    Ok(corpus)
}

#[derive(Default)]
struct Page {
    ns: String,
    redirect: bool,
    text: Vec<u8>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    None,
    Ns,
    Text,
}
