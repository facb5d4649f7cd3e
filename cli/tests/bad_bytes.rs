//! Arbitrary bytes into every corpus reader and every numeric flag: each ends in a corpus, a
//! run configuration or a typed error, never a panic. The same inputs, unbounded, are the
//! cargo-fuzz targets in `fuzz/` (docs/testing.md, "Fuzzing").

use std::io::Write;
use std::path::Path;

use clap::Parser;
use mgws_cli::corpus::{self, Format};
use mgws_cli::{
    args::WorkloadCmd,
    cli::{Cli, Command},
};
use proptest::prelude::*;

/// A small valid JSONL corpus and MediaWiki dump, for mutation.
const JSONL: &[u8] =
    b"{\"text\":\"one word\"}\n{\"text\":\"two\",\"id\":3}\n\n{\"text\":\"\\u00e9\"}\n";
const XML: &[u8] = b"<mediawiki><page><title>A</title><ns>0</ns><revision><text>alpha &amp; word</text></revision></page><page><ns>1</ns><revision><text>talk</text></revision></page></mediawiki>";

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn bzip2(bytes: &[u8]) -> Vec<u8> {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Every reader on `bytes`, under every name that selects a decompressor.
fn read_all_ways(bytes: &[u8]) {
    for (name, format) in [
        ("c.jsonl", Format::Jsonl),
        ("c.xml", Format::Xml),
        ("c.jsonl.gz", Format::Jsonl),
        ("c.xml.gz", Format::Xml),
        ("c.jsonl.bz2", Format::Jsonl),
        ("c.xml.bz2", Format::Xml),
    ] {
        // Ok or a typed error; a panic fails the test.
        let _ = corpus::load_bytes(bytes, Path::new(name), format, 1000);
    }
}

/// `bytes` with `edits` applied: (position, new byte) pairs, positions taken modulo the length.
fn mutate(bytes: &[u8], edits: &[(usize, u8)], cut: usize) -> Vec<u8> {
    let mut v = bytes.to_vec();
    for &(at, b) in edits {
        if !v.is_empty() {
            let at = at % v.len();
            v[at] = b;
        }
    }
    v.truncate(cut % (v.len() + 1));
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn corpus_readers_survive_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        read_all_ways(&bytes);
    }

    #[test]
    fn corpus_readers_survive_mutated_valid_files(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        cut in any::<usize>(),
    ) {
        for valid in [JSONL.to_vec(), XML.to_vec(), gzip(JSONL), gzip(XML), bzip2(JSONL), bzip2(XML)] {
            read_all_ways(&mutate(&valid, &edits, cut));
        }
    }

    #[test]
    fn numeric_flags_parse_or_fail_with_a_typed_error(
        flag in prop::sample::select(vec![
            "--tasks", "--workers", "--lanes", "--public-capacity", "--local-capacity",
            "--spill-capacity", "--queue-sharing", "--watchdog-ms", "--seed",
            "--same-device-bias", "--level-capacity",
        ]),
        value in prop_oneof![
            any::<i64>().prop_map(|v| v.to_string()),
            any::<u64>().prop_map(|v| v.to_string()),
            any::<f64>().prop_map(|v| v.to_string()),
            "[0-9a-zA-Z.+-]{0,24}",
        ],
    ) {
        let args = ["mgws", "run", "memset", "--device", "cpu", flag, &value];
        if let Ok(cli) = Cli::try_parse_from(args) {
            let Command::Run { mut workload } = cli.command else { unreachable!() };
            // Validation only: a configuration that passes would run, one that does not is a
            // typed error.
            let _ = workload.sched_mut().reject_inapplicable();
            let sched = workload.sched_mut().clone();
            let _ = sched.scheduler::<mgws_tasks::MemsetTasks>();
        }
    }

    #[test]
    fn uts_flags_parse_or_fail_with_a_typed_error(
        flag in prop::sample::select(vec!["-b", "-d", "-q", "-m", "-r", "-f", "--max-nodes"]),
        tree in prop::sample::select(vec!["bin", "geo", "hybrid"]),
        value in prop_oneof![
            any::<i64>().prop_map(|v| v.to_string()),
            any::<f64>().prop_map(|v| v.to_string()),
            "[0-9a-zA-Z.+-]{0,24}",
        ],
    ) {
        let args = ["mgws", "run", "uts", "-t", tree, flag, &value];
        if let Ok(cli) = Cli::try_parse_from(args) {
            let Command::Run { workload: WorkloadCmd::Uts { args, .. } } = cli.command else {
                unreachable!()
            };
            if let Ok(cfg) = args.config() {
                // A valid tree's parameters are computable (the root and one child).
                let _ = cfg.params().root().depth;
            }
        }
    }
}
