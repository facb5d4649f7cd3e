//! Memory a run needs, checked before it is allocated: a size that passes validation but does
//! not fit becomes [`Error::OutOfMemory`] naming the setting, the bytes needed and the bytes
//! available, never an aborted process.

use std::fmt::Display;

use crate::error::{Error, Result};

/// Bytes of host memory available to new allocations: `MemAvailable` of `/proc/meminfo` plus free
/// swap, where the system reports them (`None` elsewhere).
pub fn host_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib * 1024)
    };
    Some(field("MemAvailable:")? + field("SwapFree:").unwrap_or(0))
}

/// Checks that `needed` bytes of host memory, sized by `what` (a flag and its value), fit in
/// what is available. Where the system does not say, only the address space is checked.
pub fn check_host(what: impl Display, needed: u64) -> Result<()> {
    let available = host_available().unwrap_or(isize::MAX as u64);
    if needed > available {
        return Err(Error::OutOfMemory {
            what: what.to_string(),
            where_: "host memory".into(),
            needed,
            available,
        });
    }
    Ok(())
}

/// `count` elements of `T` in bytes, saturating (an overflow is a size no machine has).
pub fn bytes_of<T>(count: u64) -> u64 {
    count.saturating_mul(std::mem::size_of::<T>() as u64)
}

/// An empty vector with room for `count` elements, sized by `what`: checked against the memory
/// available, then reserved fallibly (an allocator that still refuses is the same error).
pub fn try_with_capacity<T>(what: impl Display, count: u64) -> Result<Vec<T>> {
    let needed = bytes_of::<T>(count);
    check_host(&what, needed)?;
    let mut v = Vec::new();
    let refused = || Error::OutOfMemory {
        what: what.to_string(),
        where_: "host memory".into(),
        needed,
        available: host_available().unwrap_or(0),
    };
    let count = usize::try_from(count).map_err(|_| refused())?;
    v.try_reserve_exact(count).map_err(|_| refused())?;
    Ok(v)
}

/// A vector of `count` copies of `value`, sized by `what`, as [`try_with_capacity`].
pub fn try_filled<T: Clone>(what: impl Display, count: u64, value: T) -> Result<Vec<T>> {
    let mut v = try_with_capacity(what, count)?;
    v.resize(count as usize, value);
    Ok(v)
}

/// Runs `work(start, len)` over `0..total` in contiguous, disjoint shares, each of at least
/// `min_share` and a multiple of `granule` (but the last), from as many threads as the process
/// may use.
pub(crate) fn in_shares(
    total: usize,
    min_share: usize,
    granule: usize,
    work: impl Fn(usize, usize) + Sync,
) {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(total.div_ceil(min_share.max(1)))
        .max(1);
    if threads == 1 {
        if total > 0 {
            work(0, total);
        }
        return;
    }
    let share = total.div_ceil(threads).next_multiple_of(granule.max(1));
    let work = &work;
    std::thread::scope(|scope| {
        for start in (0..total).step_by(share) {
            scope.spawn(move || work(start, share.min(total - start)));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_beyond_memory_names_the_setting_and_both_sizes() {
        let e = try_with_capacity::<u64>("--tasks 1", u64::MAX / 4).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, Error::OutOfMemory { .. }), "{text}");
        assert!(text.contains("--tasks 1"), "{text}");
        assert!(text.contains("bytes"), "{text}");
        assert_eq!(e.kind(), "out_of_memory");
    }

    #[test]
    fn sizes_that_fit_are_allocated() {
        let v = try_filled("test", 1000, 7u32).unwrap();
        assert_eq!(v.len(), 1000);
        assert!(v.iter().all(|&x| x == 7));
        if cfg!(target_os = "linux") {
            assert!(host_available().unwrap() > 0);
        }
    }
}
