//! The idle path: entering and leaving the idle count, the termination detectors (design
//! section 5) and the pause between idle rounds.

use super::WorkerCore;
use crate::config::{RunFlags, TerminationMode, IDLE_PAUSE_MAX_NS, IDLE_PAUSE_MIN_NS};
use crate::operation::Operation;
use crate::platform::{AtomicWord, Platform, ProtocolStep, Scope};
use crate::spec::Spec;
use crate::termination::{EndWatch, HierarchicalCounter, IdleCounter, VoteOutcome, VotingTree};

/// The counting termination detectors, as the idle path drives them.
pub(crate) enum IdleCount<'e, W> {
    Flat(IdleCounter<'e, W>),
    Hierarchical(HierarchicalCounter<'e, W>),
}

impl<W: AtomicWord> IdleCount<'_, W> {
    #[inline(always)]
    fn enter(&self) {
        match self {
            IdleCount::Flat(c) => c.enter(),
            IdleCount::Hierarchical(c) => c.enter(),
        }
    }

    #[inline(always)]
    fn leave(&self) {
        match self {
            IdleCount::Flat(c) => c.leave(),
            IdleCount::Hierarchical(c) => c.leave(),
        }
    }

    #[inline(always)]
    fn all_idle(&self) -> bool {
        match self {
            IdleCount::Flat(c) => c.all_idle(),
            IdleCount::Hierarchical(c) => c.all_idle(),
        }
    }

    #[inline(always)]
    pub(crate) fn any_idle(&self) -> bool {
        match self {
            IdleCount::Flat(c) => c.any_idle(),
            IdleCount::Hierarchical(c) => c.any_idle(),
        }
    }
}

impl<'e, P: Platform, T: Copy, S: Spec> WorkerCore<'e, P, T, S> {
    /// Leaves the idle count after gaining work, before any steal that gave the work completes.
    #[inline(always)]
    pub(crate) fn leave_idle(&mut self) {
        if self.idle {
            if self.p.is_leader() {
                if let Some(counter) = self.idle_count() {
                    self.p.protocol_step(ProtocolStep::IdleLeave);
                    counter.leave();
                }
            }
            self.idle = false;
            self.report_progress();
        }
    }

    #[inline(always)]
    pub(crate) fn idle_counter(&self) -> IdleCounter<'e, P::Word> {
        // SAFETY: the shared state outlives the run.
        let shared = unsafe { self.env.shared() };
        IdleCounter {
            counter: &shared.idle_workers,
            workers: self.env.config.workers as u64,
            scope: self.scope,
        }
    }

    /// The run's counting detector (the flat or the hierarchical idle counter), or `None` under
    /// voting trees.
    #[inline(always)]
    pub(crate) fn idle_count(&self) -> Option<IdleCount<'e, P::Word>> {
        match S::termination(&self.env.config) {
            TerminationMode::IdleCounter => Some(IdleCount::Flat(self.idle_counter())),
            TerminationMode::Hierarchical => {
                Some(IdleCount::Hierarchical(self.hierarchical_counter()))
            }
            TerminationMode::VotingTree => None,
        }
    }

    #[inline(always)]
    pub(crate) fn hierarchical_counter(&self) -> HierarchicalCounter<'e, P::Word> {
        let t = &self.env.topology;
        let d = t.device_of_worker(self.id) as usize;
        // SAFETY: the shared state outlives the run, and the host gives every device of the
        // topology its words (`Env::device_idle`), which outlive the run too.
        let (shared, words) = unsafe { (self.env.shared(), &*self.env.device_idle[d]) };
        // A bridged run's "all idle" is one side's and may not last: no relay there.
        let end = if S::bridged(&self.env.config) || S::follows_bridge(&self.env.config) {
            EndWatch::Global
        } else if self.id == t.first_worker[d] {
            EndWatch::Watch(&words.over)
        } else {
            EndWatch::Relayed(&words.over)
        };
        HierarchicalCounter {
            device: &words.count,
            device_workers: t.workers_on(d) as u64,
            // Only this device's workers update its words, and they live in their memory.
            device_scope: Scope::Device,
            global: &shared.idle_devices,
            devices: t.devices as u64,
            scope: self.scope,
            end,
        }
    }

    /// The idle path of the loop: nothing local, public, initial or stealable was found. Returns
    /// true when the run is over.
    #[inline(always)]
    pub(crate) fn idle_step(&mut self) -> bool {
        self.set_operation(Operation::Idle);
        self.count(|s| s.idle_rounds += 1);
        let ignore_in_flight = self.flags.contains(RunFlags::BREAK_IN_FLIGHT_RULE);
        // [terminate, abort, became idle, the pause after this round]
        let mut plan = [0u64; 4];
        if self.p.is_leader() {
            // Idle rounds in a row (no other loop iteration between them) double the pause.
            let iteration = self.iterations;
            let streak = self.with_leader(|l| {
                let streak = if iteration == l.last_idle_iteration.wrapping_add(1) {
                    l.idle_streak.saturating_add(1)
                } else {
                    0
                };
                l.last_idle_iteration = iteration;
                l.idle_streak = streak;
                streak
            });
            let abort = (self.abort_flag())();
            let mut became_idle = false;
            let terminate = match self.idle_count() {
                Some(counter) => {
                    // The own queue is read only by a worker that may enter the count: once
                    // counted, it stays idle until it gains work, and its rounds only poll the
                    // count. The check is a chain of dependent loads (the word, then the
                    // epochs' completion counters), which every idle round of every worker
                    // waited for before (much of a short run's idle path, ncu).
                    if !self.idle && self.own_queue().quiescent(ignore_in_flight).is_some() {
                        self.p.protocol_step(ProtocolStep::IdleEnter);
                        counter.enter();
                        became_idle = true;
                    }
                    let all = (self.idle || became_idle) && counter.all_idle();
                    if S::bridged(&self.env.config) {
                        self.bridge_decide(all)
                    } else if S::follows_bridge(&self.env.config) {
                        // The decision implies that this side stays all idle, so a follower
                        // looks for it only once its detector says so: until then it polls only
                        // what a plain run polls, in its own GPU's memory where it can.
                        all && self.bridge_decision()
                    } else {
                        all
                    }
                }
                None => {
                    // A voting worker reports its queue's state in every vote.
                    let quiescent = self.own_queue().quiescent(ignore_in_flight);
                    let targeted = match quiescent {
                        Some(claims) => {
                            let t = claims != self.with_leader(|l| l.claims_at_last_vote)
                                && !self.flags.contains(RunFlags::BREAK_TARGETED_RULE);
                            Some((claims, t))
                        }
                        None => None,
                    };
                    let vote_idle = matches!(targeted, Some((_, false)));
                    became_idle = !self.idle && quiescent.is_some();
                    self.p.protocol_step(ProtocolStep::Vote);
                    let tree = VotingTree {
                        tree: self.env.tree,
                        // SAFETY: the shared state outlives the run.
                        shared: unsafe { self.env.shared() },
                        topology: &self.env.topology,
                        scope: self.scope,
                    };
                    let id = self.id;
                    let outcome = self.with_leader(|l| {
                        let outcome = tree.step(id, vote_idle, &mut l.voted_round);
                        if outcome == VoteOutcome::Voted {
                            if let Some((claims, _)) = targeted {
                                l.claims_at_last_vote = claims;
                            }
                        }
                        outcome
                    });
                    outcome == VoteOutcome::Terminate
                }
            };
            plan = [
                terminate as u64,
                abort as u64,
                became_idle as u64,
                idle_pause_ns(streak) as u64,
            ];
        }
        let [terminate, abort, became_idle, pause] = self.exchange(plan);
        if became_idle != 0 {
            self.idle = true;
            self.report_progress();
        }
        if abort != 0 {
            self.aborted = true;
            return true;
        }
        if terminate == 0 {
            self.p.idle_pause(pause as u32);
        }
        terminate != 0
    }
}

/// The pause after the `streak`-th idle round in a row (0-based): [`IDLE_PAUSE_MIN_NS`] doubled
/// `streak` times, at most [`IDLE_PAUSE_MAX_NS`].
#[inline(always)]
pub(crate) fn idle_pause_ns(streak: u32) -> u32 {
    // The minimum shifted 16 times fits a u32 and is past the maximum.
    const {
        assert!(IDLE_PAUSE_MIN_NS <= u32::MAX >> 16 && IDLE_PAUSE_MIN_NS << 16 >= IDLE_PAUSE_MAX_NS)
    };
    (IDLE_PAUSE_MIN_NS << streak.min(16)).min(IDLE_PAUSE_MAX_NS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_idle_pause_doubles_up_to_its_maximum() {
        assert_eq!(idle_pause_ns(0), IDLE_PAUSE_MIN_NS);
        assert_eq!(idle_pause_ns(1), 2 * IDLE_PAUSE_MIN_NS);
        let mut last = 0;
        for streak in 0..100 {
            let pause = idle_pause_ns(streak);
            assert!(pause >= last && pause <= IDLE_PAUSE_MAX_NS);
            last = pause;
        }
        assert_eq!(last, IDLE_PAUSE_MAX_NS);
        assert_eq!(idle_pause_ns(u32::MAX), IDLE_PAUSE_MAX_NS);
    }
}
