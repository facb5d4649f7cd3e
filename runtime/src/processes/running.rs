//! A multi-process run in progress, as the pipeline's supervisor sees it.

use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mgws_core::WorkerProgress;

use super::children::Children;
use super::device::ProcessPlaced;
use super::nodes::NodeLink;
use crate::cpu::device::{abort_requested, request_abort, side_live_state, side_progress};
use crate::device::{LiveState, Running};
use crate::error::{Error, Result};

/// A multi-process run in progress.
pub(super) struct ProcessRunning<'a> {
    pub(super) placed: &'a ProcessPlaced,
    pub(super) children: Mutex<Children>,
    /// How long PEs may take to exit once every PE has finished (see [`exit_grace`]).
    pub(super) teardown_grace: Duration,
    /// A run across nodes: the link to the other nodes' launchers.
    pub(super) link: Mutex<Option<NodeLink>>,
    /// The link failed (reported once by `wait`; the run is being aborted): it is not read
    /// again, and the other nodes count as done.
    pub(super) link_failed: std::sync::atomic::AtomicBool,
    /// The PEs this launcher started.
    pub(super) pes: std::ops::Range<u32>,
}

/// How long node 0 waits for the other nodes' results once its own PEs have exited (besides the
/// exit grace): their PEs finish with node 0's (NVSHMEM's final barrier), and then only their
/// teardown and the transfer of their area changes remain.
const RESULTS_WAIT: Duration = Duration::from_secs(60);

/// How long a PE may take to exit once it should: after an abort (aborted workers leave their
/// loop at their next check), or once every PE has finished its part (a GPU PE then frees its
/// symmetric memory and leaves NVSHMEM, both collective, and releases its GPU). The watchdog's
/// timeout, between 1 and 10 seconds. A PE still running after it is ended: after an abort by
/// `give_up`; after every PE finished with a warning, and the run stands, its results final
/// (say, a PE waiting in a collective for a PE that died after finishing). While PEs tear
/// down, the watchdog does not look at their records, which no longer change.
pub(super) fn exit_grace(watchdog: Duration) -> Duration {
    watchdog.clamp(Duration::from_secs(1), Duration::from_secs(10))
}

impl ProcessRunning<'_> {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Children> {
        // Nothing panics while holding the lock; recover the value regardless.
        self.children.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_link(&self) -> std::sync::MutexGuard<'_, Option<NodeLink>> {
        // As above.
        self.link.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A run across nodes: one look at the link (records, aborts, failures, results); a failure
    /// on another node is an error.
    fn poll_link(&self) -> Result<()> {
        // Relaxed: only the supervisor's thread reads and writes it.
        if self.link_failed.load(AtomicOrdering::Relaxed) {
            return Ok(());
        }
        let mut link = self.lock_link();
        let Some(link) = link.as_mut() else {
            return Ok(());
        };
        if let Err(e) = link.poll_run(&self.placed.env, self.pes.clone()) {
            self.link_failed.store(true, AtomicOrdering::Relaxed);
            return Err(e);
        }
        if link.abort_requested() {
            request_abort(&self.placed.env);
        }
        Ok(())
    }

    /// Whether every other node's PEs are done (always, on one node and on followers; and once
    /// the link failed, since nothing more comes from it).
    fn other_nodes_done(&self) -> bool {
        // Relaxed: as in `poll_link`.
        self.link_failed.load(AtomicOrdering::Relaxed)
            || self.lock_link().as_ref().is_none_or(NodeLink::all_done)
    }

    /// Node 0, once its own PEs have exited (`since`): waits for the other nodes' results,
    /// reading the link, at most the exit grace and [`RESULTS_WAIT`]. It does not return to the
    /// supervisor meanwhile: its watchdog must not judge records that no longer change.
    fn await_other_nodes(&self, since: Instant) -> Result<bool> {
        loop {
            self.poll_link()?;
            if self.other_nodes_done() {
                return Ok(true);
            }
            let limit = self.teardown_grace + RESULTS_WAIT;
            if since.elapsed() > limit {
                let late = self
                    .lock_link()
                    .as_ref()
                    .map_or_else(String::new, NodeLink::nodes_not_done);
                return Err(Error::Process(format!(
                    "this node's PEs finished, but {late} sent no results within {limit:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Running for ProcessRunning<'_> {
    fn wait(&self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            self.poll_link()?;
            let mut children = self.lock();
            if let Some(e) = children.exited_early(self.placed)? {
                // The other nodes stop too (node 0 aborts every node's kernels).
                if let Some(link) = self.lock_link().as_mut() {
                    link.fail(&e);
                }
                return Err(e);
            }
            if children.all_exited() {
                // This node's PEs are done; the other nodes' results are on their way.
                let since = *children.all_finished_at.get_or_insert_with(Instant::now);
                drop(children);
                return self.await_other_nodes(since);
            }
            if children.all_finished(self.placed.header()) {
                // The run is over; only teardown remains (the supervisor's watchdog is not
                // consulted again).
                let since = *children.all_finished_at.get_or_insert_with(Instant::now);
                let waited = since.elapsed();
                if waited >= self.teardown_grace {
                    let left = children.pes.iter().filter(|p| p.status.is_none()).count();
                    tracing::warn!(
                        pes = left,
                        grace = ?self.teardown_grace,
                        "PEs still tearing down after every PE finished; ended (the results \
                         are final)"
                    );
                    children.kill_all();
                    drop(children);
                    return self.await_other_nodes(since);
                }
                children.sleep_until_an_exit(self.teardown_grace - waited);
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            // Only the supervisor's thread uses the PEs: holding the lock while asleep blocks
            // no one.
            children.sleep_until_an_exit(deadline - now);
        }
    }

    fn progress(&self) -> Vec<WorkerProgress> {
        // Node 0 watches every worker of a run across nodes (their records come over the link);
        // a follower watches none.
        if matches!(*self.lock_link(), Some(NodeLink::Follower(_))) {
            return Vec::new();
        }
        side_progress(&self.placed.env)
    }

    fn live_state(&self) -> LiveState {
        side_live_state(&self.placed.env)
    }

    fn abort(&self) {
        request_abort(&self.placed.env);
        if let Some(link) = self.lock_link().as_mut() {
            link.abort();
        }
    }

    fn exit_grace(&self, watchdog: Duration) -> Option<Duration> {
        Some(exit_grace(watchdog))
    }

    fn give_up(&self) -> bool {
        if let Some(link) = self.lock_link().as_mut() {
            link.abort();
        }
        self.lock().kill_all()
    }

    fn aborted(&self) -> bool {
        abort_requested(&self.placed.env)
    }
}
