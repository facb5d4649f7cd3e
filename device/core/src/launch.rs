//! The handshake of a run whose workers live in several processes (PEs): a launcher lays the run
//! out in memory every PE maps, starts the PEs, and releases them together once all are ready;
//! each PE then runs its workers and publishes how it ended. The run's own protocols (queues,
//! termination) are the single-process ones, with each PE a device of the topology; this module
//! is only the start and the end.
//!
//! Invariants (`docs/design.md`, "Several processes"):
//! 1. No PE runs a worker before every PE is ready ([`LaunchGate::wait`] returns
//!    [`Go::Run`] only after [`LaunchGate::open`], which the launcher calls only once
//!    [`LaunchGate::all_ready`]); so no PE's worker can end the run while another PE is still
//!    mapping the memory its queues live in.
//! 2. The launcher reads a PE's results (statistics, data areas, its record) only after it saw the
//!    PE's [`PeState::finish`]: a release store that every write of the PE's workers precedes,
//!    acquired by [`PeState::is_finished`].

use crate::platform::{AtomicWord, Ordering, Scope};

/// Every atomic of the handshake is system-scope: PEs are processes, possibly on other devices.
const SCOPE: Scope = Scope::System;

/// The launcher's gate, shared by every PE.
#[repr(C)]
pub struct LaunchGate<W> {
    /// PEs that are ready to run.
    pub ready: W,
    /// [`GATE_WAIT`], then [`GATE_RUN`] or [`GATE_CANCEL`], written once by the launcher.
    pub go: W,
}

/// `LaunchGate::go` before the launcher decided.
pub const GATE_WAIT: u64 = 0;
/// `LaunchGate::go`: every PE is ready; run.
pub const GATE_RUN: u64 = 1;
/// `LaunchGate::go`: the launch failed; every PE leaves without running.
pub const GATE_CANCEL: u64 = 2;

/// What a PE waiting at the gate learns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Go {
    /// Run the workers.
    Run,
    /// The launcher cancelled the run.
    Cancel,
    /// The caller's patience ran out before the launcher decided.
    GaveUp,
}

impl<W: AtomicWord> LaunchGate<W> {
    /// PE side: counts this PE ready. Release: the PE's set-up (its record's state) is published
    /// with it; the launcher's acquire of the final count synchronizes with every arrival, since
    /// each increment continues the release sequence of the ones before.
    #[inline]
    pub fn arrive(&self) {
        self.ready.fetch_add(1, Ordering::Release, SCOPE);
    }

    /// PE side: waits for the launcher's decision, calling `wait` between looks (a sleep, a
    /// yield); `wait` returns false to give up.
    #[inline]
    pub fn wait(&self, mut wait: impl FnMut() -> bool) -> Go {
        loop {
            // Acquire: pairs with the launcher's release in `open`: every PE's arrival (and so
            // its set-up) happened before this PE runs.
            match self.go.load(Ordering::Acquire, SCOPE) {
                GATE_RUN => return Go::Run,
                GATE_CANCEL => return Go::Cancel,
                _ if !wait() => return Go::GaveUp,
                _ => {}
            }
        }
    }

    /// Launcher side: whether all `pes` PEs arrived. Acquire: pairs with their arrivals.
    #[inline]
    pub fn all_ready(&self, pes: u64) -> bool {
        self.ready.load(Ordering::Acquire, SCOPE) >= pes
    }

    /// Launcher side: releases every PE (call once [`Self::all_ready`]). Release: passes on
    /// the arrivals the launcher acquired, so each PE runs after every PE is set up.
    #[inline]
    pub fn open(&self) {
        self.go.store(GATE_RUN, Ordering::Release, SCOPE);
    }

    /// Launcher side: sends every PE away without running (a PE failed to start). Relaxed:
    /// nothing is published with it.
    #[inline]
    pub fn cancel(&self) {
        self.go.store(GATE_CANCEL, Ordering::Relaxed, SCOPE);
    }

    /// Launcher side: whether it opened the gate. Relaxed: the launcher reads its own store.
    #[inline]
    pub fn opened(&self) -> bool {
        self.go.load(Ordering::Relaxed, SCOPE) == GATE_RUN
    }

    /// PE side: whether the launcher cancelled the run (a PE waiting for something else before
    /// the gate stops waiting). Relaxed: a hint; [`Self::wait`] acquires the decision.
    #[inline]
    pub fn cancelled(&self) -> bool {
        self.go.load(Ordering::Relaxed, SCOPE) == GATE_CANCEL
    }
}

/// One PE's state as the launcher sees it: 0, then [`PE_ATTACHED`], then [`PE_DONE`] or
/// [`PE_FAILED`].
#[repr(C)]
pub struct PeState<W>(pub W);

/// `PeState`: the PE mapped the shared memory and counts itself ready.
pub const PE_ATTACHED: u64 = 1;
/// `PeState`: every worker of the PE has left its loop; its results are final.
pub const PE_DONE: u64 = 2;
/// `PeState`: the PE could not join the run, or its part of the run failed (a GPU PE's kernel
/// fault); its record says why.
pub const PE_FAILED: u64 = 3;

impl<W: AtomicWord> PeState<W> {
    /// PE side: mapped and set up (before [`LaunchGate::arrive`], which publishes it). Relaxed:
    /// the arrival's release orders it.
    #[inline]
    pub fn attach(&self) {
        self.0.store(PE_ATTACHED, Ordering::Relaxed, SCOPE);
    }

    /// PE side: every worker has left its loop. Release: every write of this PE's workers and
    /// of its record precedes it, for the launcher's acquire in [`Self::load`].
    #[inline]
    pub fn finish(&self) {
        self.0.store(PE_DONE, Ordering::Release, SCOPE);
    }

    /// PE side: the PE cannot take part, or its part failed. Release: publishes the reason
    /// written before it.
    #[inline]
    pub fn fail(&self) {
        self.0.store(PE_FAILED, Ordering::Release, SCOPE);
    }

    /// Launcher side: the state, acquired (after [`PE_DONE`] or [`PE_FAILED`], everything the
    /// PE wrote before is visible).
    #[inline]
    pub fn load(&self) -> u64 {
        self.0.load(Ordering::Acquire, SCOPE)
    }

    /// Launcher side: whether the PE finished, its results now readable.
    #[inline]
    pub fn is_finished(&self) -> bool {
        self.load() == PE_DONE
    }

    /// TESTING ONLY (the loom twin): [`Self::finish`] without its release, which must let the
    /// launcher read a PE's results before they are written.
    #[cfg(loom)]
    pub fn finish_without_release(&self) {
        self.0.store(PE_DONE, Ordering::Relaxed, SCOPE);
    }
}
