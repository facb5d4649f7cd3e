//! The CUDA backend's host logic against a stand-in libcuda (`tests/cuda_mock/mockcuda.c`, built
//! with the system C compiler): grid sizing, placement checks, the env the kernel receives, data
//! areas in and out, the watchdog's abort, and how faults are reported. No GPU is involved; the
//! mock's "kernel" is a host thread with a scripted behaviour (see the C file). The C compiler
//! is the one the build already needs (bzip2-sys compiles C), so a missing one fails the tests
//! rather than skipping them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mgws_tasks::{MemsetTasks, Registry};

/// Builds the mock library once.
fn mock_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuda-mock");
        std::fs::create_dir_all(&dir).expect("creating the mock's directory");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        // Each stand-in library from its C file.
        let build = |source: &str, out: &Path, what: &str| {
            if let Some(parent) = out.parent() {
                std::fs::create_dir_all(parent).expect("creating a mock's directory");
            }
            let src = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/cuda_mock")
                .join(source);
            let ok = Command::new(&cc)
                .args(["-shared", "-fPIC", "-O1", "-o"])
                .arg(out)
                .arg(&src)
                .arg("-lpthread")
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            assert!(
                ok,
                "building the mock {what} with the C compiler {cc:?} failed"
            );
        };
        build("mockcuda.c", &dir.join("libcuda.so"), "libcuda");
        // The stand-in NVSHMEM, where NVSHMEM_HOME finds it (`<home>/lib`).
        let lib = dir.join("nvshmem/lib");
        build(
            "mocknvshmem.c",
            &lib.join("libnvshmem_host.so.3"),
            "NVSHMEM",
        );
        // The stand-in NVRTC, apart from the loader's path (MGWS_NVRTC_LIBRARY names it), and
        // the files the device-API transport links against: NVSHMEM's headers and device
        // library beside the stand-in host library, and CCCL's headers.
        build("mocknvrtc.c", &dir.join("nvrtc/libnvrtc.so.13"), "NVRTC");
        let include = dir.join("nvshmem/include");
        std::fs::create_dir_all(&include).expect("creating the mock NVSHMEM's headers");
        std::fs::write(include.join("nvshmem.h"), "/* mock */\n").expect("writing nvshmem.h");
        std::fs::write(lib.join("libnvshmem_device.a"), "!<arch>\n").expect("writing the library");
        let cccl = dir.join("cuda-include/cccl/cuda/std");
        std::fs::create_dir_all(&cccl).expect("creating the mock CCCL headers");
        std::fs::write(cccl.join("cstdint"), "/* mock */\n").expect("writing cstdint");
        std::fs::write(
            dir.join("mock-nvshmem.ptx"),
            mock_nvshmem_ptx(MemsetTasks::FINGERPRINT),
        )
        .expect("writing the mock's device-API PTX");
        // A PTX file with the entries the host checks and the built-in registry's fingerprint
        // (the mock never compiles it), and one with another registry's fingerprint.
        std::fs::write(dir.join("mock.ptx"), mock_ptx(MemsetTasks::FINGERPRINT))
            .expect("writing the mock's PTX");
        std::fs::write(
            dir.join("wrong.ptx"),
            mock_ptx(MemsetTasks::FINGERPRINT ^ 0x5a5a),
        )
        .expect("writing the mock's PTX");
        dir
    })
}

/// The mock's PTX text, declaring `fingerprint` as `worker_kernel!` does, with the MEMSET
/// worker entries of one and of two GPUs (device and system scope) with unshared and shared queues
/// (a GPU run's default), the hierarchical entries of GPU PEs, the bridged entries of one GPU
/// beside CPU workers, the level entry and the fill entry of indexed initial tasks, but no
/// static entry.
fn mock_ptx(fingerprint: u64) -> String {
    let worker = |suffix: &str| {
        format!(
            ".visible .entry mgws_memset_worker_{suffix}(\n\
             \t.param .u64 p0,\n\t.param .u32 p1,\n\t.param .u32 p2\n)\n{{\n\tret;\n}}\n"
        )
    };
    format!(
        ".version 8.0\n.target sm_90\n.address_size 64\n\
         .visible .global .align 8 .u64 mgws_memset_fingerprint = {fingerprint};\n\
         {}{}{}{}{}{}{}{}{}{}\
         .visible .entry mgws_memset_level(\n\t.param .u64 .ptr .align 1 q0,\n\t.param .u32 q1\n)\n\
         {{\n\tret;\n}}\n\
         .visible .entry mgws_memset_fill_indexed(\n\t.param .u64 .ptr .align 1 f0,\n\
         \t.param .align 16 .b8 f1[64],\n\t.param .u64 f2,\n\t.param .u64 f3\n)\n{{\n\tret;\n}}\n",
        worker("counter_damping_single_device"),
        worker("counter_damping_single_system"),
        worker("counter_damping_shared_device"),
        worker("counter_damping_shared_system"),
        // GPU PE processes: hierarchical termination by default, system scope; shared queues
        // over the mapped transport, unshared over the device API.
        worker("hierarchical_damping_single_system"),
        worker("hierarchical_damping_shared_system"),
        // One GPU beside CPU workers (--cpu-workers).
        worker("counter_damping_single_device_bridged"),
        worker("counter_damping_shared_device_bridged"),
        worker("hierarchical_damping_single_device_bridged"),
        worker("hierarchical_damping_shared_device_bridged"),
    )
}

/// [`mock_ptx`] as `cargo xtask ptx --nvshmem` builds it: calling the NVSHMEM wrappers and with
/// the window global.
fn mock_nvshmem_ptx(fingerprint: u64) -> String {
    mock_ptx(fingerprint).replacen(
        ".address_size 64\n",
        ".address_size 64\n\
         .extern .func  (.param .b64 func_retval0) mgws_nvshmem_fetch_add\n(\n\
         \t.param .b64 a,\n\t.param .b64 b,\n\t.param .b32 c\n);\n\
         .visible .global .align 8 .b8 mgws_pe_window[16];\n",
        1,
    )
}

/// Runs `mgws run memset` with the mock as libcuda.
fn mgws(mode: &str, gpus: u32, args: &[&str]) -> Output {
    mgws_with_ptx(mode, gpus, "mock.ptx", args)
}

/// [`mgws`] with the PTX file `ptx` of the mock's directory.
fn mgws_with_ptx(mode: &str, gpus: u32, ptx: &str, args: &[&str]) -> Output {
    mgws_with_env(mode, gpus, ptx, args, &[])
}

/// [`mgws_with_ptx`] with extra environment variables for the mock.
fn mgws_with_env(mode: &str, gpus: u32, ptx: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    mgws_command(mode, gpus, ptx, args, env)
        .output()
        .expect("running mgws")
}

/// The command [`mgws_with_env`] runs.
fn mgws_command(mode: &str, gpus: u32, ptx: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
    let dir = mock_dir();
    let mut c = Command::new(env!("CARGO_BIN_EXE_mgws"));
    c.args(["run", "memset"])
        .args(args)
        .arg("--ptx")
        .arg(dir.join(ptx))
        .env("LD_LIBRARY_PATH", dir)
        .env("MOCK_CUDA_MODE", mode)
        .env("MOCK_CUDA_GPUS", gpus.to_string())
        .envs(env.iter().copied());
    c
}

/// Checks that `mgws run memset` with `args` on `gpus` mock GPUs and the environment variable
/// `var` set to `value` is a configuration error (exit code 1) saying `var="value": expected ...`
/// before any launch.
fn refused_setting(gpus: u32, args: &[&str], var: &str, value: &str, expected: &str) {
    let o = mgws_with_env("memset", gpus, "mock.ptx", args, &[(var, value)]);
    assert_setting_refused(&o, var, value, expected);
}

/// Whether a MEMSET run's output says that no slot was lost and none written twice.
fn memset_exact(t: &str) -> bool {
    t.contains(r#""lost":0"#) && t.contains(r#""duplicated":0"#)
}

/// Checks that the run `o` ended as a configuration error (exit code 1) saying
/// `var="value": expected ...`, before any launch.
fn assert_setting_refused(o: &Output, var: &str, value: &str, expected: &str) {
    let t = text(o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains(&format!("{var}={value:?}: expected {expected}")),
        "{t}"
    );
    assert!(!t.contains("mock: launch"), "{t}");
}

/// Checks that `mgws run memset` with `args` (one mock GPU) is refused as bad input (exit code 1)
/// with an error containing `needle`.
fn refused(args: &[&str], needle: &str) {
    let o = mgws("memset", 1, args);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains(needle), "{t}");
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn data_areas_and_initial_tasks_reach_the_kernel_in_every_placement() {
    for extra in [
        &["--placement", "global"][..],
        &["--placement", "host", "--tasks-in", "host"],
        &[
            "--placement",
            "global",
            "--tasks-in",
            "host",
            "--lanes",
            "128",
        ],
    ] {
        let mut args = vec!["--device", "cuda", "--tasks", "5000"];
        args.extend_from_slice(extra);
        let o = mgws("memset", 1, &args);
        let t = text(&o);
        // The mock ran every task through the env's pointers; the host copied the area back.
        assert!(o.status.success(), "{t}");
        assert!(memset_exact(&t), "{t}");
        assert!(t.contains("mock: launch grid="), "{t}");
    }
}

#[test]
fn cpu_workers_that_run_no_task_are_left_out_after_the_first_run_unless_always() {
    // The mock's kernel runs every MEMSET task and gives the CPU workers none. Each process keeps
    // what it measured in the ledger of the cache directory named here.
    let cache = mock_dir().join("bridge-ledger-test");
    let _ = std::fs::remove_dir_all(&cache);
    let cache = cache.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["--device", "cuda", "--cpu-workers", "2"];
        args.extend_from_slice(extra);
        if !extra.contains(&"--tasks") {
            args.extend(["--tasks", "3000"]);
        }
        let o = mgws_with_env("memset", 1, "mock.ptx", &args, &[("MGWS_CACHE_DIR", cache)]);
        let t = text(&o);
        assert!(o.status.success(), "{t}");
        // Every run verified.
        let runs = t.lines().filter(|l| l.contains(" backend: ")).count();
        assert_eq!(
            t.matches("0 lost, 0 written more than once").count(),
            runs,
            "{t}"
        );
        let backends: Vec<String> = t
            .lines()
            .filter(|l| l.contains(" backend: "))
            .map(|l| {
                l.split(" on ")
                    .nth(1)
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect();
        (backends, t)
    };
    // The first run beside one of them (the mock's 92 workers and 1), then the GPU alone, each
    // saying why.
    let (backends, t) = run(&["--repeat", "3"]);
    assert_eq!(backends, ["cuda+cpu", "cuda", "cuda"], "{t}");
    assert!(t.contains("on cuda+cpu backend: 93 workers"), "{t}");
    let why = "CPU workers left out: one beside the GPUs ran 0.000% of this job's tasks, so 2 \
               would run about 0.000%";
    // (The log's copy of the line aside.)
    assert_eq!(t.lines().filter(|l| l.starts_with(why)).count(), 2, "{t}");
    // A later process reads the ledger: its first run is on the GPU alone too.
    let (backends, t) = run(&[]);
    assert_eq!(backends, ["cuda"], "{t}");
    assert!(t.lines().any(|l| l.starts_with(why)), "{t}");
    // Another job (more tasks) is measured anew.
    let (backends, t) = run(&["--tasks", "4000"]);
    assert_eq!(backends, ["cuda+cpu"], "{t}");
    // Always: every run beside all of them, whatever the ledger says.
    let (backends, t) = run(&["--repeat", "2", "--bridge-policy", "always"]);
    assert_eq!(backends, ["cuda+cpu", "cuda+cpu"], "{t}");
    assert_eq!(
        t.matches("on cuda+cpu backend: 94 workers").count(),
        2,
        "{t}"
    );
    assert!(!t.contains("left out"), "{t}");
    // Those runs added to the job's record and kept what was measured before: the next process
    // under the default leaves the CPU workers out at once.
    let (backends, t) = run(&[]);
    assert_eq!(backends, ["cuda"], "{t}");
    let ledger = std::fs::read_to_string(Path::new(cache).join("bridge-ledger.txt")).unwrap();
    assert_eq!(ledger.lines().count(), 2, "{ledger}");
    assert!(
        ledger.lines().all(|l| l.split(' ').nth(2) == Some("0e0")),
        "{ledger}"
    );
    // The policy without CPU workers is refused with the flag it needs.
    refused(
        &["--device", "cuda", "--bridge-policy", "always"],
        "it needs --cpu-workers N",
    );
}

#[test]
fn several_gpus_get_their_share_of_workers_and_one_env_each() {
    let o = mgws(
        "memset",
        2,
        // The local queue of the backend's default, whose blocks fit 32 per mock SM.
        &[
            "--device",
            "cuda",
            "--devices",
            "0,1",
            "--tasks",
            "100",
            "--local-capacity",
            "64",
        ],
    );
    let t = text(&o);
    assert!(t.contains("device=0 workers=256"), "{t}");
    assert!(t.contains("device=1 workers=256"), "{t}");
    assert!(t.contains(r#""lost":0"#), "{t}");
}

#[test]
fn every_area_layout_over_several_gpus_keeps_memset_exact() {
    // Each mock GPU runs the tasks of its own queues' home ranges through its own env's pointer
    // to the area, so every GPU writes its share: partitioned slices on a small granularity
    // (several slices with bytes, one range), one home, copies added after the run.
    for gpus in [2u32, 3] {
        let devices = (0..gpus)
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(",");
        for layout in ["auto", "partitioned", "single-home", "replicated-add"] {
            let args = [
                "--device",
                "cuda",
                "--devices",
                &devices,
                "--tasks",
                "20000",
                "--area-layout",
                layout,
            ];
            let o = mgws_with_env(
                "memset",
                gpus,
                "mock.ptx",
                &args,
                &[("MOCK_CUDA_GRANULARITY", "512")],
            );
            let t = text(&o);
            assert!(o.status.success(), "{gpus} GPUs, {layout}: {t}");
            assert!(memset_exact(&t), "{gpus} GPUs, {layout}: {t}");
            assert_eq!(t.matches("mock: launch grid").count(), gpus as usize, "{t}");
        }
    }
}

#[test]
fn a_listed_initial_set_is_split_over_the_gpus_only_where_whole_units_keep_each_share_home() {
    // MEMSET's tasks listed (the diagnostic flag lists them; the mock runs every task by its
    // index), 20,000 of 64 bytes over 2 GPUs: 625 KiB per GPU's share.
    let args = [
        "--device",
        "cuda",
        "--devices",
        "0,1",
        "--tasks",
        "20000",
        "--corrupt-tag-of",
        "0",
    ];
    // 32 units of 512 bytes fit in a share: split; 32 of 64 KiB do not: a copy on each GPU.
    for (granularity, placement) in [("512", "Split"), ("65536", "Copies")] {
        let env = [
            ("MOCK_CUDA_GRANULARITY", granularity),
            ("MGWS_LOG", "mgws::cuda::memory=debug"),
        ];
        let o = mgws_with_env("memset", 2, "mock.ptx", &args, &env);
        let t = text(&o);
        assert!(o.status.success(), "{granularity}: {t}");
        assert!(t.contains("mock: initial tasks listed"), "{t}");
        assert!(memset_exact(&t), "{granularity}: {t}");
        assert!(
            t.contains(&format!("placement={placement} bytes=1280000")),
            "{granularity}: {t}"
        );
    }
}

#[test]
fn a_partitioned_area_needs_virtual_memory_management_and_the_default_falls_back() {
    let args = |layout| {
        [
            "--device",
            "cuda",
            "--devices",
            "0,1",
            "--tasks",
            "3000",
            "--area-layout",
            layout,
        ]
    };
    let no_vmm = [("MOCK_CUDA_VMM", "0")];
    // Chosen: a configuration error (exit 1) that says what to do.
    let o = mgws_with_env("memset", 2, "mock.ptx", &args("partitioned"), &no_vmm);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("virtual memory management") && t.contains("single-home"),
        "{t}"
    );
    assert!(!t.contains("mock: launch"), "{t}");
    // The default: one home and a copy of the initial tasks per GPU, as before; exact.
    let o = mgws_with_env("memset", 2, "mock.ptx", &args("auto"), &no_vmm);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(memset_exact(&t), "{t}");
    // A layout flag on the CPU backend is refused, not ignored.
    refused(
        &["--device", "cpu", "--area-layout", "single-home"],
        "--area-layout",
    );
}

#[test]
fn gpu_runs_share_queues_by_two_unless_told_or_unable() {
    let sharing = |gpus, args: &[&str]| {
        let mut all = vec![
            "--device",
            "cuda",
            "--tasks",
            "100",
            "--local-capacity",
            "64",
        ];
        all.extend_from_slice(args);
        let o = mgws("memset", gpus, &all);
        let t = text(&o);
        assert!(t.contains(r#""lost":0"#), "{t}");
        ["1", "2", "4"]
            .into_iter()
            .find(|n| t.contains(&format!(" {n} per public queue)")))
            .unwrap_or_else(|| panic!("no queue sharing reported: {t}"))
    };
    assert_eq!(sharing(1, &[]), "2");
    assert_eq!(sharing(1, &["--queue-sharing", "1"]), "1");
    assert_eq!(sharing(1, &["--queue-sharing", "4"]), "4");
    // An odd worker count runs unshared rather than failing.
    assert_eq!(sharing(1, &["--workers", "127"]), "1");
    // Several GPUs share by two as well, unless the workers do not pair up on every GPU.
    assert_eq!(sharing(2, &["--devices", "0,1"]), "2");
    assert_eq!(sharing(2, &["--devices", "0,1", "--workers", "2"]), "1");
    assert_eq!(
        sharing(2, &["--devices", "0,1", "--queue-sharing", "1"]),
        "1"
    );
}

#[test]
fn the_workers_default_to_what_fits_and_more_are_refused() {
    let o = mgws(
        "exit",
        1,
        &[
            "--device",
            "cuda",
            "--workers",
            "129",
            "--local-capacity",
            "64",
        ],
    );
    let t = text(&o);
    assert!(!o.status.success());
    assert!(t.contains("at most 128 blocks are co-resident"), "{t}");
    let o = mgws("exit", 1, &["--device", "cuda", "--lanes", "8"]);
    assert!(text(&o).contains("32..=1024"), "{}", text(&o));
}

#[test]
fn placements_that_would_lose_atomics_are_refused() {
    let o = mgws(
        "exit",
        2,
        &[
            "--device",
            "cuda",
            "--devices",
            "0,1",
            "--placement",
            "host",
        ],
    );
    let t = text(&o);
    assert!(t.contains("HOST_NATIVE_ATOMIC_SUPPORTED = 0"), "{t}");
    let o = mgws("exit", 1, &["--device", "cuda", "--placement", "remote"]);
    assert!(text(&o).contains("two GPUs"), "{}", text(&o));
    let o = mgws("memset", 2, &["--device", "cuda", "--placement", "remote"]);
    assert!(text(&o).contains(r#""lost":0"#), "{}", text(&o));
}

#[test]
fn a_trapped_kernel_is_an_error_naming_the_cause() {
    let o = mgws("trap", 1, &["--device", "cuda"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("CUDA_ERROR_LAUNCH_FAILED") && t.contains("trapped"),
        "{t}"
    );
}

#[test]
fn an_error_the_scheduler_recorded_is_reported() {
    let o = mgws("error", 1, &["--device", "cuda"]);
    let t = text(&o);
    assert!(t.contains("tag 57005") && t.contains("worker 3"), "{t}");
}

#[test]
fn a_stalled_run_is_aborted_through_its_gpus_abort_flag_and_reports_every_worker() {
    let o = mgws(
        "hang",
        1,
        &["--device", "cuda", "--workers", "4", "--watchdog-ms", "300"],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("watchdog aborted it"), "{t}");
    assert!(t.contains("worker    3: op=start"), "{t}");
    // The kernel saw the abort flag and exited: no leak message.
    assert!(!t.contains("did not exit"), "{t}");
}

#[test]
fn a_kernel_that_ignores_the_abort_cannot_hang_the_host() {
    let start = Instant::now();
    let o = mgws(
        "stuck",
        1,
        &["--device", "cuda", "--workers", "4", "--watchdog-ms", "300"],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("did not exit within"), "{t}");
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn auto_falls_back_to_the_cpu_when_no_gpu_is_usable() {
    let o = mgws("nodevice", 1, &["--workers", "2", "--tasks", "100"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("running on the CPU") && t.contains("CUDA_ERROR_NO_DEVICE"),
        "{t}"
    );
    assert!(t.contains("on cpu backend"), "{t}");
    let o = mgws("nodevice", 1, &["--device", "cuda"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("backend unavailable"), "{}", text(&o));
}

#[test]
fn the_kernel_per_level_baseline_runs_level_by_level_in_the_same_process() {
    let o = mgws(
        "memset",
        1,
        &[
            "--device",
            "cuda",
            "--baselines",
            "levels",
            "--tasks",
            "300",
        ],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("mock: level launch") && t.contains("frontier=300"),
        "{t}"
    );
    assert!(t.contains("on cuda-levels backend"), "{t}");
    assert_eq!(t.matches("verified: yes").count(), 2, "{t}");
}

#[test]
fn a_faulting_level_kernel_ends_the_run_with_the_level_and_the_cause() {
    let o = mgws("trap", 1, &["--device", "cuda", "--method", "levels"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("level 0 of the kernel-per-level baseline failed")
            && t.contains("CUDA_ERROR_LAUNCH_FAILED"),
        "{t}"
    );
}

#[test]
fn a_stalled_level_is_aborted_through_its_abort_counter() {
    let o = mgws(
        "hang",
        1,
        &[
            "--device",
            "cuda",
            "--method",
            "levels",
            "--watchdog-ms",
            "300",
        ],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("watchdog aborted it"), "{t}");
    // The level saw its abort counter and exited: no leak message.
    assert!(!t.contains("did not exit"), "{t}");
}

#[test]
fn a_missing_baseline_kernel_is_reported_the_main_run_stands_and_the_command_fails() {
    let o = mgws(
        "memset",
        1,
        &["--device", "cuda", "--baselines", "static", "--tasks", "64"],
    );
    let t = text(&o);
    assert!(
        t.contains("has no kernel `mgws_memset_static_device`"),
        "{t}"
    );
    assert!(t.contains(r#""lost":0"#), "{t}");
    // The baseline's figures are missing: the command fails.
    assert_eq!(o.status.code(), Some(1), "{t}");
}

#[test]
fn a_ptx_built_for_another_registry_is_refused_before_it_is_loaded() {
    let o = mgws_with_ptx("memset", 1, "wrong.ptx", &["--device", "cuda"]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("built for another task registry")
            && t.contains("MemsetTasks")
            && t.contains("wrong.ptx")
            && t.contains(&format!("{:#018x}", MemsetTasks::FINGERPRINT))
            && t.contains(&format!("{:#018x}", MemsetTasks::FINGERPRINT ^ 0x5a5a)),
        "{t}"
    );
    assert!(!t.contains("mock: module load"), "{t}");
}

#[test]
fn the_kernel_is_compiled_once_per_gpu_for_a_run_and_its_baselines() {
    let o = mgws(
        "memset",
        2,
        &["--device", "cuda", "--devices", "0,1", "--tasks", "100"],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    // One JIT per GPU of the one worker entry the run launches (the defaults' occupancy query
    // and the run share it), never of the whole module. MEMSET's tasks are indexed: the workers
    // make them from the template, so the fill entry is not loaded.
    assert_eq!(t.matches("mock: module load (1 entries)").count(), 2, "{t}");
    assert!(
        !t.contains("mock: function mgws_memset_fill_indexed"),
        "{t}"
    );
    assert_eq!(t.matches("mock: initial tasks indexed").count(), 2, "{t}");
    assert!(
        !t.contains("mock: module load (2") && !t.contains("mock: module load (3"),
        "{t}"
    );
    let o = mgws(
        "memset",
        1,
        &[
            "--device",
            "cuda",
            "--baselines",
            "levels",
            "--tasks",
            "300",
        ],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    // The worker entry, the level entry and the fill entry (which builds the level run's first
    // frontier), each compiled once.
    assert_eq!(t.matches("mock: module load (1 entries)").count(), 3, "{t}");
    assert_eq!(t.matches("mock: module load").count(), 3, "{t}");
}

#[test]
fn the_gpu_bench_without_a_gpu_is_a_clear_error() {
    let dir = mock_dir();
    let o = Command::new(env!("CARGO_BIN_EXE_mgws"))
        .args(["bench", "gpu", "--reps", "1", "--workloads", "memset"])
        .env("LD_LIBRARY_PATH", dir)
        .env("MOCK_CUDA_MODE", "memset")
        .env("MOCK_CUDA_GPUS", "0")
        .output()
        .expect("running mgws");
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("mgws bench gpu needs a CUDA GPU"), "{t}");
}

#[test]
fn the_multi_gpu_bench_runs_every_gpu_count_verified_and_writes_its_files() {
    let dir = mock_dir();
    let out = dir.join("bench-multi");
    let _ = std::fs::remove_dir_all(&out);
    let bench = |gpus: &str, visible: &str| {
        Command::new(env!("CARGO_BIN_EXE_mgws"))
            .args(["bench", "multi", "--reps", "2", "--workloads", "memset"])
            .args([
                "--memset-tasks",
                "6000",
                "--modes",
                "process",
                "--gpus",
                gpus,
            ])
            .arg("--ptx")
            .arg(dir.join("mock.ptx"))
            .arg("--out")
            .arg(&out)
            .env("LD_LIBRARY_PATH", dir)
            .env("MOCK_CUDA_MODE", "memset")
            .env("MOCK_CUDA_GPUS", visible)
            .output()
            .expect("running mgws")
    };
    let o = bench("1,2,3", "3");
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    // One launch per GPU of each run: (1 + 2 + 3) x 2 repetitions.
    assert_eq!(t.matches("mock: launch grid").count(), 12, "{t}");
    // The process pays each module load once, whatever the runs: one per GPU and entry (GPU 0:
    // one GPU's device-scope entry and several GPUs' system-scope one; GPUs 1 and 2: the
    // latter).
    assert_eq!(t.matches("mock: module load").count(), 4, "{t}");
    for g in 1..=3 {
        assert!(t.contains(&format!("memset    process      {g}")), "{t}");
    }
    assert!(t.contains("1.00x"), "{t}");
    let csv = std::fs::read_to_string(out.join("multi-runs.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 6, "{csv}");
    assert!(
        std::fs::read_to_string(out.join("multi-memset-speedup.svg"))
            .unwrap()
            .contains("<svg")
    );
    // More GPUs than are visible, or no 1 to compare with: refused before any run (exit 1).
    for (gpus, why) in [
        ("1,4", "4 GPUs, but 3 are visible"),
        ("2", "must include 1"),
    ] {
        let o = bench(gpus, "3");
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{t}");
        assert!(t.contains(why), "{t}");
        assert!(!t.contains("mock: launch"), "{t}");
    }
}

#[test]
fn a_size_beyond_gpu_memory_names_the_flag_and_both_sizes() {
    // The mock's GPU has 1 GiB free; 2^24 overflow slots of 64 bytes for each worker exceed it.
    let o = mgws(
        "memset",
        1,
        &[
            "--device",
            "cuda",
            "--tasks",
            "1000",
            "--spill-capacity",
            "16777216",
        ],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("--spill-capacity 16777216"), "{t}");
    assert!(t.contains("GPU 0 memory"), "{t}");
    assert!(t.contains("bytes) available"), "{t}");
}

#[test]
fn the_kernels_local_memory_is_reserved_in_setup_and_a_refusal_is_named() {
    // The mock's kernels need 1,120 bytes of local memory per thread, the context has 1,024.
    let args = [
        "--device",
        "cuda",
        "--tasks",
        "300",
        "--baselines",
        "levels",
    ];
    let o = mgws("memset", 1, &args);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    // Raised once, before the first launch; the level kernel finds it raised.
    assert_eq!(
        t.matches("mock: stack limit 1024 -> 1120").count(),
        1,
        "{t}"
    );
    assert_eq!(t.matches("mock: stack limit").count(), 1, "{t}");
    let raised = t.find("mock: stack limit").unwrap();
    let launched = t.find("mock: launch").expect("a launch");
    assert!(raised < launched, "{t}");
    let with_env = |env| mgws_with_env("memset", 1, "mock.ptx", &args, env);
    // A kernel that fits the default reservation leaves it alone.
    let o = with_env(&[("MOCK_CUDA_LOCAL_BYTES", "512")]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(!t.contains("mock: stack limit"), "{t}");
    // A reservation the driver refuses ends the run before any launch, naming what failed.
    let o = with_env(&[("MOCK_CUDA_STACK_FAIL", "1")]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("reserving 1120 bytes of local memory per thread on GPU 0"),
        "{t}"
    );
    assert!(!t.contains("mock: launch"), "{t}");
}

#[test]
fn kernels_wait_behind_the_launch_gate_until_every_launch_is_queued() {
    // Two GPUs: each kernel is queued behind the closed gate, which opens after the last launch,
    // and every kernel runs.
    let args = ["--device", "cuda", "--devices", "0,1", "--tasks", "300"];
    let o = mgws("memset", 2, &args);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains(r#""lost":0"#), "{t}");
    assert_eq!(
        t.matches("mock: launch behind a closed gate").count(),
        2,
        "{t}"
    );
    assert!(!t.contains("mock: launch behind an open gate"), "{t}");
    assert!(!t.contains("the launch gate never opened"), "{t}");
    // Launched ungated on `gpus` GPUs with `env`: the run completes, every kernel is launched,
    // and nothing waits on a gate.
    let ungated = |gpus: u32, env: (&str, &str)| {
        let mut args = vec!["--device", "cuda", "--tasks", "300"];
        if gpus == 2 {
            args.extend(["--devices", "0,1"]);
        }
        let o = mgws_with_env("memset", gpus, "mock.ptx", &args, &[env]);
        let t = text(&o);
        assert!(o.status.success(), "{env:?}: {t}");
        assert!(t.contains(r#""lost":0"#), "{env:?}: {t}");
        let launches = t.matches("mock: launch grid").count();
        assert_eq!(launches, gpus as usize, "{env:?}: {t}");
        assert!(!t.contains("gate"), "{env:?}: {t}");
    };
    // A driver that refuses stream memory operations.
    ungated(1, ("MOCK_CUDA_NO_STREAM_WAIT", "1"));
    // MGWS_LAUNCH_GATE=off (Nsight Compute could not profile a gated kernel): the driver is
    // never asked to wait.
    ungated(2, ("MGWS_LAUNCH_GATE", "off"));
    // A value that is neither on nor off: a configuration error before any launch (exit 1).
    let one = ["--device", "cuda", "--tasks", "300"];
    refused_setting(1, &one, "MGWS_LAUNCH_GATE", "maybe", "on or off");
}

#[test]
fn the_links_between_a_runs_gpus_are_woken_before_its_kernels_are_launched() {
    const COPY: &str = "mock: copy between GPUs";
    // Three GPUs: one copy from each to each of the others, all queued before the first launch
    // call (and so before the gate opens).
    let o = mgws(
        "memset",
        3,
        &["--device", "cuda", "--devices", "0,1,2", "--tasks", "3000"],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains(r#""lost":0"#), "{t}");
    assert_eq!(t.matches(COPY).count(), 6, "{t}");
    let first_launch = t.find("mock: launch").expect("a launch");
    assert!(t.rfind(COPY).unwrap() < first_launch, "{t}");
    // Each GPU's two copies were waited for before the gate let any kernel go.
    let waited = t.matches("mock: 2 copies between GPUs waited for").count();
    assert_eq!(waited, 3, "{t}");
    let first_start = t.find("mock: a kernel passed the gate").expect("a start");
    assert!(
        t.rfind("copies between GPUs waited for").unwrap() < first_start,
        "{t}"
    );
    // One GPU has no links to wake.
    let o = mgws("memset", 1, &["--device", "cuda", "--tasks", "300"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(!t.contains(COPY), "{t}");
    // MGWS_LINK_WAKE=off leaves the copies out, and the run is the same.
    let two = ["--device", "cuda", "--devices", "0,1", "--tasks", "300"];
    let o = mgws_with_env("memset", 2, "mock.ptx", &two, &[("MGWS_LINK_WAKE", "off")]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains(r#""lost":0"#), "{t}");
    assert!(!t.contains(COPY), "{t}");
    // A value that is neither on nor off: a configuration error before any launch (exit 1),
    // with links to wake or none.
    refused_setting(2, &two, "MGWS_LINK_WAKE", "later", "on or off");
    let one = ["--device", "cuda", "--tasks", "300"];
    refused_setting(1, &one, "MGWS_LINK_WAKE", "later", "on or off");
}

#[test]
fn a_run_over_several_gpus_logs_each_gpus_kernel_time() {
    let args = ["--device", "cuda", "--devices", "0,1,2", "--tasks", "3000"];
    let o = mgws_with_env(
        "memset",
        3,
        "mock.ptx",
        &args,
        &[("MGWS_LOG", "mgws=debug")],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for gpu in 0..3 {
        let lines = t
            .lines()
            .filter(|l| l.contains("a GPU's kernel time") && l.contains(&format!("gpu={gpu} ")))
            .count();
        assert_eq!(lines, 1, "GPU {gpu}: {t}");
    }
}

#[test]
fn the_queue_scope_diagnostic_widens_one_gpu_to_the_system_entry() {
    let args = ["--device", "cuda", "--tasks", "300"];
    // The entry a one-GPU run loads with `env`, after checking that the run verified.
    let entry = |env: &[(&str, &str)]| {
        let o = mgws_with_env("memset", 1, "mock.ptx", &args, env);
        let t = text(&o);
        assert!(o.status.success(), "{env:?}: {t}");
        assert!(t.contains(r#""lost":0"#), "{env:?}: {t}");
        let line = t
            .lines()
            .find(|l| l.starts_with("mock: function mgws_memset_worker_"));
        line.unwrap_or_else(|| panic!("no worker entry loaded: {t}"))
            .to_string()
    };
    assert!(entry(&[]).ends_with("_device"));
    assert!(entry(&[("MGWS_QUEUE_SCOPE", "auto")]).ends_with("_device"));
    assert!(entry(&[("MGWS_QUEUE_SCOPE", "system")]).ends_with("_system"));
    // Anything else: a configuration error before any launch (exit 1).
    refused_setting(1, &args, "MGWS_QUEUE_SCOPE", "device", "auto or system");
}

/// `mgws run memset` over `pes` GPU PE processes, with the mock libcuda (`gpus` GPUs) and the
/// mock NVSHMEM, and `env` besides.
fn pes(mode: &str, gpus: u32, pes: u32, args: &[&str], env: &[(&str, &str)]) -> Output {
    pes_command(mode, gpus, pes, "mock.ptx", args, env)
        .output()
        .expect("running mgws")
}

/// The command [`pes`] runs, with the PTX file `ptx` of the mock's directory.
fn pes_command(
    mode: &str,
    gpus: u32,
    pes: u32,
    ptx: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Command {
    let home = mock_dir().join("nvshmem");
    let home = home.to_str().expect("a UTF-8 path");
    // The mock's heap and barrier files, apart from the machine's /dev/shm.
    let shm = mock_dir().join("shm");
    std::fs::create_dir_all(&shm).expect("creating the mock NVSHMEM's file directory");
    let shm = shm.to_str().expect("a UTF-8 path");
    let pes = pes.to_string();
    let mut all = vec!["--device", "cuda", "--processes", &pes];
    all.extend_from_slice(args);
    let mut with = vec![("NVSHMEM_HOME", home), ("MOCK_NVSHMEM_DIR", shm)];
    with.extend_from_slice(env);
    mgws_command(mode, gpus, ptx, &all, &with)
}

#[test]
fn gpu_pes_join_through_the_unique_id_and_run_over_the_symmetric_heap() {
    for (gpus, count) in [(2, 2), (1, 3)] {
        let o = pes(
            "memset",
            gpus,
            count,
            &["--workers", "6", "--tasks", "5000", "--json"],
            &[],
        );
        let t = text(&o);
        // Each PE's mock kernel ran its share of the tasks through its env, whose area 0 is PE
        // 0's part of the symmetric heap; PE 0 copied it back through the control heap.
        assert!(o.status.success(), "{t}");
        assert!(memset_exact(&t), "{t}");
        assert!(t.contains(r#""backend":"cuda-processes""#), "{t}");
        // Each PE's kernel made MEMSET's indexed initial tasks from the template (none came
        // through the control heap, and none was built first).
        assert_eq!(
            t.matches("mock: initial tasks indexed").count(),
            count as usize,
            "{t}"
        );
        assert!(!t.contains("mock: fill "), "{t}");
        // After the gate each PE woke its links: one slice copied into each other PE's part,
        // and each PE waited for its copies before its launch.
        assert_eq!(
            t.matches("mock: copy between GPUs, 524288 bytes").count(),
            (count * (count - 1)) as usize,
            "{t}"
        );
        let waited = format!("mock: {} copies between GPUs waited for", count - 1);
        assert_eq!(t.matches(&waited).count(), count as usize, "{t}");
        for pe in 0..count {
            assert!(
                t.contains(&format!("mock-nvshmem: PE {pe} of {count} joined")),
                "{t}"
            );
            // Each PE launched its share (6 / count workers) on its GPU (PEs take the visible
            // GPUs in turn) as device `pe` of the run's topology.
            assert!(
                t.contains(&format!("grid={} block=32 smem=", 6 / count))
                    && t.contains(&format!("device={pe} workers=6")),
                "{t}"
            );
            assert!(
                t.contains(&format!("mock-nvshmem: PE {pe} finalized")),
                "{t}"
            );
        }
    }
}

#[test]
fn gpu_pes_leave_the_link_wake_out_when_told_and_refuse_a_bad_setting() {
    let args = ["--workers", "4", "--tasks", "3000", "--json"];
    let o = pes("memset", 2, 2, &args, &[("MGWS_LINK_WAKE", "off")]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains(r#""lost":0"#), "{t}");
    assert!(!t.contains("mock: copy between GPUs"), "{t}");
    // A bad value stops the PEs before the gate, on either transport: no kernel starts.
    let bad = [("MGWS_LINK_WAKE", "later")];
    for o in [
        pes("memset", 2, 2, &args, &bad),
        api_pes("memset", 2, "cache-wake", &args, &bad),
    ] {
        assert_setting_refused(&o, "MGWS_LINK_WAKE", "later", "on or off");
    }
}

#[test]
fn gpu_pes_over_the_mapped_transport_add_their_own_copies_of_additive_areas() {
    // Each PE's mock kernel adds its share of the slots into its env's area 0: PE 0's part of
    // the symmetric heap (one home, the default), or the PE's own copy (replicated-add), whose
    // changes every PE adds into the launcher's area. Without those additions half the slots
    // would be lost.
    for layout in ["auto", "single-home", "replicated-add"] {
        let args = [
            "--workers",
            "4",
            "--tasks",
            "5000",
            "--json",
            "--area-layout",
            layout,
        ];
        let o = pes("memset", 2, 2, &args, &[]);
        let t = text(&o);
        assert!(o.status.success(), "{layout}: {t}");
        assert!(memset_exact(&t), "{layout}: {t}");
        assert!(t.contains(r#""tasks":5000"#), "{layout}: {t}");
    }
}

/// [`pes`] over the device-API transport with the mock NVRTC and CCCL, the wrappers cached in
/// `cache` (a directory of the mock's, fresh for each call with a new name).
fn api_pes(mode: &str, pes: u32, cache: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    api_pes_command(mode, pes, cache, args, env)
        .output()
        .expect("running mgws")
}

/// The command [`api_pes`] runs.
fn api_pes_command(
    mode: &str,
    pes: u32,
    cache: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Command {
    let dir = mock_dir();
    let cache = dir.join(cache);
    let _ = std::fs::remove_dir_all(&cache);
    let [nvrtc, include, cache] = [
        dir.join("nvrtc/libnvrtc.so.13"),
        dir.join("cuda-include"),
        cache,
    ]
    .map(|p| p.to_str().expect("a UTF-8 path").to_string());
    let mut all = vec!["--pe-transport", "device-api"];
    all.extend_from_slice(args);
    let mut with = vec![
        ("MGWS_NVRTC_LIBRARY", nvrtc.as_str()),
        ("MGWS_CUDA_INCLUDE", include.as_str()),
        ("MGWS_CACHE_DIR", cache.as_str()),
    ];
    with.extend_from_slice(env);
    pes_command(mode, 2, pes, "mock-nvshmem.ptx", &all, &with)
}

#[test]
fn gpu_pes_over_the_device_api_link_route_through_the_window_and_add_their_copies() {
    // The other PEs through NVSHMEM's calls (the mock stands in for them by its own mapping),
    // the own PE by the kernel's own operations, or with MGWS_NVSHMEM_CALLS_ONLY=1 through the
    // calls too (which the mock reports).
    for calls_only in [false, true] {
        let env: &[(&str, &str)] = if calls_only {
            &[("MGWS_NVSHMEM_CALLS_ONLY", "1")]
        } else {
            &[]
        };
        let via =
            |t: &str| t.contains("mock: the kernel reaches its own PE through NVSHMEM's calls");
        let o = api_pes(
            "memset",
            2,
            "cache-run",
            &["--workers", "6", "--tasks", "5000", "--json"],
            env,
        );
        let t = text(&o);
        // Each PE's mock kernel ran its half of the tasks into its own copy of area 0: the
        // slots are exact only if both copies were added back into the launcher's area.
        assert!(o.status.success(), "{t}");
        assert!(memset_exact(&t), "{t}");
        // Parts reached through NVSHMEM's calls are not mapped: no copies wake the links.
        assert!(!t.contains("mock: copy between GPUs"), "{t}");
        // The launcher compiled the wrappers once and cached them; the PEs linked the cached
        // cubin with the PTX and the device library, and registered their modules after the
        // init.
        assert_eq!(
            t.matches("mock-nvrtc: compiled the NVSHMEM wrappers")
                .count(),
            1,
            "{t}"
        );
        assert!(
            t.matches("mock: linked module").count() >= 2,
            "every PE links its module: {t}"
        );
        for pe in 0..2 {
            assert!(
                t.contains(&format!("mock-nvshmem: PE {pe} registered its module")),
                "{t}"
            );
        }
        // A stall over the window: PE d's kernel added to every PE's idle counter and queue
        // word through the window, and PE 0's shared state carried the launcher's abort
        // (forwarded by PE 0 alone).
        let o = api_pes(
            "hang",
            2,
            "cache-hang",
            &["--workers", "4", "--watchdog-ms", "300"],
            env,
        );
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{t}");
        assert_both_pes_reached_both_pes(&t);
        assert_eq!(via(&t), calls_only, "{t}");
        // An error PE 1 recorded in PE 0's shared state through the window reaches the
        // launcher.
        let o = api_pes("error", 2, "cache-error", &["--workers", "2"], env);
        let t = text(&o);
        assert!(t.contains("tag 57005") && t.contains("worker 3"), "{t}");
    }
}

/// A free TCP port on the loopback interface, for a run across nodes' coordinator.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `mgws run memset` as node `node` of a run over 2 nodes with one GPU PE each (2 PEs), over the
/// device-API transport, node 0 listening at `127.0.0.1:port`; `args` and `env` besides.
fn node_command(mode: &str, node: u32, port: u16, args: &[&str], env: &[(&str, &str)]) -> Command {
    let coordinator = format!("127.0.0.1:{port}");
    let node_rank = node.to_string();
    let mut all = vec![
        "--nodes",
        "2",
        "--node-rank",
        &node_rank,
        "--coordinator",
        &coordinator,
    ];
    all.extend_from_slice(args);
    let cache = format!("cache-node-{mode}-{node}");
    api_pes_command(mode, 2, &cache, &all, env)
}

/// Runs node 1 and node 0 of [`node_command`] at once; their outputs, node 0's first.
fn two_nodes(mode: &str, args: [&[&str]; 2], env: [&[(&str, &str)]; 2]) -> (Output, Output) {
    let port = free_port();
    let follower = node_command(mode, 1, port, args[1], env[1])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting node 1");
    let node0 = node_command(mode, 0, port, args[0], env[0])
        .output()
        .expect("running node 0");
    let node1 = follower.wait_with_output().expect("waiting for node 1");
    (node0, node1)
}

#[test]
fn a_run_across_nodes_joins_its_launchers_and_every_node_reports_the_run() {
    // Two launchers, one PE each: node 1's PE joins NVSHMEM with the unique ID node 0 forwarded,
    // each PE adds its share of every MEMSET slot into its own copy, node 1 sends its changes to
    // node 0, which adds them up and sends the run's results back: both verify the same slots.
    let args: &[&str] = &["--workers", "4", "--tasks", "5000", "--json"];
    let (o0, o1) = two_nodes("memset", [args, args], [&[], &[]]);
    let (t0, t1) = (text(&o0), text(&o1));
    for (t, o) in [(&t0, &o0), (&t1, &o1)] {
        assert!(o.status.success(), "node 0: {t0}\nnode 1: {t1}");
        assert!(memset_exact(t), "{t}");
        assert!(t.contains(r#""tasks_run":5000"#), "{t}");
        // Victims by PE, then node, unless a victim flag says otherwise.
        assert!(t.contains(r#""same_device_bias":0.9"#), "{t}");
    }
    // Each launcher started its own PE, PE 1 on its node's first GPU, as device 1 of the run.
    assert!(t0.contains("mock-nvshmem: PE 0 of 2 joined"), "{t0}");
    assert!(!t0.contains("mock-nvshmem: PE 1 of 2 joined"), "{t0}");
    assert!(t1.contains("mock-nvshmem: PE 1 of 2 joined"), "{t1}");
    assert!(
        t1.contains("grid=2 block=32") && t1.contains("device=1 workers=4"),
        "{t1}"
    );

    // A stall across nodes: node 0's watchdog sees node 1's workers through the records node 1
    // sends (PE 1's steals and idle counts reach node 0's hang report), its abort reaches PE 1's
    // kernel through PE 0's shared state, and node 1 ends with node 0's error.
    let args: &[&str] = &[
        "--workers",
        "4",
        "--watchdog-ms",
        "400",
        "--same-device-bias",
        "0",
    ];
    let (o0, o1) = two_nodes("hang", [args, args], [&[], &[]]);
    let (t0, t1) = (text(&o0), text(&o1));
    assert_eq!(o0.status.code(), Some(1), "{t0}");
    assert_both_pes_reached_both_pes(&t0);
    assert_eq!(o1.status.code(), Some(1), "{t1}");
    assert!(
        t1.contains("node 0: the run stopped making progress"),
        "{t1}"
    );
}

#[test]
fn a_run_across_nodes_fails_clearly_when_a_node_differs_dies_or_never_comes() {
    let quick: &[&str] = &[
        "--workers",
        "4",
        "--watchdog-ms",
        "500",
        "--start-timeout-ms",
        "2000",
    ];
    // Another job on node 1: refused at its hello, and node 0 names the node it waited for.
    let other: Vec<&str> = quick.iter().copied().chain(["--tasks", "77"]).collect();
    let start = Instant::now();
    let (o0, o1) = two_nodes("memset", [quick, &other], [&[], &[]]);
    let (t0, t1) = (text(&o0), text(&o1));
    assert_eq!(o1.status.code(), Some(1), "{t1}");
    assert!(
        t1.contains("node 0's launcher refused node 1") && t1.contains("runs another job"),
        "{t1}"
    );
    assert!(
        !t1.contains("mock-nvshmem: PE 1"),
        "no PE starts on a refused node: {t1}"
    );
    assert_eq!(o0.status.code(), Some(1), "{t0}");
    assert!(
        t0.contains("ready after 2s") && t0.contains("node 1 (never connected to 127.0.0.1:"),
        "{t0}"
    );
    assert!(start.elapsed() < Duration::from_secs(15), "{t0}");

    // PE 1 dies in its NVSHMEM init on node 1: node 1 says so, and node 0 ends with its error.
    let (o0, o1) = two_nodes(
        "memset",
        [quick, quick],
        [&[], &[("MOCK_NVSHMEM_EXIT_INIT", "1")]],
    );
    let (t0, t1) = (text(&o0), text(&o1));
    assert_eq!(o1.status.code(), Some(1), "{t1}");
    assert!(
        t1.contains("PE 1 (pid ") && t1.contains("while joining NVSHMEM"),
        "{t1}"
    );
    assert_eq!(o0.status.code(), Some(1), "{t0}");
    assert!(
        t0.contains("node 1: multi-process run: PE 1 (pid ")
            && t0.contains("while joining NVSHMEM"),
        "{t0}"
    );

    // Node 1's launcher killed during the run (its PE dies with it): node 0 learns it from the
    // closed connection, well before its watchdog would fire, and stops its own PE.
    let port = free_port();
    let slow: &[&str] = &["--workers", "4", "--watchdog-ms", "20000"];
    let piped = |mut c: Command| {
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("starting a node")
    };
    let start = Instant::now();
    let mut node1 = piped(node_command("hang", 1, port, slow, &[]));
    let node0 = piped(node_command("hang", 0, port, slow, &[]));
    std::thread::sleep(Duration::from_millis(2500));
    node1.kill().expect("killing node 1");
    let _ = node1.wait();
    let o0 = node0.wait_with_output().expect("waiting for node 0");
    let t0 = text(&o0);
    assert_eq!(o0.status.code(), Some(1), "{t0}");
    assert!(
        t0.contains("the link to node 1's launcher: the connection was closed"),
        "{t0}"
    );
    assert!(start.elapsed() < Duration::from_secs(15), "{t0}");

    // Node 1 never starts: node 0 gives up after the start-up timeout, naming it.
    let port = free_port();
    let o = node_command("memset", 0, port, quick, &[])
        .output()
        .expect("running node 0");
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains(&format!("node 1 (never connected to 127.0.0.1:{port})")),
        "{t}"
    );

    // Flags: a run across nodes needs the device-API transport, a rank, an address and an even
    // share of PEs.
    let flags = |args: &[&str], env: &[(&str, &str)]| {
        let mut all = vec!["--device", "cuda", "--processes", "2", "--workers", "4"];
        all.extend_from_slice(args);
        let mut c = mgws_command("memset", 2, "mock.ptx", &all, &[]);
        for var in mgws::processes::nodes::RANK_VARS {
            c.env_remove(var);
        }
        let o = c
            .env_remove("MGWS_COORDINATOR")
            .envs(env.iter().copied())
            .output()
            .expect("running mgws");
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        text(&o)
    };
    let t = flags(
        &[
            "--nodes",
            "2",
            "--node-rank",
            "0",
            "--coordinator",
            "127.0.0.1:1",
        ],
        &[],
    );
    assert!(t.contains("add --pe-transport device-api"), "{t}");
    let t = flags(&["--nodes", "2", "--coordinator", "127.0.0.1:1"], &[]);
    assert!(
        t.contains("--node-rank R") && t.contains("OMPI_COMM_WORLD_RANK"),
        "{t}"
    );
    let t = flags(&["--nodes", "2"], &[("OMPI_COMM_WORLD_RANK", "1")]);
    assert!(t.contains("--coordinator HOST:PORT"), "{t}");
    let t = flags(&["--nodes", "2"], &[("SLURM_PROCID", "x")]);
    assert!(t.contains("SLURM_PROCID=x is no node rank"), "{t}");
    let t = flags(
        &["--nodes", "4", "--node-rank", "1", "--coordinator", "a:1"],
        &[],
    );
    assert!(
        t.contains("2 PEs cannot be shared evenly by 4 nodes"),
        "{t}"
    );
    let t = flags(&["--node-rank", "1"], &[]);
    assert!(t.contains("add --nodes"), "{t}");
}

#[test]
fn the_device_api_transport_says_what_it_lacks() {
    // The mapped transport's PTX where the device API's is needed, and the reverse.
    let home = mock_dir().join("nvshmem");
    let shm = mock_dir().join("shm");
    let (home, shm) = (home.to_str().unwrap(), shm.to_str().unwrap());
    let wrong = |ptx: &str, transport: &str| {
        mgws_with_env(
            "memset",
            2,
            ptx,
            &[
                "--device",
                "cuda",
                "--processes",
                "2",
                "--workers",
                "2",
                "--pe-transport",
                transport,
            ],
            &[("NVSHMEM_HOME", home), ("MOCK_NVSHMEM_DIR", shm)],
        )
    };
    let o = wrong("mock.ptx", "device-api");
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("was not built for NVSHMEM's device API") && t.contains("--nvshmem"),
        "{t}"
    );
    let o = wrong("mock-nvshmem.ptx", "mapped");
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("was built for NVSHMEM's device API") && t.contains("--pe-transport device-api"),
        "{t}"
    );
    // A kernel whose window global has another size (built by another version of mgws), and
    // NVRTC refusing the wrappers (its log reaches the error).
    for (cache, env, needles) in [
        (
            "cache-size",
            ("MOCK_CUDA_WINDOW_BYTES", "16"),
            ["`mgws_pe_window` has 16 bytes, not 24", "--nvshmem"],
        ),
        (
            "cache-fail",
            ("MOCK_NVRTC_FAIL", "1"),
            ["could not compile nvshmem_shim.cu", "mock compile failure"],
        ),
    ] {
        let o = api_pes("memset", 2, cache, &["--workers", "2"], &[env]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{t}");
        assert!(needles.iter().all(|n| t.contains(n)), "{t}");
    }
    // No CCCL headers anywhere (python3 off the path: no pip packages either): what to install.
    let o = api_pes(
        "memset",
        2,
        "cache-cccl",
        &["--workers", "2"],
        &[
            ("MGWS_CUDA_INCLUDE", "/nonexistent"),
            ("CUDA_HOME", "/nonexistent"),
            ("PATH", "/nonexistent"),
        ],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("cuda/std/cstdint") && t.contains("nvidia-cuda-cccl-cu13"),
        "{t}"
    );
    // --pe-transport without GPU PEs.
    refused(
        &["--device", "cuda", "--pe-transport", "device-api"],
        "--processes N",
    );
}

#[test]
fn gpu_pe_faults_end_the_run_with_the_cause() {
    // A trapped kernel on the PEs: the first PE to report it names its GPU and the cause.
    let o = pes("trap", 2, 2, &["--workers", "2"], &[]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("mgws: error: multi-process run: PE ")
            && t.contains("failed: CUDA error: the kernel on GPU ")
            && t.contains("CUDA_ERROR_LAUNCH_FAILED"),
        "{t}"
    );
    // An error PE 1's kernel recorded in PE 0's shared state (through its mapping) reaches the
    // launcher.
    let o = pes("error", 2, 2, &["--workers", "2"], &[]);
    let t = text(&o);
    assert!(t.contains("tag 57005") && t.contains("worker 3"), "{t}");
    // A stall: the launcher's watchdog reads the mirrored progress records and aborts; every PE
    // forwards the abort to PE 0's shared state, where its kernel sees it.
    let o = pes(
        "hang",
        2,
        2,
        // One queue a worker, as the report's arithmetic below assumes.
        &[
            "--workers",
            "4",
            "--watchdog-ms",
            "300",
            "--queue-sharing",
            "1",
        ],
        &[],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("worker    3: op=start"), "{t}");
    assert_both_pes_reached_both_pes(&t);
}

/// The hang report of the mock's "hang" mode over 2 PEs of 2 workers each (one queue a worker):
/// PE d's kernel added 1 to every PE's idle counter and d + 1 steals to every PE's first queue
/// word, through its env's pointers; each PE mirrored its own, and the launcher that watches
/// the run reported them. So each PE's first queue shows 1 + 2 steals, and the idle counters sum
/// to 4, only if every PE reached every PE's memory and every PE's records reached the report.
fn assert_both_pes_reached_both_pes(t: &str) {
    assert!(t.contains("watchdog aborted it"), "{t}");
    assert!(t.contains("idle counter 4,"), "{t}");
    let queue_of = |w: u32| {
        t.lines()
            .find(|l| l.contains(&format!("worker {w:>4}:")))
            .and_then(|l| l.split("queue[").nth(1))
            .unwrap_or_default()
            .to_string()
    };
    for (w, steals) in [(0, 3), (1, 0), (2, 3), (3, 0)] {
        assert!(
            queue_of(w).starts_with(&format!("steals={steals} ")),
            "worker {w}: {t}"
        );
    }
}

#[test]
fn gpu_pes_without_nvshmem_or_with_a_failed_init_say_why() {
    // No NVSHMEM anywhere (python3 off the path, so no pip package either): what to install.
    let o = mgws_with_env(
        "memset",
        1,
        "mock.ptx",
        &[
            "--device",
            "cuda",
            "--processes",
            "2",
            "--workers",
            "2",
            "--json",
        ],
        &[("NVSHMEM_HOME", "/nonexistent"), ("PATH", "/nonexistent")],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("pip install nvidia-nvshmem-cu13") && t.contains("NVSHMEM_HOME"),
        "{t}"
    );
    assert!(t.contains(r#""kind":"backend_unavailable""#), "{t}");
    // NVSHMEM refuses to initialise one PE, or to allocate its block, while the other waits:
    // that PE's reason reaches the launcher's error at once, and the waiting PE is ended.
    for (var, needle) in [
        ("MOCK_NVSHMEM_FAIL_INIT", "PE 1 (pid "),
        ("MOCK_NVSHMEM_FAIL_MALLOC", "PE 1 (pid "),
    ] {
        let start = Instant::now();
        let o = pes("memset", 2, 2, &["--workers", "2"], &[(var, "1")]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{var}: {t}");
        assert!(t.contains(needle) && t.contains(") failed: "), "{var}: {t}");
        assert!(
            t.contains(if var.ends_with("INIT") {
                "NVSHMEM did not initialise PE 1 of 2"
            } else {
                "NVSHMEM's symmetric heap"
            }),
            "{var}: {t}"
        );
        assert!(start.elapsed() < Duration::from_secs(10), "{var}: {t}");
    }
}

#[test]
fn gpu_pes_that_are_late_are_named_with_their_start_up_stage() {
    // PE 1's NVSHMEM bootstrap never returns: after the start-up timeout the launcher's error
    // says where each late PE is (PE 1 joining NVSHMEM; PE 0, whose stand-in init does not wait
    // for the others, in its collective allocation as a rule) instead of blaming the program.
    let start = Instant::now();
    let o = pes(
        "memset",
        2,
        2,
        &[
            "--workers",
            "2",
            "--watchdog-ms",
            "500",
            "--start-timeout-ms",
            "1500",
        ],
        &[("MOCK_NVSHMEM_HANG_INIT", "1")],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("not every one of the 2 PE processes of ") && t.contains("ready after 1.5s"),
        "{t}"
    );
    assert!(
        t.contains("PE 1 (pid ") && t.contains(", GPU 1) joining NVSHMEM"),
        "{t}"
    );
    assert!(t.contains("PE 0 (pid "), "{t}");
    assert!(!t.contains("Pe::from_env() first"), "{t}");
    assert!(start.elapsed() < Duration::from_secs(15), "{t}");
}

#[test]
fn gpu_pes_that_would_share_gpus_unevenly_are_refused() {
    // 3 PEs on 2 GPUs: NVSHMEM cannot join them (two share GPU 0, one has GPU 1); refused
    // before any PE starts, with the shares and what would run.
    let o = pes("memset", 2, 3, &["--workers", "6", "--json"], &[]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains(r#""kind":"config""#), "{t}");
    assert!(
        t.contains("3 PEs on 2 GPUs share them unevenly (PEs per GPU: GPU 0: 2, GPU 1: 1)")
            && t.contains("a multiple of 2 PEs"),
        "{t}"
    );
    assert!(!t.contains("mock-nvshmem: PE"), "{t}");
    // 4 PEs on the same 2 GPUs share them evenly and run.
    let o = pes(
        "memset",
        2,
        4,
        &["--workers", "8", "--tasks", "4000", "--json"],
        &[],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(memset_exact(&t), "{t}");
}

#[test]
fn a_gpu_pe_that_dies_in_its_start_up_is_named_with_its_stage() {
    // NVSHMEM ends PE 1's process inside its init: the launcher says where it died, at once,
    // and does not blame the program for not serving its PE.
    let start = Instant::now();
    let o = pes(
        "memset",
        2,
        2,
        &["--workers", "2"],
        &[("MOCK_NVSHMEM_EXIT_INIT", "1")],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(
        t.contains("PE 1 (pid ") && t.contains("exited (exit status: 3) while joining NVSHMEM"),
        "{t}"
    );
    assert!(!t.contains("Pe::from_env() first"), "{t}");
    assert!(start.elapsed() < Duration::from_secs(8), "{t}");
}

#[test]
fn gpu_pes_that_hang_in_their_teardown_after_finishing_do_not_fail_the_run() {
    // Every PE finished (its results final), then PE 1 waits in NVSHMEM's finalize forever: the
    // run is exact and succeeds once the teardown grace (the watchdog's timeout, at least 1 s)
    // has passed, instead of ending in a hang report when the records stop changing.
    let start = Instant::now();
    let o = pes(
        "memset",
        2,
        2,
        &[
            "--workers",
            "2",
            "--tasks",
            "3000",
            "--watchdog-ms",
            "300",
            "--json",
        ],
        &[("MOCK_NVSHMEM_HANG_FINALIZE", "1")],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("mock-nvshmem: PE 1 waits in its finalize forever"),
        "{t}"
    );
    assert!(memset_exact(&t), "{t}");
    assert!(!t.contains("watchdog"), "{t}");
    assert!(start.elapsed() < Duration::from_secs(10), "{t}");
}

#[test]
fn later_runs_in_one_process_reuse_the_first_runs_small_allocations() {
    let allocs = |repeat: &str| {
        let o = mgws_with_env(
            "memset",
            2,
            "mock.ptx",
            &[
                "--tasks",
                "4096",
                "--devices",
                "0,1",
                "--workers",
                "8",
                "--repeat",
                repeat,
            ],
            &[("MOCK_CUDA_TRACE_ALLOCS", "1")],
        );
        let t = text(&o);
        assert!(o.status.success(), "{t}");
        assert_eq!(
            t.matches("verified: yes").count(),
            repeat.parse::<usize>().unwrap(),
            "{t}"
        );
        (
            t.matches("mock: alloc").count(),
            t.matches("mock: free").count(),
        )
    };
    let (one, freed_one) = allocs("1");
    let (three, freed_three) = allocs("3");
    assert!(one > 0);
    // Each allocation of the first run is kept and taken again by the next two; none is freed.
    assert_eq!(three, one, "allocations of 3 runs against 1");
    assert_eq!((freed_one, freed_three), (0, 0));
}
