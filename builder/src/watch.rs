//! What a build script watches (`cargo:rerun-if-changed`) and the skip switch. Only the kernel's
//! own inputs are watched, so that editing the host program (`src/main.rs`, `src/bin/`) does not
//! rebuild the kernel.

use std::fs;
use std::path::{Path, PathBuf};

/// Skips the kernel build when set to `1` (see [`skip_kernel`]).
pub const MGWS_SKIP_KERNEL: &str = "MGWS_SKIP_KERNEL";

/// Whether the value of [`MGWS_SKIP_KERNEL`] asks to skip the kernel: `1`, `true`, `yes`, `on`
/// skip; unset, empty, `0`, `false`, `no`, `off` build (any case, surrounding blanks ignored).
/// Anything else is an error, so that a typo does not silently build or skip.
pub fn skip_kernel(value: Option<&str>) -> Result<bool, String> {
    let Some(raw) = value else { return Ok(false) };
    match raw.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "false" | "no" | "off" => Ok(false),
        "1" | "true" | "yes" | "on" => Ok(true),
        _ => Err(format!(
            "{MGWS_SKIP_KERNEL}={raw:?} is neither 1 (skip the GPU kernel) nor 0 (build it)"
        )),
    }
}

/// The few keys of a `Cargo.toml` the builder needs, read line by line (a TOML parser would be a
/// dependency of every user's build script).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub package: Option<String>,
    pub lib_name: Option<String>,
    pub lib_path: Option<String>,
    pub bin_paths: Vec<String>,
}

impl Manifest {
    pub(crate) fn read(dir: &Path) -> Manifest {
        Manifest::parse(&fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default())
    }

    pub(crate) fn parse(text: &str) -> Manifest {
        let mut m = Manifest::default();
        let mut section = String::new();
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line.split('#').next().unwrap_or("").replace(' ', "");
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let Some(value) = toml_string(value) else {
                continue;
            };
            match (section.as_str(), key.trim()) {
                ("[package]", "name") => m.package = Some(value),
                ("[lib]", "name") => m.lib_name = Some(value),
                ("[lib]", "path") => m.lib_path = Some(value),
                ("[[bin]]", "path") => m.bin_paths.push(value),
                _ => {}
            }
        }
        m
    }
}

/// A basic TOML string (`"..."` or `'...'`) at the start of `value`; a trailing comment is ignored.
fn toml_string(value: &str) -> Option<String> {
    let value = value.trim_start();
    let quote = value.chars().next().filter(|&c| c == '"' || c == '\'')?;
    let rest = &value[1..];
    Some(rest[..rest.find(quote)?].to_string())
}

/// The files of the library of the package in `dir`: every file under the directory of its root
/// (`[lib] path`, default `src/lib.rs`), except the binary targets' (`src/main.rs`, `src/bin/`,
/// each `[[bin]] path`), `target`, `tests`, `examples`, `benches`, hidden entries and nested
/// packages. Sorted.
pub(crate) fn library_files(dir: &Path) -> Vec<PathBuf> {
    let manifest = Manifest::read(dir);
    let root = dir.join(manifest.lib_path.as_deref().unwrap_or("src/lib.rs"));
    let mut skip: Vec<PathBuf> = [
        "src/main.rs",
        "src/bin",
        "target",
        "tests",
        "examples",
        "benches",
    ]
    .iter()
    .map(|p| dir.join(p))
    .collect();
    skip.extend(manifest.bin_paths.iter().map(|p| dir.join(p)));
    let mut files = Vec::new();
    if let Some(top) = root.parent() {
        walk(top, &skip, &mut files);
    }
    files.sort();
    files
}

fn walk(dir: &Path, skip: &[PathBuf], files: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(|e| e.ok()) {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') || skip.contains(&path) {
            continue;
        }
        // Not following directory links keeps a link cycle from looping.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if !path.join("Cargo.toml").is_file() {
                walk(&path, skip, files);
            }
        } else if path.is_file() {
            files.push(path);
        }
    }
}

/// The `Cargo.toml`, `Cargo.lock` and `build.rs` of the package in `dir`, where present.
pub(crate) fn manifest_files(dir: &Path) -> Vec<PathBuf> {
    ["Cargo.toml", "Cargo.lock", "build.rs"]
        .iter()
        .map(|f| dir.join(f))
        .filter(|p| p.is_file())
        .collect()
}

/// What a build script of the package in `dir` watches while no kernel build has listed its
/// inputs (tools missing, the kernel skipped): its `Cargo.toml`, `Cargo.lock` and `build.rs` where
/// present ([`manifest_files`]), and [`library_files`]. Sorted, without duplicates.
pub(crate) fn package_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = manifest_files(dir);
    files.extend(library_files(dir));
    files.sort();
    files.dedup();
    files
}

/// The files a cargo dep-info file (`<target>/<triple>/<profile>/<name>.d`: `out: dep dep ...`,
/// spaces in paths escaped as `\ `) names as inputs: the sources rustc read for the crate and its
/// path dependencies, as compiled for nvptx64.
pub(crate) fn dep_info_files(text: &str) -> Vec<PathBuf> {
    let Some((_, deps)) = text.lines().next().and_then(|l| l.split_once(": ")) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    let mut current = String::new();
    let mut chars = deps.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => current.push(chars.next().unwrap_or(' ')),
            ' ' => {
                if !current.is_empty() {
                    files.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            c => current.push(c),
        }
    }
    if !current.trim().is_empty() {
        files.push(PathBuf::from(current.trim()));
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skip_switch_parses() {
        assert_eq!(skip_kernel(None), Ok(false));
        for off in ["", "0", "false", "No", " off "] {
            assert_eq!(skip_kernel(Some(off)), Ok(false), "{off:?}");
        }
        for on in ["1", "true", "YES", "on\n"] {
            assert_eq!(skip_kernel(Some(on)), Ok(true), "{on:?}");
        }
        let err = skip_kernel(Some("2")).unwrap_err();
        assert!(err.contains("MGWS_SKIP_KERNEL=\"2\""), "{err}");
    }

    #[test]
    fn the_manifest_gives_names_and_target_paths() {
        let m = Manifest::parse(
            "[package]\nname = \"my-kernel\" # the name\n[dependencies]\nname = \"x\"\n\
             [lib]\nname = 'k'\npath = \"gpu/lib.rs\"\ncrate-type = [\"cdylib\"]\n\
             [[bin]]\nname = \"a\"\npath = \"gpu/host.rs\"\n[ [bin] ]\npath = \"tools/b.rs\"\n",
        );
        assert_eq!(
            m,
            Manifest {
                package: Some("my-kernel".into()),
                lib_name: Some("k".into()),
                lib_path: Some("gpu/lib.rs".into()),
                bin_paths: vec!["gpu/host.rs".into(), "tools/b.rs".into()],
            }
        );
    }

    /// A scratch package, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str, manifest: &str, files: &[&str]) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("mgws-builder-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("Cargo.toml"), manifest).unwrap();
            for f in files {
                let p = dir.join(f);
                fs::create_dir_all(p.parent().unwrap()).unwrap();
                fs::write(p, "").unwrap();
            }
            Scratch(dir)
        }

        fn relative(&self, files: Vec<PathBuf>) -> Vec<String> {
            files
                .iter()
                .map(|f| {
                    f.strip_prefix(&self.0)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_binaries_files_are_not_watched() {
        let p = Scratch::new(
            "default-layout",
            "[package]\nname = \"k\"\n",
            &[
                "build.rs",
                "src/lib.rs",
                "src/functors/mod.rs",
                "src/functors/collatz.rs",
                "src/main.rs",
                "src/bin/tool.rs",
                "src/bin/big/main.rs",
                "src/.hidden.rs",
                "tests/t.rs",
                "target/debug/x",
            ],
        );
        assert_eq!(
            p.relative(package_files(&p.0)),
            [
                "Cargo.toml",
                "build.rs",
                "src/functors/collatz.rs",
                "src/functors/mod.rs",
                "src/lib.rs",
            ]
        );
    }

    #[test]
    fn the_lib_root_comes_from_the_manifest() {
        let p = Scratch::new(
            "lib-path",
            "[package]\nname = \"k\"\n[lib]\npath = \"gpu/lib.rs\"\n\
             [[bin]]\nname = \"host\"\npath = \"gpu/host.rs\"\n",
            &[
                "Cargo.lock",
                "gpu/lib.rs",
                "gpu/task.rs",
                "gpu/host.rs",
                "gpu/nested/Cargo.toml",
                "gpu/nested/src/lib.rs",
                "src/lib.rs",
            ],
        );
        assert_eq!(
            p.relative(package_files(&p.0)),
            ["Cargo.lock", "Cargo.toml", "gpu/lib.rs", "gpu/task.rs"]
        );
        // A root in the package directory: its files, not the other targets' directories.
        let q = Scratch::new(
            "root-lib",
            "[package]\nname = \"k\"\n[lib]\npath = \"lib.rs\"\n",
            &[
                "lib.rs",
                "m/a.rs",
                "examples/e.rs",
                "benches/b.rs",
                "target/x",
            ],
        );
        assert_eq!(
            q.relative(package_files(&q.0)),
            ["Cargo.toml", "lib.rs", "m/a.rs"]
        );
    }

    #[test]
    fn dep_info_lists_the_inputs() {
        let text = "/t/release/k.ptx: /w/k/build.rs /w/k/src/lib.rs /w/my\\ dir/src/lib.rs \
                    /w/core/src/word.rs\n\n";
        assert_eq!(
            dep_info_files(text),
            [
                "/w/k/build.rs",
                "/w/k/src/lib.rs",
                "/w/my dir/src/lib.rs",
                "/w/core/src/word.rs"
            ]
            .map(PathBuf::from)
        );
        assert!(dep_info_files("").is_empty());
        assert!(dep_info_files("/t/k.ptx:\n").is_empty());
    }
}
