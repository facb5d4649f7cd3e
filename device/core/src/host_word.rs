//! The atomic word of CPU workers: `core::sync::atomic::AtomicU64` (loom's under `--cfg loom`).
//! Scopes need no distinction on a CPU: every atomic is coherent system-wide.

use crate::platform::{AtomicWord, Ordering, Scope};

#[cfg(not(loom))]
use core::sync::atomic::AtomicU64;
#[cfg(loom)]
use loom::sync::atomic::AtomicU64;

/// A 64-bit atomic word for host threads, layout-compatible with a `u64` (outside loom).
#[derive(Debug)]
#[repr(transparent)]
pub struct HostWord(AtomicU64);

impl Default for HostWord {
    fn default() -> Self {
        HostWord::new(0)
    }
}

impl AtomicWord for HostWord {
    fn new(value: u64) -> Self {
        HostWord(AtomicU64::new(value))
    }
    #[inline(always)]
    fn load(&self, order: Ordering, _: Scope) -> u64 {
        self.0.load(order)
    }
    #[inline(always)]
    fn store(&self, value: u64, order: Ordering, _: Scope) {
        // loom 0.7 can order a plain store before a concurrent RMW that read the value preceding
        // it, losing the store (a coherence violation real hardware never shows). Under loom a
        // store is therefore modelled as a swap, which is one legal implementation of a store.
        #[cfg(loom)]
        self.0.swap(
            value,
            match order {
                Ordering::Release | Ordering::SeqCst => order,
                _ => Ordering::Relaxed,
            },
        );
        #[cfg(not(loom))]
        self.0.store(value, order)
    }
    #[inline(always)]
    fn fetch_add(&self, value: u64, order: Ordering, _: Scope) -> u64 {
        self.0.fetch_add(value, order)
    }
    #[inline(always)]
    fn fetch_sub(&self, value: u64, order: Ordering, _: Scope) -> u64 {
        self.0.fetch_sub(value, order)
    }
    #[inline(always)]
    fn fetch_or(&self, value: u64, order: Ordering, _: Scope) -> u64 {
        self.0.fetch_or(value, order)
    }
    #[inline(always)]
    fn fetch_and(&self, value: u64, order: Ordering, _: Scope) -> u64 {
        self.0.fetch_and(value, order)
    }
    #[inline(always)]
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
        _: Scope,
    ) -> Result<u64, u64> {
        self.0.compare_exchange(current, new, success, failure)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The single-writer updates' default (a load and a store) adds and raises like their
    /// read-modify-write counterparts, wrapping and keeping the larger value.
    #[test]
    fn single_writer_updates_add_and_raise() {
        let word = HostWord::new(5);
        word.add_single_writer(7, Scope::Device);
        assert_eq!(word.load(Ordering::Relaxed, Scope::Device), 12);
        word.add_single_writer(u64::MAX, Scope::System);
        assert_eq!(word.load(Ordering::Relaxed, Scope::Device), 11);
        word.max_single_writer(3, Scope::Device);
        assert_eq!(word.load(Ordering::Relaxed, Scope::Device), 11);
        word.max_single_writer(40, Scope::Device);
        assert_eq!(word.load(Ordering::Relaxed, Scope::Device), 40);
    }
}
