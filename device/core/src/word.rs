//! The packed 64-bit public-queue word (SWS layout, docs/background.md section 1).
//!
//! | bits  | width | field |
//! |-------|-------|-------|
//! | 63-40 | 24 | attempted steals in this epoch (a thief adds [`STEAL_INCREMENT`]) |
//! | 39    | 1  | lock: steals fail while the owner rearranges the queue |
//! | 38    | 1  | epoch index (0/1) |
//! | 37-19 | 19 | tasks published at the start of this epoch |
//! | 18-0  | 19 | epoch tail: ring index of the first of those tasks |

use bitflags::bitflags;

/// Width of the attempted-steals field.
pub const STEALS_BITS: u32 = 24;
/// Width of the initial-tasks and epoch-tail fields.
pub const FIELD_BITS: u32 = 19;
/// The most tasks an epoch can publish, and the largest ring a public queue may have.
pub const MAX_FIELD: u64 = (1 << FIELD_BITS) - 1;
/// Shift of the attempted-steals field.
pub const STEALS_SHIFT: u32 = 40;
/// What a thief adds to the word to claim one steal attempt.
pub const STEAL_INCREMENT: u64 = 1 << STEALS_SHIFT;
const INITIAL_SHIFT: u32 = FIELD_BITS;

bitflags! {
    /// The single-bit fields of the queue word.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct WordFlags: u64 {
        /// Set by an owner while it rearranges the queue; a steal that sees it fails.
        const LOCK = 1 << 39;
        /// The epoch index, 0 or 1.
        const EPOCH = 1 << 38;
    }
}

/// A decoded view of a public-queue word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct QueueWord(pub u64);

impl QueueWord {
    /// The word that opens an epoch: no steals, unlocked.
    #[inline(always)]
    pub const fn open(epoch: u32, initial: u64, tail: u64) -> QueueWord {
        debug_assert!(initial <= MAX_FIELD && tail <= MAX_FIELD && epoch < 2);
        QueueWord(
            ((epoch as u64 & 1) << 38)
                | ((initial & MAX_FIELD) << INITIAL_SHIFT)
                | (tail & MAX_FIELD),
        )
    }
    /// Attempted steals so far in this epoch.
    #[inline(always)]
    pub const fn steals(self) -> u64 {
        self.0 >> STEALS_SHIFT
    }
    #[inline(always)]
    pub const fn locked(self) -> bool {
        self.0 & WordFlags::LOCK.bits() != 0
    }
    #[inline(always)]
    pub const fn epoch(self) -> u32 {
        ((self.0 >> 38) & 1) as u32
    }
    /// Tasks published when the epoch opened.
    #[inline(always)]
    pub const fn initial(self) -> u64 {
        (self.0 >> INITIAL_SHIFT) & MAX_FIELD
    }
    /// Ring index of the first task of the epoch.
    #[inline(always)]
    pub const fn tail(self) -> u64 {
        self.0 & MAX_FIELD
    }
    #[inline(always)]
    pub const fn with_lock(self) -> QueueWord {
        QueueWord(self.0 | WordFlags::LOCK.bits())
    }
    /// The flag bits of the word.
    #[inline(always)]
    pub const fn flags(self) -> WordFlags {
        WordFlags::from_bits_truncate(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fields_round_trip_at_their_limits() {
        let w = QueueWord::open(1, MAX_FIELD, MAX_FIELD);
        assert_eq!(
            (w.epoch(), w.initial(), w.tail(), w.steals()),
            (1, MAX_FIELD, MAX_FIELD, 0)
        );
        assert!(!w.locked());
        assert!(w.with_lock().locked());
        assert_eq!(w.with_lock().flags(), WordFlags::LOCK | WordFlags::EPOCH);
    }

    #[test]
    fn steal_increment_leaves_other_fields_alone() {
        let w = QueueWord(QueueWord::open(0, 77, 12345).0 + 5 * STEAL_INCREMENT);
        assert_eq!(
            (w.steals(), w.initial(), w.tail(), w.epoch()),
            (5, 77, 12345, 0)
        );
        let max_steals = QueueWord(w.0 + ((1 << STEALS_BITS) - 6) * STEAL_INCREMENT);
        assert_eq!(max_steals.steals(), (1 << STEALS_BITS) - 1);
        assert_eq!(max_steals.initial(), 77);
    }

    proptest! {
        #[test]
        fn packing_is_lossless(epoch in 0u32..2, initial in 0..=MAX_FIELD, tail in 0..=MAX_FIELD,
                               steals in 0u64..(1 << STEALS_BITS), locked: bool) {
            let mut w = QueueWord(QueueWord::open(epoch, initial, tail).0 + steals * STEAL_INCREMENT);
            if locked { w = w.with_lock(); }
            prop_assert_eq!(w.epoch(), epoch);
            prop_assert_eq!(w.initial(), initial);
            prop_assert_eq!(w.tail(), tail);
            prop_assert_eq!(w.steals(), steals);
            prop_assert_eq!(w.locked(), locked);
        }
    }
}
