//! A GPU PE's own copies of writable data areas, added into the launcher's after the run.

use std::sync::atomic::Ordering as AtomicOrdering;

use crate::cuda::driver::{self, DeviceBuffer};
use crate::error::Result;
use crate::processes::layout::{Header, HeapLayout};

/// A PE's copy of a writable data area (every one over the device-API transport, those of
/// `Header::area_copies` over the mapped one): its tasks write it, and after the run its changes
/// are added into the launcher's area, where every PE adds its own.
///
/// Word `w` of the area ends as `initial[w] + sum over PEs of (copy[w] - initial[w])` (wrapping):
/// exact for words only one PE changes (each of MEMSET's slots, each worker's result row, a
/// task's own output) and for additions from any PEs (`Context::atomic_add`, `reduce_add`). Its
/// limits (docs/design.md 5.8): words that several PEs change otherwise (two PEs storing 1 into a
/// flag leave 2; OR or max updates from several PEs) add up their changes; the value
/// `Context::atomic_add` returns is unique within a PE only; a task sees no other PE's writes to
/// the area during the run. Bytes past the last whole word are taken from the PE that changed
/// them.
pub(super) struct Replica {
    pub(super) area: usize,
    pub(super) buffer: DeviceBuffer,
    /// The area's bytes before the run; `None` where they were all zero (counters and result
    /// rows): then no host copy is kept and the device copy is zeroed rather than written.
    pub(super) initial: Option<Vec<u8>>,
}

impl Replica {
    /// This PE's copy of `src` (the area's bytes in the heap) on `gpu`.
    pub(super) fn place(gpu: &driver::Gpu, area: usize, src: &[u8]) -> Result<Replica> {
        let buffer = DeviceBuffer::alloc(
            gpu,
            src.len(),
            &format!("this PE's copy of data area {area}"),
        )?;
        let initial = if all_zero(src) {
            buffer.zero()?;
            None
        } else {
            buffer.write(0, src)?;
            Some(src.to_vec())
        };
        Ok(Replica {
            area,
            buffer,
            initial,
        })
    }

    /// Adds this PE's changes of the area into the launcher's copy in the heap at `base`.
    pub(super) fn merge_into(
        self,
        layout: &HeapLayout,
        base: *mut u8,
        header: &Header,
    ) -> Result<()> {
        let (dst, len) = layout.area(base, self.area, &header.area_limits);
        let mut copy = vec![0u8; len];
        self.buffer.read(0, &mut copy)?;
        // SAFETY: the heap holds the area's `len` bytes at `dst` (its layout), and every PE adds
        // into it with atomic operations only, after every kernel ended.
        unsafe { add_changes(dst, &copy, self.initial.as_deref()) };
        Ok(())
    }
}

/// Whether every byte of `bytes` is zero (eight at a time).
pub(super) fn all_zero(bytes: &[u8]) -> bool {
    let words = bytes.chunks_exact(8);
    let tail = words.remainder();
    words
        .map(|w| u64::from_ne_bytes(w.try_into().expect("8 bytes")))
        .all(|w| w == 0)
        && tail.iter().all(|&b| b == 0)
}

/// Adds `copy`'s changes against `initial` (all zero where `None`) into the `copy.len()` bytes at
/// `dst`: word by word with atomic additions (other PEs add theirs at the same time), and bytes
/// past the last whole word by storing the changed ones (see [`Replica`]).
///
/// # Safety
/// `dst` is valid for `copy.len()` bytes, 8-byte aligned, and only changed this way meanwhile.
pub(super) unsafe fn add_changes(dst: *mut u8, copy: &[u8], initial: Option<&[u8]>) {
    assert!(
        (dst as usize).is_multiple_of(8),
        "the heap aligns its data areas"
    );
    let was = |at: usize| initial.map_or(0, |b| b[at]);
    let words = copy.len() / 8;
    for w in 0..words {
        let at = w * 8;
        let now = u64::from_ne_bytes(copy[at..at + 8].try_into().expect("8 bytes"));
        let before = initial.map_or(0, |b| {
            u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
        });
        if now != before {
            // SAFETY: in bounds and aligned (the contract); other PEs only add atomically.
            let word = unsafe { &*(dst.add(at) as *const std::sync::atomic::AtomicU64) };
            // Relaxed: the PE's finished state (a release store) publishes the sums.
            word.fetch_add(now.wrapping_sub(before), AtomicOrdering::Relaxed);
        }
    }
    for (at, &now) in copy.iter().enumerate().skip(words * 8) {
        if now != was(at) {
            // SAFETY: in bounds (the contract); a byte no other PE changed in a well-formed run
            // (see `Replica`).
            unsafe { dst.add(at).write_volatile(now) };
        }
    }
}
