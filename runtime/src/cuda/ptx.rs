//! Finding the kernel's PTX and checking that it was built for the run's registry.
//!
//! Where the PTX comes from ([`source`]), in order: an explicit path (`CudaBackend::ptx`,
//! `--ptx`); else the registry's embedded kernel ([`Registry::KERNEL_PTX`]); else the search of
//! [`resolve`]: `$MGWS_PTX`, else `mgws_kernel.sm_90.ptx` next to the binary, in `target/ptx/`
//! above it (where `cargo xtask ptx` writes it), or in `./target/ptx/`.
//!
//! A PTX module holds the entries of one or more registries, each under the registry's kernel
//! name (`worker_kernel!(name => Registry)`), with its fingerprint in the global
//! `mgws_<name>_fingerprint`; [`check_fingerprint`] refuses a module whose fingerprint for the
//! run's registry differs, or that has none.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use mgws_tasks::Registry;

pub use super::ptx_prune::prune_to_entry;

use super::cache::{lookup, remember};
use crate::error::{Error, Result};

/// The PTX global that names the registry the entries of `R` were built for:
/// `mgws_<R::KERNEL>_fingerprint`.
pub fn fingerprint_symbol<R: Registry>() -> String {
    format!("mgws_{}_fingerprint", R::KERNEL)
}

/// What [`Registry::KERNEL_PTX`] starts with when the registry's build could not compile its
/// kernel; the rest of the first line is the reason.
pub const NOT_BUILT_MARKER: &str = "// mgws-builder: not built:";

/// A kernel's PTX text and where it came from (a path, or the registry that embeds it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxSource {
    /// The PTX text.
    pub text: String,
    /// Where it came from, for messages.
    pub origin: String,
}

/// The PTX of a run of registry `R`: `explicit` if given, else `R::KERNEL_PTX`, else the search
/// of [`resolve`]. Checks the fingerprint against `R` before anything is loaded.
///
/// Read and checked once per process: later runs find it in a cache keyed by the file's path,
/// length and modification time (a rebuilt file is read again) or by the embedded text.
pub fn source<R: Registry>(explicit: Option<&Path>) -> Result<Arc<PtxSource>> {
    let origin = TextOrigin::of::<R>(explicit)?;
    let key = (origin.clone(), R::FINGERPRINT);
    if let Some(src) = lookup(&SOURCES, &key) {
        return Ok(src);
    }
    let src = match origin {
        TextOrigin::File { path, .. } => from_file(&path)?,
        TextOrigin::Embedded { .. } => embedded::<R>(R::KERNEL_PTX.unwrap_or_default())?,
    };
    check_fingerprint::<R>(&src.text, &src.origin)?;
    Ok(remember(&SOURCES, key, Arc::new(src)))
}

/// Registry `R`'s PTX ([`source`]) pruned to the one entry a run launches
/// ([`prune_to_entry`]), with a digest of the pruned text for the module cache. Pruned once per
/// process and entry.
pub fn entry_source<R: Registry>(explicit: Option<&Path>, entry: &str) -> Result<Arc<EntryPtx>> {
    let key = (
        TextOrigin::of::<R>(explicit)?,
        R::FINGERPRINT,
        entry.to_owned(),
    );
    if let Some(e) = lookup(&ENTRIES, &key) {
        return Ok(e);
    }
    let full = source::<R>(explicit)?;
    let Some(text) = prune_to_entry(&full.text, entry) else {
        return Err(Error::BackendUnavailable(format!(
            "{} has no kernel `{entry}` (registry {}); rebuild it with `cargo xtask ptx` (or the \
             registry's build script) from this version of mgws",
            full.origin,
            R::NAME
        )));
    };
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    let e = EntryPtx {
        digest: h.finish(),
        src: PtxSource {
            text,
            origin: full.origin.clone(),
        },
    };
    Ok(remember(&ENTRIES, key, Arc::new(e)))
}

/// One entry's PTX ([`entry_source`]).
#[derive(Debug)]
pub struct EntryPtx {
    /// The pruned text and where its module came from.
    pub src: PtxSource,
    /// A hash of the pruned text.
    pub digest: u64,
}

/// Where a kernel text comes from, as the caches tell texts apart.
#[derive(Clone, Debug, PartialEq, Eq)]
enum TextOrigin {
    /// A file, with its length and modification time when it was looked at.
    File {
        path: PathBuf,
        len: u64,
        modified: Option<SystemTime>,
    },
    /// A registry's embedded text (`'static`: its address names it).
    Embedded { addr: usize, len: usize },
}

impl TextOrigin {
    /// Where [`source`] takes registry `R`'s PTX from; only looks at the file's metadata.
    fn of<R: Registry>(explicit: Option<&Path>) -> Result<TextOrigin> {
        if let (None, Some(text)) = (explicit, R::KERNEL_PTX) {
            return Ok(TextOrigin::Embedded {
                addr: text.as_ptr() as usize,
                len: text.len(),
            });
        }
        let path = resolve(explicit)?;
        let meta = std::fs::metadata(&path).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
        Ok(TextOrigin::File {
            path,
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

type SourceKey = (TextOrigin, u64);
type EntryKey = (TextOrigin, u64, String);

/// Checked sources by origin and registry fingerprint, and pruned entries by origin,
/// fingerprint and entry; both live until the process exits.
static SOURCES: Mutex<Vec<(SourceKey, Arc<PtxSource>)>> = Mutex::new(Vec::new());
static ENTRIES: Mutex<Vec<(EntryKey, Arc<EntryPtx>)>> = Mutex::new(Vec::new());

fn from_file(path: &Path) -> Result<PtxSource> {
    Ok(PtxSource {
        text: read(path)?,
        origin: path.display().to_string(),
    })
}

/// The kernel `R` embeds, or why its build could not make one.
fn embedded<R: Registry>(text: &str) -> Result<PtxSource> {
    if let Some(rest) = text.trim_start().strip_prefix(NOT_BUILT_MARKER) {
        let reason = rest.lines().next().unwrap_or("").trim();
        return Err(Error::BackendUnavailable(format!(
            "the kernel of registry {} was not built: {reason}; do what it says and rebuild \
             (docs/kernels.md: a nightly toolchain with the nvptx64 target or a sysroot, and \
             MGWS_SKIP_KERNEL unset), or pass --ptx PATH",
            R::NAME
        )));
    }
    Ok(PtxSource {
        text: text.to_owned(),
        origin: format!("the kernel embedded in registry {}", R::NAME),
    })
}

/// The value of the global `symbol` in `ptx`, if it declares one, e.g. from
/// `.visible .global .align 8 .u64 mgws_fib_fingerprint = 1234567890;` (decimal or `0x`
/// hexadecimal, as the PTX backend writes integer initialisers).
pub fn parse_fingerprint(ptx: &str, symbol: &str) -> Option<u64> {
    ptx.lines().find_map(|line| {
        let line = line.trim();
        if !line.contains(".global") {
            return None;
        }
        let (decl, init) = line.split_once('=')?;
        let name = decl.split_whitespace().last()?;
        if name != symbol {
            return None;
        }
        let value = init.trim().trim_end_matches(';').trim();
        match value
            .strip_prefix("0x")
            .or_else(|| value.strip_prefix("0X"))
        {
            Some(hex) => u64::from_str_radix(hex.trim_end_matches(['u', 'U']), 16).ok(),
            None => value.trim_end_matches(['u', 'U']).parse().ok(),
        }
    })
}

/// The kernel names whose fingerprints `ptx` declares (`mgws_<name>_fingerprint`), for messages.
fn kernels_in(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter(|l| l.contains(".global"))
        .filter_map(|l| l.split_once('=')?.0.split_whitespace().last())
        .filter_map(|sym| sym.strip_prefix("mgws_")?.strip_suffix("_fingerprint"))
        .collect()
}

/// Refuses a PTX that was not built for registry `R`: its `mgws_<R::KERNEL>_fingerprint` differs
/// from `R::FINGERPRINT`, or it has none. `origin` names where the PTX came from.
pub fn check_fingerprint<R: Registry>(ptx: &str, origin: &str) -> Result<()> {
    let symbol = fingerprint_symbol::<R>();
    match parse_fingerprint(ptx, &symbol) {
        Some(f) if f == R::FINGERPRINT => Ok(()),
        Some(f) => Err(Error::Input(format!(
            "the kernel PTX {origin} was built for another task registry, or by another \
             version of mgws: its {symbol} is {f:#018x}, registry {} has {:#018x}; build the \
             kernel of this registry with this mgws (`worker_kernel!({} => {})`, e.g. `cargo \
             xtask ptx`) and load that",
            R::NAME,
            R::FINGERPRINT,
            R::KERNEL,
            R::NAME
        ))),
        None => {
            let found = kernels_in(ptx);
            Err(Error::Input(format!(
                "the kernel PTX {origin} has no kernel `{}` for registry {} (no {symbol}; it has \
                 {}), so it cannot run that registry; build it with `worker_kernel!({} => {})` \
                 (e.g. `cargo xtask ptx`)",
                R::KERNEL,
                R::NAME,
                if found.is_empty() {
                    "no mgws kernel: built before kernel names, or not by worker_kernel!".into()
                } else {
                    format!("kernels {}", found.join(", "))
                },
                R::KERNEL,
                R::NAME
            )))
        }
    }
}

/// File name of the built-in kernel's PTX that `cargo xtask ptx` writes.
pub const DEFAULT_PTX: &str = "mgws_kernel.sm_90.ptx";

/// File name of the built-in kernel's PTX for GPU PEs over NVSHMEM's device API, which `cargo
/// xtask ptx --nvshmem` writes.
pub const DEFAULT_NVSHMEM_PTX: &str = "mgws_kernel.sm_90.nvshmem.ptx";

/// The places searched when no path is given, in order.
pub fn candidates(exe: Option<&Path>, cwd: Option<&Path>) -> Vec<PathBuf> {
    candidates_of(DEFAULT_PTX, exe, cwd)
}

/// The places searched for the PTX file named `file`, in order.
fn candidates_of(file: &str, exe: Option<&Path>, cwd: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(dir) = exe.and_then(Path::parent) {
        out.push(dir.join(file));
        out.push(dir.join("ptx").join(file));
        // target/release/mgws -> target/ptx/
        if let Some(target) = dir.parent() {
            out.push(target.join("ptx").join(file));
        }
    }
    if let Some(cwd) = cwd {
        out.push(cwd.join("target").join("ptx").join(file));
        out.push(cwd.join(file));
    }
    let mut unique = Vec::new();
    for p in out {
        if !unique.contains(&p) {
            unique.push(p);
        }
    }
    unique
}

/// The PTX file of GPU PEs over NVSHMEM's device API: `explicit`, else `$MGWS_NVSHMEM_PTX`,
/// else the first place of [`candidates`] that holds [`DEFAULT_NVSHMEM_PTX`].
pub fn resolve_nvshmem(explicit: Option<&Path>) -> Result<PathBuf> {
    let exe = std::env::current_exe().ok();
    let cwd = std::env::current_dir().ok();
    let candidates = candidates_of(DEFAULT_NVSHMEM_PTX, exe.as_deref(), cwd.as_deref());
    resolve_with(
        explicit,
        std::env::var_os("MGWS_NVSHMEM_PTX").map(PathBuf::from),
        &candidates,
    )
    .map_err(|e| match e {
        Error::BackendUnavailable(m) => Error::BackendUnavailable(format!(
            "{} (runs over GPU PEs with --pe-transport device-api load the kernel of `cargo \
             xtask ptx --nvshmem`, target/ptx/{DEFAULT_NVSHMEM_PTX}; MGWS_NVSHMEM_PTX names it \
             too)",
            m.trim_end_matches('.')
        )),
        other => other,
    })
}

/// The PTX file to load: `explicit`, else `$MGWS_PTX`, else the first candidate that exists.
pub fn resolve(explicit: Option<&Path>) -> Result<PathBuf> {
    resolve_with(
        explicit,
        std::env::var_os("MGWS_PTX").map(PathBuf::from),
        &candidates(
            std::env::current_exe().ok().as_deref(),
            std::env::current_dir().ok().as_deref(),
        ),
    )
}

fn resolve_with(
    explicit: Option<&Path>,
    from_env: Option<PathBuf>,
    candidates: &[PathBuf],
) -> Result<PathBuf> {
    let named = explicit
        .map(|p| (p.to_path_buf(), "--ptx"))
        .or(from_env.map(|p| (p, "MGWS_PTX")));
    if let Some((path, source)) = named {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Error::BackendUnavailable(format!(
                "the kernel PTX {} (from {source}) does not exist; build it with `cargo xtask ptx` \
                 (it writes target/ptx/{DEFAULT_PTX})",
                path.display()
            )))
        };
    }
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            Error::BackendUnavailable(format!(
                "no kernel PTX found (looked for {}); build it with `cargo xtask ptx`, or pass \
                 --ptx PATH or set MGWS_PTX",
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// Reads the PTX text at `path`.
pub fn read(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })?;
    if !text.contains(".entry") {
        return Err(Error::Input(format!(
            "{} is not a PTX module with kernels (no `.entry`); rebuild it with `cargo xtask ptx`",
            path.display()
        )));
    }
    Ok(text)
}

/// The name prefix of the NVSHMEM wrappers a kernel built for the device-API transport calls
/// (`cargo xtask ptx --nvshmem`).
pub const WRAPPER_PREFIX: &str = "mgws_nvshmem_";

/// Checks that `ptx` (from `origin`) is the kernel a run of this transport loads: one that calls
/// the wrappers for the device-API transport (`device_api`), one that does not for every other
/// run.
pub fn check_transport(ptx: &str, origin: &str, device_api: bool) -> Result<()> {
    match (device_api, calls_wrappers(ptx)) {
        (true, false) => Err(Error::BackendUnavailable(format!(
            "{origin} was not built for NVSHMEM's device API (it calls no mgws_nvshmem_ \
             function), which --pe-transport device-api runs: build it with `cargo xtask ptx \
             --nvshmem` (target/ptx/{}) and pass it with --ptx",
            DEFAULT_NVSHMEM_PTX
        ))),
        (false, true) => Err(Error::BackendUnavailable(format!(
            "{origin} was built for NVSHMEM's device API (`cargo xtask ptx --nvshmem`): it loads \
             only in runs over GPU PEs with --pe-transport device-api; other runs need the PTX \
             of `cargo xtask ptx`"
        ))),
        _ => Ok(()),
    }
}

/// Whether `ptx` calls the wrappers (a kernel built with `cargo xtask ptx --nvshmem`).
pub fn calls_wrappers(ptx: &str) -> bool {
    ptx.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with(".extern .func") && l.contains(WRAPPER_PREFIX)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mgws_tasks::FibTasks as Fib;

    const SYMBOL: &str = "mgws_fib_fingerprint";

    fn ptx_with(fingerprint: &str) -> String {
        format!(
            ".version 8.0\n.target sm_90\n.address_size 64\n\n\
             .visible .global .align 8 .u64 {SYMBOL} = {fingerprint};\n\
             .visible .entry mgws_fib_worker()\n{{\nret;\n}}\n"
        )
    }

    #[test]
    fn the_fingerprint_is_parsed_in_decimal_and_hex() {
        let parse = |p: &str| parse_fingerprint(p, SYMBOL);
        assert_eq!(parse(&ptx_with("1234567890")), Some(1234567890));
        assert_eq!(parse(&ptx_with("0xff")), Some(255));
        assert_eq!(parse(&ptx_with(&u64::MAX.to_string())), Some(u64::MAX));
        assert_eq!(parse(".visible .entry mgws_fib_worker()\n"), None);
        // Another global of the same shape is not it.
        assert_eq!(parse(".visible .global .align 8 .u64 other = 5;\n"), None);
        assert_eq!(fingerprint_symbol::<Fib>(), SYMBOL);
    }

    #[test]
    fn a_ptx_of_another_registry_or_without_fingerprint_is_refused() {
        let good = ptx_with(&Fib::FINGERPRINT.to_string());
        assert!(check_fingerprint::<Fib>(&good, "k.ptx").is_ok());
        let wrong = ptx_with(&(Fib::FINGERPRINT ^ 1).to_string());
        let e = check_fingerprint::<Fib>(&wrong, "k.ptx")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("FibTasks")
                && e.contains("k.ptx")
                && e.contains(&format!("{:#018x}", Fib::FINGERPRINT))
                && e.contains(&format!("{:#018x}", Fib::FINGERPRINT ^ 1))
                && e.contains("build the kernel of this registry"),
            "{e}"
        );
        let e = check_fingerprint::<Fib>(".visible .entry mgws_worker()\n", "old.ptx")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("old.ptx") && e.contains("no kernel `fib`") && e.contains("no mgws kernel"),
            "{e}"
        );
        let other = ".visible .global .align 8 .u64 mgws_uts_fingerprint = 5;\n";
        let e = check_fingerprint::<Fib>(other, "k.ptx")
            .unwrap_err()
            .to_string();
        assert!(e.contains("it has kernels uts"), "{e}");
    }

    #[test]
    fn an_embedded_placeholder_says_why_and_where_to_read_on() {
        let e =
            embedded::<Fib>("// mgws-builder: not built: nvptx64 target missing\n").unwrap_err();
        assert!(matches!(e, Error::BackendUnavailable(_)), "{e:?}");
        let e = e.to_string();
        assert!(
            e.contains("nvptx64 target missing")
                && e.contains("docs/kernels.md")
                && e.contains("MGWS_SKIP_KERNEL")
                && e.contains("FibTasks"),
            "{e}"
        );
        let ok = embedded::<Fib>(".visible .entry mgws_worker()\n").unwrap();
        assert!(ok.origin.contains("FibTasks"), "{}", ok.origin);
    }

    #[test]
    fn candidates_cover_the_binary_and_the_target_dir() {
        let c = candidates(
            Some(Path::new("/r/target/release/mgws")),
            Some(Path::new("/w")),
        );
        assert!(c.contains(&PathBuf::from("/r/target/release/mgws_kernel.sm_90.ptx")));
        assert!(c.contains(&PathBuf::from("/r/target/ptx/mgws_kernel.sm_90.ptx")));
        assert!(c.contains(&PathBuf::from("/w/target/ptx/mgws_kernel.sm_90.ptx")));
    }

    #[test]
    fn a_missing_ptx_is_a_clear_error_naming_the_path_and_the_build_command() {
        let e = resolve_with(Some(Path::new("/nonexistent/k.ptx")), None, &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/nonexistent/k.ptx") && e.contains("cargo xtask ptx"),
            "{e}"
        );
        let e = resolve_with(None, Some(PathBuf::from("/nope.ptx")), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("MGWS_PTX") && e.contains("/nope.ptx"), "{e}");
        let e = resolve_with(None, None, &[PathBuf::from("/a/b.ptx")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/a/b.ptx") && e.contains("cargo xtask ptx"),
            "{e}"
        );
    }

    #[test]
    fn an_existing_candidate_is_found() {
        let dir = std::env::temp_dir().join(format!("mgws-ptx-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(DEFAULT_PTX);
        std::fs::write(
            &p,
            ".version 8.0\n.visible .entry mgws_worker()\n{\nret;\n}\n",
        )
        .unwrap();
        let found = resolve_with(None, None, &[dir.join("missing.ptx"), p.clone()]).unwrap();
        assert_eq!(found, p);
        assert!(read(&p).is_ok());
        std::fs::write(&p, "hello").unwrap();
        assert!(read(&p).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
