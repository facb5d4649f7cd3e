//! Waiting for kernels from the host: poll the launch streams, back off between polls.

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::error::Result;

/// The shortest sleep between stream queries.
const FIRST_NAP: Duration = Duration::from_micros(20);
/// The longest sleep between stream queries.
const MAX_NAP: Duration = Duration::from_millis(2);
/// A sleep is at most this fraction of the time waited so far, so that the host sees a kernel
/// end within an eighth of its run (and 2 ms) while a long run costs few wake-ups.
const NAP_SHARE: u32 = 8;

/// The backoff of one kernel's waits, kept across `Running::wait` calls.
pub(super) struct Backoff {
    /// When the first wait began (about when the kernel started).
    first_wait: Cell<Option<Instant>>,
    /// How long each wait polls without sleeping before it backs off (a sleep costs at least
    /// the timer slack, about 50 us on Linux).
    spin_for: Duration,
}

impl Backoff {
    /// Sleeps from the first poll on.
    pub(super) fn sleeping() -> Self {
        Backoff {
            first_wait: Cell::new(None),
            spin_for: Duration::ZERO,
        }
    }

    /// Polls without sleeping for the first `spin_for` of each wait.
    pub(super) fn spinning(spin_for: Duration) -> Self {
        Backoff {
            spin_for,
            ..Self::sleeping()
        }
    }

    /// Calls `poll` until it answers `Some` (returned) or `timeout` passed (`Ok(false)`),
    /// yielding for the first `spin_for`, then sleeping an eighth of the time waited since the
    /// first wait (from 20 us to 2 ms).
    pub(super) fn wait(
        &self,
        timeout: Duration,
        mut poll: impl FnMut() -> Option<Result<bool>>,
    ) -> Result<bool> {
        let start = Instant::now();
        let first = self.first_wait.get().unwrap_or(start);
        self.first_wait.set(Some(first));
        loop {
            if let Some(answer) = poll() {
                return answer;
            }
            let waited = start.elapsed();
            let left = timeout.saturating_sub(waited);
            if left.is_zero() {
                return Ok(false);
            }
            if waited < self.spin_for {
                std::thread::yield_now();
                continue;
            }
            std::thread::sleep(nap(first.elapsed()).min(left));
        }
    }
}

/// The sleep after waiting `waited` in all.
fn nap(waited: Duration) -> Duration {
    (waited / NAP_SHARE).clamp(FIRST_NAP, MAX_NAP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn naps_grow_with_the_wait_between_their_bounds() {
        assert_eq!(nap(Duration::ZERO), FIRST_NAP);
        assert_eq!(nap(Duration::from_millis(4)), Duration::from_micros(500));
        assert_eq!(nap(Duration::from_secs(10)), MAX_NAP);
    }
}
