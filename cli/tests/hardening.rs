//! The `mgws` binary on bad input, broken output and hangs: each ends in a clear error with the
//! documented exit code (docs/cli.md, "Exit status"; docs/design.md, "Bad input and faults").

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const EXIT_ERROR: i32 = 1;
const EXIT_USAGE: i32 = 64;

fn mgws(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mgws"))
        .args(args)
        .env_remove("NO_COLOR")
        .output()
        .expect("running mgws")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The one JSON object stdout must hold under `--json`.
fn json(o: &Output) -> serde_json::Value {
    let text = stdout(o);
    let mut objects = serde_json::Deserializer::from_str(&text).into_iter::<serde_json::Value>();
    let first = objects
        .next()
        .unwrap_or_else(|| panic!("no JSON on stdout; stderr: {}", stderr(o)))
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {text}"));
    assert!(objects.next().is_none(), "more than one JSON value: {text}");
    assert!(first.is_object(), "{text}");
    first
}

/// `mgws bench fib -n N` on one worker, one repetition and no warm-up, into a temporary
/// directory named after `name`, with `extra` flags.
fn bench_fib(n: &str, name: &str, extra: &[&str]) -> Output {
    let out = std::env::temp_dir().join(format!("mgws-{name}-{}", std::process::id()));
    let out = out.display().to_string();
    let mut args = vec![
        "bench",
        "fib",
        "-n",
        n,
        "--workers",
        "1",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--out",
        &out,
    ];
    args.extend_from_slice(extra);
    mgws(&args)
}

#[test]
fn usage_errors_have_their_own_exit_code() {
    for args in [
        &["run", "memset", "--tasks", "abc"][..],
        &["run", "memset", "--no-such-flag"],
        &["run", "no-such-workload"],
        &["bench", "uts", "--workers", "x"],
    ] {
        let o = mgws(args);
        assert_eq!(
            o.status.code(),
            Some(EXIT_USAGE),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(stderr(&o).contains("error"), "{args:?}: {}", stderr(&o));
    }
    let help = mgws(&["run", "memset", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(stdout(&help).contains("--tasks"));
}

#[test]
fn under_json_stdout_holds_one_object_for_results_and_errors() {
    let ok = mgws(&[
        "run", "memset", "--tasks", "1000", "--device", "cpu", "--json",
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert_eq!(json(&ok)["verified"], true);

    let with_baselines = mgws(&[
        "run",
        "memset",
        "--tasks",
        "1000",
        "--device",
        "cpu",
        "--baselines",
        "static,levels",
        "--json",
    ]);
    assert_eq!(with_baselines.status.code(), Some(0));
    let v = json(&with_baselines);
    assert_eq!(v["baselines"].as_array().map(Vec::len), Some(2), "{v}");

    let config = mgws(&[
        "run",
        "memset",
        "--workers",
        "0",
        "--device",
        "cpu",
        "--json",
    ]);
    assert_eq!(config.status.code(), Some(EXIT_ERROR));
    let v = json(&config);
    assert_eq!(v["kind"], "config", "{v}");
    assert!(v["error"].as_str().unwrap().contains("worker"), "{v}");

    // The local queue is a ring of a power of two tasks.
    let o = mgws(&[
        "run",
        "memset",
        "--local-capacity",
        "48",
        "--device",
        "cpu",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(EXIT_ERROR));
    let v = json(&o);
    assert_eq!(v["kind"], "config", "{v}");
    assert!(v["error"].as_str().unwrap().contains("power of two"), "{v}");

    // The initial chunk: 1 to half the local queue, and a run with one in range says so.
    for bad in ["0", "17"] {
        let o = mgws(&[
            "run",
            "memset",
            "--initial-chunk",
            bad,
            "--local-capacity",
            "32",
            "--device",
            "cpu",
            "--json",
        ]);
        assert_eq!(o.status.code(), Some(EXIT_ERROR), "{bad}");
        let v = json(&o);
        assert_eq!(v["kind"], "config", "{v}");
        assert!(v["error"].as_str().unwrap().contains("chunk"), "{v}");
    }
    let chunk = mgws(&[
        "run",
        "memset",
        "--tasks",
        "1000",
        "--initial-chunk",
        "3",
        "--device",
        "cpu",
        "--json",
    ]);
    assert_eq!(chunk.status.code(), Some(0), "{}", stderr(&chunk));
    let v = json(&chunk);
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["config"]["initial_chunk"], 3, "{v}");

    let usage = mgws(&["run", "memset", "--tasks", "abc", "--json"]);
    assert_eq!(usage.status.code(), Some(EXIT_USAGE));
    assert_eq!(json(&usage)["kind"], "usage");

    let bench = bench_fib("12", "json-bench", &["--json"]);
    assert_eq!(bench.status.code(), Some(0), "{}", stderr(&bench));
    let v = json(&bench);
    assert!(!v["rows"].as_array().unwrap().is_empty(), "{v}");
}

#[test]
fn a_full_disk_is_an_error_and_a_closed_pipe_ends_quietly() {
    if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        let o = Command::new(env!("CARGO_BIN_EXE_mgws"))
            .args(["run", "memset", "--tasks", "1000", "--device", "cpu"])
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(EXIT_ERROR), "{}", stderr(&o));
        assert!(stderr(&o).contains("stdout"), "{}", stderr(&o));
    }
    // The reader takes one byte and closes the pipe before mgws writes the rest.
    let mut child = Command::new(env!("CARGO_BIN_EXE_mgws"))
        .args([
            "run", "memset", "--tasks", "1000", "--device", "cpu", "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn log_lines_in_a_pipe_carry_no_colour_codes() {
    let o = Command::new(env!("CARGO_BIN_EXE_mgws"))
        .args(["run", "memset", "--tasks", "1000", "--device", "cpu"])
        .env("MGWS_LOG", "debug")
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(!err.is_empty(), "MGWS_LOG=debug logged nothing");
    assert!(!err.contains('\u{1b}'), "{err:?}");
}

/// `mgws run stall` with a task that stalls 300 s under a 500 ms watchdog, and `extra` flags.
fn stall_under_watchdog(extra: &[&str]) -> Output {
    let mut args = vec![
        "run",
        "stall",
        "--nanos",
        "300000000000",
        "--watchdog-ms",
        "500",
    ];
    args.extend_from_slice(extra);
    mgws(&args)
}

#[test]
fn the_cpu_watchdog_ends_the_process_soon_after_it_fires() {
    for method in ["mgws", "static", "levels"] {
        let start = Instant::now();
        let o = stall_under_watchdog(&["--workers", "2", "--device", "cpu", "--method", method]);
        let took = start.elapsed();
        assert_eq!(
            o.status.code(),
            Some(EXIT_ERROR),
            "{method}: {}",
            stderr(&o)
        );
        assert!(took < Duration::from_secs(5), "{method}: took {took:?}");
        let err = stderr(&o);
        assert!(err.contains("watchdog aborted it"), "{method}: {err}");
        // The stalled worker is reported running its task, with the task's tag.
        assert!(err.contains("op=run-task"), "{method}: {err}");
        assert!(err.contains("tag="), "{method}: {err}");
    }
}

#[test]
fn sizes_beyond_host_memory_are_errors_naming_the_flag() {
    for (args, flag) in [
        (
            &["run", "memset", "--tasks", "536870911"][..],
            "--tasks 536870911",
        ),
        (
            &["run", "memset", "--tasks", "1000", "--workers", "100000"],
            "--workers 100000",
        ),
        (
            &[
                "run",
                "memset",
                "--tasks",
                "1000",
                "--spill-capacity",
                "2147483648",
            ],
            "--spill-capacity 2147483648",
        ),
        (
            &["run", "uts", "--spill-capacity", "268435456"],
            "--spill-capacity 268435456",
        ),
        (
            &["run", "uts", "--level-capacity", "1099511627776"],
            "--level-capacity 1099511627776",
        ),
    ] {
        // MEMSET's tasks reach host memory only as the CPU kernel per level's first frontier
        // (the mgws workers make them from one template).
        let method = if flag.starts_with("--level") || flag.starts_with("--tasks") {
            "levels"
        } else {
            "mgws"
        };
        let mut all = args.to_vec();
        all.extend(["--device", "cpu", "--method", method, "--json"]);
        let o = mgws(&all);
        assert_eq!(
            o.status.code(),
            Some(EXIT_ERROR),
            "{args:?}: {}",
            stderr(&o)
        );
        let v = json(&o);
        assert_eq!(v["kind"], "out_of_memory", "{args:?}: {v}");
        let message = v["error"].as_str().unwrap();
        assert!(message.contains(flag), "{args:?}: {message}");
        assert!(message.contains("available"), "{args:?}: {message}");
    }
}

#[test]
fn flags_that_do_not_apply_are_refused() {
    for (args, says) in [
        (
            &["run", "uts", "-t", "geo", "-q", "0.3"][..],
            "-q applies to",
        ),
        (&["run", "uts", "-t", "bin", "-d", "8"], "-d applies to"),
        (&["run", "uts", "-t", "geo", "-f", "0.5"], "-f applies to"),
        (
            &["run", "memset", "--tasks", "10", "--placement", "remote"],
            "--placement",
        ),
        (
            &["run", "memset", "--tasks", "10", "--level-capacity", "100"],
            "--level-capacity",
        ),
    ] {
        let mut all = args.to_vec();
        all.extend(["--device", "cpu"]);
        let o = mgws(&all);
        assert_eq!(o.status.code(), Some(EXIT_ERROR), "{args:?}");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    // Where it applies, --level-capacity is taken.
    let o = mgws(&[
        "run",
        "memset",
        "--tasks",
        "10",
        "--device",
        "cpu",
        "--level-capacity",
        "100000",
        "--baselines",
        "levels",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn help_groups_the_flags_and_names_each_backends_defaults() {
    let o = mgws(&["run", "uts", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = stdout(&o);
    for heading in ["Workload:", "Scheduler:", "CUDA:", "Output:", "Baselines:"] {
        assert!(help.contains(heading), "no {heading} in\n{help}");
    }
    // A workload flag sits under Workload, a GPU flag under CUDA.
    let at = |s: &str| help.find(s).unwrap();
    assert!(at("Workload:") < at("--max-nodes") && at("--max-nodes") < at("Scheduler:"));
    assert!(at("CUDA:") < at("--placement"));
    // The help wraps to the terminal: compare its words.
    let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("CPU: threads per worker, default 1"),
        "{help}"
    );
    assert!(words.contains("CUDA: threads per block"), "{help}");
}

#[test]
fn slow_configurations_are_warned_about() {
    let lanes = mgws(&["run", "fib", "-n", "5", "--device", "cpu", "--lanes", "2"]);
    assert_eq!(lanes.status.code(), Some(0));
    assert!(stderr(&lanes).contains("40x slower"), "{}", stderr(&lanes));
    let one = mgws(&["run", "fib", "-n", "5", "--device", "cpu", "--lanes", "1"]);
    assert!(!stderr(&one).contains("slower"), "{}", stderr(&one));
    let bench = bench_fib("3", "short-bench", &[]);
    assert_eq!(bench.status.code(), Some(0), "{}", stderr(&bench));
    assert!(
        stderr(&bench).contains("too short to time"),
        "{}",
        stderr(&bench)
    );
}

#[test]
fn long_runs_draw_no_progress_into_pipes() {
    // 1.5 s: long enough for the terminal's progress line, which a pipe must not get.
    let o = mgws(&[
        "run",
        "stall",
        "--tasks",
        "2",
        "--nanos",
        "1500000000",
        "--device",
        "cpu",
        "--workers",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(!err.contains("tasks/s") && !err.contains('\r'), "{err:?}");
}

#[cfg(unix)]
#[test]
fn long_runs_on_a_terminal_show_tasks_and_rate_and_clear_the_line() {
    // `script` gives the command a terminal; where it is missing there is nothing to check with.
    let Ok(o) = Command::new("script")
        .args(["-qc"])
        .arg(format!(
            "{} run stall --tasks 2 --nanos 1500000000 --device cpu --workers 2",
            env!("CARGO_BIN_EXE_mgws")
        ))
        .arg("/dev/null")
        .output()
    else {
        panic!("`script` (util-linux) is needed to test the terminal progress line");
    };
    let all = stdout(&o);
    assert!(all.contains(" tasks/s"), "{all:?}");
    assert!(all.contains("\u{1b}[2K"), "the line is cleared: {all:?}");
    assert!(all.contains("verified: yes"), "{all:?}");
}

#[test]
fn a_bench_whose_baseline_cannot_hold_the_work_measures_the_rest_and_says_why() {
    let o = bench_fib(
        "18",
        "bench-skip",
        &["--methods", "mgws,levels", "--level-capacity", "100"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let table = stdout(&o);
    assert!(table.contains("note: levels not measured"), "{table}");
    assert!(table.contains("--level-capacity"), "{table}");
    assert!(table.contains(" mgws "), "{table}");
}

#[test]
fn an_unwritable_bench_output_fails_before_measuring() {
    let start = Instant::now();
    let o = mgws(&[
        "bench",
        "fib",
        "-n",
        "25",
        "--workers",
        "1",
        "--reps",
        "3",
        "--out",
        "/proc/mgws-cannot-write-here",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(EXIT_ERROR), "{}", stderr(&o));
    assert_eq!(json(&o)["kind"], "io");
    assert!(stderr(&o).contains("/proc/mgws-cannot-write-here"));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "it measured first"
    );
}

#[test]
fn cpu_domains_run_every_termination_exactly_and_bad_counts_are_refused() {
    for termination in ["counter", "tree", "hierarchical"] {
        let o = mgws(&[
            "run",
            "uts",
            "--preset",
            "T3",
            "--workers",
            "6",
            "--cpu-domains",
            "3",
            "--termination",
            termination,
            "--device",
            "cpu",
        ]);
        assert_eq!(o.status.code(), Some(0), "{termination}: {}", stderr(&o));
        assert!(stdout(&o).contains("verified: yes"), "{termination}");
    }
    for (args, code, says) in [
        (&["--cpu-domains", "0"][..], EXIT_ERROR, "CPU domains"),
        (&["--cpu-domains", "7"], EXIT_ERROR, "CPU domains"),
        (
            &["--cpu-domains", "2", "--device", "cuda"],
            EXIT_ERROR,
            "--cpu-domains",
        ),
        (&["--cpu-domains", "x"], EXIT_USAGE, "--cpu-domains"),
        // Victim policies: one at a time, and local first needs a local attempt.
        (
            &["--cpu-domains", "2", "--local-first", "0"],
            EXIT_ERROR,
            "local-first stealing needs at least one attempt",
        ),
        (
            &["--local-first", "2", "--same-device-bias", "0.5"],
            EXIT_ERROR,
            "--same-device-bias and --local-first exclude each other",
        ),
        (
            &["--same-device-only", "--local-first", "2"],
            EXIT_ERROR,
            "--same-device-only and --local-first exclude each other",
        ),
        (&["--local-first", "x"], EXIT_USAGE, "--local-first"),
        (
            &["--area-layout", "replicated-add", "--device", "cpu"],
            EXIT_ERROR,
            "--area-layout",
        ),
    ] {
        let mut all = vec!["run", "memset", "--tasks", "100", "--workers", "6"];
        all.extend_from_slice(args);
        let o = mgws(&all);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn a_hang_under_hierarchical_termination_is_reported_with_the_idle_count() {
    let o = stall_under_watchdog(&[
        "--workers",
        "4",
        "--cpu-domains",
        "2",
        "--termination",
        "hierarchical",
        "--device",
        "cpu",
    ]);
    assert_eq!(o.status.code(), Some(EXIT_ERROR), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("watchdog aborted it"), "{err}");
    assert!(err.contains("op=run-task"), "{err}");
    // Three of the four workers found nothing to do: the per-device counters add up to them.
    assert!(err.contains("idle counter 3"), "{err}");
}
