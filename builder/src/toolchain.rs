//! The nightly toolchain, the nvptx64 sysroot and the PTX linker.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{BuildError, TARGET};

/// The nightly toolchain that builds the kernels.
#[derive(Clone, Debug)]
pub struct Toolchain {
    /// Its `bin` directory (with `cargo` and `rustc`).
    pub bin: PathBuf,
    /// `rustc -V`.
    pub version: String,
}

impl Toolchain {
    /// `MGWS_NIGHTLY` (a toolchain directory), else rustup's `nightly-*` toolchains (undated
    /// first, then newest date), else `rustup which --toolchain nightly rustc`.
    pub fn find() -> Result<Toolchain, BuildError> {
        let bin = Self::candidates()
            .into_iter()
            .find(|b| b.join("rustc").is_file())
            .ok_or_else(|| {
                BuildError::ToolsMissing(format!(
                    "no nightly Rust toolchain found (the GPU kernels need nightly: asm on nvptx64, \
                     extern \"ptx-kernel\"). Install one with `rustup toolchain install nightly \
                     --target {TARGET}`, or point MGWS_NIGHTLY at a nightly toolchain directory"
                ))
            })?;
        let out = Command::new(bin.join("rustc"))
            .arg("-V")
            .output()
            .map_err(|e| {
                BuildError::ToolsMissing(format!("cannot run {}: {e}", bin.join("rustc").display()))
            })?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !version.contains("nightly") && !version.contains("-dev") {
            return Err(BuildError::ToolsMissing(format!(
                "{} is `{version}`, not a nightly toolchain; set MGWS_NIGHTLY to a nightly one",
                bin.join("rustc").display()
            )));
        }
        if !bin.join("cargo").is_file() {
            return Err(BuildError::ToolsMissing(format!(
                "the nightly toolchain at {} has no cargo",
                bin.display()
            )));
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
    pub fn dir(&self) -> &Path {
        self.bin.parent().unwrap_or(&self.bin)
    }
}

/// `shared/tools/<name>` in `near` or one of its ancestors: the project's tool scripts, in a
/// checkout or beside it.
pub(crate) fn shared_tool(near: &Path, name: &str) -> Option<PathBuf> {
    near.ancestors()
        .map(|a| a.join("shared/tools").join(name))
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

/// The `--sysroot` to pass, or `None` when the toolchain has the nvptx64 target installed:
/// `MGWS_NVPTX_SYSROOT` (refreshed by `shared/tools/nvptx-sysroot.sh` where that script is
/// found), else the toolchain's own target, else one built by that script in its default place.
pub(crate) fn find_sysroot(
    near: &Path,
    toolchain: &Toolchain,
) -> Result<Option<PathBuf>, BuildError> {
    let script = shared_tool(near, "nvptx-sysroot.sh");
    if let Some(dir) = env::var_os("MGWS_NVPTX_SYSROOT").map(PathBuf::from) {
        // The script rebuilds the sysroot if another rustc made it, and is quick otherwise.
        if let Some(script) = &script {
            return build_sysroot(script, toolchain, Some(&dir)).map(Some);
        }
        if has_core(&dir) {
            return Ok(Some(dir));
        }
        return Err(BuildError::ToolsMissing(format!(
            "MGWS_NVPTX_SYSROOT={} holds no core library for {TARGET} \
             (lib/rustlib/{TARGET}/lib/libcore*.rlib, built by the same nightly rustc)",
            dir.display()
        )));
    }
    if has_core(toolchain.dir()) {
        return Ok(None);
    }
    match script {
        Some(script) => build_sysroot(&script, toolchain, None).map(Some),
        None => Err(BuildError::ToolsMissing(format!(
            "the nightly toolchain at {} lacks the {TARGET} target. Run `rustup target add \
             {TARGET} --toolchain nightly`, or, where it cannot be downloaded, set \
             MGWS_NVPTX_SYSROOT to a sysroot holding lib/rustlib/{TARGET}/lib/libcore*.rlib \
             built by that nightly (mgws's docs/kernels.md says how to build one; a \
             shared/tools/nvptx-sysroot.sh in the crate's directory or an ancestor is used when \
             present)",
            toolchain.dir().display()
        ))),
    }
}

fn build_sysroot(
    script: &Path,
    toolchain: &Toolchain,
    dest: Option<&Path>,
) -> Result<PathBuf, BuildError> {
    let mut cmd = Command::new("bash");
    cmd.arg(script)
        .env("NIGHTLY", toolchain.dir())
        .stderr(Stdio::inherit());
    if let Some(dest) = dest {
        cmd.arg(dest);
    }
    let out = cmd
        .output()
        .map_err(|e| BuildError::ToolsMissing(format!("cannot run {}: {e}", script.display())))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout.lines().last().map(str::trim).unwrap_or("");
    if !out.status.success() || path.is_empty() {
        return Err(BuildError::ToolsMissing(format!(
            "{} failed ({}) to build a {TARGET} sysroot; see its messages",
            script.display(),
            out.status
        )));
    }
    let path = PathBuf::from(path);
    if !has_core(&path) {
        return Err(BuildError::ToolsMissing(format!(
            "{} printed {}, which holds no core library",
            script.display(),
            path.display()
        )));
    }
    Ok(path)
}

/// The source of `mgws-ptx-link`, the linker the builder gives rustc for nvptx64.
const LINKER_SOURCE: &str = include_str!("../linker/main.rs");

/// Compiles `mgws-ptx-link` with the toolchain's rustc into `dir` (once per linker source and
/// rustc version) and returns its path.
pub(crate) fn ptx_linker(toolchain: &Toolchain, dir: &Path) -> Result<PathBuf, BuildError> {
    let tag = crate::fnv1a(format!("{LINKER_SOURCE}{}", toolchain.version).as_bytes());
    let exe = dir.join(format!(
        "mgws-ptx-link-{tag:016x}{}",
        env::consts::EXE_SUFFIX
    ));
    if exe.is_file() {
        return Ok(exe);
    }
    fs::create_dir_all(dir)
        .map_err(|e| BuildError::Failed(format!("cannot create {}: {e}", dir.display())))?;
    let src = dir.join("mgws-ptx-link.rs");
    fs::write(&src, LINKER_SOURCE)
        .map_err(|e| BuildError::Failed(format!("cannot write {}: {e}", src.display())))?;
    let tmp = exe.with_extension("tmp");
    let out = Command::new(toolchain.bin.join("rustc"))
        .args(["--edition", "2021", "-O", "--crate-name", "mgws_ptx_link"])
        .arg(&src)
        .arg("-o")
        .arg(&tmp)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .map_err(|e| BuildError::ToolsMissing(format!("cannot run the nightly rustc: {e}")))?;
    if !out.status.success() {
        return Err(BuildError::Failed(format!(
            "compiling the PTX linker {} failed:\n{}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    fs::rename(&tmp, &exe)
        .map_err(|e| BuildError::Failed(format!("cannot move {}: {e}", tmp.display())))?;
    Ok(exe)
}
