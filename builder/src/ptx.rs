//! What the builder checks in a PTX module, and `ptxas`.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::toolchain::shared_tool;
use crate::{BuildError, WORKER_ENTRY};

/// The global by which kernel `name` names the registry it was built for (`worker_kernel!`):
/// `mgws_<name>_fingerprint`.
pub fn fingerprint_symbol(name: &str) -> String {
    format!("mgws_{name}_fingerprint")
}

/// The kernel name of a fingerprint symbol `mgws_<name>_fingerprint`.
fn kernel_of_symbol(symbol: &str) -> Option<&str> {
    let name = symbol.strip_prefix("mgws_")?.strip_suffix("_fingerprint")?;
    (!name.is_empty()).then_some(name)
}

/// What [`check_ptx`] found in a PTX module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxCheck {
    /// The kernel entry points (`.entry NAME`).
    pub entries: Vec<String>,
    /// Functions the module calls but does not define (`.extern .func NAME`).
    pub unresolved: Vec<String>,
    /// Each kernel's name and registry fingerprint (`mgws_<name>_fingerprint`), in module order.
    pub fingerprints: Vec<(String, u64)>,
}

impl PtxCheck {
    /// Fails if the module calls undefined functions, names no registry, or lacks the default
    /// worker entry of a registry it names (`mgws_<name>_worker_counter_damping_single_device`).
    pub fn result(&self) -> Result<(), BuildError> {
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
            return Err(BuildError::Failed(msg));
        }
        if self.fingerprints.is_empty() {
            return Err(BuildError::Failed(format!(
                "the PTX defines no kernel (no `mgws_<name>_fingerprint` global; entries found: \
                 {}); define them with `mgws::worker_kernel!(name => MyRegistry);`",
                if self.entries.is_empty() {
                    "none".to_string()
                } else {
                    self.entries.join(", ")
                }
            )));
        }
        for (name, _) in &self.fingerprints {
            let entry = format!("mgws_{name}_{WORKER_ENTRY}");
            if !self.entries.contains(&entry) {
                return Err(BuildError::Failed(format!(
                    "the PTX has the fingerprint of kernel `{name}` but no `.entry {entry}`"
                )));
            }
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

/// Lists the entries, the unresolved functions and the registry fingerprint of a PTX module.
pub fn check_ptx(ptx: &str) -> PtxCheck {
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
        } else if let Some(found) = fingerprint_of_line(line) {
            check.fingerprints.push(found);
        }
    }
    check
}

/// The kernel name and fingerprint a `mgws_<name>_fingerprint` definition holds, in either
/// spelling: `.u64 mgws_<name>_fingerprint = 123;` or, as LLVM writes a Rust `u64` static,
/// `.b8 mgws_<name>_fingerprint[8] = {b0, ..., b7};` (little-endian bytes).
pub fn fingerprint_of_line(line: &str) -> Option<(String, u64)> {
    if !line.contains(".global") {
        return None;
    }
    let (decl, init) = line.split_once('=')?;
    let symbol = decl.split_whitespace().last()?;
    let init = init.trim().trim_end_matches(';').trim();
    if decl.contains(".u64") {
        let name = kernel_of_symbol(symbol)?;
        return Some((name.to_string(), init.parse().ok()?));
    }
    if decl.contains(".b8") {
        let name = kernel_of_symbol(symbol.strip_suffix("[8]")?)?;
        let bytes: Vec<u8> = init
            .trim_start_matches('{')
            .trim_end_matches('}')
            .split(',')
            .map(|b| b.trim().parse::<u8>())
            .collect::<Result<_, _>>()
            .ok()?;
        return Some((name.to_string(), u64::from_le_bytes(bytes.try_into().ok()?)));
    }
    None
}

/// Rewrites the byte-array definitions of `mgws_<name>_fingerprint` that LLVM emits into the
/// equivalent `.visible .global .align 8 .u64 mgws_<name>_fingerprint = <decimal>;` (same size,
/// alignment and symbol), so that the PTX states the fingerprints legibly. Other lines are kept.
pub fn normalize_fingerprint(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len());
    for line in ptx.split_inclusive('\n') {
        let trimmed = line.trim_start();
        match fingerprint_of_line(trimmed) {
            Some((name, value)) if trimmed.contains(".b8") => {
                let visible = if trimmed.starts_with(".visible") {
                    ".visible "
                } else {
                    ""
                };
                out.push_str(&format!(
                    "{visible}.global .align 8 .u64 {} = {value};\n",
                    fingerprint_symbol(&name)
                ));
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// ptxas on this machine without fetching anything: `MGWS_PTXAS`, `ptxas` on the PATH, or the
/// CUDA toolkit's (`$CUDA_HOME/bin`, `$CUDA_PATH/bin`, `/usr/local/cuda/bin`).
pub(crate) fn find_local_ptxas() -> Option<Vec<OsString>> {
    if let Some(p) = std::env::var_os("MGWS_PTXAS") {
        return Some(vec![p]);
    }
    let runs = |program: &OsString| {
        Command::new(program)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let toolkits = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|home| Path::new(&home).join("bin/ptxas").into_os_string());
    std::iter::once(OsString::from("ptxas"))
        .chain(toolkits)
        .chain(std::iter::once(OsString::from("/usr/local/cuda/bin/ptxas")))
        .find(runs)
        .map(|p| vec![p])
}

/// The `ptxas` command: one on this machine ([`find_local_ptxas`]), else `shared/tools/ptxas.sh`
/// in `near` or one of its ancestors (it fetches NVIDIA's ptxas from PyPI once).
pub(crate) fn find_ptxas(near: &Path) -> Result<Vec<OsString>, BuildError> {
    if let Some(program) = find_local_ptxas() {
        return Ok(program);
    }
    if let Some(script) = shared_tool(near, "ptxas.sh") {
        return Ok(vec!["bash".into(), script.into()]);
    }
    Err(BuildError::ToolsMissing(
        "no ptxas: install the CUDA toolkit (ptxas on the PATH) or set MGWS_PTXAS to a ptxas \
         binary"
            .into(),
    ))
}

/// What `ptxas -v` said about the kernel entries of a module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PtxasReport {
    /// The lines about kernel entries (registers, shared memory, stack, spills) and global memory.
    pub lines: Vec<String>,
    /// Register spills, one line per spilling entry.
    pub warnings: Vec<String>,
}

/// Assembles `ptx` for `arch` with `ptxas -v` into `cubin`; `relocatable` (`-c`) for a module
/// whose calls are linked in at load time.
pub(crate) fn run_ptxas(
    program: &[OsString],
    arch: &str,
    ptx: &Path,
    cubin: &Path,
    relocatable: bool,
) -> Result<PtxasReport, BuildError> {
    let mut command = Command::new(&program[0]);
    command.args(&program[1..]);
    if relocatable {
        command.arg("-c");
    }
    if has_split_compile(program) {
        // One thread per CPU over the module's functions: the entries, their registers and
        // spills come out the same, and a module of hundreds of entries assembles in about
        // half the time on two cores.
        command.args(["--split-compile", "0"]);
    }
    let out = command
        .arg(format!("-arch={arch}"))
        .arg("-v")
        .arg(ptx)
        .arg("-o")
        .arg(cubin)
        .output()
        .map_err(|e| {
            BuildError::ToolsMissing(format!("cannot run {}: {e}", program[0].to_string_lossy()))
        })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(BuildError::Failed(format!(
            "ptxas rejected {} ({}):\n{text}",
            ptx.display(),
            out.status
        )));
    }
    Ok(ptxas_report(&text))
}

/// Whether this ptxas has `--split-compile` (CUDA 12.1 on); an older one is used without it.
fn has_split_compile(program: &[OsString]) -> bool {
    Command::new(&program[0])
        .args(&program[1..])
        .arg("--help")
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains("--split-compile"))
}

/// Keeps what `ptxas -v` says about kernel entries (not about internal functions) and flags spills.
pub fn ptxas_report(text: &str) -> PtxasReport {
    let mut report = PtxasReport::default();
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

/// The `.ptx` file among the artifacts cargo reported (`--message-format json`) for the library
/// `lib` (the crate name, `_` for `-`), else the last one.
pub(crate) fn ptx_artifact(messages: &str, lib: Option<&str>) -> Option<std::path::PathBuf> {
    let found: Vec<&str> = messages
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\""))
        .flat_map(|l| l.split('"'))
        .filter(|s| s.ends_with(".ptx"))
        .collect();
    found
        .iter()
        .rev()
        .find(|p| {
            lib.is_some_and(|lib| {
                Path::new(p)
                    .file_stem()
                    .is_some_and(|s| s.to_string_lossy() == lib)
            })
        })
        .or(found.last())
        .map(std::path::PathBuf::from)
}

/// The directories of the path packages (local sources: the kernel crate and its path
/// dependencies, `mgws` among them) in cargo's JSON messages, for `cargo:rerun-if-changed`.
pub(crate) fn path_packages(messages: &str) -> Vec<std::path::PathBuf> {
    let mut dirs = Vec::new();
    for line in messages
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\"") && l.contains("path+file://"))
    {
        let Some(manifest) = line
            .split_once("\"manifest_path\":\"")
            .and_then(|(_, rest)| rest.split('"').next())
        else {
            continue;
        };
        if let Some(dir) = Path::new(manifest).parent() {
            if !dirs.iter().any(|d: &std::path::PathBuf| d == dir) {
                dirs.push(dir.to_path_buf());
            }
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_check_finds_entries_unresolved_functions_and_the_fingerprints() {
        let ptx = "\
.version 7.8
// .globl	mgws_fib_worker_counter_damping_single_device
.extern .func  (.param .b32 func_retval0) memcmp
(
.extern .func helper(
.visible .global .align 8 .b8 mgws_fib_fingerprint[8] = {56, 176, 173, 25, 237, 70, 0, 69};
.visible .global .align 8 .u64 mgws_my_uts_fingerprint = 7;
.visible .entry mgws_fib_worker_counter_damping_single_device(
.visible .entry other_kernel()
.func _ZN4core9panicking5panic(
";
        let c = check_ptx(ptx);
        assert_eq!(
            c.entries,
            [
                "mgws_fib_worker_counter_damping_single_device",
                "other_kernel"
            ]
        );
        assert_eq!(c.unresolved, ["memcmp", "helper"]);
        assert_eq!(
            c.fingerprints,
            [
                (
                    "fib".to_string(),
                    u64::from_le_bytes([56, 176, 173, 25, 237, 70, 0, 69])
                ),
                ("my_uts".to_string(), 7)
            ]
        );
        let err = c.result().unwrap_err().to_string();
        assert!(
            err.contains("memcmp, helper") && err.contains("mem-builtins"),
            "{err}"
        );
        let one = ".visible .global .align 8 .u64 mgws_fib_fingerprint = 1;\n\
                   .visible .entry mgws_fib_worker_counter_damping_single_device(\n.func f(\n";
        assert!(check_ptx(one).result().is_ok());
        let missing = check_ptx(".visible .global .align 8 .u64 mgws_uts_fingerprint = 1;\n");
        assert!(missing.result().unwrap_err().to_string().contains(
            "kernel `uts` but no `.entry mgws_uts_worker_counter_damping_single_device`"
        ));
        let none = check_ptx(".visible .entry other(\n");
        let e = none.result().unwrap_err().to_string();
        assert!(
            e.contains("defines no kernel") && e.contains("other"),
            "{e}"
        );
    }

    #[test]
    fn the_fingerprint_is_rewritten_as_a_decimal_u64() {
        let ptx = "a\n.visible .global .align 8 .b8 mgws_fib_fingerprint[8] = {1, 0, 0, 0, 0, 0, 0, 1};\nb\n";
        let fixed = normalize_fingerprint(ptx);
        assert_eq!(
            fixed,
            "a\n.visible .global .align 8 .u64 mgws_fib_fingerprint = 72057594037927937;\nb\n"
        );
        assert_eq!(
            check_ptx(&fixed).fingerprints,
            [("fib".to_string(), 72_057_594_037_927_937)]
        );
        assert_eq!(normalize_fingerprint(&fixed), fixed);
        let other = ".visible .global .align 8 .b8 other[8] = {1, 0, 0, 0, 0, 0, 0, 1};\n";
        assert_eq!(normalize_fingerprint(other), other);
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
    fn artifacts_and_path_packages_are_found_in_cargo_messages() {
        let msgs = r#"{"reason":"compiler-artifact","package_id":"path+file:///w/device/core#mgws-core@0.1.0","manifest_path":"/w/device/core/Cargo.toml","filenames":["/t/deps/libmgws_core-1.rlib"]}
{"reason":"compiler-artifact","package_id":"registry+https://github.com/rust-lang/crates.io-index#libm@0.2.16","manifest_path":"/r/libm/Cargo.toml","filenames":["/t/deps/liblibm-1.rlib"]}
{"reason":"compiler-artifact","package_id":"path+file:///w/k#mgws-kernel@0.1.0","manifest_path":"/w/k/Cargo.toml","filenames":["/t/ptx/mgws_kernel.ptx"]}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            ptx_artifact(msgs, Some("mgws_kernel")).unwrap(),
            std::path::PathBuf::from("/t/ptx/mgws_kernel.ptx")
        );
        assert!(ptx_artifact("{}", None).is_none());
        assert_eq!(
            path_packages(msgs),
            [
                std::path::PathBuf::from("/w/device/core"),
                std::path::PathBuf::from("/w/k")
            ]
        );
    }
}
