//! Steal-half arithmetic: which tasks the k-th steal attempt of an epoch claims.
//!
//! The k-th successful steal (0-based) of an epoch that opened with `n` tasks takes `rem / 2` of the
//! `rem` tasks still unclaimed, or 1 when `rem == 1`. A thief learns `k` and `n` from the word its
//! fetch-add returned, so it can compute its range without further communication. At most
//! `floor(log2 n) + 1` steals succeed per epoch.

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

/// The share of steal attempt `attempt` (0-based) of an epoch that opened with `initial` tasks, or
/// `None` if that attempt finds the epoch exhausted.
#[inline]
pub fn share(initial: u64, attempt: u64) -> Option<StealShare> {
    let mut offset = 0;
    let mut k = 0;
    loop {
        let remaining = initial - offset;
        if remaining == 0 {
            return None;
        }
        let take = take_of(remaining);
        if k == attempt {
            return Some(StealShare {
                offset,
                count: take,
            });
        }
        offset += take;
        k += 1;
    }
}

/// Tasks claimed by the first `attempts` steal attempts of an epoch of `initial` tasks.
#[inline]
pub fn claimed_by(initial: u64, attempts: u64) -> u64 {
    let mut offset = 0;
    let mut k = 0;
    while k < attempts && offset < initial {
        offset += take_of(initial - offset);
        k += 1;
    }
    offset
}

/// How many steal attempts of an epoch of `initial` tasks can succeed.
#[inline]
pub fn max_successful_steals(initial: u64) -> u64 {
    let mut offset = 0;
    let mut k = 0;
    while offset < initial {
        offset += take_of(initial - offset);
        k += 1;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::word::MAX_FIELD;
    use proptest::prelude::*;

    #[test]
    fn eight_tasks_split_four_two_one_one() {
        let takes: [u64; 5] = core::array::from_fn(|k| share(8, k as u64).map_or(0, |s| s.count));
        assert_eq!(takes, [4, 2, 1, 1, 0]);
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
    }
}
