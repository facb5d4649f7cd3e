//! What a kernel that calls NVSHMEM's device API needs to load (GPU PEs with
//! [`PeTransport::DeviceApi`](super::PeTransport)): the `mgws_nvshmem_*` wrappers of
//! `nvshmem_shim.cu`, compiled by NVRTC into a relocatable cubin, and NVSHMEM's device library,
//! which [`Module::link`](super::driver::Module::link) links with the kernel's PTX. No nvcc is
//! involved: NVRTC, NVSHMEM's headers, CCCL's headers (which NVSHMEM's include) and the device
//! library are found at run time.
//!
//! The cubin is cached on disk (`$MGWS_CACHE_DIR`, else `$XDG_CACHE_HOME/mgws`, else
//! `~/.cache/mgws`), keyed by the wrappers' source, the compile options, NVRTC's version and the
//! NVSHMEM files: NVRTC takes about 5 s over NVSHMEM's headers, which would be most of a PE's
//! start-up.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use super::nvrtc::Nvrtc;
pub use crate::cuda::ptx::check_transport;
use crate::error::{Error, Result};

/// The wrappers' CUDA C source.
pub const SHIM_SOURCE: &str = include_str!("nvshmem_shim.cu");

/// The environment variable naming a directory of CUDA headers that holds CCCL
/// (`cuda/std/cstdint`, directly or under `cccl/`).
pub const CUDA_INCLUDE_VAR: &str = "MGWS_CUDA_INCLUDE";

/// The PTX global holding the run's `mgws_core::PeWindow`.
pub const WINDOW_GLOBAL: &str = "mgws_pe_window";

/// The device code a device-API kernel is linked with.
#[derive(Clone, Debug)]
pub struct DeviceCode {
    /// The wrappers, a relocatable cubin for the GPU's architecture.
    pub wrappers: Vec<u8>,
    /// NVSHMEM's device library (`libnvshmem_device.a`).
    pub library: PathBuf,
}

/// NVSHMEM's installation as the device code needs it: `include/nvshmem.h` and
/// `lib/libnvshmem_device.a` beside the host library `host_library` (`<dir>/lib/...`).
pub fn nvshmem_files(host_library: &Path) -> Result<(PathBuf, PathBuf)> {
    let dir = host_library
        .parent()
        .and_then(Path::parent)
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| {
            Error::BackendUnavailable(format!(
                "NVSHMEM's host library was loaded as {} through the loader's search, so its \
                 headers and device library cannot be found: set {} to the NVSHMEM installation \
                 (the directory with include/ and lib/)",
                host_library.display(),
                super::nvshmem::HOME_VAR
            ))
        })?;
    let include = dir.join("include");
    let library = dir.join("lib").join("libnvshmem_device.a");
    for (path, what) in [
        (include.join("nvshmem.h"), "headers"),
        (library.clone(), "device library"),
    ] {
        if !path.is_file() {
            return Err(Error::BackendUnavailable(format!(
                "NVSHMEM's {what} ({}) is missing, which GPU PEs over the device API link \
                 against: install the full `nvidia-nvshmem-cu13` package or an NVSHMEM 3 \
                 installation (or run the PEs with --pe-transport mapped on one node)",
                path.display()
            )));
        }
    }
    Ok((include, library))
}

/// The include directories that provide CCCL's `cuda/std/cstdint`: `dirs` are the candidates
/// (each is tried as is and with `cccl/` appended); the first that has it, and its parent where
/// it was `cccl/`.
pub fn cccl_includes(dirs: &[PathBuf]) -> Option<Vec<PathBuf>> {
    for dir in dirs {
        let cccl = dir.join("cccl");
        if cccl.join("cuda/std/cstdint").is_file() {
            return Some(vec![dir.clone(), cccl]);
        }
        if dir.join("cuda/std/cstdint").is_file() {
            return Some(vec![dir.clone()]);
        }
    }
    None
}

/// The CUDA include directories CCCL is looked for in, and the first of them that has it (see
/// [`cccl_includes`]): `$MGWS_CUDA_INCLUDE`, each CUDA installation's `include`, then the pip
/// packages' (`nvidia/cu13/include`, `nvidia/cuda_cccl/include`), which are looked up (a
/// `python3` run) only when the others have no CCCL.
fn find_cccl() -> (Vec<PathBuf>, Option<Vec<PathBuf>>) {
    let mut dirs: Vec<PathBuf> = std::env::var_os(CUDA_INCLUDE_VAR)
        .map(PathBuf::from)
        .into_iter()
        .collect();
    dirs.extend(
        super::nvrtc::cuda_homes()
            .into_iter()
            .map(|h| h.join("include")),
    );
    if let Some(found) = cccl_includes(&dirs) {
        return (dirs, Some(found));
    }
    if let Some(nvidia) = super::nvshmem::pip_nvidia() {
        dirs.push(nvidia.join("cu13/include"));
        dirs.push(nvidia.join("cuda_cccl/include"));
    }
    let found = cccl_includes(&dirs);
    (dirs, found)
}

/// The NVRTC options of the wrappers for a GPU of compute capability `cc`.
pub fn shim_options(cc: (u32, u32), includes: &[PathBuf]) -> Vec<String> {
    // `-default-device`: NVSHMEM's headers declare some functions without an execution space,
    // which NVRTC would take for host functions and refuse.
    let mut options = vec![
        "-rdc=true".to_string(),
        format!("--gpu-architecture=sm_{}{}", cc.0, cc.1),
        "-std=c++17".to_string(),
        "-default-device".to_string(),
    ];
    options.extend(includes.iter().map(|d| format!("-I{}", d.display())));
    options
}

/// The device code for a GPU of compute capability `cc`, with NVSHMEM's host library at
/// `host_library`: the wrappers from the cache, or compiled by NVRTC (and cached).
pub fn device_code(host_library: &Path, cc: (u32, u32)) -> Result<DeviceCode> {
    let (nvshmem_include, library) = nvshmem_files(host_library)?;
    let (candidates, cccl) = find_cccl();
    let mut includes = vec![nvshmem_include.clone()];
    includes.extend(cccl.ok_or_else(|| {
        Error::BackendUnavailable(format!(
            "CCCL's headers (cuda/std/cstdint), which NVSHMEM's device headers include, were not \
             found in {}: install the CUDA toolkit's headers or `pip install \
             nvidia-cuda-cccl-cu13`, or set {CUDA_INCLUDE_VAR} to the include directory",
            candidates
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?);
    let options = shim_options(cc, &includes);
    let nvrtc = Nvrtc::load()?;
    let mut key = std::collections::hash_map::DefaultHasher::new();
    (
        SHIM_SOURCE,
        &options,
        nvrtc.version(),
        crate::disk_cache::file_stamp(&nvshmem_include.join("nvshmem.h")),
        crate::disk_cache::file_stamp(&library),
    )
        .hash(&mut key);
    let file = crate::disk_cache::dir()
        .map(|d| d.join(format!("nvshmem-wrappers-{:016x}.cubin", key.finish())));
    if let Some(cached) = file.as_ref().and_then(|f| std::fs::read(f).ok()) {
        tracing::debug!(path = %file.as_ref().expect("read").display(), "NVSHMEM wrappers from the cache");
        return Ok(DeviceCode {
            wrappers: cached,
            library,
        });
    }
    let began = std::time::Instant::now();
    let wrappers = nvrtc.compile_cubin(SHIM_SOURCE, "nvshmem_shim.cu", &options)?;
    tracing::debug!(
        seconds = began.elapsed().as_secs_f64(),
        nvrtc = %nvrtc.path().display(),
        "NVSHMEM wrappers compiled"
    );
    if let Some(file) = &file {
        // Written whole under a temporary name, then renamed: PEs that compile at the same time
        // never read half a file. A cache that cannot be written costs the next run a compile.
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        let written = file
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&tmp, &wrappers))
            .and_then(|()| std::fs::rename(&tmp, file));
        if let Err(e) = written {
            tracing::warn!(path = %file.display(), error = %e, "caching the NVSHMEM wrappers failed");
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Ok(DeviceCode { wrappers, library })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::ptx::{calls_wrappers, WRAPPER_PREFIX};

    #[test]
    fn cccl_is_found_directly_or_under_cccl() {
        let root = std::env::temp_dir().join(format!("mgws-cccl-{}", std::process::id()));
        let direct = root.join("a");
        let nested = root.join("b");
        std::fs::create_dir_all(direct.join("cuda/std")).unwrap();
        std::fs::create_dir_all(nested.join("cccl/cuda/std")).unwrap();
        std::fs::write(direct.join("cuda/std/cstdint"), "").unwrap();
        std::fs::write(nested.join("cccl/cuda/std/cstdint"), "").unwrap();
        let none = root.join("none");
        assert_eq!(cccl_includes(std::slice::from_ref(&none)), None);
        assert_eq!(
            cccl_includes(&[none.clone(), nested.clone(), direct.clone()]),
            Some(vec![nested.clone(), nested.join("cccl")])
        );
        assert_eq!(
            cccl_includes(std::slice::from_ref(&direct)),
            Some(vec![direct])
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_wrappers_compile_relocatable_for_the_gpu_with_every_include() {
        let o = shim_options((9, 0), &[PathBuf::from("/n/include"), PathBuf::from("/c")]);
        assert_eq!(
            o,
            [
                "-rdc=true",
                "--gpu-architecture=sm_90",
                "-std=c++17",
                "-default-device",
                "-I/n/include",
                "-I/c"
            ]
        );
    }

    #[test]
    fn nvshmem_files_name_what_is_missing() {
        let e = nvshmem_files(Path::new("libnvshmem_host.so.3"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("NVSHMEM_HOME"), "{e}");
        let e = nvshmem_files(Path::new("/nonexistent/lib/libnvshmem_host.so.3"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/include/nvshmem.h"), "{e}");
    }

    #[test]
    fn the_shim_defines_every_function_the_kernel_declares_and_the_builder_allows() {
        /// The `mgws_nvshmem_*` names in `text` that `before` precedes directly.
        fn names(text: &str, before: &str) -> std::collections::BTreeSet<String> {
            text.match_indices(before)
                .map(|(i, _)| {
                    let rest = &text[i + before.len()..];
                    let end = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    rest[..end].to_string()
                })
                .filter(|n| n.starts_with(WRAPPER_PREFIX))
                .collect()
        }
        // The kernel's declarations (its `extern "C"` block), the builder's list of functions a
        // device-API PTX may leave undefined, and the shim's definitions must be one set.
        let kernel = include_str!("../../../../device/kernel-support/src/nvshmem.rs");
        let declared = names(kernel, "    fn ");
        let builder = include_str!("../../../../builder/src/lib.rs");
        let allowed = names(builder, "    \"");
        let defined = names(SHIM_SOURCE, " ");
        assert_eq!(declared.len(), 9, "{declared:?}");
        assert_eq!(declared, allowed);
        assert_eq!(declared, defined);
        assert!(calls_wrappers(
            ".extern .func  (.param .b64 func_retval0) mgws_nvshmem_fetch_add\n"
        ));
        assert!(!calls_wrappers(".extern .func memcmp\n.entry x("));
    }
}
