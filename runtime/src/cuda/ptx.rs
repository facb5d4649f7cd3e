//! Finding the kernel's PTX: `--ptx PATH`, else `$MGWS_PTX`, else `mgws_kernel.sm_90.ptx` next to
//! the binary, in `target/ptx/` above it (where `cargo xtask ptx` writes it), or in
//! `./target/ptx/`.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// File name of the built-in kernel's PTX that `cargo xtask ptx` writes.
pub const DEFAULT_PTX: &str = "mgws_kernel.sm_90.ptx";

/// The places searched when no path is given, in order.
pub fn candidates(exe: Option<&Path>, cwd: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(dir) = exe.and_then(Path::parent) {
        out.push(dir.join(DEFAULT_PTX));
        out.push(dir.join("ptx").join(DEFAULT_PTX));
        // target/release/mgws -> target/ptx/
        if let Some(target) = dir.parent() {
            out.push(target.join("ptx").join(DEFAULT_PTX));
        }
    }
    if let Some(cwd) = cwd {
        out.push(cwd.join("target").join("ptx").join(DEFAULT_PTX));
        out.push(cwd.join(DEFAULT_PTX));
    }
    let mut unique = Vec::new();
    for p in out {
        if !unique.contains(&p) {
            unique.push(p);
        }
    }
    unique
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

#[cfg(test)]
mod tests {
    use super::*;

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
