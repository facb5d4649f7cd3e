//! Hang detection shared by the backends: a run makes progress while any worker runs tasks or
//! changes its idle state; a run that does neither for the timeout is hung.

use std::time::{Duration, Instant};

use mgws_core::WorkerProgress;

/// Watches the workers' progress records and says when none changed for the timeout.
pub struct Watchdog {
    timeout: Duration,
    last: Vec<(u64, u64, u64)>,
    /// Per worker: when its record last showed progress.
    worker_change: Vec<Instant>,
    last_change: Instant,
}

impl Watchdog {
    /// A watchdog of `workers` workers that fires after `timeout` without progress.
    pub fn new(timeout: Duration, workers: usize) -> Self {
        Watchdog {
            timeout,
            last: vec![(u64::MAX, u64::MAX, u64::MAX); workers],
            worker_change: vec![Instant::now(); workers],
            last_change: Instant::now(),
        }
    }

    /// Feeds a snapshot; returns how long the run has been stalled once that exceeds the timeout.
    pub fn observe(&mut self, snapshot: &[WorkerProgress]) -> Option<Duration> {
        let mut changed = false;
        let seen = Instant::now();
        for ((last, when), p) in self
            .last
            .iter_mut()
            .zip(&mut self.worker_change)
            .zip(snapshot)
        {
            // Idle workers advance `iterations` while they look for work, so only tasks, idle
            // transitions and heartbeats count as progress.
            let now = (p.tasks_run, p.state, p.heartbeats);
            if *last != now {
                *last = now;
                *when = seen;
                changed = true;
            }
        }
        if changed {
            self.last_change = Instant::now();
            return None;
        }
        let stalled = self.last_change.elapsed();
        (stalled >= self.timeout).then_some(stalled)
    }
}

impl Watchdog {
    /// How long worker `w`'s record has shown no progress (since the watchdog started, for a
    /// worker that never reported).
    pub fn since_progress(&self, w: usize) -> Duration {
        self.worker_change
            .get(w)
            .map_or(Duration::ZERO, Instant::elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_only_after_the_timeout_without_change() {
        let mut w = Watchdog::new(Duration::from_millis(30), 2);
        let mut snap = vec![WorkerProgress::default(); 2];
        assert_eq!(w.observe(&snap), None);
        std::thread::sleep(Duration::from_millis(40));
        assert!(w.observe(&snap).is_some());
        snap[1].tasks_run = 5;
        assert_eq!(w.observe(&snap), None);
        assert!(w.since_progress(0) >= Duration::from_millis(40));
        assert!(w.since_progress(1) < Duration::from_millis(40));
    }
}
