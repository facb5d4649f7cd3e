//! Steal-half arithmetic: which tasks the k-th steal attempt of an epoch claims.
//!
//! The k-th successful steal (0-based) of an epoch that opened with `n` tasks takes `rem / 2` of the
//! `rem` tasks still unclaimed, or 1 when `rem == 1`. A thief learns `k` and `n` from the word its
//! fetch-add returned, so it can compute its range without further communication. At most
//! `ceil(log2 n) + 1` steals succeed per epoch (3 of 3 tasks: 1, 1, 1).

/// The tasks one steal claims: `count` tasks starting `offset` tasks after the epoch tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StealShare {
    pub offset: u64,
    pub count: u64,
}

/// Tasks a steal takes when `remaining` are unclaimed.
#[inline]
pub const fn take_of(remaining: u64) -> u64 {
    if remaining == 1 {
        1
    } else {
        remaining / 2
    }
}

/// Tasks of an epoch that opened with `initial` tasks still unclaimed after its first `attempts`
/// steal attempts.
///
/// Each attempt takes [`take_of`] the `r` unclaimed tasks and leaves `ceil(r / 2)` of them while
/// `r >= 2`, and 0 once `r == 1`; so after `k` attempts `ceil(initial / 2^k)` remain while
/// `initial > 2^(k-1)`, and none after. The closed form replaces a loop of up to `k` rounds of
/// 64-bit arithmetic in every thief's and owner's path: on an H100 that loop, inlined into the
/// persistent kernel, held registers that pushed the MEMSET entry's worker state into local
/// memory (docs/results.md).
#[inline(always)]
pub fn remaining_after(initial: u64, attempts: u64) -> u64 {
    if attempts == 0 {
        return initial;
    }
    // attempts >= 65 leaves nothing of any u64; below, `attempts - 1 <= 63`.
    if attempts > 64 || initial <= 1u64 << (attempts - 1) {
        return 0;
    }
    // initial > 2^(attempts - 1) >= 1: ceil(initial / 2^attempts) without overflow.
    ((initial - 1).checked_shr(attempts as u32).unwrap_or(0)) + 1
}

/// The share of steal attempt `attempt` (0-based) of an epoch that opened with `initial` tasks, or
/// `None` if that attempt finds the epoch exhausted.
#[inline(always)]
pub fn share(initial: u64, attempt: u64) -> Option<StealShare> {
    let share = steal_share(initial, attempt);
    (share.count > 0).then_some(share)
}

/// [`share`] without the `Option`: a `count` of 0 (at offset `initial`) when the attempt finds
/// the epoch exhausted. Branch-free, so that both outcomes leave every field defined (see
/// `PublicQueue::lock`).
#[inline(always)]
pub fn steal_share(initial: u64, attempt: u64) -> StealShare {
    let remaining = remaining_after(initial, attempt);
    // take_of(0) == 0.
    StealShare {
        offset: initial - remaining,
        count: take_of(remaining),
    }
}

/// Number of tasks claimed by the first `attempts` steal attempts of an epoch of `initial` tasks.
#[inline(always)]
pub fn claimed_by(initial: u64, attempts: u64) -> u64 {
    initial - remaining_after(initial, attempts)
}

/// The number of steal attempts that succeed in an epoch of `initial` tasks (`0` for an empty
/// epoch, else `ceil(log2 initial) + 1`).
#[inline]
pub fn max_successful_steals(initial: u64) -> u64 {
    if initial == 0 {
        0
    } else {
        (64 - (initial - 1).leading_zeros()) as u64 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::word::MAX_FIELD;
    use proptest::prelude::*;

    /// The rule itself, attempt by attempt: the oracle of the closed forms above.
    fn remaining_by_steps(initial: u64, attempts: u64) -> u64 {
        let mut remaining = initial;
        for _ in 0..attempts {
            if remaining == 0 {
                break;
            }
            remaining -= take_of(remaining);
        }
        remaining
    }

    #[test]
    fn closed_forms_agree_with_the_rule_step_by_step() {
        let edges = [
            0,
            1,
            2,
            3,
            4,
            5,
            7,
            8,
            9,
            1023,
            1024,
            1025,
            MAX_FIELD,
            u64::MAX / 2 + 1,
        ];
        for &n in edges.iter().chain(&[u64::MAX - 1, u64::MAX]) {
            for k in 0..80 {
                assert_eq!(
                    remaining_after(n, k),
                    remaining_by_steps(n, k),
                    "n {n} k {k}"
                );
            }
            let steals = (0..80).filter(|&k| share(n, k).is_some()).count() as u64;
            assert_eq!(max_successful_steals(n), steals, "n {n}");
        }
        assert_eq!(remaining_after(5, u64::MAX), 0);
    }

    #[test]
    fn eight_tasks_split_four_two_one_one() {
        let takes: [u64; 5] = core::array::from_fn(|k| share(8, k as u64).map_or(0, |s| s.count));
        assert_eq!(takes, [4, 2, 1, 1, 0]);
        // Without the Option: an exhausted epoch's share is empty, at the epoch's end.
        let exhausted = steal_share(8, 4);
        assert_eq!((exhausted.offset, exhausted.count), (8, 0));
        assert_eq!(steal_share(8, 1), share(8, 1).unwrap());
        assert_eq!(
            share(8, 2),
            Some(StealShare {
                offset: 6,
                count: 1
            })
        );
        assert_eq!(max_successful_steals(8), 4);
        assert_eq!(share(0, 0), None);
        assert_eq!(
            share(1, 0),
            Some(StealShare {
                offset: 0,
                count: 1
            })
        );
    }

    #[test]
    fn the_largest_epoch_needs_about_log2_steals() {
        let k = max_successful_steals(MAX_FIELD);
        assert!(k <= 64 - MAX_FIELD.leading_zeros() as u64 + 1, "{k}");
        assert_eq!(claimed_by(MAX_FIELD, k), MAX_FIELD);
    }

    proptest! {
        #[test]
        fn shares_tile_the_epoch_exactly_once(initial in 0..=MAX_FIELD) {
            let mut next = 0;
            let mut k = 0;
            while let Some(s) = share(initial, k) {
                prop_assert_eq!(s.offset, next);
                prop_assert!(s.count >= 1);
                next += s.count;
                k += 1;
                prop_assert_eq!(claimed_by(initial, k), next);
            }
            prop_assert_eq!(next, initial);
            prop_assert_eq!(k, max_successful_steals(initial));
            prop_assert!(k <= 20);
            prop_assert_eq!(claimed_by(initial, k + 1000), initial);
        }

        #[test]
        fn remaining_after_matches_the_rule(initial in any::<u64>(), attempts in 0u64..70) {
            prop_assert_eq!(remaining_after(initial, attempts), remaining_by_steps(initial, attempts));
        }
    }
}
