//! How a read-write data area is laid out over the GPUs of a run, and how the host puts the
//! GPUs' bytes back together after it.
//!
//! On one GPU, and on the CPU backend, every layout is one buffer: the layout only matters where
//! a run spans several GPUs. There a task's writes to memory of another GPU cross NVLink, so each
//! layout keeps the data a worker writes most in that worker's own GPU. Every layout stays exact
//! for a task that writes anywhere in the area: see docs/design.md, "Data areas over several GPUs".

use std::ops::Range;

use crate::error::{Error, Result};

/// The layout of one read-write data area over a run's GPUs ([`crate::Job::layout`]). Read-only
/// areas are always copied to every GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AreaLayout {
    /// One copy, in the first GPU's memory; the other GPUs reach it over NVLink.
    SingleHome,
    /// One address range split into contiguous slices, one in each GPU's memory, in proportion
    /// to the GPU's share of the initial tasks (split the same way where the set is large):
    /// task `i` of `n` and byte `i * len / n` live on the same GPU, up to the driver's mapping
    /// granularity. Tasks address the area as one buffer. The default for read-write areas.
    Partitioned,
    /// A copy on each GPU, each starting from the job's bytes; after the run the copies are
    /// combined element by element with `Combine`. Tasks see only their own GPU's copy during the
    /// run, so this suits results (sums, counts, minima), not data that tasks pass to each other.
    Replicated(Combine),
    /// One row of `row_bytes` per worker (row `w` at `w * row_bytes`, by global worker id, as
    /// [`crate::PerWorker`] and `TaskContext::accumulate` lay them out): a copy on each GPU, of
    /// which the rows of that GPU's workers are kept. Rows of workers no GPU has (CPU workers
    /// beside the GPUs) come from the first copy.
    PerWorker {
        /// Bytes from one worker's row to the next.
        row_bytes: u64,
    },
}

impl AreaLayout {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            AreaLayout::SingleHome => "single-home",
            AreaLayout::Partitioned => "partitioned",
            AreaLayout::Replicated(Combine::AddU64) => "replicated-add-u64",
            AreaLayout::Replicated(Combine::AddU32) => "replicated-add-u32",
            AreaLayout::Replicated(Combine::MinU64) => "replicated-min-u64",
            AreaLayout::Replicated(Combine::MaxU64) => "replicated-max-u64",
            AreaLayout::Replicated(Combine::OrU64) => "replicated-or-u64",
            AreaLayout::PerWorker { .. } => "per-worker",
        }
    }

    /// Checks that an area of `len` bytes can have this layout.
    pub fn check(self, index: u8, len: usize) -> Result<()> {
        let whole = |unit: u64, what: &str| {
            if !(len as u64).is_multiple_of(unit) {
                return Err(Error::Input(format!(
                    "data area {index} ({len} bytes) is not a whole number of {what} \
                     ({unit} bytes each), as its layout {} needs",
                    self.name()
                )));
            }
            Ok(())
        };
        match self {
            AreaLayout::SingleHome | AreaLayout::Partitioned => Ok(()),
            AreaLayout::Replicated(c) => whole(c.width() as u64, "elements"),
            AreaLayout::PerWorker { row_bytes: 0 } => Err(Error::Input(format!(
                "data area {index}: a per-worker layout needs rows of at least one byte"
            ))),
            AreaLayout::PerWorker { row_bytes } => whole(row_bytes, "rows"),
        }
    }
}

/// How [`AreaLayout::Replicated`] combines the GPUs' copies, element by element (little-endian
/// unsigned integers; the additions wrap).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Combine {
    /// The job's value plus every copy's change to it: what one shared area would hold after
    /// every task's `atomic_add` or `reduce_add`.
    AddU64,
    /// As `AddU64`, for 32-bit elements.
    AddU32,
    /// The smallest value of any copy (the job's value included).
    MinU64,
    /// The largest value of any copy (the job's value included).
    MaxU64,
    /// Every bit set in any copy.
    OrU64,
}

impl Combine {
    /// Bytes per element.
    pub fn width(self) -> usize {
        match self {
            Combine::AddU32 => 4,
            _ => 8,
        }
    }

    /// Combines `copy` (one GPU's bytes after the run) into `acc` (the bytes so far), given
    /// `before` (the job's bytes before the run). All three have the same length, a multiple
    /// of [`Combine::width`].
    pub fn fold(self, acc: &mut [u8], copy: &[u8], before: &[u8]) {
        debug_assert!(acc.len() == copy.len() && copy.len() == before.len());
        match self {
            Combine::AddU32 => {
                let get = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap());
                for ((a, c), b) in acc
                    .chunks_exact_mut(4)
                    .zip(copy.chunks_exact(4))
                    .zip(before.chunks_exact(4))
                {
                    let v = get(a).wrapping_add(get(c).wrapping_sub(get(b)));
                    a.copy_from_slice(&v.to_le_bytes());
                }
            }
            _ => {
                let get = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap());
                for ((a, c), b) in acc
                    .chunks_exact_mut(8)
                    .zip(copy.chunks_exact(8))
                    .zip(before.chunks_exact(8))
                {
                    let (x, y) = (get(a), get(c));
                    let v = match self {
                        Combine::AddU64 => x.wrapping_add(y.wrapping_sub(get(b))),
                        Combine::MinU64 => x.min(y),
                        Combine::MaxU64 => x.max(y),
                        Combine::OrU64 => x | y,
                        Combine::AddU32 => unreachable!("handled above"),
                    };
                    a.copy_from_slice(&v.to_le_bytes());
                }
            }
        }
    }
}

/// The byte range of each of `parts.len()` slices of an area of `len` bytes, in proportion to
/// `parts` (each part's weight, e.g. a GPU's share of the initial tasks), with every boundary
/// rounded to a multiple of `granularity` (the driver's mapping unit). Slices may be empty;
/// together they cover `0..len` in order.
pub fn split_bounds(len: u64, parts: &[u64], granularity: u64) -> Vec<Range<u64>> {
    let total: u64 = parts.iter().sum();
    let granularity = granularity.max(1);
    let mut bounds = Vec::with_capacity(parts.len());
    let mut start = 0u64;
    let mut before = 0u64;
    for (i, &p) in parts.iter().enumerate() {
        before += p;
        let end = if i + 1 == parts.len() || total == 0 {
            len
        } else {
            let ideal = (len as u128 * before as u128 / total as u128) as u64;
            // To the nearest multiple of the granularity, never backwards, never past the end.
            let rounded = (ideal + granularity / 2) / granularity * granularity;
            rounded.clamp(start, len)
        };
        bounds.push(start..end);
        start = end;
    }
    bounds
}

/// Puts one more copy of a replicated or per-worker area back into `dst`, which starts as copy
/// 0's bytes: `copy` is the bytes of the device whose workers are `workers`, `before` the job's
/// bytes before the run (used by [`AreaLayout::Replicated`]). Other layouts are one buffer and
/// have no copies.
pub fn merge_copy(
    layout: AreaLayout,
    dst: &mut [u8],
    copy: &[u8],
    workers: Range<u32>,
    before: &[u8],
) {
    match layout {
        AreaLayout::PerWorker { row_bytes } => {
            let rows = rows_of(workers, row_bytes, dst.len() as u64);
            let rows = rows.start as usize..rows.end as usize;
            dst[rows.clone()].copy_from_slice(&copy[rows]);
        }
        AreaLayout::Replicated(combine) => combine.fold(dst, copy, before),
        AreaLayout::SingleHome | AreaLayout::Partitioned => {
            unreachable!("one buffer, no copies")
        }
    }
}

/// Whether the layout gives each device a copy of its own (on several devices).
pub fn copies(layout: AreaLayout) -> bool {
    matches!(
        layout,
        AreaLayout::Replicated(_) | AreaLayout::PerWorker { .. }
    )
}

/// The rows (worker ids) whose bytes a [`AreaLayout::PerWorker`] area keeps from GPU `d`'s copy,
/// as a byte range of an area of `len` bytes: `workers` is GPU `d`'s range of global worker ids.
pub fn rows_of(workers: Range<u32>, row_bytes: u64, len: u64) -> Range<u64> {
    let at = |w: u32| (u64::from(w) * row_bytes).min(len);
    at(workers.start)..at(workers.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn unwords(b: &[u8]) -> Vec<u64> {
        b.chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn adding_copies_gives_what_one_shared_area_would_hold() {
        // Before: 10, 0. GPU 0 adds 1 and 5; GPU 1 adds 2 and 7 (wrapping past zero).
        let before = words(&[10, 0]);
        let mut acc = words(&[11, 5]);
        Combine::AddU64.fold(&mut acc, &words(&[12, 7u64.wrapping_neg()]), &before);
        assert_eq!(unwords(&acc), [13, 5u64.wrapping_sub(7)]);
        let before32: Vec<u8> = [3u32, 0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut acc32: Vec<u8> = [4u32, 1].iter().flat_map(|x| x.to_le_bytes()).collect();
        let copy32: Vec<u8> = [5u32, u32::MAX]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        Combine::AddU32.fold(&mut acc32, &copy32, &before32);
        assert_eq!(
            acc32,
            [6u32, 0]
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn min_max_and_or_fold_every_copy() {
        let before = words(&[5, 5, 0b01]);
        let mut min = words(&[3, 9, 0]);
        Combine::MinU64.fold(&mut min, &words(&[4, 2, 0]), &before);
        assert_eq!(unwords(&min)[..2], [3, 2]);
        let mut max = words(&[3, 9, 0]);
        Combine::MaxU64.fold(&mut max, &words(&[4, 2, 0]), &before);
        assert_eq!(unwords(&max)[..2], [4, 9]);
        let mut or = words(&[0, 0, 0b011]);
        Combine::OrU64.fold(&mut or, &words(&[0, 0, 0b101]), &before);
        assert_eq!(unwords(&or)[2], 0b111);
    }

    #[test]
    fn slices_follow_the_weights_on_granularity_boundaries_and_cover_the_area() {
        let b = split_bounds(100 << 20, &[1, 1, 1, 1], 2 << 20);
        assert_eq!(b.len(), 4);
        assert_eq!(b[0].start, 0);
        assert_eq!(b[3].end, 100 << 20);
        for w in b.windows(2) {
            assert_eq!(w[0].end, w[1].start);
            assert_eq!(w[0].end % (2 << 20), 0);
        }
        // 25 MiB rounds to 26 MiB (nearest 2 MiB), 50 stays, 75 rounds to 76.
        assert_eq!(b[0].end, 26 << 20);
        assert_eq!(b[1].end, 50 << 20);
        assert_eq!(b[2].end, 76 << 20);
        // Unequal weights, and an area smaller than one unit: all of it in the first slice that
        // rounds past zero (here the last).
        let b = split_bounds(1000, &[3, 1], 4096);
        assert_eq!(b, [0..0, 0..1000]);
        let b = split_bounds(1 << 30, &[3, 1], 1 << 20);
        assert_eq!(b[0], 0..(768 << 20));
    }

    #[test]
    fn layouts_refuse_areas_they_cannot_divide() {
        assert!(AreaLayout::Replicated(Combine::AddU64)
            .check(0, 12)
            .is_err());
        assert!(AreaLayout::Replicated(Combine::AddU32).check(0, 12).is_ok());
        let e = AreaLayout::PerWorker { row_bytes: 64 }
            .check(2, 100)
            .unwrap_err();
        assert!(e.to_string().contains("data area 2 (100 bytes)"), "{e}");
        assert!(AreaLayout::PerWorker { row_bytes: 0 }.check(0, 0).is_err());
        assert!(AreaLayout::Partitioned.check(0, 7).is_ok());
    }

    #[test]
    fn a_gpus_rows_are_its_workers_rows_cut_to_the_area() {
        assert_eq!(rows_of(2..5, 64, 1 << 10), 128..320);
        assert_eq!(rows_of(10..20, 64, 1000), 640..1000);
    }
}
