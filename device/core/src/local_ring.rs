//! Ring arithmetic: reducing monotonic queue positions to slots of a ring, and the local queue's
//! ring in scratch memory. Used by the worker loop, the baselines and the public-queue protocol.

/// `position` reduced to a ring of `capacity` slots: a mask for power-of-two capacities (the
/// defaults), which saves a 64-bit division per copied word on a GPU.
#[inline(always)]
pub fn ring_index(position: u64, capacity: u64) -> u64 {
    if capacity & (capacity - 1) == 0 {
        position & (capacity - 1)
    } else {
        ring_index_by_division(position, capacity)
    }
}

/// [`ring_index`] for a capacity that is not a power of two, out of line: inlined, the division
/// (on a GPU a 64-bit and a 32-bit remainder sequence with a branch between them) was repeated at
/// every one of the worker's ring accesses, in the middle of its hot path, for a configuration
/// the defaults never use.
#[cold]
#[inline(never)]
fn ring_index_by_division(position: u64, capacity: u64) -> u64 {
    position % capacity
}

/// Slot `j` of a run of slots that starts at slot `start` of a ring of `capacity` slots, for
/// `start < capacity` and `j < capacity`: the run wraps at most once, so one compare replaces the
/// division [`ring_index`] needs for a capacity that is not a power of two. The copy loops of a
/// GPU worker use it: a call to the division inside a loop made ptxas keep the worker's state
/// in local memory around it.
#[inline(always)]
pub fn ring_slot_after(start: u64, j: u64, capacity: u64) -> u64 {
    debug_assert!(start < capacity && j < capacity);
    let i = start + j;
    if i >= capacity {
        i - capacity
    } else {
        i
    }
}

/// The local queue's ring in scratch memory: `capacity` slots from `base`, a power of two
/// (`SchedConfig::validate`), so that a position reduces to its slot with one mask. With
/// [`ring_index`]'s test for other capacities, every pop of a GPU worker paid a uniform test and
/// branch for a configuration the defaults never use.
#[derive(Clone, Copy)]
pub(crate) struct LocalRing<T> {
    pub(crate) base: *mut T,
    pub(crate) capacity: u64,
}

impl<T> LocalRing<T> {
    /// The slot of monotonic position `position`.
    #[inline(always)]
    pub(crate) fn slot(self, position: u64) -> *mut T {
        debug_assert!(self.capacity.is_power_of_two());
        // SAFETY: the ring holds `capacity` tasks, a power of two; the mask reduces the index
        // modulo the capacity, so the pointer stays inside the ring.
        unsafe { self.base.add((position & (self.capacity - 1)) as usize) }
    }
}

#[cfg(test)]
mod tests {
    use super::{ring_index, ring_slot_after};

    #[test]
    fn ring_index_masks_powers_of_two_and_divides_otherwise() {
        assert_eq!(ring_index(17, 16), 1);
        assert_eq!(ring_index(16, 16), 0);
        assert_eq!(ring_index(17, 12), 5);
        assert_eq!(ring_index(u64::MAX, 1 << 19), (1 << 19) - 1);
    }

    #[test]
    fn a_run_of_slots_wraps_once_like_the_division() {
        for capacity in [1, 2, 3, 7, 12, 16] {
            for start in 0..capacity {
                for j in 0..capacity {
                    assert_eq!(
                        ring_slot_after(start, j, capacity),
                        ring_index(start + j, capacity),
                        "start {start}, j {j}, capacity {capacity}"
                    );
                }
            }
        }
    }
}
