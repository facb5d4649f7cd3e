//! The corpus readers on arbitrary bytes: the first byte picks the reader and the compression
//! (JSON Lines or MediaWiki XML; plain, gzip or bzip2), the rest is the file. Every input must
//! give a corpus or a typed error.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use mgws_cli::corpus::{load_bytes, Format};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let names = [
        "c.jsonl",
        "c.xml",
        "c.jsonl.gz",
        "c.xml.gz",
        "c.jsonl.bz2",
        "c.xml.bz2",
    ];
    let name = names[pick as usize % names.len()];
    let format = if name.contains(".xml") {
        Format::Xml
    } else {
        Format::Jsonl
    };
    let _ = load_bytes(bytes, Path::new(name), format, 10_000);
});
