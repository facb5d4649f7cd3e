//! Small allocations kept between the runs of one process. A run allocates a dozen small
//! buffers (the env, progress records, the launch gate, ...) and frees them when it ends; device
//! and pinned host allocations cost 0.1 to 1.2 ms each on an H200 (docs/results.md), so a
//! program that reuses its backend would pay them on every run. Freed buffers of up to
//! [`LARGEST`] bytes go back here instead, by owner and size class, and the next run of the same
//! owner takes them; at most [`KEPT_PER_OWNER`] bytes are kept per owner, and a device
//! allocation that finds too little free memory first gives back what its GPU keeps.
//!
//! A buffer returns here only when it is dropped, which its users do after the work that uses
//! it has finished: the same condition under which `cuMemFree` may free it.

use std::sync::{Mutex, PoisonError};

/// The largest allocation kept (larger ones are freed at once).
pub const LARGEST: usize = 16 << 20;
/// The most bytes kept per owner.
pub const KEPT_PER_OWNER: usize = 64 << 20;
/// The smallest size class: the page size of pinned host memory.
const SMALLEST: usize = 4 << 10;

/// Whose memory a kept allocation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Device memory of the context with this handle.
    Device(usize),
    /// Pinned, mapped host memory (usable from every context).
    Host,
}

/// A kept allocation: its owner, its size class and its address.
struct Kept {
    owner: Owner,
    class: usize,
    addr: u64,
}

static KEPT: Mutex<Vec<Kept>> = Mutex::new(Vec::new());

/// The size allocated for `bytes` so that the allocation can be kept: the next power of two of
/// at least 4 KiB, or `None` for an allocation too large to keep.
pub fn class(bytes: usize) -> Option<usize> {
    let class = bytes.max(SMALLEST).checked_next_power_of_two()?;
    (class <= LARGEST).then_some(class)
}

/// A kept allocation of `owner` and `class`, if there is one.
pub fn take(owner: Owner, class: usize) -> Option<u64> {
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    let i = kept
        .iter()
        .position(|k| k.owner == owner && k.class == class)?;
    Some(kept.swap_remove(i).addr)
}

/// Keeps the allocation at `addr`; false when `owner` keeps enough already (the caller frees it).
pub fn give(owner: Owner, class: usize, addr: u64) -> bool {
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    let held: usize = kept
        .iter()
        .filter(|k| k.owner == owner)
        .map(|k| k.class)
        .sum();
    if held + class > KEPT_PER_OWNER {
        return false;
    }
    kept.push(Kept { owner, class, addr });
    true
}

/// Removes every allocation `owner` keeps and returns their addresses, for the caller to free.
pub fn drain(owner: Owner) -> Vec<u64> {
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    let mut out = Vec::new();
    kept.retain(|k| {
        if k.owner == owner {
            out.push(k.addr);
        }
        k.owner != owner
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_up_to_a_class_and_large_ones_are_not_kept() {
        assert_eq!(class(0), Some(4096));
        assert_eq!(class(4097), Some(8192));
        assert_eq!(class(LARGEST), Some(LARGEST));
        assert_eq!(class(LARGEST + 1), None);
        assert_eq!(class(usize::MAX), None);
    }

    #[test]
    fn kept_allocations_go_to_their_owner_and_class_within_the_limit() {
        // An owner no other test uses.
        let owner = Owner::Device(0x5eed);
        let other = Owner::Device(0x5eee);
        assert!(give(owner, 8192, 0x1000));
        assert_eq!(take(other, 8192), None, "another owner's memory");
        assert_eq!(take(owner, 4096), None, "another class");
        assert_eq!(take(owner, 8192), Some(0x1000));
        assert_eq!(take(owner, 8192), None, "taken once");
        let per = KEPT_PER_OWNER / LARGEST;
        for i in 0..per {
            assert!(give(owner, LARGEST, i as u64));
        }
        assert!(!give(owner, LARGEST, 99), "over the owner's limit");
        assert!(give(other, LARGEST, 100), "the limit is per owner");
        let mut drained = drain(owner);
        drained.sort_unstable();
        assert_eq!(drained, (0..per as u64).collect::<Vec<_>>());
        assert_eq!(drain(other), vec![100]);
        assert!(drain(owner).is_empty());
    }
}
