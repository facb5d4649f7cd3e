//! Build tasks of the MGWS workspace.
//!
//! `cargo xtask ptx [--arch sm_90] [--crate PACKAGE] [--out PATH]` builds a GPU kernel crate
//! (default `mgws-kernel`) for `nvptx64-nvidia-cuda` and checks the PTX:
//!
//! 1. finds a nightly toolchain (`MGWS_NIGHTLY`, else `$RUSTUP_HOME/toolchains/nightly-*`, else
//!    `rustup which --toolchain nightly rustc`);
//! 2. finds a sysroot with `core` for nvptx64: `MGWS_NVPTX_SYSROOT`, else the toolchain's installed
//!    `nvptx64-nvidia-cuda` target, else one built by `shared/tools/nvptx-sysroot.sh`;
//! 3. runs that toolchain's cargo with profile `ptx` (fat LTO, one codegen unit), target rustflags
//!    `--sysroot <sysroot> --emit=asm,link -Ctarget-cpu=<arch>`, target dir `target/nvptx` (the
//!    `target` part follows `CARGO_TARGET_DIR`), crate type `cdylib` (`cargo rustc`), and
//!    this very binary as the linker: rustc's linker for nvptx64 is `llvm-bitcode-linker`, which
//!    is not installed here; instead, called with [`LINKER_ENV`] set, this program copies the
//!    `<out>.s` rustc wrote for the LTO'd module to the `<out>.ptx` it asked the linker for;
//! 4. copies the PTX to `--out` (default `target/ptx/<lib>.<arch>.ptx`), checks that it has no
//!    unresolved functions (`.extern .func`) and has a `.entry mgws_worker`, and assembles it with
//!    ptxas (`MGWS_PTXAS`, else `ptxas` on the PATH, else `shared/tools/ptxas.sh`), printing the
//!    register, shared-memory and spill figures of every kernel entry.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

const TARGET: &str = "nvptx64-nvidia-cuda";
/// Set in the environment of the nested cargo: tells this binary that rustc runs it as the linker.
const LINKER_ENV: &str = "MGWS_XTASK_PTX_LINKER";
const DEFAULT_CRATE: &str = "mgws-kernel";
const DEFAULT_ARCH: &str = "sm_90";
/// The kernel entry point every MGWS kernel crate defines (`worker_kernel!`).
const WORKER_ENTRY: &str = "mgws_worker";

type Result<T> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<OsString> = env::args_os().skip(1).collect();
    let result = if env::var_os(LINKER_ENV).is_some() {
        link(&args)
    } else {
        let args: Vec<String> = args
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        command(&args)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "\
usage: cargo xtask ptx [--arch sm_XX] [--crate PACKAGE] [--out PATH]

Builds a GPU kernel crate to PTX with the nightly toolchain and checks it with ptxas.
  --arch sm_XX     GPU architecture (default sm_90; sm_70 or newer)
  --crate PACKAGE  kernel crate to build (default mgws-kernel)
  --out PATH       where to write the PTX (default target/ptx/<lib>.<arch>.ptx); the cubin
                   ptxas produced goes next to it with the extension .cubin
Environment: MGWS_NIGHTLY (toolchain directory), MGWS_NVPTX_SYSROOT, MGWS_PTXAS.";

fn command(args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("ptx") if !args.iter().any(|a| a == "-h" || a == "--help") => {
            ptx(&PtxOptions::parse(&args[1..])?)
        }
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
}

impl PtxOptions {
    fn parse(args: &[String]) -> Result<PtxOptions> {
        let mut opts = PtxOptions {
            arch: DEFAULT_ARCH.into(),
            package: DEFAULT_CRATE.into(),
            out: None,
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
                _ => return Err(format!("unknown argument `{arg}`\n{USAGE}")),
            }
        }
        match opts
            .arch
            .strip_prefix("sm_")
            .and_then(|n| n.trim_end_matches(['a', 'f']).parse::<u32>().ok())
        {
            Some(n) if n >= 70 => Ok(opts),
            Some(_) => Err(format!(
                "--arch {}: the kernels need sm_70 or newer (scoped atomics, nanosleep)",
                opts.arch
            )),
            None => Err(format!(
                "--arch {}: expected an architecture like sm_90",
                opts.arch
            )),
        }
    }
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
    let toolchain = Toolchain::find()?;
    let sysroot = find_sysroot(&root, &toolchain)?;
    eprintln!(
        "xtask: building {} for {TARGET} ({}) with {}",
        opts.package, opts.arch, toolchain.version
    );

    let mut rustflags = Vec::new();
    if let Some(s) = &sysroot {
        rustflags.push(format!("--sysroot={}", s.display()));
    }
    rustflags.push("--emit=asm,link".into());
    rustflags.push(format!("-Ctarget-cpu={}", opts.arch));
    let me = env::current_exe().map_err(|e| format!("cannot locate the xtask binary: {e}"))?;
    // The kernel build gets a target directory of its own: its custom linker and rustflags must
    // not clash with host builds.
    let target_base =
        env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |d| root.join(d));
    let target_dir = target_base.join("nvptx");

    let mut cargo = Command::new(toolchain.bin.join("cargo"));
    cargo
        .current_dir(&root)
        // `cargo rustc --crate-type cdylib`: the PTX module needs a cdylib (one LTO'd module), and
        // only that one crate type, or rustc's `.s` would not be the LTO'd module. A kernel crate
        // may list `rlib` too, so that the host can use its registry.
        .args([
            "rustc",
            "--package",
            &opts.package,
            "--lib",
            "--crate-type",
            "cdylib",
            "--profile",
            "ptx",
            "--target",
            TARGET,
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        .args(["--message-format", "json-render-diagnostics"])
        .env("RUSTC", toolchain.bin.join("rustc"))
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags.join("\x1f"))
        .env("CARGO_TARGET_NVPTX64_NVIDIA_CUDA_LINKER", &me)
        .env(LINKER_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // What the outer (stable) cargo or the user's shell set must not leak into the nightly build.
    for var in [
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTUP_TOOLCHAIN",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PROFILE_PTX_DEBUG",
    ] {
        cargo.env_remove(var);
    }
    let output = cargo
        .output()
        .map_err(|e| format!("cannot run {}: {e}", toolchain.bin.join("cargo").display()))?;
    if !output.status.success() {
        return Err(format!(
            "building {} for {TARGET} failed ({})",
            opts.package, output.status
        ));
    }
    let built = ptx_artifact(&String::from_utf8_lossy(&output.stdout), &opts.package)?;

    let lib_name = built
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("kernel")
        .to_string();
    let out = opts.out.clone().unwrap_or_else(|| {
        target_base
            .join("ptx")
            .join(format!("{lib_name}.{}.ptx", opts.arch))
    });
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    fs::copy(&built, &out)
        .map_err(|e| format!("cannot copy {} to {}: {e}", built.display(), out.display()))?;
    let text =
        fs::read_to_string(&out).map_err(|e| format!("cannot read {}: {e}", out.display()))?;
    let check = check_ptx(&text);
    println!(
        "PTX: {} ({} bytes, entries: {})",
        out.display(),
        text.len(),
        check.entries.join(", ")
    );
    check.result()?;

    let cubin = out.with_extension("cubin");
    let report = ptxas(&root, &opts.arch, &out, &cubin)?;
    for line in &report.lines {
        println!("{line}");
    }
    for warning in &report.warnings {
        println!("xtask: warning: {warning}");
    }
    println!(
        "ptxas accepted {} for {} (cubin: {})",
        out.display(),
        opts.arch,
        cubin.display()
    );
    Ok(())
}

/// The nightly toolchain that builds the kernels.
struct Toolchain {
    /// Its `bin` directory (with `cargo` and `rustc`).
    bin: PathBuf,
    /// `rustc -V`.
    version: String,
}

impl Toolchain {
    fn find() -> Result<Toolchain> {
        let bin = Self::candidates()
            .into_iter()
            .find(|b| b.join("rustc").is_file())
            .ok_or(
                "no nightly Rust toolchain found. The GPU kernels need nightly (asm on nvptx64, \
             extern \"ptx-kernel\"): install one with `rustup toolchain install nightly \
             --component rust-docs`, or point MGWS_NIGHTLY at a toolchain directory",
            )?;
        let out = Command::new(bin.join("rustc"))
            .arg("-V")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", bin.join("rustc").display()))?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !version.contains("nightly") && !version.contains("-dev") {
            return Err(format!(
                "{} is `{version}`, not a nightly toolchain",
                bin.join("rustc").display()
            ));
        }
        if !bin.join("cargo").is_file() {
            return Err(format!(
                "the nightly toolchain at {} has no cargo",
                bin.display()
            ));
        }
        Ok(Toolchain { bin, version })
    }

    /// Possible `bin` directories of a nightly toolchain, best first.
    fn candidates() -> Vec<PathBuf> {
        if let Some(dir) = env::var_os("MGWS_NIGHTLY") {
            return vec![PathBuf::from(dir).join("bin")];
        }
        let mut found = Vec::new();
        let rustup_home = env::var_os("RUSTUP_HOME")
            .map(PathBuf::from)
            .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".rustup")));
        if let Some(Ok(entries)) = rustup_home.map(|h| fs::read_dir(h.join("toolchains"))) {
            let mut dirs: Vec<PathBuf> = entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("nightly"))
                .map(|e| e.path().join("bin"))
                .collect();
            // `nightly-<host>` before dated nightlies, newest date first.
            dirs.sort_by_key(|d| {
                (
                    d.to_string_lossy().matches('-').count() > 4,
                    std::cmp::Reverse(d.clone()),
                )
            });
            found.extend(dirs);
        }
        if let Ok(out) = Command::new("rustup")
            .args(["which", "--toolchain", "nightly", "rustc"])
            .output()
        {
            if out.status.success() {
                let rustc = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
                found.extend(rustc.parent().map(Path::to_path_buf));
            }
        }
        found
    }

    /// The toolchain directory (parent of `bin`).
    fn dir(&self) -> &Path {
        self.bin.parent().unwrap_or(&self.bin)
    }
}

/// `shared/tools/<name>`: in the checkout (device machines) or beside it (CI, development).
fn shared_tool(root: &Path, name: &str) -> Option<PathBuf> {
    [
        root.join("shared/tools").join(name),
        root.join("../shared/tools").join(name),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

fn has_core(sysroot: &Path) -> bool {
    let lib = sysroot.join("lib/rustlib").join(TARGET).join("lib");
    fs::read_dir(lib).is_ok_and(|entries| {
        entries.filter_map(|e| e.ok()).any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("libcore") && name.ends_with(".rlib")
        })
    })
}

/// The `--sysroot` to pass, or `None` when the toolchain has the nvptx64 target installed.
fn find_sysroot(root: &Path, toolchain: &Toolchain) -> Result<Option<PathBuf>> {
    let script = shared_tool(root, "nvptx-sysroot.sh");
    if let Some(dir) = env::var_os("MGWS_NVPTX_SYSROOT").map(PathBuf::from) {
        // The script rebuilds the sysroot if it was made by another rustc, and is quick otherwise.
        if let Some(script) = &script {
            return build_sysroot(script, toolchain, Some(&dir)).map(Some);
        }
        if has_core(&dir) {
            return Ok(Some(dir));
        }
        return Err(format!(
            "MGWS_NVPTX_SYSROOT={} holds no core library for {TARGET}",
            dir.display()
        ));
    }
    if has_core(toolchain.dir()) {
        return Ok(None);
    }
    match script {
        Some(script) => build_sysroot(&script, toolchain, None).map(Some),
        None => Err(format!(
            "no {TARGET} sysroot: the nightly toolchain at {} lacks the target, and \
             shared/tools/nvptx-sysroot.sh was found neither in the checkout nor beside it. Run \
             `rustup target add {TARGET} --toolchain nightly`, or set MGWS_NVPTX_SYSROOT to a \
             sysroot built by that script",
            toolchain.dir().display()
        )),
    }
}

fn build_sysroot(script: &Path, toolchain: &Toolchain, dest: Option<&Path>) -> Result<PathBuf> {
    let mut cmd = Command::new("bash");
    cmd.arg(script)
        .env("NIGHTLY", toolchain.dir())
        .stderr(Stdio::inherit());
    if let Some(dest) = dest {
        cmd.arg(dest);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout.lines().last().map(str::trim).unwrap_or("");
    if !out.status.success() || path.is_empty() {
        return Err(format!(
            "{} failed ({}); see its messages above",
            script.display(),
            out.status
        ));
    }
    let path = PathBuf::from(path);
    if !has_core(&path) {
        return Err(format!(
            "{} printed {}, which holds no core library",
            script.display(),
            path.display()
        ));
    }
    Ok(path)
}

/// The `.ptx` file among the artifacts cargo reported (`--message-format json`) for `package`.
fn ptx_artifact(messages: &str, package: &str) -> Result<PathBuf> {
    let lib = package.replace('-', "_");
    let found: Vec<&str> = messages
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\""))
        .flat_map(|l| l.split('"'))
        .filter(|s| s.ends_with(".ptx"))
        .collect();
    found
        .iter()
        .rev()
        .find(|p| Path::new(p).file_stem().is_some_and(|s| s.to_string_lossy() == lib))
        .or(found.last())
        .map(PathBuf::from)
        .ok_or(format!(
            "cargo built {package} but reported no .ptx file: is it a `crate-type = [\"cdylib\"]` crate?"
        ))
}

/// What [`check_ptx`] found.
#[derive(Debug, Default, PartialEq, Eq)]
struct PtxCheck {
    entries: Vec<String>,
    unresolved: Vec<String>,
}

impl PtxCheck {
    fn result(&self) -> Result<()> {
        if !self.unresolved.is_empty() {
            let mut msg = format!(
                "the PTX calls functions it does not define (.extern .func): {}",
                self.unresolved.join(", ")
            );
            if self.unresolved.iter().any(|f| f == "memcmp" || f == "bcmp") {
                msg.push_str(
                    "\n  memcmp/bcmp come from slice comparisons: enable the `mem-builtins` feature \
                     of mgws-kernel-support in the kernel crate",
                );
            }
            return Err(msg);
        }
        if !self.entries.iter().any(|e| e == WORKER_ENTRY) {
            return Err(format!(
                "the PTX has no `.entry {WORKER_ENTRY}` (found: {}); define it with \
                 `mgws_kernel_support::worker_kernel!(Registry);`",
                if self.entries.is_empty() {
                    "none".to_string()
                } else {
                    self.entries.join(", ")
                }
            ));
        }
        Ok(())
    }
}

/// The name that follows `keyword` on a PTX declaration line, up to `(`, `;` or white space.
fn declared_name<'a>(line: &'a str, keyword: &str) -> Option<&'a str> {
    let rest = line.split_once(keyword)?.1.trim_start();
    // `.func (.param .b32 func_retval0) name(` declares a return value before the name.
    let rest = match rest.strip_prefix('(') {
        Some(r) => r.split_once(')')?.1.trim_start(),
        None => rest,
    };
    let name = rest
        .split(|c: char| c == '(' || c == ';' || c.is_whitespace())
        .next()?;
    (!name.is_empty()).then_some(name)
}

fn check_ptx(ptx: &str) -> PtxCheck {
    let mut check = PtxCheck::default();
    for line in ptx.lines().map(str::trim_start) {
        if line.starts_with("//") {
            continue;
        }
        if line.starts_with(".extern .func") {
            check
                .unresolved
                .extend(declared_name(line, ".func").map(String::from));
        } else if line.contains(".entry ") {
            check
                .entries
                .extend(declared_name(line, ".entry").map(String::from));
        }
    }
    check
}

/// The lines of `ptxas -v` worth showing, and warnings about them.
struct PtxasReport {
    lines: Vec<String>,
    warnings: Vec<String>,
}

fn find_ptxas(root: &Path) -> Result<Vec<OsString>> {
    if let Some(p) = env::var_os("MGWS_PTXAS") {
        return Ok(vec![p]);
    }
    if Command::new("ptxas")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
    {
        return Ok(vec!["ptxas".into()]);
    }
    if let Some(script) = shared_tool(root, "ptxas.sh") {
        return Ok(vec!["bash".into(), script.into()]);
    }
    Err(
        "no ptxas: install the CUDA toolkit, set MGWS_PTXAS, or provide shared/tools/ptxas.sh \
         (which fetches NVIDIA's ptxas from PyPI) beside or inside the checkout"
            .into(),
    )
}

fn ptxas(root: &Path, arch: &str, ptx: &Path, cubin: &Path) -> Result<PtxasReport> {
    let program = find_ptxas(root)?;
    let out = Command::new(&program[0])
        .args(&program[1..])
        .arg(format!("-arch={arch}"))
        .arg("-v")
        .arg(ptx)
        .arg("-o")
        .arg(cubin)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program[0].to_string_lossy()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(format!(
            "ptxas rejected {} ({}):\n{text}",
            ptx.display(),
            out.status
        ));
    }
    Ok(ptxas_report(&text))
}

/// Keeps what `ptxas -v` says about kernel entries (not about internal functions) and flags spills.
fn ptxas_report(text: &str) -> PtxasReport {
    let mut report = PtxasReport {
        lines: Vec::new(),
        warnings: Vec::new(),
    };
    let mut entry: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.split_once("Compiling entry function '") {
            entry = rest.1.split('\'').next().map(String::from);
            report.lines.push(line.trim_end().to_string());
            continue;
        }
        if line.contains("Function properties for") {
            let name = line
                .rsplit("Function properties for")
                .next()
                .unwrap_or("")
                .trim();
            if entry.as_deref() != Some(name) {
                entry = None;
            }
        }
        if line.contains("gmem") || line.starts_with("ptxas warning") {
            report.lines.push(line.trim_end().to_string());
        }
        let Some(e) = &entry else { continue };
        report.lines.push(line.trim_end().to_string());
        if let Some(spills) = spill_bytes(line).filter(|&b| b > 0) {
            report.warnings.push(format!(
                "{e} spills {spills} bytes of registers to local memory"
            ));
        }
        if line.contains("Used ") && line.contains("registers") {
            entry = None;
        }
    }
    report
}

/// The spill bytes (stores plus loads) of a `ptxas -v` properties line.
fn spill_bytes(line: &str) -> Option<u64> {
    if !line.contains("spill") {
        return None;
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    let total = words
        .windows(3)
        .filter(|w| w[1] == "bytes" && w[2] == "spill")
        .filter_map(|w| w[0].parse::<u64>().ok())
        .sum();
    Some(total)
}

/// Linker mode: `rustc ... -o <dir>/<name>.ptx` was compiled with `--emit=asm,link`, so the PTX of
/// the whole (LTO'd) module is already in `<dir>/<name>.s`; "linking" is copying it.
fn link(args: &[OsString]) -> Result<()> {
    let out = args
        .iter()
        .position(|a| a == "-o")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .ok_or("run as the nvptx linker without `-o <output>`")?;
    let asm = out.with_extension("s");
    if !asm.is_file() {
        return Err(format!(
            "{} is missing: the kernel crate must be built with `--emit=asm,link` (cargo xtask ptx does that)",
            asm.display()
        ));
    }
    fs::copy(&asm, &out)
        .map_err(|e| format!("cannot copy {} to {}: {e}", asm.display(), out.display()))?;
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

    #[test]
    fn ptx_check_finds_entries_and_unresolved_functions() {
        let ptx = "\
.version 7.8
// .globl	mgws_worker
.extern .func  (.param .b32 func_retval0) memcmp
(
.extern .func helper(
.visible .entry mgws_worker(
.visible .entry other_kernel()
.func _ZN4core9panicking5panic(
";
        let c = check_ptx(ptx);
        assert_eq!(c.entries, ["mgws_worker", "other_kernel"]);
        assert_eq!(c.unresolved, ["memcmp", "helper"]);
        let err = c.result().unwrap_err();
        assert!(
            err.contains("memcmp, helper") && err.contains("mem-builtins"),
            "{err}"
        );
        let ok = check_ptx(".visible .entry mgws_worker(\n.func f(\n");
        assert!(ok.result().is_ok());
        let none = check_ptx(".visible .entry other(\n");
        assert!(none
            .result()
            .unwrap_err()
            .contains("no `.entry mgws_worker` (found: other)"));
    }

    #[test]
    fn ptxas_report_keeps_entries_and_flags_spills() {
        let text = "\
ptxas info    : 559 bytes gmem
ptxas info    : Compiling entry function 'mgws_worker' for 'sm_90'
ptxas info    : Function properties for mgws_worker
    392 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 120 registers, used 1 barriers, 392 bytes cumulative stack size
ptxas info    : Compile time = 839.878 ms
ptxas info    : Function properties for _helper
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
";
        let r = ptxas_report(text);
        assert_eq!(r.lines.len(), 5, "{:?}", r.lines);
        assert!(r.lines[4].contains("Used 120 registers"));
        assert_eq!(
            r.warnings,
            ["mgws_worker spills 12 bytes of registers to local memory"]
        );
    }

    #[test]
    fn artifact_is_found_in_cargo_messages() {
        let msgs = r#"{"reason":"compiler-artifact","filenames":["/t/deps/libmgws_core-1.rlib"]}
{"reason":"compiler-artifact","filenames":["/t/ptx/mgws_kernel.ptx"]}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            ptx_artifact(msgs, "mgws-kernel").unwrap(),
            PathBuf::from("/t/ptx/mgws_kernel.ptx")
        );
        assert!(ptx_artifact("{}", "x").is_err());
    }
}
