//! Libraries loaded at run time from a list of places (NVSHMEM's host library, NVRTC): the first
//! that loads wins, and a failure lists every place tried and why.

use std::path::{Path, PathBuf};

/// The first of `places` that `load` loads, or for each place tried, the place and why it
/// failed (`"<path>: <reason>"`).
pub(crate) fn load_first<T>(
    places: impl IntoIterator<Item = PathBuf>,
    load: impl Fn(&Path) -> Result<T, String>,
) -> Result<T, Vec<String>> {
    let mut tried = Vec::new();
    for path in places {
        match load(&path) {
            Ok(loaded) => return Ok(loaded),
            Err(e) => tried.push(format!("{}: {e}", path.display())),
        }
    }
    Err(tried)
}

/// The entry point `name` of `library` (loaded from `path`), as a `T` (a function pointer type).
///
/// # Safety
/// `T` is the entry point's type: the signature of the library's header for `name`.
pub(crate) unsafe fn entry<T: Copy>(
    library: &libloading::Library,
    path: &Path,
    name: &str,
) -> Result<T, String> {
    let symbol = format!("{name}\0");
    // SAFETY: the caller guarantees the type; the symbol's name is NUL-terminated.
    unsafe { library.get::<T>(symbol.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("{} lacks {name}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_place_that_loads_wins_and_a_failure_lists_each_place() {
        let load = |p: &Path| match p.to_str() {
            Some("good") => Ok(1),
            _ => Err("missing".to_string()),
        };
        assert_eq!(
            load_first(["bad", "good", "x"].map(PathBuf::from), load),
            Ok(1)
        );
        assert_eq!(
            load_first(["a", "b"].map(PathBuf::from), load),
            Err(vec!["a: missing".to_string(), "b: missing".to_string()])
        );
    }
}
