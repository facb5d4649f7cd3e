//! Lane 0's private state, kept in the worker's scratch memory.

use crate::bridge::BridgeLedger;
use crate::layout::WorkerStats;
use crate::operation::Operation;
use crate::victim::VictimPicker;

/// [`LeaderState::initial_hint`] when no other range is known to hold initial tasks.
pub const NO_RANGE: u32 = u32::MAX;

/// The part of a worker's state that only lane 0 uses and that the hot path never touches. It lives
/// in the worker's scratch (shared memory on a GPU), not in the worker: kept in registers for the
/// whole loop, these values pushed a GPU worker's hot values out to local memory, which slowed
/// UTS (docs/results.md). Its size counts too: MEMSET's workers fit 23 per SM on an H200 with
/// it at 288 bytes, and 22 with 16 bytes more (docs/results.md; the test below holds it).
#[derive(Clone)]
pub struct LeaderState {
    /// The worker's counters (`tasks_run` is kept in the worker: the watchdog's progress reports
    /// read it).
    pub stats: WorkerStats,
    /// The victim picker: lane 0 draws every victim and hands it to the others.
    pub picker: VictimPicker,
    /// Voting-tree termination: the public queue's claim count at this worker's last vote.
    pub claims_at_last_vote: u64,
    /// Voting-tree termination: the last round this worker voted in.
    pub voted_round: u64,
    /// What the worker is doing, for the watchdog's progress reports.
    pub operation: Operation,
    /// The worker's loop iterations so far (the worker counts them in a wrapping `u32`).
    pub iterations_total: u64,
    /// The worker's iteration count at the last progress report.
    pub iterations_reported: u32,
    /// Heartbeats of long tasks (`TaskContext::heartbeat`), added to the reported iterations.
    pub heartbeats: u64,
    /// The home range of the worker's queue in the initial set (`Env::initial_range`), worked out
    /// once: it costs two 64-bit divisions, software routines on a GPU, which added to every
    /// MEMSET task's instructions when they were repeated at every claim.
    pub own_range: (u64, u64),
    /// A lower bound on the own range's claimed count: the end of this worker's last claim from
    /// it (`claim_initial` skips reading the count while that leaves a wide margin).
    pub own_claimed_at_least: u64,
    /// Once the own range is claimed: the other home range whose claim last found tasks, tried
    /// first at the next claim ([`NO_RANGE`] for none).
    pub initial_hint: u32,
    /// Idle backoff (`WorkerCore::idle_step`): the loop iteration of the last idle round.
    pub last_idle_iteration: u32,
    /// Idle backoff: idle rounds in a row, up to the last one.
    pub idle_streak: u32,
    /// The bridge worker's ledger (bridged runs: [`crate::bridge`]).
    pub bridge: BridgeLedger,
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_leader_state_keeps_memsets_workers_per_sm() {
        // 288 bytes: MEMSET's default scratch (local queue 128, 32 lanes, 1452 queues on an
        // H200) is 9008 bytes, which fits 23 blocks per SM; 304 (9024) fit 22.
        assert!(core::mem::size_of::<super::LeaderState>() <= 288);
        let scratch = crate::ScratchLayout::new(128, 64, 32, 1452).total;
        assert_eq!(scratch, 9008);
    }
}
