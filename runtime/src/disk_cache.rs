//! The directory where mgws keeps what a later process can reuse: compiled NVSHMEM wrappers
//! (`processes::gpu::nvshmem_link`) and what CPU workers beside the GPUs were measured to add
//! (`cuda::bridge_policy`). Everything in it can be deleted; it is then rebuilt or measured again.

use std::path::{Path, PathBuf};

/// The environment variable naming the cache directory.
pub const CACHE_VAR: &str = "MGWS_CACHE_DIR";

/// The cache directory: `$MGWS_CACHE_DIR`, else `$XDG_CACHE_HOME/mgws`, else `~/.cache/mgws`;
/// `None` if none can be named.
pub fn dir() -> Option<PathBuf> {
    std::env::var_os(CACHE_VAR)
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("mgws")))
        .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/mgws")))
}

/// The length and modification time of `path` ((0, 0) if it cannot be read), for cache keys.
pub fn file_stamp(path: &Path) -> (u64, u128) {
    std::fs::metadata(path)
        .map(|m| {
            let modified = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            (m.len(), modified)
        })
        .unwrap_or((0, 0))
}
