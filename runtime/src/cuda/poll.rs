//! Waiting for kernels from the host: poll the launch streams, back off between polls.

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::error::Result;

/// The first sleep between stream queries; it doubles up to [`MAX_NAP`], so a short run is seen
/// finished soon after it finishes and a long one costs few wake-ups.
const FIRST_NAP: Duration = Duration::from_micros(20);
/// The longest sleep between stream queries.
const MAX_NAP: Duration = Duration::from_millis(2);

/// The backoff of one kernel's waits, kept across `Running::wait` calls.
pub(super) struct Backoff {
    nap: Cell<Duration>,
    /// How long each wait polls without sleeping before it backs off (a sleep costs at least
    /// the timer slack, about 50 us on Linux).
    spin_for: Duration,
}

impl Backoff {
    /// Sleeps from the first poll on.
    pub(super) fn sleeping() -> Self {
        Backoff {
            nap: Cell::new(FIRST_NAP),
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
    /// yielding for the first `spin_for`, then sleeping with a doubling nap.
    pub(super) fn wait(
        &self,
        timeout: Duration,
        mut poll: impl FnMut() -> Option<Result<bool>>,
    ) -> Result<bool> {
        let start = Instant::now();
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
            let nap = self.nap.get();
            std::thread::sleep(nap.min(left));
            self.nap.set((nap * 2).min(MAX_NAP));
        }
    }
}
