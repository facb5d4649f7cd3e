//! The workloads of issue 3 on the CPU backend: every run verified, on 1 to several workers and
//! with 1 and 4 lanes; the published UTS counts; the baselines; bad input.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use clap::{CommandFactory, Parser};
use mgws::{Backend, Error, Method, Scheduler};
use mgws_cli::baseline;
use mgws_cli::cli::Cli;
use mgws_cli::corpus::{self, Corpus, Format};
use mgws_cli::workload::uts::{Preset, Shape, TreeType, UtsConfig};
use mgws_cli::workload::{contains, fib, uts};
use mgws_tasks::workloads::uts::UtsCounts;

/// The static-assignment baseline on CPU threads (same task execution, depth-first, no
/// stealing).
const CPU_STATIC: Backend = Backend::cpu().method(Method::Static);
/// The level-by-level baseline on CPU threads (default frontier buffers).
const CPU_LEVELS: Backend = Backend::cpu().method(Method::LEVELS);

fn sched(workers: u32, lanes: u32) -> Scheduler {
    Scheduler::builder()
        .workers(workers)
        .lanes(lanes)
        .spill_capacity(16384)
        .build()
        .unwrap()
}

/// A fresh, empty directory for one test.
fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "mgws-workloads-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn pool(n: u32) -> rayon::ThreadPool {
    baseline::rayon_pool(n, true).unwrap()
}

// ----- UTS ---------------------------------------------------------------------------------------

#[test]
fn uts_default_tree_on_1_to_4_workers_and_1_and_4_lanes() {
    let cfg = UtsConfig::preset(Preset::Default);
    for lanes in [1, 4] {
        for workers in 1..=4 {
            let o = uts::run(&sched(workers, lanes), &Backend::cpu(), &cfg).unwrap();
            assert!(o.verified, "{workers}x{lanes}: {}", o.check);
            assert_eq!(o.result["nodes"], 1_732);
            assert_eq!(o.result["leaves"], 1_050);
            assert_eq!(o.result["depth"], 6);
        }
    }
}

/// UTS nodes run one per lane, 4 side by side, and a batch's children land past local queues of
/// 2 and 4 tasks, on the overflow stack. On the mgws loop and both baselines the default tree's
/// counts come out exact. (Worker-wide spawns wider than half the local queue:
/// `mgws-tests`' `worker_wide_spawns_wider_than_half_the_local_queue_go_in_parts`.)
#[test]
fn uts_batches_whose_spawns_overflow_tiny_local_queues_are_exact() {
    let cfg = UtsConfig::preset(Preset::Default);
    for capacity in [2, 4] {
        let s = Scheduler::builder()
            .workers(2)
            .lanes(4)
            .local_capacity(capacity)
            .spill_capacity(16384)
            .build()
            .unwrap();
        for backend in [Backend::cpu(), CPU_STATIC, CPU_LEVELS] {
            let o = uts::run(&s, &backend, &cfg).unwrap();
            let label = format!("{backend:?}, local capacity {capacity}");
            assert!(o.verified, "{label}: {}", o.check);
            assert_eq!(o.result["nodes"], 1_732, "{label}");
            assert_eq!(o.result["leaves"], 1_050, "{label}");
        }
    }
}

fn assert_published(preset: Preset, nodes: u64, leaves: u64, depth: u64) {
    let cfg = UtsConfig::preset(preset);
    let want = UtsCounts {
        nodes,
        leaves,
        depth,
    };
    assert_eq!(cfg.published().unwrap().1, want);
    let (counts, report) = uts::run_once(&sched(2, 1), &Backend::cpu(), &cfg.params()).unwrap();
    assert_eq!(counts, want, "{preset:?} on mgws");
    assert_eq!(report.tasks_run, nodes);
    // The static and rayon baselines expand the same tree, and so does the parallel reference
    // traversal, which splits its stack every SPLIT_EVERY nodes (these trees have many more).
    assert_eq!(baseline::uts::rayon(&cfg.params(), &pool(2)), want);
    assert!(nodes > 100 * u64::from(baseline::uts::SPLIT_EVERY));
    assert_eq!(baseline::uts::parallel(&cfg.params(), &pool(3)), want);
    for backend in [CPU_STATIC, CPU_LEVELS] {
        let (counts, report) = uts::run_once(&sched(2, 1), &backend, &cfg.params()).unwrap();
        assert_eq!(counts, want, "{preset:?} on {}", backend.name());
        assert_eq!(report.tasks_run, nodes);
    }
}

#[test]
#[cfg_attr(debug_assertions, ignore = "a 4M-node tree: run with --release")]
fn uts_t1_published_counts() {
    assert_published(Preset::T1, 4_130_071, 3_305_118, 10);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "a 4M-node tree: run with --release")]
fn uts_t5_published_counts() {
    assert_published(Preset::T5, 4_147_582, 2_181_318, 20);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "a 4M-node tree: run with --release")]
fn uts_t3_published_counts() {
    assert_published(Preset::T3, 4_112_897, 3_599_034, 1572);
}

/// A published large tree on mgws alone (about 1e8 nodes: the baselines' runs of the smaller
/// trees above cover them).
fn assert_published_large(preset: Preset, nodes: u64, leaves: u64, depth: u64) {
    let cfg = UtsConfig::preset(preset);
    let want = UtsCounts {
        nodes,
        leaves,
        depth,
    };
    assert_eq!(cfg.published().unwrap().1, want);
    let spill = cfg.spill_hint().unwrap_or(16384);
    let s = Scheduler::builder()
        .workers(2)
        .spill_capacity(spill)
        .build()
        .unwrap();
    let outcome = uts::run(&s, &Backend::cpu(), &cfg).unwrap();
    assert!(outcome.verified, "{preset:?}: {}", outcome.check);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "a 1e8-node tree: run with --release")]
fn uts_t3l_published_counts_although_q_times_m_exceeds_one() {
    let cfg = UtsConfig::preset(Preset::T3L);
    assert!(cfg.warning().unwrap().contains("may be infinite"));
    assert_published_large(Preset::T3L, 111_345_631, 89_076_904, 17_844);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "a 1e8-node tree: run with --release")]
fn uts_t2l_published_counts() {
    assert_published_large(Preset::T2L, 96_793_510, 53_791_152, 67);
}

#[test]
fn a_tree_that_may_be_infinite_stops_at_its_node_bound_with_an_error() {
    // q * m = 2: almost surely infinite for this seed's root of 200 children.
    let cfg = UtsConfig {
        tree: TreeType::Bin,
        b0: 200.0,
        q: 0.5,
        m: 4,
        seed: 1,
        max_nodes: 1_000,
        ..UtsConfig::default()
    };
    assert!(cfg.warning().is_some());
    let err = uts::run(&sched(2, 1), &Backend::cpu(), &cfg).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("--max-nodes 1000"), "{text}");
    // Its twin, a finite tree with the same bound, runs and verifies.
    let finite = UtsConfig { q: 0.1, ..cfg };
    assert!(finite.warning().is_none());
    assert!(
        uts::run(&sched(2, 1), &Backend::cpu(), &finite)
            .unwrap()
            .verified
    );
}

#[test]
fn uts_t3_fits_the_default_overflow_stack_and_fails_clearly_in_a_small_one() {
    // A depth-first traversal of T3 keeps up to 5,730 nodes pending (the binomial root's 2,000
    // children plus up to 7 siblings per level): more than local (32) + public (256) + an
    // overflow stack of 4,096 on one worker, but less than the default overflow stack (16,384).
    let (_, peak) = baseline::uts::sequential_with_stack(&UtsConfig::preset(Preset::T3).params());
    assert!(peak > 32 + 256 + 4096 && peak < 16_384, "peak {peak}");
    let small = Scheduler::builder()
        .workers(1)
        .spill_capacity(4096)
        .build()
        .unwrap();
    let err = uts::run(&small, &Backend::cpu(), &UtsConfig::preset(Preset::T3)).unwrap_err();
    assert!(
        matches!(err, Error::SpillOverflow { .. }),
        "unexpected error {err}"
    );
    assert!(err.to_string().contains("--spill-capacity"));
    let default = Scheduler::builder().workers(1).build().unwrap();
    let outcome = uts::run(&default, &Backend::cpu(), &UtsConfig::preset(Preset::T3)).unwrap();
    assert!(outcome.verified, "{}", outcome.check);
}

/// Small trees of every type and shape, checked against the sequential traversal.
fn small_trees() -> Vec<UtsConfig> {
    let d = UtsConfig::default();
    vec![
        UtsConfig {
            shape: Shape::Expdec,
            depth: 8,
            b0: 3.0,
            seed: 0,
            ..d
        },
        UtsConfig {
            shape: Shape::Cyclic,
            depth: 6,
            b0: 2.5,
            seed: 0,
            ..d
        },
        UtsConfig {
            shape: Shape::Fixed,
            depth: 5,
            b0: 3.0,
            seed: 0,
            ..d
        },
        UtsConfig {
            tree: TreeType::Bin,
            b0: 200.0,
            q: 0.2,
            m: 4,
            seed: 1,
            ..d
        },
        UtsConfig {
            tree: TreeType::Hybrid,
            depth: 8,
            b0: 3.0,
            q: 0.22,
            m: 4,
            seed: 0,
            ..d
        },
    ]
}

#[test]
fn uts_every_tree_type_and_shape_verifies_on_1_to_3_workers_and_1_and_4_lanes() {
    for cfg in small_trees() {
        cfg.validate().unwrap();
        assert!(cfg.published().is_none());
        let reference = baseline::uts::sequential(&cfg.params());
        assert!(
            (100..20_000).contains(&reference.nodes),
            "{}: {reference:?}",
            cfg.flags()
        );
        for (workers, lanes) in [(1, 1), (2, 1), (3, 1), (1, 4), (2, 4)] {
            let o = uts::run(&sched(workers, lanes), &Backend::cpu(), &cfg).unwrap();
            assert!(o.verified, "{} {workers}x{lanes}: {}", cfg.flags(), o.check);
            assert!(o.check.contains("traversal on the host"), "{}", o.check);
            assert_eq!(o.result["nodes"], reference.nodes);
        }
        assert_eq!(baseline::uts::rayon(&cfg.params(), &pool(3)), reference);
        assert_eq!(baseline::uts::parallel(&cfg.params(), &pool(3)), reference);
        for backend in [CPU_STATIC, CPU_LEVELS] {
            let o = uts::run(&sched(3, 1), &backend, &cfg).unwrap();
            assert!(
                o.verified,
                "{} on {}: {}",
                cfg.flags(),
                backend.name(),
                o.check
            );
            assert_eq!(o.report.tasks_run, reference.nodes);
        }
    }
}

#[test]
fn uts_parameters_out_of_range_are_refused() {
    let d = UtsConfig::default();
    let bin = UtsConfig {
        tree: TreeType::Bin,
        ..d
    };
    let cases = [
        (UtsConfig { b0: 0.0, ..d }, "-b"),
        (UtsConfig { b0: f64::NAN, ..d }, "-b"),
        (UtsConfig { b0: 1e9, ..d }, "-b"),
        (UtsConfig { depth: 0, ..d }, "-d"),
        (
            UtsConfig {
                shape: Shape::Expdec,
                depth: 1,
                ..d
            },
            "-d",
        ),
        (UtsConfig { q: 1.5, ..bin }, "-q"),
        (UtsConfig { m: 101, ..bin }, "-m"),
        (
            UtsConfig {
                tree: TreeType::Hybrid,
                shift: 2.0,
                ..d
            },
            "-f",
        ),
    ];
    for (cfg, needle) in cases {
        let err = cfg.validate().unwrap_err().to_string();
        assert!(
            err.contains("out of range") && err.contains(needle),
            "{err}"
        );
        let err = uts::run(&sched(1, 1), &Backend::cpu(), &cfg).unwrap_err();
        assert!(matches!(err, Error::Input(_)));
    }
    // Through the command line too.
    let cli =
        Cli::try_parse_from(["mgws", "run", "uts", "-t", "bin", "-q", "1.5", "-m", "8"]).unwrap();
    let err = mgws_cli::cli::main_with(cli).unwrap_err().to_string();
    assert!(err.contains("-q (non-leaf probability)"), "{err}");
}

#[test]
fn uts_flags_override_presets() {
    let cli = Cli::try_parse_from([
        "mgws",
        "run",
        "uts",
        "--preset",
        "T1",
        "-d",
        "4",
        "--workers",
        "2",
    ])
    .unwrap();
    let mgws_cli::cli::Command::Run {
        workload: mgws_cli::args::WorkloadCmd::Uts { args, .. },
    } = cli.command
    else {
        panic!("parsed {:?}", cli.command)
    };
    let cfg = args.config().unwrap();
    assert_eq!((cfg.shape, cfg.depth, cfg.seed), (Shape::Fixed, 4, 19));
    assert!(cfg.published().is_none());
    // UTS's numeric -t/-a values work as well.
    let cli = Cli::try_parse_from(["mgws", "run", "uts", "-t", "0", "-a", "3"]).unwrap();
    let mgws_cli::cli::Command::Run {
        workload: mgws_cli::args::WorkloadCmd::Uts { args, .. },
    } = cli.command
    else {
        panic!()
    };
    assert_eq!(args.tree, Some(TreeType::Bin));
    assert_eq!(args.shape, Some(Shape::Fixed));
}

// ----- CONTAINS ----------------------------------------------------------------------------------

/// A corpus with a skewed (Pareto-like) length distribution: most articles short, a few very
/// long; the word occurs in some of them, at random places.
fn skewed_corpus(articles: usize, seed: u64) -> Corpus {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let words: [&[u8]; 6] = [
        b"und ",
        b"der ",
        b"die ",
        b"Zwischenraum ",
        b"zwisch ",
        b"en ",
    ];
    let mut c = Corpus::default();
    for _ in 0..articles {
        // Lengths 16 * 2^k with k roughly geometric: a long tail.
        let k = (next() % 1024).leading_zeros().saturating_sub(54).min(9) as usize
            + (next() % 3) as usize;
        let len = 16usize << k;
        let mut text = Vec::with_capacity(len + 16);
        while text.len() < len {
            text.extend_from_slice(words[(next() % words.len() as u64) as usize]);
        }
        if next() % 3 == 0 {
            let at = (next() as usize) % text.len();
            text.splice(at..at, b"zwischen".iter().copied());
        }
        c.push(&text);
    }
    c
}

#[test]
fn contains_verifies_on_1_to_3_workers_and_1_and_4_lanes() {
    let corpus = skewed_corpus(3000, 42);
    let lengths: Vec<u64> = corpus.articles.iter().map(|a| a.1).collect();
    let (min, max) = (lengths.iter().min().unwrap(), lengths.iter().max().unwrap());
    assert!(max / min.max(&1) >= 100, "skew {min}..{max}");
    let want = contains::reference_count(&corpus, b"zwischen");
    assert!(want > 500 && want < 2500, "{want}");
    for (workers, lanes) in [(1, 1), (2, 1), (3, 1), (1, 4), (2, 4)] {
        let o = contains::run(
            &sched(workers, lanes),
            &Backend::cpu(),
            &corpus,
            b"zwischen",
        )
        .unwrap();
        assert!(o.verified, "{workers}x{lanes}: {}", o.check);
        assert_eq!(o.result["matches"], want);
        assert_eq!(o.report.tasks_run, 3000);
    }
    // Words that span round boundaries, never occur, or are a whole article.
    for word in [&b"Zwischenraum zwisch"[..], b"nowhere", b"und der die"] {
        let expect = contains::reference_count(&corpus, word);
        let o = contains::run(&sched(2, 4), &Backend::cpu(), &corpus, word).unwrap();
        assert!(o.verified, "{}", o.check);
        assert_eq!(o.result["matches"], expect);
    }
}

#[test]
fn contains_baselines_agree_with_the_reference() {
    let corpus = skewed_corpus(2000, 7);
    let word = b"zwischen";
    let want = contains::reference_count(&corpus, word);
    let tasks = contains::tasks(&corpus, word, 3).unwrap();
    assert_eq!(baseline::contains::sequential(&corpus, word, &tasks), want);
    for backend in [CPU_STATIC, CPU_LEVELS] {
        let (matches, report) =
            contains::run_once(&sched(3, 1), &backend, &corpus, word, &tasks).unwrap();
        assert_eq!(matches, want, "{}", backend.name());
        assert_eq!(report.tasks_run, tasks.len() as u64);
    }
    assert_eq!(
        baseline::contains::rayon(&corpus, word, &tasks, &pool(3)),
        want
    );
}

#[test]
fn the_baselines_report_how_long_each_worker_waited() {
    // Worker 0's share is one 128 MiB document, worker 1's one of 8 bytes: one worker waits
    // (static: after its share until the run ends; levels: at the barrier of the only level) for
    // about the whole run, the other for next to nothing. Usually worker 1 waits; on a loaded
    // machine worker 1's thread may start later than worker 0's scan takes, and then worker 0
    // waits for it. Either way the run's waits are one worker's. The scan is long so that a
    // thread that starts late on a loaded machine takes little of it (at 32 MiB, a start 3 ms
    // late against an 11.7 ms run once put the share at 0.24).
    let mut corpus = Corpus::default();
    corpus.push(&vec![b'x'; 128 << 20]);
    corpus.push(b"zwischen");
    let word = b"zwischen";
    let tasks = contains::tasks(&corpus, word, 2).unwrap();
    for backend in [CPU_STATIC, CPU_LEVELS] {
        let (matches, report) =
            contains::run_once(&sched(2, 1), &backend, &corpus, word, &tasks).unwrap();
        assert_eq!(matches, 1);
        let idle: Vec<u64> = report
            .per_worker
            .iter()
            .map(|w| w.idle_ns.expect("the baseline records every worker's wait"))
            .collect();
        let name = backend.name();
        assert_eq!(idle.len(), 2, "{name}");
        let (least, most) = (idle[0].min(idle[1]), idle[0].max(idle[1]));
        assert!(least * 10 <= most, "{name}: {idle:?}");
        assert!(
            most as f64 * 1e-9 <= report.elapsed_s,
            "{name}: {idle:?} of {}",
            report.elapsed_s
        );
        let share = report.idle_share().unwrap();
        let mean_s = (idle[0] + idle[1]) as f64 * 1e-9 / 2.0;
        assert!(
            (share - mean_s / report.elapsed_s).abs() < 1e-9,
            "{name}: {share}"
        );
        assert!(share > 0.25 && share < 0.6, "{name}: {share}");
    }
    // mgws records no such wait.
    let (_, report) =
        contains::run_once(&sched(2, 1), &Backend::cpu(), &corpus, word, &tasks).unwrap();
    assert!(report.per_worker.iter().all(|w| w.idle_ns.is_none()));
    assert_eq!(report.idle_share(), None);
}

#[test]
fn contains_refuses_an_empty_word_and_an_empty_corpus() {
    let corpus = skewed_corpus(10, 1);
    let err = contains::run(&sched(1, 1), &Backend::cpu(), &corpus, b"").unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
    let err = contains::run(&sched(1, 1), &Backend::cpu(), &Corpus::default(), b"x").unwrap_err();
    assert!(err.to_string().contains("no articles"), "{err}");
    let cli =
        Cli::try_parse_from(["mgws", "run", "contains", "--corpus", ".", "--word", ""]).unwrap();
    let err = mgws_cli::cli::main_with(cli).unwrap_err().to_string();
    assert!(err.contains("empty"), "{err}");
}

// ----- corpus readers ----------------------------------------------------------------------------

const DUMP: &str = r#"<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11">
  <siteinfo><sitename>Wikipedia</sitename></siteinfo>
  <page>
    <title>Alpha</title><ns>0</ns><id>1</id>
    <revision><id>10</id><text bytes="40" xml:space="preserve">Alpha liegt zwischen &lt;b&gt; &amp; c.</text></revision>
  </page>
  <page>
    <title>Talk:Alpha</title><ns>1</ns><id>2</id>
    <revision><text xml:space="preserve">zwischen</text></revision>
  </page>
  <page>
    <title>Beta</title><ns>0</ns><id>3</id><redirect title="Alpha" />
    <revision><text xml:space="preserve">#REDIRECT [[Alpha]] zwischen</text></revision>
  </page>
  <page>
    <title>Gamma</title><ns>0</ns><id>4</id>
    <revision><text xml:space="preserve">Gamma ohne das Wort.</text></revision>
  </page>
  <page>
    <title>Delta</title><ns>0</ns><id>5</id>
    <revision><text xml:space="preserve" /></revision>
  </page>
</mediawiki>
"#;

fn bz2(bytes: &[u8]) -> Vec<u8> {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn xml_dumps_plain_and_bz2_multistream() {
    let dir = temp_dir("xml");
    let plain = dir.join("dump.xml");
    std::fs::write(&plain, DUMP).unwrap();
    let c = corpus::load(&plain, Format::Auto, None).unwrap();
    // Main namespace, no redirects: Alpha, Gamma, Delta (empty).
    assert_eq!(c.len(), 3);
    assert_eq!(c.article(0), "Alpha liegt zwischen <b> & c.".as_bytes());
    assert_eq!(c.article(2), b"");
    assert_eq!(corpus::load(&plain, Format::Xml, Some(2)).unwrap().len(), 2);
    // A multistream .bz2: two concatenated bzip2 streams, split inside the XML.
    let (a, b) = DUMP.split_at(DUMP.len() / 2);
    let mut multi = bz2(a.as_bytes());
    multi.extend(bz2(b.as_bytes()));
    let packed = dir.join("dewiki-pages-articles-multistream.xml.bz2");
    std::fs::write(&packed, &multi).unwrap();
    let cb = corpus::load(&packed, Format::Auto, None).unwrap();
    assert_eq!(
        (cb.bytes.clone(), cb.articles.clone()),
        (c.bytes, c.articles)
    );
    let o = contains::run(&sched(2, 1), &Backend::cpu(), &cb, b"zwischen").unwrap();
    assert!(o.verified);
    assert_eq!(o.result["matches"], 1);
}

#[test]
fn broken_corpora_get_clear_errors() {
    let dir = temp_dir("broken");
    let err = |p: &std::path::Path, f: Format| corpus::load(p, f, None).unwrap_err().to_string();
    // Missing.
    let e = err(&dir.join("nope.xml.bz2"), Format::Auto);
    assert!(
        e.contains("does not exist") && e.contains("scripts/fetch-corpus.sh"),
        "{e}"
    );
    // Truncated XML.
    let p = dir.join("cut.xml");
    std::fs::write(&p, &DUMP[..DUMP.len() / 2]).unwrap();
    let e = err(&p, Format::Auto);
    assert!(e.contains("truncated") || e.contains("not a valid"), "{e}");
    // Mismatched tags.
    let p = dir.join("bad.xml");
    std::fs::write(&p, "<mediawiki><page><ns>0</ns></text></page></mediawiki>").unwrap();
    let e = err(&p, Format::Xml);
    assert!(e.contains("not a valid MediaWiki XML dump"), "{e}");
    // Not a MediaWiki export.
    let p = dir.join("other.xml");
    std::fs::write(&p, "<html><body/></html>").unwrap();
    let e = err(&p, Format::Xml);
    assert!(e.contains("<html>"), "{e}");
    // Truncated bz2.
    let full = bz2(DUMP.as_bytes());
    let p = dir.join("cut.xml.bz2");
    std::fs::write(&p, &full[..full.len() * 2 / 3]).unwrap();
    let e = err(&p, Format::Auto);
    assert!(e.contains(".bz2"), "{e}");
    // Corrupt bz2.
    let mut bad = full.clone();
    for b in bad.iter_mut().skip(40).take(64) {
        *b ^= 0x5a;
    }
    let p = dir.join("corrupt.xml.bz2");
    std::fs::write(&p, &bad).unwrap();
    let e = err(&p, Format::Auto);
    assert!(e.contains(".bz2") || e.contains("not a valid"), "{e}");
    // Not bz2 at all.
    let p = dir.join("plain-text.xml.bz2");
    std::fs::write(&p, DUMP).unwrap();
    let e = err(&p, Format::Auto);
    assert!(e.contains(".bz2"), "{e}");
    // Bad JSON line, with its number.
    let p = dir.join("c.jsonl");
    std::fs::write(&p, "{\"text\": \"a\"}\n\n{\"text\": 3}\n").unwrap();
    let e = err(&p, Format::Auto);
    assert!(e.contains("line 3"), "{e}");
    std::fs::write(&p, "{\"text\": \"a\"}\n{\"title\": \"b\"}\n").unwrap();
    let e = err(&p, Format::Jsonl);
    assert!(e.contains("line 2") && e.contains("text"), "{e}");
    // Empty corpora.
    std::fs::write(&p, "\n\n").unwrap();
    assert!(err(&p, Format::Jsonl).contains("no articles"));
    let empty = dir.join("empty-dir");
    std::fs::create_dir_all(&empty).unwrap();
    assert!(err(&empty, Format::Auto).contains("no articles"));
    let p = dir.join("empty.xml");
    std::fs::write(&p, "<mediawiki></mediawiki>").unwrap();
    assert!(err(&p, Format::Auto).contains("no articles"));
    // A file given as a directory, and an unknown format.
    assert!(err(&p, Format::Dir).contains("not a directory"));
    let p = dir.join("mystery.bin");
    std::fs::write(&p, "plain words").unwrap();
    assert!(err(&p, Format::Auto).contains("--format"));
}

#[test]
fn jsonl_and_directory_corpora() {
    let dir = temp_dir("jsonl");
    let p = dir.join("c.jsonl");
    std::fs::write(
        &p,
        "{\"title\": \"A\", \"text\": \"by the way\"}\n\n{\"text\": \"nothing \\\"here\\\"\"}\n{\"text\": \"stand by\"}\n",
    )
    .unwrap();
    let c = corpus::load(&p, Format::Auto, None).unwrap();
    assert_eq!(c.len(), 3);
    assert_eq!(c.article(1), b"nothing \"here\"");
    assert_eq!(corpus::load(&p, Format::Auto, Some(1)).unwrap().len(), 1);
    let pb = dir.join("c.jsonl.bz2");
    std::fs::write(&pb, bz2(&std::fs::read(&p).unwrap())).unwrap();
    assert_eq!(
        corpus::load(&pb, Format::Auto, None).unwrap().bytes,
        c.bytes
    );
    let o = contains::run(&sched(2, 4), &Backend::cpu(), &c, b"by").unwrap();
    assert!(o.verified);
    assert_eq!(o.result["matches"], 2);

    let docs = dir.join("docs");
    std::fs::create_dir_all(docs.join("sub")).unwrap();
    std::fs::write(docs.join("b.txt"), "zwei").unwrap();
    std::fs::write(docs.join("a.txt"), "eins zwischen").unwrap();
    std::fs::write(docs.join("sub/c.html"), "<p>zwischen</p>").unwrap();
    std::fs::write(docs.join(".hidden"), "zwischen").unwrap();
    let d = corpus::load(&docs, Format::Auto, None).unwrap();
    assert_eq!(d.len(), 3);
    assert_eq!(d.article(0), b"eins zwischen");
    let o = contains::run(&sched(3, 1), &Backend::cpu(), &d, b"zwischen").unwrap();
    assert!(o.verified);
    assert_eq!(o.result["matches"], 2);
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn gzipped_corpora_are_decompressed() {
    let dir = temp_dir("gz");
    // A manual-page tree: gzipped pages (one of two gzip members, as `cat a.gz b.gz` writes),
    // a bzip2 one and a plain one, in sorted path order.
    let man = dir.join("man");
    std::fs::create_dir_all(man.join("man1")).unwrap();
    std::fs::create_dir_all(man.join("man5")).unwrap();
    let mut two_members = gz(b".TH LS 1\nListe ");
    two_members.extend(gz(b"zwischen den Dateien"));
    std::fs::write(man.join("man1/ls.1.gz"), &two_members).unwrap();
    std::fs::write(man.join("man1/cat.1"), b".TH CAT 1\nzwei").unwrap();
    std::fs::write(man.join("man5/passwd.5.bz2"), bz2(b"zwischen Feldern")).unwrap();
    let c = corpus::load(&man, Format::Auto, None).unwrap();
    assert_eq!(c.len(), 3);
    assert_eq!(c.article(0), b".TH CAT 1\nzwei");
    assert_eq!(c.article(1), b".TH LS 1\nListe zwischen den Dateien");
    assert_eq!(c.article(2), b"zwischen Feldern");
    let o = contains::run(&sched(2, 1), &Backend::cpu(), &c, b"zwischen").unwrap();
    assert!(o.verified, "{}", o.check);
    assert_eq!(o.result["matches"], 2);

    // JSON Lines and an XML dump, gzipped, read as their plain versions are.
    let lines = "{\"text\": \"by the way\"}\n{\"text\": \"stand by\"}\n";
    let p = dir.join("c.jsonl.gz");
    std::fs::write(&p, gz(lines.as_bytes())).unwrap();
    let c = corpus::load(&p, Format::Auto, None).unwrap();
    assert_eq!((c.len(), c.article(1)), (2, &b"stand by"[..]));
    let p = dir.join("dump.xml.gz");
    std::fs::write(&p, gz(DUMP.as_bytes())).unwrap();
    assert_eq!(corpus::load(&p, Format::Auto, None).unwrap().len(), 3);

    // A truncated page, and a file named .gz that is not gzip: errors naming the file.
    let err = |p: &std::path::Path| corpus::load(p, Format::Auto, None).unwrap_err().to_string();
    let full = gz(DUMP.as_bytes());
    std::fs::write(man.join("man1/ls.1.gz"), &full[..full.len() / 2]).unwrap();
    let e = err(&man);
    assert!(e.contains("ls.1.gz") && e.contains(".gz file"), "{e}");
    std::fs::write(man.join("man1/ls.1.gz"), DUMP).unwrap();
    let e = err(&man);
    assert!(e.contains("ls.1.gz") && e.contains(".gz file"), "{e}");
    std::fs::write(&p, &full[..full.len() * 2 / 3]).unwrap();
    let e = err(&p);
    assert!(e.contains("dump.xml.gz") && e.contains(".gz"), "{e}");
}

// ----- FIB ---------------------------------------------------------------------------------------

#[test]
fn fib_verifies_on_1_to_4_workers_and_1_and_4_lanes() {
    for (workers, lanes, n) in [(1, 1, 24), (2, 1, 24), (4, 1, 24), (1, 4, 14), (2, 4, 14)] {
        let o = fib::run(&sched(workers, lanes), &Backend::cpu(), n).unwrap();
        assert!(o.verified, "{workers}x{lanes}: {}", o.check);
        assert_eq!(o.result["fib"], mgws_tasks::workloads::fib::fib(n));
    }
    for n in [0, 1, 2, 20] {
        let want = (
            mgws_tasks::workloads::fib::fib(n),
            mgws_tasks::workloads::fib::tree_nodes(n),
        );
        assert_eq!(baseline::fib::sequential(n), want);
        for backend in [CPU_STATIC, CPU_LEVELS] {
            let o = fib::run(&sched(3, 1), &backend, n).unwrap();
            assert!(o.verified, "fib({n}) on {}: {}", backend.name(), o.check);
            assert_eq!(o.report.tasks_run, want.1);
        }
        assert_eq!(baseline::fib::rayon(n, &pool(2)), want);
    }
    assert!(fib::run(&sched(1, 1), &Backend::cpu(), 61).is_err());
}

// ----- CLI and bench -----------------------------------------------------------------------------

#[test]
fn command_line_is_consistent() {
    Cli::command().debug_assert();
    for args in [
        &[
            "mgws",
            "run",
            "contains",
            "--corpus",
            "x.xml.bz2",
            "--word",
            "w",
            "--limit",
            "5",
        ][..],
        &[
            "mgws",
            "run",
            "uts",
            "--preset",
            "T3",
            "--workers",
            "2",
            "--lanes",
            "4",
            "--json",
        ],
        &["mgws", "run", "fib", "-n", "20", "--device", "cpu"],
        &[
            "mgws",
            "run",
            "fib",
            "--device",
            "cpu",
            "--method",
            "levels",
            "--level-capacity",
            "100000",
            "--baselines",
            "static,levels",
        ],
        &[
            "mgws",
            "bench",
            "uts",
            "--preset",
            "T1",
            "--workers",
            "1,2,4",
            "--reps",
            "3",
        ],
        &[
            "mgws",
            "bench",
            "contains",
            "--corpus",
            "d",
            "--word",
            "by",
            "--workers",
            "2",
        ],
        &[
            "mgws",
            "bench",
            "fib",
            "-n",
            "25",
            "--methods",
            "mgws,rayon",
            "--lanes",
            "2",
        ],
    ] {
        Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    }
}

#[test]
fn bench_measures_every_method_and_writes_csv_and_svg() {
    let dir = temp_dir("bench");
    let cli = Cli::try_parse_from([
        "mgws",
        "bench",
        "fib",
        "-n",
        "16",
        "--workers",
        "1,2",
        "--reps",
        "2",
        "--warmup",
        "0",
        "--methods",
        "mgws,static,levels,rayon,sequential",
        "--out",
        dir.to_str().unwrap(),
    ])
    .unwrap();
    assert_eq!(mgws_cli::cli::main_with(cli).unwrap(), 0);
    let summary = std::fs::read_to_string(dir.join("fib-16-summary.csv")).unwrap();
    for m in [
        "mgws,1",
        "mgws,2",
        "static,2",
        "levels,2",
        "rayon,2",
        "sequential,1",
    ] {
        assert!(summary.contains(m), "{m} missing in\n{summary}");
    }
    let samples = std::fs::read_to_string(dir.join("fib-16-samples.csv")).unwrap();
    // 4 methods x 2 worker counts + sequential, 2 reps each, plus the header.
    assert_eq!(samples.lines().count(), 1 + 2 * 9);
    // The baselines' share of the run spent waiting (static: after a worker's share until the
    // run ended; levels: at the level barriers): recorded for them alone, and nothing to wait for
    // with one worker.
    for line in samples.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let idle_share = f[8];
        if f[1] == "static" || f[1] == "levels" {
            let v: f64 = idle_share.parse().unwrap_or_else(|e| panic!("{line}: {e}"));
            assert!((0.0..1.0).contains(&v), "{line}");
            if f[2] == "1" {
                assert!(v < 0.05, "one worker waits for nobody: {line}");
            }
        } else {
            assert_eq!(idle_share, "", "{line}");
        }
    }
    let svg = std::fs::read_to_string(dir.join("fib-16.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("workers"));
    // The plot can be redrawn from the summary alone.
    let replotted = dir.join("again.svg");
    let cli = Cli::try_parse_from([
        "mgws",
        "bench",
        "replot",
        dir.join("fib-16-summary.csv").to_str().unwrap(),
        "--title",
        "FIB again",
        "--svg",
        replotted.to_str().unwrap(),
    ])
    .unwrap();
    assert_eq!(mgws_cli::cli::main_with(cli).unwrap(), 0);
    assert!(std::fs::read_to_string(&replotted)
        .unwrap()
        .contains("FIB again"));
    let (name, rows) = mgws_cli::bench::read_summary(&dir.join("fib-16-summary.csv")).unwrap();
    assert_eq!((name.as_str(), rows.len()), ("fib-16", 9));
    std::fs::write(dir.join("bad.csv"), "header\nfib,warp,1,1,1,1,1,1\n").unwrap();
    let err = mgws_cli::bench::read_summary(&dir.join("bad.csv")).unwrap_err();
    assert!(err.to_string().contains("line 2"), "{err}");

    let work = mgws_cli::bench::Prepared::uts(UtsConfig::preset(Preset::Default)).unwrap();
    let opts = mgws_cli::bench::BenchOpts {
        workers: vec![1, 3],
        reps: 3,
        warmup: 0,
        methods: vec![
            mgws_cli::bench::Method::Mgws,
            mgws_cli::bench::Method::Static,
        ],
        out: dir.clone(),
        name: None,
    };
    // Given the CUDA backend (as `auto` resolves on a GPU machine), it still measures the CPU
    // backend with the CPU's defaults: one lane per worker, and no GPU needed.
    let sched_args = match Cli::try_parse_from(["mgws", "run", "fib", "--device", "cuda"])
        .unwrap()
        .command
    {
        mgws_cli::cli::Command::Run {
            workload: mgws_cli::args::WorkloadCmd::Fib { sched, .. },
        } => sched,
        _ => unreachable!(),
    };
    let r = mgws_cli::bench::measure(&work, &opts, &sched_args).unwrap();
    assert_eq!(r.lanes, 1);
    assert_eq!(r.samples.len(), 12);
    let table = r.table();
    assert!(
        table.contains("/static") && table.contains("mgws"),
        "{table}"
    );
}

#[test]
fn cpu_levels_reports_a_frontier_that_outgrows_its_buffer_and_the_baselines_run_lanes() {
    // fib(20) has levels of hundreds of tasks: a 16-task buffer cannot hold them.
    let small = Backend::cpu().method(Method::Levels {
        level_capacity: Some(16),
    });
    let e = fib::run(&sched(2, 1), &small, 20).unwrap_err().to_string();
    assert!(
        e.contains("frontier buffer holds (16)") && e.contains("--level-capacity"),
        "{e}"
    );
    // Both baselines run workers of several lanes, as on a GPU.
    for backend in [CPU_STATIC, CPU_LEVELS] {
        let o = fib::run(&sched(2, 4), &backend, 10).unwrap();
        assert!(o.verified, "{}: {}", backend.name(), o.check);
        assert_eq!(o.report.lanes, 4);
    }
}

#[test]
fn cpu_runs_take_baselines_and_every_cpu_backend_runs_every_workload() {
    let cli = Cli::try_parse_from([
        "mgws",
        "run",
        "fib",
        "-n",
        "12",
        "--device",
        "cpu",
        "--workers",
        "2",
        "--baselines",
        "static,levels",
    ])
    .unwrap();
    assert_eq!(mgws_cli::cli::main_with(cli).unwrap(), 0);
    for method in ["mgws", "static", "levels"] {
        for args in [
            &["memset", "--tasks", "100"][..],
            &["uts"][..],
            &["fib", "-n", "14"][..],
            &["stall", "--tasks", "2", "--nanos", "1000"][..],
        ] {
            let mut argv = vec!["mgws", "run"];
            argv.extend_from_slice(args);
            argv.extend_from_slice(&["--device", "cpu", "--method", method, "--workers", "2"]);
            let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            assert_eq!(mgws_cli::cli::main_with(cli).unwrap(), 0, "{argv:?}");
        }
    }
}

#[test]
fn skew_verifies_on_every_cpu_backend_with_1_and_4_lanes_and_a_wrong_slot_is_caught() {
    use mgws_cli::workload::skew::{self, SkewConfig};
    for k in [0, 3] {
        let cfg = SkewConfig {
            tasks: 3000,
            k,
            bits: 8,
            seed: 5,
        };
        for lanes in [1, 4] {
            for backend in [Backend::cpu(), CPU_STATIC, CPU_LEVELS] {
                let o = skew::run(&sched(3, lanes), &backend, &cfg).unwrap();
                assert!(o.verified, "k={k} lanes={lanes} {backend:?}: {}", o.check);
            }
        }
        // The check must catch one slot off by one, and a slot never written.
        let (mut slots, _) = skew::run_once(&sched(2, 1), &Backend::cpu(), &cfg).unwrap();
        assert_eq!(skew::wrong_slots(&cfg, &slots), 0);
        slots[17] = slots[17].wrapping_add(1);
        slots[2999] = 0;
        assert_eq!(skew::wrong_slots(&cfg, &slots), 2);
    }
    let bad = |tasks, k, bits| {
        SkewConfig {
            tasks,
            k,
            bits,
            seed: 1,
        }
        .check()
        .unwrap_err()
        .to_string()
    };
    assert!(bad(0, 0, 8).contains("--tasks"));
    assert!(bad(10, 33, 8).contains("--k"));
    assert!(bad(10, 0, 25).contains("--bits"));
}

#[cfg(unix)]
#[test]
fn directory_corpora_count_each_file_once_and_follow_links_only_when_asked() {
    use std::os::unix::fs::symlink;
    let root = temp_dir("dir-links");
    let tree = root.join("tree");
    let other = root.join("other");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(tree.join("a.txt"), "alpha word").unwrap();
    std::fs::write(tree.join("sub/b.txt"), "beta").unwrap();
    std::fs::write(other.join("c.txt"), "gamma word").unwrap();
    // An alias of a file in the tree, a link into another tree and a cycle.
    symlink(tree.join("a.txt"), tree.join("sub/alias.txt")).unwrap();
    symlink(&other, tree.join("elsewhere")).unwrap();
    symlink(&tree, tree.join("sub/loop")).unwrap();
    let plain = corpus::load(&tree, Format::Dir, None).unwrap();
    assert_eq!(plain.len(), 2, "links are skipped by default");
    let followed = corpus::load_with(&tree, Format::Dir, None, true).unwrap();
    assert_eq!(
        followed.len(),
        3,
        "the alias and the cycle add nothing; the other tree adds c"
    );
    let matches = followed
        .iter()
        .filter(|a| a.windows(4).any(|w| w == b"word"))
        .count();
    assert_eq!(matches, 2);
}

/// Each flag sets one axis of the backend: `--device` the device, `--method` the method,
/// `--processes` and `--nodes` the process layout; combinations that do not exist are refused
/// with a configuration error naming the flags.
#[test]
fn the_device_method_and_process_flags_map_one_to_one_onto_the_backends_axes() {
    use mgws::cuda::Placement;
    use mgws::{Device, ProcessLayout};
    use mgws_cli::args::{SchedArgs, WorkloadCmd};
    use mgws_tasks::FibTasks;
    let parse = |extra: &[&str]| -> SchedArgs {
        let mut argv = vec!["mgws", "run", "fib"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(&argv).unwrap().command {
            mgws_cli::cli::Command::Run {
                workload: WorkloadCmd::Fib { sched, .. },
            } => sched,
            _ => unreachable!(),
        }
    };
    let backend = |extra: &[&str]| parse(extra).backend::<FibTasks>().unwrap();
    for (method, want, name) in [
        ("mgws", Method::Mgws, "cpu"),
        ("static", Method::Static, "cpu-static"),
        ("levels", Method::LEVELS, "cpu-levels"),
    ] {
        let b = backend(&["--device", "cpu", "--method", method]);
        assert_eq!(b.device, Device::Cpu, "{method}");
        assert_eq!(b.layout, ProcessLayout::OneProcess, "{method}");
        assert_eq!((b.method, b.name()), (want, name));
    }
    let b = backend(&[
        "--device",
        "cpu",
        "--method",
        "levels",
        "--level-capacity",
        "100",
    ]);
    assert_eq!(
        b.method,
        Method::Levels {
            level_capacity: Some(100)
        }
    );
    // `--processes` is the layout alone; `auto` with it is the CPU.
    for extra in [
        &["--device", "cpu", "--processes", "2"][..],
        &["--processes", "2"],
    ] {
        let b = backend(extra);
        assert_eq!(b, Backend::cpu().processes(2), "{extra:?}");
        assert_eq!(b.name(), "cpu-processes");
    }
    // GPU PEs are set up without a GPU (none is probed before the run).
    let b = backend(&["--device", "cuda", "--processes", "2", "--devices", "0,1"]);
    assert_eq!(b.layout, ProcessLayout::Pes { processes: 2 });
    assert_eq!((b.method, b.name()), (Method::Mgws, "cuda-processes"));
    let Device::Cuda(cuda) = &b.device else {
        panic!("{b:?}")
    };
    assert_eq!(
        (&cuda.devices[..], cuda.placement),
        (&[0, 1][..], Placement::Symmetric)
    );
    for (extra, needle) in [
        (
            &["--device", "cpu", "--devices", "0"][..],
            "need --device cuda",
        ),
        (
            &["--device", "cpu", "--placement", "host"],
            "need --device cuda",
        ),
        (
            &["--method", "static", "--processes", "2"],
            "--method static runs in one process",
        ),
        (
            &["--device", "cuda", "--method", "levels", "--processes", "2"],
            "--method levels runs in one process",
        ),
        (
            &["--device", "cpu", "--processes", "2", "--nodes", "2"],
            "it needs --device cuda --processes N",
        ),
        (&["--level-capacity", "5"], "needs --method levels"),
        (
            &[
                "--device",
                "cpu",
                "--method",
                "levels",
                "--cpu-domains",
                "2",
            ],
            "--cpu-domains",
        ),
    ] {
        let a = parse(extra);
        let e = a
            .reject_inapplicable()
            .and_then(|()| a.backend::<FibTasks>().map(drop))
            .unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{extra:?}: {e:?}");
        assert!(e.to_string().contains(needle), "{extra:?}: {e}");
    }
    // The flags that mixed the axes are gone.
    for old in [&["--backend", "cpu"][..], &["--gpu-kernel", "static"]] {
        let argv = [&["mgws", "run", "fib"][..], old].concat();
        assert!(Cli::try_parse_from(&argv).is_err(), "{old:?}");
    }
}
