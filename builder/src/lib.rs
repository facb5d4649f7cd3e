//! # mgws-builder
//!
//! Builds an MGWS GPU kernel crate to PTX, like rust-gpu's `spirv-builder` or Rust-CUDA's
//! `cuda_builder`: called from a build script, so that `cargo build` builds the kernel too.
//!
//! ```ignore
//! // build.rs of a crate whose library is its own kernel (`mgws::worker_kernel!(my => MyTasks);`,
//! // crate-type = ["cdylib", "rlib"]):
//! fn main() {
//!     mgws_builder::KernelBuilder::new(env!("CARGO_MANIFEST_DIR")).build_script();
//! }
//! ```
//! and in the library, the registry embeds the PTX the builder wrote to `$OUT_DIR/<crate>.ptx`:
//! ```ignore
//! #[mgws::registry(ptx = mgws::kernel_ptx!())]
//! pub enum MyTasks { Collatz(CollatzRange) }
//! ```
//! (`mgws::kernel_ptx!()` is `include_str!(concat!(env!("OUT_DIR"), "/", env!("CARGO_CRATE_NAME"),
//! ".ptx"))`; `kernel_ptx!("name")` names another file.)
//!
//! ## The recipe
//!
//! 1. A nightly toolchain: `MGWS_NIGHTLY` (a toolchain directory), else rustup's `nightly-*`.
//! 2. A sysroot with `core` for `nvptx64-nvidia-cuda`: `MGWS_NVPTX_SYSROOT`, else the toolchain's
//!    installed target (`rustup target add nvptx64-nvidia-cuda --toolchain nightly`), else one
//!    built by the project's `shared/tools/nvptx-sysroot.sh` where that script is found in the
//!    crate's directory or an ancestor's `shared/tools`.
//! 3. That toolchain's cargo runs `cargo rustc --lib --crate-type cdylib --release --target
//!    nvptx64-nvidia-cuda` on the kernel crate with fat LTO, one codegen unit and `panic=abort`
//!    (`CARGO_PROFILE_RELEASE_*`), rustflags `--sysroot <sysroot> --emit=asm,link
//!    -Ctarget-cpu=<arch>`, in a target directory of its own, and [`MGWS_BUILDER_NESTED`] set so
//!    that the kernel crate's own build script, which runs again inside, does nothing.
//! 4. The linker: rustc's linker for nvptx64 (`llvm-bitcode-linker`) is often not installable, so
//!    the builder compiles its own tiny `mgws-ptx-link` (`linker/main.rs` of this crate) with the
//!    nightly rustc and passes it as `CARGO_TARGET_NVPTX64_NVIDIA_CUDA_LINKER`. With
//!    `--emit=asm,link` rustc has written the whole LTO'd module's PTX to `<out>.s`; the linker
//!    copies it to the `<out>.ptx` rustc asks for.
//! 5. The PTX is checked: no unresolved functions, and for each registry fingerprint
//!    (`mgws_<name>_fingerprint`, which the builder rewrites from LLVM's byte array into
//!    `.visible .global .align 8 .u64 mgws_<name>_fingerprint = <decimal>;`) the registry's
//!    default worker entry `mgws_<name>_worker_counter_damping_single_device`. Optionally `ptxas`
//!    assembles it (`MGWS_PTXAS`, else `ptxas` on the PATH).
//!
//! ## For GPU PEs over NVSHMEM's device API
//!
//! [`KernelBuilder::nvshmem`] builds the kernel with the crate's `nvshmem` feature, which must
//! enable `mgws-kernel-support/nvshmem` (for a crate that reaches it through `mgws`, declare
//! `nvshmem = ["mgws-kernel-support/nvshmem"]` with `mgws-kernel-support` as a dependency of the
//! kernel crate), into `<lib>.<arch>.nvshmem.ptx`. Its entries call [`NVSHMEM_FUNCTIONS`], which
//! mgws links in when a run over `--pe-transport device-api` loads the module; ptxas assembles it
//! as relocatable code (`-c`). `cargo xtask ptx --nvshmem` does this for the built-in kernel.
//!
//! ## From a build script
//!
//! [`KernelBuilder::build_script`] never fails a host build for a missing tool: without a nightly
//! toolchain or an nvptx64 sysroot it writes a placeholder PTX whose first line is
//! `// mgws-builder: not built: <reason and what to install>` and emits a `cargo:warning`; the CPU
//! backend runs as usual and the CUDA backend reports that line when asked to load it.
//! [`MGWS_SKIP_KERNEL`]`=1` writes the same placeholder on purpose, for work on the CPU side. A
//! kernel that does not compile fails the build with rustc's own messages and a one-line summary
//! (exit status 1, no panic). The build script reruns only when the kernel's inputs change (its
//! library's modules, not `src/main.rs` or `src/bin/`; see [`KernelBuilder::build_script`]).
//!
//! ## Environment
//!
//! - [`MGWS_SKIP_KERNEL`]: `1` skips the kernel build (a placeholder PTX, as without nightly).
//! - `MGWS_NIGHTLY`: the nightly toolchain directory (with `bin/cargo` and `bin/rustc`).
//! - `MGWS_NVPTX_SYSROOT`: a sysroot with `lib/rustlib/nvptx64-nvidia-cuda/lib/libcore*.rlib`
//!   built by that nightly, for toolchains that lack the target.
//! - `MGWS_PTXAS`: a `ptxas` binary; from a build script, ptxas runs only when this is set.
//! - `MGWS_PTX_ARCH`: the architecture of build-script builds (default `sm_90`).
//! - [`MGWS_BUILDER_NESTED`]: set by the builder for the nested nvptx64 build (recursion guard).

mod ptx;
mod toolchain;
mod watch;

use std::env;
use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub use ptx::{
    check_ptx, fingerprint_of_line, fingerprint_symbol, normalize_fingerprint, ptxas_report,
    PtxCheck, PtxasReport,
};
pub use toolchain::Toolchain;
pub use watch::{skip_kernel, MGWS_SKIP_KERNEL};

/// The GPU target.
pub const TARGET: &str = "nvptx64-nvidia-cuda";
/// The architecture built when none is given.
pub const DEFAULT_ARCH: &str = "sm_90";
/// The suffix of the worker entry every registry of a kernel crate has (`worker_kernel!`:
/// `mgws_<name>_<WORKER_ENTRY>`, the worker compiled for the default options).
pub const WORKER_ENTRY: &str = "worker_counter_damping_single_device";
/// Set by the builder in the environment of the nested nvptx64 cargo: a build script that calls
/// [`KernelBuilder::build_script`] with it set does nothing, so that a crate can build itself.
pub const MGWS_BUILDER_NESTED: &str = "MGWS_BUILDER_NESTED";
/// The first words of a placeholder PTX file (see [`KernelBuilder::build_script`]).
pub const PLACEHOLDER_PREFIX: &str = "// mgws-builder: not built: ";
/// The environment variables the builder reads.
pub const ENV_VARS: [&str; 9] = [
    MGWS_SKIP_KERNEL,
    "MGWS_NIGHTLY",
    "MGWS_NVPTX_SYSROOT",
    "MGWS_PTXAS",
    "CUDA_HOME",
    "CUDA_PATH",
    "MGWS_PTX_ARCH",
    MGWS_BUILDER_NESTED,
    "RUSTUP_HOME",
];

/// Why a kernel was not built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// A tool is missing (nightly, the nvptx64 sysroot, ptxas): the message says what to install.
    ToolsMissing(String),
    /// The build or a check failed.
    Failed(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ToolsMissing(m) | BuildError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for BuildError {}

/// A built kernel.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// The PTX file.
    pub ptx: PathBuf,
    /// Its size in bytes.
    pub bytes: usize,
    /// Its entries, unresolved functions (none) and registry fingerprints.
    pub check: PtxCheck,
    /// The cubin and what `ptxas -v` said, when ptxas ran.
    pub ptxas: Option<(PathBuf, PtxasReport)>,
    /// Why ptxas, found where it was only wanted if found ([`Ptxas::IfFound`]), rejected the
    /// PTX (an older toolkit than the PTX needs, say); the PTX is good without it.
    pub ptxas_failed: Option<String>,
    /// The directories of the local packages compiled into it (the kernel crate and its path
    /// dependencies).
    pub sources: Vec<PathBuf>,
    /// The files rustc read to build it (the nested build's dep-info: the modules of those
    /// packages compiled for nvptx64, and the build scripts); empty if cargo wrote none.
    pub inputs: Vec<PathBuf>,
    /// `rustc -V` of the nightly that built it.
    pub rustc: String,
}

/// Whether [`KernelBuilder`] runs ptxas on the PTX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ptxas {
    /// Never.
    Off,
    /// When ptxas is on this machine: `MGWS_PTXAS`, `ptxas` on the PATH, or the CUDA toolkit's
    /// (`$CUDA_HOME/bin`, `$CUDA_PATH/bin`, `/usr/local/cuda/bin`); the default of
    /// [`KernelBuilder::build_script`]. A ptxas that rejects the PTX leaves no cubin and a
    /// reason in [`Kernel::ptxas_failed`]: the PTX alone still runs.
    IfFound,
    /// Always; a missing ptxas is an error (one found as for [`Ptxas::IfFound`], else the
    /// project's `shared/tools/ptxas.sh`).
    Required,
}

/// Builds one kernel crate to PTX. See the crate documentation for the recipe.
#[derive(Clone, Debug)]
pub struct KernelBuilder {
    manifest_dir: PathBuf,
    package: Option<String>,
    arch: String,
    out: Option<PathBuf>,
    target_dir: Option<PathBuf>,
    ptxas: Ptxas,
    quiet: bool,
    nvshmem: bool,
}

/// The functions a kernel built with [`KernelBuilder::nvshmem`] calls and leaves undefined: the
/// non-inline wrappers over NVSHMEM's device API that the host compiles with NVRTC and links in at
/// load time (`mgws-kernel-support`'s `nvshmem` feature).
pub const NVSHMEM_FUNCTIONS: &[&str] = &[
    "mgws_nvshmem_fetch_add",
    "mgws_nvshmem_add",
    "mgws_nvshmem_fetch",
    "mgws_nvshmem_set",
    "mgws_nvshmem_fetch_or",
    "mgws_nvshmem_fetch_and",
    "mgws_nvshmem_compare_swap",
    "mgws_nvshmem_get",
    "mgws_nvshmem_release",
];

impl KernelBuilder {
    /// A builder for the kernel crate (or the workspace, with [`KernelBuilder::package`]) whose
    /// `Cargo.toml` is in `manifest_dir`.
    pub fn new(manifest_dir: impl AsRef<Path>) -> KernelBuilder {
        KernelBuilder {
            manifest_dir: manifest_dir.as_ref().to_path_buf(),
            package: None,
            arch: DEFAULT_ARCH.into(),
            out: None,
            target_dir: None,
            ptxas: Ptxas::IfFound,
            quiet: false,
            nvshmem: false,
        }
    }

    /// Builds the kernel for GPU PEs over NVSHMEM's device API: with the kernel crate's
    /// `nvshmem` feature (which must enable `mgws-kernel-support/nvshmem`), into
    /// `<lib>.<arch>.nvshmem.ptx` by default. Its PTX calls [`NVSHMEM_FUNCTIONS`], which mgws
    /// links in when it loads the module; ptxas then assembles it as relocatable code (`-c`).
    pub fn nvshmem(mut self, on: bool) -> Self {
        self.nvshmem = on;
        self
    }

    /// The package to build, where the manifest is a workspace's.
    pub fn package(mut self, package: impl Into<String>) -> Self {
        self.package = Some(package.into());
        self
    }

    /// The GPU architecture (`sm_70` or newer; default `sm_90`).
    pub fn arch(mut self, arch: impl Into<String>) -> Self {
        self.arch = arch.into();
        self
    }

    /// Where to write the PTX (default: `$OUT_DIR/<lib>.ptx` from a build script, else
    /// `<target dir>/ptx/<lib>.<arch>.ptx`). A cubin goes next to it when ptxas runs.
    pub fn out(mut self, path: impl Into<PathBuf>) -> Self {
        self.out = Some(path.into());
        self
    }

    /// The target directory of the nested nvptx64 build (default: `mgws-builder` beside the
    /// profile directories of the calling build, else `target/mgws-builder` in `manifest_dir`).
    pub fn target_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.target_dir = Some(dir.into());
        self
    }

    /// Whether to run ptxas.
    pub fn ptxas(mut self, ptxas: Ptxas) -> Self {
        self.ptxas = ptxas;
        self
    }

    /// Passes `--quiet` to the nested cargo: the compiler's messages without its progress lines
    /// (default: off; [`KernelBuilder::build_script`] turns it on).
    pub fn quiet(mut self, quiet: bool) -> Self {
        self.quiet = quiet;
        self
    }

    /// Checks the architecture name: `sm_XX` (with an optional `a`/`f` suffix), XX at least 70.
    pub fn check_arch(arch: &str) -> Result<(), BuildError> {
        match arch
            .strip_prefix("sm_")
            .and_then(|n| n.trim_end_matches(['a', 'f']).parse::<u32>().ok())
        {
            Some(n) if n >= 70 => Ok(()),
            Some(_) => Err(BuildError::Failed(format!(
                "arch {arch}: the kernels need sm_70 or newer (scoped atomics, nanosleep)"
            ))),
            None => Err(BuildError::Failed(format!(
                "arch {arch}: expected an architecture like sm_90"
            ))),
        }
    }

    /// For a build script: builds the kernel to `$OUT_DIR/<lib>.ptx` (or [`KernelBuilder::out`])
    /// and emits the `cargo:` directives: `rerun-if-env-changed` for [`ENV_VARS`], and
    /// `rerun-if-changed` for the kernel's inputs only, so that editing the host program
    /// (`src/main.rs`, `src/bin/`) does not rebuild the kernel. After a build those are the files
    /// rustc read for it (the nested build's dep-info: the library's modules, the build script,
    /// the path dependencies' modules compiled for nvptx64) and the manifests of those packages;
    /// otherwise the crate's `Cargo.toml`, `Cargo.lock`, `build.rs` and every file under its
    /// library root's directory except the binaries' (`src/main.rs`, `src/bin/`, `[[bin]] path`).
    ///
    /// When ptxas ran ([`Ptxas::IfFound`]), its cubin is `<lib>.cubin` (which
    /// `mgws::kernel_cubin!()` embeds) and its figures `<lib>.ptxas.txt` beside the PTX; otherwise
    /// `<lib>.cubin` is empty, and the CUDA backend JIT-compiles the PTX. Returns the kernel, or
    /// `None` when nothing was built: inside the builder's own nested build
    /// ([`MGWS_BUILDER_NESTED`]), when the build script runs for nvptx64, when [`MGWS_SKIP_KERNEL`]
    /// is `1`, or when a tool is missing. In the last two cases the PTX file is a placeholder whose
    /// first line starts with [`PLACEHOLDER_PREFIX`], and a `cargo:warning` says why.
    ///
    /// # Exits
    /// When the kernel does not compile or fails a check: the compiler's messages stay on stderr,
    /// a one-line summary follows them, and the process exits with status 1 (no panic, so no
    /// backtrace buries them).
    pub fn build_script(mut self) -> Option<Kernel> {
        if env::var_os(MGWS_BUILDER_NESTED).is_some()
            || env::var("TARGET").is_ok_and(|t| t.starts_with("nvptx64"))
        {
            return None;
        }
        if let Ok(arch) = env::var("MGWS_PTX_ARCH") {
            self.arch = arch;
        }
        // The nested cargo's progress lines would only show when the build fails, above the
        // compiler's errors.
        self.quiet = true;
        let out_dir = env::var_os("OUT_DIR").map(PathBuf::from);
        if self.target_dir.is_none() {
            // OUT_DIR is <target>[/<triple>]/<profile>/build/<pkg>-<hash>/out.
            self.target_dir = out_dir
                .as_deref()
                .and_then(|o| o.ancestors().nth(4))
                .map(|t| t.join("mgws-builder"));
        }
        let lib = lib_name(&self.manifest_dir);
        let out = self.out.clone().unwrap_or_else(|| {
            out_dir
                .clone()
                .unwrap_or_else(|| self.manifest_dir.join("target"))
                .join(format!("{lib}.ptx"))
        });
        self.out = Some(out.clone());
        // The directives go out only once the outcome is known: a failed build script is run
        // again anyway, and its stdout would stand between cargo's error line and rustc's errors.
        let skip_value = env::var_os(MGWS_SKIP_KERNEL).map(|v| v.to_string_lossy().into_owned());
        let skip = skip_kernel(skip_value.as_deref()).unwrap_or_else(|e| fail(&e));
        let result = if skip {
            Err(BuildError::ToolsMissing(format!(
                "skipped because {MGWS_SKIP_KERNEL}={} was set for this build; build without it \
                 (or with {MGWS_SKIP_KERNEL}=0) to get the kernel",
                skip_value.as_deref().unwrap_or("").trim()
            )))
        } else {
            self.build()
        };
        match result {
            Ok(kernel) => {
                let mut watched = watch::manifest_files(&self.manifest_dir);
                if kernel.inputs.is_empty() {
                    watched.extend(watch::library_files(&self.manifest_dir));
                    watched.extend(kernel.sources.iter().flat_map(|d| watch::package_files(d)));
                } else {
                    watched.extend(kernel.inputs.iter().cloned());
                    watched.extend(kernel.sources.iter().map(|d| d.join("Cargo.toml")));
                }
                rerun_directives(watched);
                if kernel.ptxas.is_none() {
                    write_empty_cubin(&out);
                }
                if let Some(reason) = &kernel.ptxas_failed {
                    let reason = reason.replace('\n', " ");
                    println!(
                        "cargo:warning=mgws-builder: ptxas did not assemble GPU kernel {lib} \
                         ({reason}); the PTX alone is embedded and compiled when it first runs"
                    );
                }
                if let Some((_, report)) = &kernel.ptxas {
                    // The figures, for whoever wants to see them (cargo hides build-script output).
                    let _ = fs::write(
                        kernel.ptx.with_extension("ptxas.txt"),
                        report.lines.join("\n") + "\n",
                    );
                    for w in &report.warnings {
                        println!("cargo:warning=mgws-builder: {w}");
                    }
                }
                Some(kernel)
            }
            Err(BuildError::ToolsMissing(reason)) => {
                let reason = reason.replace('\n', " ");
                let text = format!(
                    "{PLACEHOLDER_PREFIX}{reason}\n// The CPU backend does not need this kernel; \
                     the CUDA backend refuses this file with the reason above.\n"
                );
                if let Some(dir) = out.parent() {
                    let _ = fs::create_dir_all(dir);
                }
                if let Err(e) = fs::write(&out, text) {
                    fail(&format!("cannot write {}: {e}", out.display()));
                }
                write_empty_cubin(&out);
                rerun_directives(watch::package_files(&self.manifest_dir));
                if skip {
                    println!(
                        "cargo:warning=mgws-builder: GPU kernel {lib} skipped ({MGWS_SKIP_KERNEL} \
                         is set): the CPU backend runs as usual, a GPU run reports the kernel as \
                         not built. Unset {MGWS_SKIP_KERNEL} to build the kernel again."
                    );
                    return None;
                }
                println!("cargo:warning=mgws-builder: GPU kernel {lib} not built: {reason}");
                // Build again once tools may have arrived: a new toolchain or target in rustup's
                // toolchains (cargo watches a directory's modification time), or the sysroot
                // and nightly variables (watched above).
                let rustup = env::var_os("RUSTUP_HOME")
                    .map(PathBuf::from)
                    .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".rustup")));
                if let Some(toolchains) = rustup.map(|r| r.join("toolchains")) {
                    if toolchains.is_dir() {
                        println!("cargo:rerun-if-changed={}", toolchains.display());
                    }
                }
                None
            }
            Err(BuildError::Failed(msg)) => fail(&format!("GPU kernel {lib} not built: {msg}")),
        }
    }

    /// Makes ready the nvptx64 sysroot that [`KernelBuilder::build`] uses, with the same nightly
    /// (`None`: the nightly has the target). Builds that run at once call it first, so that none
    /// of them builds the sysroot in place while another reads it.
    pub fn prepare_sysroot(&self) -> Result<Option<PathBuf>, BuildError> {
        let toolchain = Toolchain::find()?;
        toolchain::find_sysroot(&self.manifest_dir, &toolchain)
    }

    /// Builds the kernel and checks it; see the crate documentation.
    pub fn build(&self) -> Result<Kernel, BuildError> {
        Self::check_arch(&self.arch)?;
        let toolchain = Toolchain::find()?;
        let sysroot = toolchain::find_sysroot(&self.manifest_dir, &toolchain)?;
        let target_dir = self
            .target_dir
            .clone()
            .unwrap_or_else(|| self.manifest_dir.join("target").join("mgws-builder"));
        let linker = toolchain::ptx_linker(&toolchain, &target_dir)?;

        let mut rustflags = Vec::new();
        if let Some(s) = &sysroot {
            rustflags.push(format!("--sysroot={}", s.display()));
        }
        rustflags.push("--emit=asm,link".into());
        rustflags.push(format!("-Ctarget-cpu={}", self.arch));

        let cargo_path = toolchain.bin.join("cargo");
        let mut cargo = Command::new(&cargo_path);
        // What the outer cargo, its build-script environment or the user's shell set must not
        // leak into the nested nightly build.
        for (key, _) in env::vars_os() {
            let k = key.to_string_lossy();
            if k.starts_with("CARGO_")
                && !["CARGO_HOME", "CARGO_MAKEFLAGS", "CARGO_NET_OFFLINE"].contains(&k.as_ref())
                && !k.starts_with("CARGO_REGISTRIES_")
                && !k.starts_with("CARGO_HTTP_")
                && !k.starts_with("CARGO_NET_")
                && !k.starts_with("CARGO_TERM_")
                || k.starts_with("DEP_")
                || [
                    "RUSTFLAGS",
                    "RUSTDOCFLAGS",
                    "RUSTC",
                    "RUSTDOC",
                    "RUSTC_WRAPPER",
                    "RUSTC_WORKSPACE_WRAPPER",
                    "RUSTC_LINKER",
                    "RUSTUP_TOOLCHAIN",
                    "OUT_DIR",
                    "TARGET",
                    "HOST",
                    "PROFILE",
                    "OPT_LEVEL",
                    "DEBUG",
                    "NUM_JOBS",
                ]
                .contains(&k.as_ref())
            {
                cargo.env_remove(&key);
            }
        }
        cargo
            .current_dir(&self.manifest_dir)
            .arg("rustc")
            .arg("--manifest-path")
            .arg(self.manifest_dir.join("Cargo.toml"));
        if let Some(p) = &self.package {
            cargo.args(["--package", p]);
        }
        if self.nvshmem {
            cargo.args(["--features", "nvshmem"]);
        }
        if self.quiet {
            cargo.arg("--quiet");
        }
        // `--crate-type cdylib`: the PTX module is one LTO'd cdylib, and only that crate type, or
        // rustc's `.s` would not be the LTO'd module. The crate may list `rlib` too for the host.
        cargo
            .args([
                "--lib",
                "--crate-type",
                "cdylib",
                "--release",
                "--target",
                TARGET,
            ])
            .arg("--target-dir")
            .arg(&target_dir)
            .args(["--message-format", "json-render-diagnostics"])
            .env("RUSTC", toolchain.bin.join("rustc"))
            .env("CARGO_ENCODED_RUSTFLAGS", rustflags.join("\x1f"))
            .env("CARGO_TARGET_NVPTX64_NVIDIA_CUDA_LINKER", &linker)
            .env("CARGO_PROFILE_RELEASE_LTO", "fat")
            .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
            .env("CARGO_PROFILE_RELEASE_PANIC", "abort")
            .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
            .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "3")
            .env(MGWS_BUILDER_NESTED, "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let output = cargo.output().map_err(|e| {
            BuildError::ToolsMissing(format!("cannot run {}: {e}", cargo_path.display()))
        })?;
        let messages = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            return Err(BuildError::Failed(format!(
                "`cargo rustc --target {TARGET}` of {} failed ({}); its messages are above",
                self.package
                    .clone()
                    .unwrap_or_else(|| self.manifest_dir.display().to_string()),
                output.status
            )));
        }
        let lib = self
            .package
            .as_ref()
            .map(|p| p.replace('-', "_"))
            .unwrap_or_else(|| lib_name(&self.manifest_dir));
        let built = ptx::ptx_artifact(&messages, Some(&lib)).ok_or_else(|| {
            BuildError::Failed(format!(
                "cargo built {lib} but reported no .ptx file: is it a `crate-type = [\"cdylib\"]` \
                 crate?"
            ))
        })?;
        let out = self.out.clone().unwrap_or_else(|| {
            target_dir
                .parent()
                .unwrap_or(&target_dir)
                .join("ptx")
                .join(if self.nvshmem {
                    format!("{lib}.{}.nvshmem.ptx", self.arch)
                } else {
                    format!("{lib}.{}.ptx", self.arch)
                })
        });
        if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)
                .map_err(|e| BuildError::Failed(format!("cannot create {}: {e}", dir.display())))?;
        }
        // Cargo writes the dep-info of the uplifted artifact beside it.
        let mut inputs: Vec<PathBuf> = fs::read_to_string(built.with_extension("d"))
            .map(|d| watch::dep_info_files(&d))
            .unwrap_or_default();
        // Files the nested build generated itself change with every build of it.
        inputs.retain(|f| !f.starts_with(&target_dir));
        if inputs.iter().any(|f| f.is_relative()) {
            // Relative to a `build.dep-info-basedir` we do not know: watch by the rule instead.
            inputs.clear();
        }
        let text = fs::read_to_string(&built)
            .map_err(|e| BuildError::Failed(format!("cannot read {}: {e}", built.display())))?;
        let text = normalize_fingerprint(&text);
        fs::write(&out, &text)
            .map_err(|e| BuildError::Failed(format!("cannot write {}: {e}", out.display())))?;
        let mut check = check_ptx(&text);
        if self.nvshmem {
            // The device-API wrappers are linked in at load time; nothing else may be missing.
            check
                .unresolved
                .retain(|f| !NVSHMEM_FUNCTIONS.contains(&f.as_str()));
        }
        check.result()?;

        let cubin = out.with_extension("cubin");
        let (ptxas, ptxas_failed) = match self.ptxas {
            Ptxas::Off => (None, None),
            Ptxas::IfFound => match ptx::find_local_ptxas() {
                None => (None, None),
                Some(program) => {
                    match ptx::run_ptxas(&program, &self.arch, &out, &cubin, self.nvshmem) {
                        Ok(report) => (Some((cubin, report)), None),
                        Err(e) => (None, Some(e.to_string())),
                    }
                }
            },
            Ptxas::Required => {
                let program: Vec<OsString> = ptx::find_ptxas(&self.manifest_dir)?;
                let report = ptx::run_ptxas(&program, &self.arch, &out, &cubin, self.nvshmem)?;
                (Some((cubin, report)), None)
            }
        };
        Ok(Kernel {
            ptx: out,
            bytes: text.len(),
            check,
            ptxas,
            ptxas_failed,
            sources: ptx::path_packages(&messages),
            inputs,
            rustc: toolchain.version,
        })
    }
}

/// Writes an empty cubin beside the PTX `ptx`, which `mgws::kernel_cubin!()` embeds as "none".
fn write_empty_cubin(ptx: &Path) {
    let cubin = ptx.with_extension("cubin");
    if let Err(e) = fs::write(&cubin, []) {
        fail(&format!("cannot write {}: {e}", cubin.display()));
    }
}

/// The library name of the crate in `manifest_dir`: `[lib] name`, else the package name with `_`
/// for `-` (read from its `Cargo.toml`; `kernel` if neither is found).
pub fn lib_name(manifest_dir: &Path) -> String {
    let manifest = watch::Manifest::read(manifest_dir);
    manifest
        .lib_name
        .or(manifest.package)
        .map(|n| n.replace('-', "_"))
        .unwrap_or_else(|| "kernel".into())
}

/// Prints `cargo:rerun-if-env-changed` for [`ENV_VARS`] and `cargo:rerun-if-changed` for each of
/// `files` that exists (cargo reruns a build script on every build while a watched file is
/// missing), once each.
fn rerun_directives(mut files: Vec<PathBuf>) {
    for var in ENV_VARS {
        println!("cargo:rerun-if-env-changed={var}");
    }
    files.retain(|f| f.exists());
    files.sort();
    files.dedup();
    for f in files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
}

/// Ends a build script on an error: the message after whatever the compiler printed, exit status
/// 1 and no panic (whose backtrace would bury the compiler's messages).
fn fail(msg: &str) -> ! {
    eprintln!("error: mgws-builder: {msg}");
    std::process::exit(1)
}

/// The message of a placeholder PTX (`// mgws-builder: not built: <reason>` on its first line), or
/// `None` for a real PTX module.
pub fn placeholder_reason(ptx: &str) -> Option<&str> {
    ptx.lines().next()?.strip_prefix(PLACEHOLDER_PREFIX)
}

/// FNV-1a, 64 bits.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_are_checked() {
        assert!(KernelBuilder::check_arch("sm_90").is_ok());
        assert!(KernelBuilder::check_arch("sm_90a").is_ok());
        assert!(KernelBuilder::check_arch("sm_60")
            .unwrap_err()
            .to_string()
            .contains("sm_70"));
        assert!(KernelBuilder::check_arch("90").is_err());
    }

    #[test]
    fn placeholders_are_recognized() {
        let text = format!("{PLACEHOLDER_PREFIX}no nightly\n// more\n");
        assert_eq!(placeholder_reason(&text), Some("no nightly"));
        assert_eq!(placeholder_reason(".version 8.0\n"), None);
    }

    #[test]
    fn the_lib_name_comes_from_the_manifest() {
        let dir = env::temp_dir().join(format!("mgws-builder-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("Cargo.toml"),
            "[package]\nname = \"my-kernel\"\n[dependencies]\nname = \"x\"\n",
        )
        .unwrap();
        assert_eq!(lib_name(&dir), "my_kernel");
        fs::write(
            dir.join("Cargo.toml"),
            "[package]\nname = \"my-kernel\"\n[lib]\nname = \"k\"\n",
        )
        .unwrap();
        assert_eq!(lib_name(&dir), "k");
        fs::remove_dir_all(&dir).unwrap();
    }
}
