//! Allocations kept between the runs of one process. A run allocates a dozen buffers (the env,
//! progress records, the launch gate, the public queues, the overflow stacks, which take gigabytes
//! by default) and frees them when it ends. Each allocation costs the driver time, and a large
//! one far more where peer access maps it into every GPU of the run, so a program that reuses
//! its backend would pay them on every run. Freed buffers go back here instead, by owner and size
//! class, and the next run of the same owner takes them. At most [`KEPT_PER_GPU`] bytes of each
//! GPU's memory and [`KEPT_PINNED`] bytes of pinned host memory are kept. A device allocation
//! that finds too little free memory first gives back what its GPU keeps, and so do the VMM
//! slices and the level baseline's sizing; `CudaBackend::release_kept_memory` gives it back on
//! demand.
//!
//! A buffer returns here only when it is dropped, which its users do after the work that uses
//! it has finished: the same condition under which `cuMemFree` may free it.

use std::sync::{Mutex, PoisonError};

/// The most bytes of one GPU's memory kept (a larger allocation is freed at once): room for
/// the default overflow stacks of a full GPU of the size this project runs on, and the rest of
/// a run.
pub const KEPT_PER_GPU: usize = 8 << 30;
/// The most bytes of pinned host memory kept.
pub const KEPT_PINNED: usize = 64 << 20;
/// The smallest size class: the page size of pinned host memory.
const SMALLEST: usize = 4 << 10;
/// Size classes are powers of two up to this size, then multiples of [`LARGE_STEP`].
const POWERS_UP_TO: usize = 16 << 20;
const LARGE_STEP: usize = 2 << 20;

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

impl Owner {
    /// The most bytes kept for this owner.
    fn limit(self) -> usize {
        match self {
            Owner::Device(_) => KEPT_PER_GPU,
            Owner::Host => KEPT_PINNED,
        }
    }
}

/// The size allocated for `bytes` of `owner` so that the allocation can be kept: the next power
/// of two of at least 4 KiB up to 16 MiB, then the next multiple of 2 MiB (a run asks for the
/// same sizes as the run before it); `None` for an allocation too large to keep.
pub fn class(owner: Owner, bytes: usize) -> Option<usize> {
    let class = if bytes <= POWERS_UP_TO {
        bytes.max(SMALLEST).next_power_of_two()
    } else {
        bytes.checked_next_multiple_of(LARGE_STEP)?
    };
    (class <= owner.limit()).then_some(class)
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
    if held + class > owner.limit() {
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
    fn sizes_round_up_to_a_class_and_too_large_ones_are_not_kept() {
        let (gpu, host) = (Owner::Device(1), Owner::Host);
        assert_eq!(class(host, 0), Some(4096));
        assert_eq!(class(host, 4097), Some(8192));
        assert_eq!(class(gpu, POWERS_UP_TO), Some(POWERS_UP_TO));
        assert_eq!(
            class(gpu, POWERS_UP_TO + 1),
            Some(POWERS_UP_TO + LARGE_STEP)
        );
        assert_eq!(class(gpu, KEPT_PER_GPU), Some(KEPT_PER_GPU));
        assert_eq!(class(gpu, KEPT_PER_GPU + 1), None);
        assert_eq!(class(host, KEPT_PINNED + 1), None);
        assert_eq!(class(gpu, usize::MAX), None);
    }

    #[test]
    fn kept_allocations_go_to_their_owner_and_class_within_the_limit() {
        // Owners no other test uses.
        let owner = Owner::Device(0x5eed);
        let other = Owner::Device(0x5eee);
        assert!(give(owner, 8192, 0x1000));
        assert_eq!(take(other, 8192), None, "another owner's memory");
        assert_eq!(take(owner, 4096), None, "another class");
        assert_eq!(take(owner, 8192), Some(0x1000));
        assert_eq!(take(owner, 8192), None, "taken once");
        let big = KEPT_PER_GPU / 4;
        for i in 0..4 {
            assert!(give(owner, big, i));
        }
        assert!(!give(owner, 4096, 99), "over the owner's limit");
        assert!(give(other, big, 100), "the limit is per owner");
        let mut drained = drain(owner);
        drained.sort_unstable();
        assert_eq!(drained, vec![0, 1, 2, 3]);
        assert_eq!(drain(other), vec![100]);
        assert!(drain(owner).is_empty());
    }
}
