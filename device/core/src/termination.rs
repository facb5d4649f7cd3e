//! Termination detection with no CPU in the loop (thesis 4.6, 5.6).
//!
//! All three detectors are driven by lane 0 of each worker from the worker loop's idle path. The rule
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

    /// Whether some worker counts itself idle now: a hint for where spare work should go
    /// (Relaxed: a stale answer only sends a task elsewhere, and decides nothing).
    #[inline(always)]
    pub fn any_idle(&self) -> bool {
        self.counter.load(Ordering::Relaxed, self.scope) != 0
    }
}

/// Hierarchical idle counters (proposed in the thesis's evaluation, 6, and future work, 7): one counter per device, in that
/// device's own memory and updated at device scope by its workers only, plus one global word that
/// counts the devices whose workers are all idle. A worker touches the global word only when its
/// device's count crosses between all-idle and not, so the idle traffic of a multi-GPU run stays
/// on each GPU.
///
/// The rule that makes it correct, beside the in-flight rule of every detector: a worker that
/// leaves the idle count finishes **both** decrements, its device's and (if it took the device out
/// of all-idle) the global word's, before it completes the steal that gave it work. Then the
/// victim's later increment, and through the device counter every later all-idle crossing of the
/// victim's device, happens after the global decrement (docs/design.md, "Hierarchical
/// termination", has the proof; `tests/loom.rs` checks it and fails without the rule).
///
/// The global word may read one less than its settled value for a moment (a crossing down applied
/// before the crossing up it undoes; the arithmetic wraps), but never more: a device adds at most
/// one more time than it subtracted. So it equals the number of devices only once every worker is
/// idle, and from then on it stays there.
///
/// That last fact lets one worker per device watch the global word for the others
/// ([`EndWatch`]): the global word lives on one device, and every idle worker of an all-idle
/// device reading it over NVLink in each idle round loaded that device's memory for nothing.
pub struct HierarchicalCounter<'a, W> {
    /// The counter of the calling worker's device.
    pub device: &'a W,
    /// Workers of that device.
    pub device_workers: u64,
    /// The scope of the device counter: `Device` where it lives in the GPU's own memory and only
    /// that GPU's workers update it.
    pub device_scope: Scope,
    /// Devices whose counters show every worker idle.
    pub global: &'a W,
    pub devices: u64,
    /// The scope of the global word (the run's queue scope).
    pub scope: Scope,
    /// How the calling worker learns that every device is all idle.
    pub end: EndWatch<'a, W>,
}

/// How a worker of an all-idle device learns that every device is all idle.
#[derive(Clone, Copy)]
pub enum EndWatch<'a, W> {
    /// It reads the global word itself: where "all idle" may not last (one side of a bridged
    /// run, whose other side can still send tasks), so it cannot be relayed.
    Global,
    /// The device's watcher: it reads the global word, and relays a yes into the device's
    /// [`crate::DeviceIdle::over`].
    Watch(&'a W),
    /// It reads the device's [`crate::DeviceIdle::over`], in its own device's memory.
    Relayed(&'a W),
}

impl<W: AtomicWord> HierarchicalCounter<'_, W> {
    /// Counts the calling worker idle; the last idle worker of its device counts the device.
    ///
    /// AcqRel on the device counter: release orders this worker's reads of its completion
    /// counters, and its own earlier global decrement, before the increment; acquire makes the
    /// last increment see every earlier worker's, so the crossing worker's global increment comes
    /// after all of their global decrements (the chain the bound above rests on).
    #[inline(always)]
    pub fn enter(&self) {
        let before = self
            .device
            .fetch_add(1, Ordering::AcqRel, self.device_scope);
        if before + 1 == self.device_workers {
            self.global.fetch_add(1, Ordering::AcqRel, self.scope);
        }
    }

    /// Takes the calling worker out of the idle count (both levels). Like
    /// [`IdleCounter::leave`], it must return before the steal that gave the worker work is
    /// marked complete.
    #[inline(always)]
    pub fn leave(&self) {
        if self.leave_device() {
            self.leave_global();
        }
    }

    /// The device half of [`HierarchicalCounter::leave`]: true if the device was all idle, so
    /// that [`HierarchicalCounter::leave_global`] must follow. Apart only for the loom model that
    /// shows what breaks when the global half comes after the steal's completion.
    #[inline(always)]
    pub fn leave_device(&self) -> bool {
        self.device
            .fetch_sub(1, Ordering::AcqRel, self.device_scope)
            == self.device_workers
    }

    /// The global half of [`HierarchicalCounter::leave`].
    #[inline(always)]
    pub fn leave_global(&self) {
        self.global.fetch_sub(1, Ordering::AcqRel, self.scope);
    }

    /// True once every worker of every device is idle. The device counter is read first, in the
    /// device's own memory, so that only the workers of an all-idle device look further: its
    /// watcher at the global word, the others at the watcher's relay ([`EndWatch`]).
    ///
    /// Acquire on the counters pairs with the increments' release. The relay is a release store
    /// that the others load with acquire, so what the watcher saw happens before their end too.
    /// A relayed yes is as final as the global word's: every worker stays idle from then on.
    #[inline(always)]
    pub fn all_idle(&self) -> bool {
        if self.device.load(Ordering::Acquire, self.device_scope) != self.device_workers {
            return false;
        }
        match self.end {
            EndWatch::Global => self.every_device_idle(),
            EndWatch::Watch(over) => {
                let all = self.every_device_idle();
                if all {
                    self.relay_end(over);
                }
                all
            }
            EndWatch::Relayed(over) => over.load(Ordering::Acquire, self.device_scope) != 0,
        }
    }

    /// The global word counts every device all idle (acquire, as in [`Self::all_idle`]).
    #[inline(always)]
    fn every_device_idle(&self) -> bool {
        self.global.load(Ordering::Acquire, self.scope) == self.devices
    }

    /// The watcher's relay into the device's [`crate::DeviceIdle::over`]. Apart only for the loom
    /// model whose twin relays on the wrong condition.
    #[inline(always)]
    pub fn relay_end(&self, over: &W) {
        over.store(1, Ordering::Release, self.device_scope);
    }

    /// Whether some worker of this device counts itself idle now, or some device is all idle: a
    /// hint, as [`IdleCounter::any_idle`] (the global word may read one below its settled value
    /// for a moment, wrapped below zero: only a count of devices counts).
    #[inline(always)]
    pub fn any_idle(&self) -> bool {
        self.device.load(Ordering::Relaxed, self.device_scope) != 0
            || (1..=self.devices).contains(&self.global.load(Ordering::Relaxed, self.scope))
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
        // Children by a constant count, not an array (whose iterator lived in local memory on a
        // GPU, written on every vote) nor a range of run-time bounds (whose `Option` items held
        // registers around the worker loop): the compiler unrolls the two rounds.
        for k in 1..=2 {
            let child = 2 * local + k;
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
        for k in 1..=2 {
            let child = 2 * d + k;
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
