//! `mgws run --processes N`: the multi-process CPU run (one PE process each, sharing one memory
//! file) is exact on every built-in workload (STALL: the hang test), every termination mode and several lanes, and a
//! PE that dies, hangs or fails ends the run with a clear error and the documented exit code,
//! leaving no process behind.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const EXIT_ERROR: i32 = 1;

fn mgws(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mgws"))
        .args(args)
        .output()
        .expect("running mgws")
}

/// The run's JSON object (the last line of stdout under `--json`).
fn json(o: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// Runs `args` with `--json` and asserts a verified run on the multi-process backend.
fn verified(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    let o = mgws(&all);
    let v = json(&o);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {v}");
    assert_eq!(v["verified"], true, "{args:?}: {v}");
    assert_eq!(v["backend"], "cpu-processes", "{args:?}: {v}");
    v
}

#[test]
fn memset_uts_fib_and_skew_are_exact_over_one_to_four_processes() {
    for processes in ["1", "2", "3", "4"] {
        let workers = "4";
        let v = verified(&[
            "run",
            "memset",
            "--tasks",
            "300000",
            "--processes",
            processes,
            "--workers",
            workers,
        ]);
        assert_eq!(v["result"]["lost"], 0);
        assert_eq!(v["result"]["duplicated"], 0);
        assert_eq!(v["tasks"], 300_000);
        let v = verified(&[
            "run",
            "uts",
            "--preset",
            "T1",
            "--processes",
            processes,
            "--workers",
            workers,
        ]);
        // T1's published counts (the workload verifies them; the figures say which tree ran).
        assert_eq!(v["result"]["nodes"], 4_130_071);
        verified(&[
            "run",
            "fib",
            "--n",
            "24",
            "--processes",
            processes,
            "--workers",
            workers,
        ]);
        verified(&[
            "run",
            "skew",
            "--tasks",
            "20000",
            "--k",
            "2",
            "--processes",
            processes,
            "--workers",
            workers,
        ]);
    }
}

#[test]
fn every_termination_mode_with_several_lanes_and_shared_queues() {
    for termination in ["counter", "tree", "hierarchical"] {
        let v = verified(&[
            "run",
            "fib",
            "--n",
            "18",
            "--processes",
            "2",
            "--workers",
            "4",
            "--lanes",
            "3",
            "--termination",
            termination,
        ]);
        assert_eq!(v["lanes"], 3);
        verified(&[
            "run",
            "uts",
            "--preset",
            "T1",
            "--processes",
            "2",
            "--workers",
            "4",
            "--queue-sharing",
            "2",
            "--termination",
            termination,
        ]);
    }
    // Steals cross PEs: with one worker per PE and one root task, the worker whose home range
    // does not hold the root gets work only by stealing it from the other PE. (A short run may
    // end before its first steal lands, so up to three runs.)
    let crossed = (0..3).any(|_| {
        let v = verified(&[
            "run",
            "fib",
            "--n",
            "28",
            "--processes",
            "2",
            "--workers",
            "2",
        ]);
        let workers = v["per_worker"].as_array().unwrap().clone();
        let thief = workers
            .iter()
            .find(|w| w["initial_loads"] == 0)
            .unwrap_or_else(|| panic!("both workers loaded the root: {v}"));
        thief["tasks_stolen"].as_u64().unwrap() > 0 && thief["tasks_run"].as_u64().unwrap() > 0
    });
    assert!(
        crossed,
        "no steal crossed from one PE to the other in three runs"
    );
}

#[test]
fn contains_is_exact_over_processes() {
    let dir = std::env::temp_dir().join(format!("mgws-pe-contains-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let corpus = dir.join("corpus.jsonl");
    let mut text = String::new();
    for i in 0..400 {
        let body = if i % 7 == 0 {
            "a word by the way"
        } else {
            "nothing here"
        };
        text.push_str(&format!(
            "{{\"title\": \"t{i}\", \"text\": \"{body} {i}\"}}\n"
        ));
    }
    std::fs::write(&corpus, text).unwrap();
    let corpus = corpus.display().to_string();
    let v = verified(&[
        "run",
        "contains",
        "--corpus",
        &corpus,
        "--word",
        "by",
        "--processes",
        "3",
        "--workers",
        "3",
    ]);
    assert_eq!(v["verified"], true);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The PE processes `parent` started (its children), by pid.
fn children_of(parent: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{parent}/task")).unwrap() {
        let path = task.unwrap().path().join("children");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        pids.extend(text.split_whitespace().map(|p| p.parse::<u32>().unwrap()));
    }
    pids
}

fn alive(pid: u32) -> bool {
    // A reaped process is gone from /proc; a zombie would still be listed as state Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

#[test]
fn a_pe_that_dies_stops_the_run_with_a_process_error_and_no_pe_is_left() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mgws"))
        .args([
            "run",
            "fib",
            "--n",
            "60",
            "--processes",
            "2",
            "--workers",
            "2",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for both PEs to start.
    let start = Instant::now();
    let pes = loop {
        let pes = children_of(child.id());
        if pes.len() == 2 {
            break pes;
        }
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().ok();
            panic!("PEs never started");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(300));
    let killed = Instant::now();
    let kill = Command::new("kill")
        .args(["-KILL", &pes[1].to_string()])
        .status()
        .unwrap();
    if !kill.success() {
        child.kill().ok();
        panic!("could not kill PE 1 (pid {})", pes[1]);
    }
    // The run must end on its own; if it does not, end it here rather than hang the suite (its
    // FIB would run for days).
    while child.try_wait().unwrap().is_none() {
        if killed.elapsed() > Duration::from_secs(30) {
            child.kill().ok();
            panic!("the run went on for 30 s after PE 1 was killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let ended = killed.elapsed();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(EXIT_ERROR));
    let v = json(&o);
    assert_eq!(v["kind"], "process", "{v}");
    let message = v["error"].as_str().unwrap();
    assert!(
        message.contains("PE 1") && message.contains("SIGKILL"),
        "{message}"
    );
    // The launcher notices within a watchdog poll and ends the other PE at once.
    assert!(ended < Duration::from_secs(5), "took {ended:?}");
    assert!(!alive(pes[0]), "PE 0 outlived its run");
}

#[test]
fn a_hung_pe_ends_in_a_hang_report_and_is_ended() {
    let start = Instant::now();
    let o = mgws(&[
        "run",
        "stall",
        "--tasks",
        "4",
        "--nanos",
        "30000000000",
        "--watchdog-ms",
        "300",
        "--processes",
        "2",
        "--workers",
        "4",
        "--json",
    ]);
    let took = start.elapsed();
    assert_eq!(o.status.code(), Some(EXIT_ERROR));
    let v = json(&o);
    assert_eq!(v["kind"], "hang", "{v}");
    // Every worker of both PEs is in the report.
    let message = v["error"].as_str().unwrap();
    for w in 0..4 {
        assert!(message.contains(&format!("worker    {w}:")), "{message}");
    }
    // The watchdog, then the grace of one second for the stuck PEs, which are then killed:
    // not the tasks' 30 s.
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

#[test]
fn a_task_error_on_a_pe_is_the_runs_error() {
    let o = mgws(&[
        "run",
        "memset",
        "--tasks",
        "100000",
        "--corrupt-tag-of",
        "70000",
        "--processes",
        "2",
        "--workers",
        "4",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(EXIT_ERROR));
    let v = json(&o);
    assert_eq!(v["kind"], "unknown_tag", "{v}");
}

#[test]
fn bad_process_settings_are_refused() {
    for (args, needle) in [
        (vec!["--processes", "0"], "1 to 8 processes, not 0"),
        (vec!["--processes", "9", "--workers", "18"], "not 9"),
        (
            vec!["--processes", "3", "--workers", "2"],
            "cannot be split",
        ),
        (
            vec!["--processes", "2", "--device", "cpu", "--method", "static"],
            "--method static runs in one process",
        ),
        (
            vec!["--processes", "2", "--method", "levels"],
            "--method levels runs in one process",
        ),
        (
            vec!["--processes", "2", "--device", "cuda", "--method", "static"],
            "drop --processes or --method",
        ),
        (
            vec![
                "--processes",
                "2",
                "--device",
                "cuda",
                "--placement",
                "host",
            ],
            "do not apply",
        ),
        (
            vec!["--processes", "2", "--device", "cpu", "--cpu-domains", "2"],
            "exclude each other",
        ),
    ] {
        let mut all = vec!["run", "memset", "--tasks", "1000", "--json"];
        all.extend(args.iter().copied());
        let o = mgws(&all);
        assert_eq!(o.status.code(), Some(EXIT_ERROR), "{args:?}");
        let v = json(&o);
        assert_eq!(v["kind"], "config", "{args:?}: {v}");
        assert!(
            v["error"].as_str().unwrap().contains(needle),
            "{args:?}: {v}"
        );
    }
}

#[test]
fn bench_runs_its_mgws_method_over_processes() {
    let out = std::env::temp_dir().join(format!("mgws-pe-bench-{}", std::process::id()));
    let out = out.display().to_string();
    let o = mgws(&[
        "bench",
        "fib",
        "-n",
        "20",
        "--workers",
        "2",
        "--reps",
        "1",
        "--warmup",
        "0",
        "--methods",
        "mgws,static",
        "--processes",
        "2",
        "--out",
        &out,
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("mgws over 2 PE processes"), "{text}");
    std::fs::remove_dir_all(&out).ok();
}
