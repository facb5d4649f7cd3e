//! Build tasks of the MGWS workspace.
//!
//! `cargo xtask ptx [--arch sm_90] [--crate PACKAGE] [--out PATH]` builds a GPU kernel crate of the
//! workspace (default `mgws-kernel`) for `nvptx64-nvidia-cuda` with [`mgws_builder`] (the same
//! recipe a user's build script runs: nightly toolchain, nvptx64 sysroot, fat LTO, the builder's
//! own PTX linker; see that crate's documentation), into the target directory `target/nvptx` (the
//! `target` part follows `CARGO_TARGET_DIR`), then
//! - writes the PTX to `--out` (default `target/ptx/<lib>.<arch>.ptx`);
//! - checks that it has no unresolved functions (`.extern .func`), declares at least one
//!   `mgws_<kernel>_fingerprint`, and has each such kernel's default worker entry
//!   (`mgws_<kernel>_worker_counter_damping_single_device`); for `mgws-kernel`, that every
//!   built-in registry is there under its kernel name with its `Registry::FINGERPRINT` and with
//!   every entry the host may launch (`mgws_<kernel>_worker_<spec>` for every spec, bridged ones
//!   included, `mgws_<kernel>_static_<device|system>`, `mgws_<kernel>_level`);
//! - assembles it with ptxas (`MGWS_PTXAS`, else `ptxas` on the PATH, else the project's
//!   `shared/tools/ptxas.sh`), printing the register, shared-memory and spill figures of every
//!   kernel entry.

use std::env;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mgws_builder::{KernelBuilder, Ptxas, DEFAULT_ARCH};
use mgws_tasks::Registry;

const DEFAULT_CRATE: &str = "mgws-kernel";

type Result<T> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    match command(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "\
usage: cargo xtask ptx [--arch sm_XX] [--crate PACKAGE] [--out PATH] [--nvshmem]
       cargo xtask sysroot

Builds a GPU kernel crate to PTX with the nightly toolchain and checks it with ptxas.
  --arch sm_XX     GPU architecture (default sm_90; sm_70 or newer)
  --crate PACKAGE  kernel crate to build (default mgws-kernel)
  --out PATH       where to write the PTX (default target/ptx/<lib>.<arch>.ptx); the cubin
                   ptxas produced goes next to it with the extension .cubin
  --nvshmem        the entries for GPU PEs over NVSHMEM's device API (the crate's `nvshmem`
                   feature; default out target/ptx/<lib>.<arch>.nvshmem.ptx), assembled by
                   ptxas as relocatable code: mgws links NVSHMEM in when it loads them
`sysroot` makes ready the nvptx64 sysroot the builds use (where the nightly lacks the target),
so that builds run at once do not each build it.
Environment: MGWS_NIGHTLY (toolchain directory), MGWS_NVPTX_SYSROOT, MGWS_PTXAS.";

fn command(args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("ptx") if !args.iter().any(|a| a == "-h" || a == "--help") => {
            ptx(&PtxOptions::parse(&args[1..])?)
        }
        Some("sysroot") if args.len() == 1 => sysroot(),
        Some("sysroot") => Err(format!("`sysroot` takes no arguments\n{USAGE}")),
        Some("help" | "-h" | "--help" | "ptx") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command `{other}`\n{USAGE}")),
    }
}

#[derive(Debug, PartialEq, Eq)]
struct PtxOptions {
    arch: String,
    package: String,
    out: Option<PathBuf>,
    nvshmem: bool,
}

impl PtxOptions {
    fn parse(args: &[String]) -> Result<PtxOptions> {
        let mut opts = PtxOptions {
            arch: DEFAULT_ARCH.into(),
            package: DEFAULT_CRATE.into(),
            out: None,
            nvshmem: false,
        };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
                _ => (arg.as_str(), None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| it.next().cloned())
                    .ok_or(format!("{flag} needs a value"))
            };
            match flag {
                "--arch" => opts.arch = value()?,
                "--crate" | "-p" | "--package" => opts.package = value()?,
                "--out" | "-o" => opts.out = Some(PathBuf::from(value()?)),
                "--nvshmem" if inline.is_none() => opts.nvshmem = true,
                _ => return Err(format!("unknown argument `{arg}`\n{USAGE}")),
            }
        }
        KernelBuilder::check_arch(&opts.arch).map_err(|e| format!("--{e}"))?;
        Ok(opts)
    }
}

/// `cargo xtask sysroot`: the sysroot the kernel builds use, made ready.
fn sysroot() -> Result<()> {
    match KernelBuilder::new(workspace_root())
        .prepare_sysroot()
        .map_err(|e| e.to_string())?
    {
        Some(dir) => println!("nvptx64 sysroot: {}", dir.display()),
        None => println!("the nightly has the nvptx64 target"),
    }
    Ok(())
}

/// The workspace root: the parent of this crate's directory.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

fn ptx(opts: &PtxOptions) -> Result<()> {
    let root = workspace_root();
    let target_base =
        env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |d| root.join(d));
    eprintln!(
        "xtask: building {} for {} ({})",
        opts.package,
        mgws_builder::TARGET,
        opts.arch
    );
    let mut builder = KernelBuilder::new(&root)
        .package(&opts.package)
        .arch(&opts.arch)
        // Its own target directory: the kernel's linker and rustflags must not clash with host
        // builds. The NVSHMEM build has another, so that both can run at once (`.ci/run`).
        .target_dir(target_base.join(if opts.nvshmem {
            "nvptx-nvshmem"
        } else {
            "nvptx"
        }))
        .ptxas(Ptxas::Required)
        .nvshmem(opts.nvshmem);
    if let Some(out) = &opts.out {
        builder = builder.out(out);
    }
    let kernel = builder.build().map_err(|e| e.to_string())?;
    println!(
        "PTX: {} ({} bytes, entries: {}; built by {})",
        kernel.ptx.display(),
        kernel.bytes,
        kernel.check.entries.join(", "),
        kernel.rustc
    );
    for (name, fingerprint) in &kernel.check.fingerprints {
        println!(
            "PTX: .visible .global .align 8 .u64 {} = {fingerprint};",
            mgws_builder::fingerprint_symbol(name)
        );
    }
    if opts.package == DEFAULT_CRATE {
        check_builtin_kernels(&kernel.check)?;
    }
    let (cubin, report) = kernel.ptxas.expect("ptxas is required");
    for line in &report.lines {
        println!("{line}");
    }
    for warning in &report.warnings {
        println!("xtask: warning: {warning}");
    }
    println!(
        "ptxas accepted {} for {} (cubin: {})",
        kernel.ptx.display(),
        opts.arch,
        cubin.display()
    );
    Ok(())
}

/// Every entry `worker_kernel!` defines for kernel `name`.
fn entry_names(name: &str) -> Vec<String> {
    let core = mgws_tasks::__core::WORKER_ENTRY_SUFFIXES
        .iter()
        .chain(mgws_tasks::__core::BRIDGED_ENTRY_SUFFIXES.iter())
        .map(|s| format!("mgws_{name}_worker_{s}"));
    let statics = mgws_tasks::__core::STATIC_ENTRY_SUFFIXES
        .iter()
        .map(|s| format!("mgws_{name}_static_{s}"));
    core.chain(statics)
        .chain([format!("mgws_{name}_level")])
        .collect()
}

/// The built-in kernel must hold every built-in registry under its kernel name, with that
/// registry's fingerprint and every entry the host may launch.
fn check_builtin_kernels(check: &mgws_builder::PtxCheck) -> Result<()> {
    use mgws_tasks::{ContainsTasks, FibTasks, MemsetTasks, SkewTasks, StallTasks, UtsTasks};
    let expected = [
        (
            MemsetTasks::KERNEL,
            MemsetTasks::FINGERPRINT,
            MemsetTasks::NAME,
        ),
        (
            ContainsTasks::KERNEL,
            ContainsTasks::FINGERPRINT,
            ContainsTasks::NAME,
        ),
        (UtsTasks::KERNEL, UtsTasks::FINGERPRINT, UtsTasks::NAME),
        (FibTasks::KERNEL, FibTasks::FINGERPRINT, FibTasks::NAME),
        (SkewTasks::KERNEL, SkewTasks::FINGERPRINT, SkewTasks::NAME),
        (
            StallTasks::KERNEL,
            StallTasks::FINGERPRINT,
            StallTasks::NAME,
        ),
    ];
    for (kernel, fingerprint, registry) in expected {
        match check.fingerprints.iter().find(|(k, _)| k == kernel) {
            None => return Err(format!("the PTX has no kernel `{kernel}` ({registry})")),
            Some((_, f)) if *f != fingerprint => {
                return Err(format!(
                    "kernel `{kernel}` has fingerprint {f:#018x}, but {registry}::FINGERPRINT is \
                     {fingerprint:#018x}"
                ))
            }
            Some(_) => {}
        }
        let missing: Vec<String> = entry_names(kernel)
            .into_iter()
            .filter(|e| !check.entries.contains(e))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "kernel `{kernel}` lacks entries the host launches: {}",
                missing.join(", ")
            ));
        }
        println!("PTX: kernel `{kernel}` has {registry}'s fingerprint ({fingerprint:#018x}) and every entry");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_parse_with_defaults_and_both_spellings() {
        let o = PtxOptions::parse(&[]).unwrap();
        assert_eq!(
            (o.arch.as_str(), o.package.as_str(), o.out),
            ("sm_90", "mgws-kernel", None)
        );
        let o = PtxOptions::parse(&args("--arch sm_80 --crate foo --out x/y.ptx")).unwrap();
        assert_eq!((o.arch.as_str(), o.package.as_str()), ("sm_80", "foo"));
        assert_eq!(o.out, Some(PathBuf::from("x/y.ptx")));
        let o = PtxOptions::parse(&args("--arch=sm_90a --crate=bar")).unwrap();
        assert_eq!((o.arch.as_str(), o.package.as_str()), ("sm_90a", "bar"));
        assert!(PtxOptions::parse(&args("--arch sm_60"))
            .unwrap_err()
            .contains("sm_70"));
        assert!(PtxOptions::parse(&args("--arch 90")).is_err());
        assert!(PtxOptions::parse(&args("--arch"))
            .unwrap_err()
            .contains("needs a value"));
        assert!(PtxOptions::parse(&args("--bogus")).is_err());
    }
}
