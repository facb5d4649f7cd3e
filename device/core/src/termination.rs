//! Termination detection with no CPU in the loop (thesis 4.6, 5.6).
//!
//! Both detectors are driven by lane 0 of each worker from the worker loop's idle path. The rule
//! that makes both correct (thesis 5.6.3): a worker reports "idle" only while no steal from its
//! public queue is still copying ([`crate::PublicQueue::quiescent`]), and, for the tree, only if
//! nobody stole from it since its previous vote.

use crate::config::MAX_DEVICES;
use crate::layout::{SharedState, Topology};
use crate::platform::{AtomicWord, Ordering, Scope};

/// The idle-worker counter (thesis 5.6.1). Terminates when every worker counts itself idle.
pub struct IdleCounter<'a, W> {
    pub counter: &'a W,
    pub workers: u64,
    pub scope: Scope,
}

impl<W: AtomicWord> IdleCounter<'_, W> {
    /// Counts the calling worker idle.
    ///
    /// AcqRel: the release half orders this worker's earlier reads of its completion counters
    /// (which showed every thief done) before the increment; the acquire half makes the increment
    /// see every earlier decrement of the counter's modification order.
    #[inline(always)]
    pub fn enter(&self) {
        self.counter.fetch_add(1, Ordering::AcqRel, self.scope);
    }

    /// Takes the calling worker out of the idle count; it must be done before the steal that gave
    /// it work is marked complete, so that the victim cannot count itself idle first.
    #[inline(always)]
    pub fn leave(&self) {
        self.counter.fetch_sub(1, Ordering::AcqRel, self.scope);
    }

    /// True once every worker is idle. Acquire pairs with the increments' release.
    #[inline(always)]
    pub fn all_idle(&self) -> bool {
        self.counter.load(Ordering::Acquire, self.scope) == self.workers
    }
}

/// A worker's standing in a vote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteOutcome {
    /// The root decided that no work is left.
    Terminate,
    /// Nothing to do now: the worker already voted this round, or its children have not yet.
    Waiting,
    /// The worker cast its vote for the current round.
    Voted,
}

/// Voting trees (thesis 5.6.2): a binary tree over the workers of each device, whose roots form a
/// global binary tree over the devices. Each node is a word `round << 1 | idle` with a single
/// writer, so the trees need no read-modify-write atomics at all: they are correct even in host
/// memory shared by agents whose atomics are not mutually atomic (docs/background.md section 3).
///
/// Word layout: `tree[w]` for worker `w`; `tree[workers + d]` is device root `d`'s vote in the
/// global tree; `tree[workers + devices + d]` is device `d`'s copy of the decision. The decision is
/// `round << 1 | terminate`, and round numbers in votes are `round + 1` so that zeroed memory
/// means "not voted".
pub struct VotingTree<'a, W> {
    pub tree: *const W,
    pub shared: &'a SharedState<W>,
    pub topology: &'a Topology,
    pub scope: Scope,
}

impl<W: AtomicWord> VotingTree<'_, W> {
    #[inline(always)]
    fn word(&self, index: usize) -> &W {
        // SAFETY: the host allocates `Env::tree_words` words and every index below is in range.
        unsafe { &*self.tree.add(index) }
    }

    #[inline(always)]
    fn device_decision(&self, d: u32) -> &W {
        self.word((self.topology.workers() + self.topology.devices + d) as usize)
    }

    #[inline(always)]
    fn global_vote(&self, d: u32) -> &W {
        self.word((self.topology.workers() + d) as usize)
    }

    /// One step of worker `worker`'s part in the vote. `idle` is its own vote (idle, quiescent and
    /// not stolen from since its last vote); `voted_round` is per-worker state, 0 initially.
    ///
    /// Acquire loads of children's votes pair with their release stores, so a parent's combined
    /// vote is ordered after everything its subtree did before voting.
    #[inline(always)]
    pub fn step(&self, worker: u32, idle: bool, voted_round: &mut u64) -> VoteOutcome {
        let t = self.topology;
        let d = t.device_of_worker(worker);
        let first = t.first_worker[d as usize];
        if d != 0 && worker == first {
            self.relay_decision(d);
        }
        let decision = self.device_decision(d).load(Ordering::Acquire, self.scope);
        if decision & 1 == 1 {
            return VoteOutcome::Terminate;
        }
        let round = (decision >> 1) + 1;
        if *voted_round == round {
            return VoteOutcome::Waiting;
        }
        let local = worker - first;
        let count = t.first_worker[d as usize + 1] - first;
        let mut all_idle = idle;
        for child in [2 * local + 1, 2 * local + 2] {
            if child < count {
                let v = self
                    .word((first + child) as usize)
                    .load(Ordering::Acquire, self.scope);
                if v >> 1 != round {
                    return VoteOutcome::Waiting;
                }
                all_idle &= v & 1 == 1;
            }
        }
        if local != 0 {
            self.word(worker as usize).store(
                round << 1 | all_idle as u64,
                Ordering::Release,
                self.scope,
            );
            *voted_round = round;
            return VoteOutcome::Voted;
        }
        // Device root: a node of the global tree over devices.
        for child in [2 * d + 1, 2 * d + 2] {
            if child < t.devices {
                let v = self.global_vote(child).load(Ordering::Acquire, self.scope);
                if v >> 1 != round {
                    return VoteOutcome::Waiting;
                }
                all_idle &= v & 1 == 1;
            }
        }
        *voted_round = round;
        if d != 0 {
            self.global_vote(d)
                .store(round << 1 | all_idle as u64, Ordering::Release, self.scope);
            return VoteOutcome::Voted;
        }
        // Global root: decide the round. `round` is the 1-based number of the round just decided.
        let next = if all_idle {
            (round - 1) << 1 | 1
        } else {
            round << 1
        };
        self.shared
            .decision
            .store(next, Ordering::Release, self.scope);
        self.device_decision(0)
            .store(next, Ordering::Release, self.scope);
        if all_idle {
            VoteOutcome::Terminate
        } else {
            VoteOutcome::Voted
        }
    }

    /// A device root copies the global decision into its device's word (it is that word's only
    /// writer, so the copy never goes back to an older decision).
    #[inline(always)]
    fn relay_decision(&self, d: u32) {
        let global = self.shared.decision.load(Ordering::Acquire, self.scope);
        let local = self.device_decision(d);
        if local.load(Ordering::Relaxed, self.scope) != global {
            local.store(global, Ordering::Release, self.scope);
        }
    }
}

const _: () = assert!(MAX_DEVICES <= 64);
