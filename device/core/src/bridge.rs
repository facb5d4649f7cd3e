//! Work stealing and termination between two *sides* whose atomics are not atomic with each
//! other: the GPUs of a run and the CPU workers beside them. On the GPUs here,
//! `HOST_NATIVE_ATOMIC_SUPPORTED = 0`: a read-modify-write on mapped host memory from a GPU is
//! not atomic against the CPU's (docs/background.md section 3 measured lost updates), while plain
//! loads and stores are coherent. So no word here is updated by read-modify-write from two sides:
//! every word of [`BridgeState`] has exactly one writer, and the two sides meet only through it.
//!
//! Each side runs the ordinary protocols among its own workers with its own atomics (its public
//! queues and its idle counter live in its own memory). One worker per side, its *bridge worker*,
//! also moves work across:
//!
//! - **Mailboxes.** One per direction. The receiving bridge asks (`requests += 1`, its word); the
//!   sending bridge answers (`reply_len`, then `replies = requests`, its words) after copying up
//!   to [`BRIDGE_CAPACITY`] of its local tasks into the mailbox's slots (side 0, the GPUs, its
//!   newest: the smallest subtrees; side 1 its oldest). At most one
//!   request per direction is open, and the receiver copies a reply out before it asks again, so
//!   the slots are never written while being read.
//! - **Termination.** Side 0 decides. Side 1's bridge, whenever its side's idle counter shows
//!   every worker idle, writes an *idle report*: how many non-empty replies it consumed and how
//!   many it sent. Side 0's bridge decides "terminate" when its own side is all idle and the
//!   report matches its own ledger both ways (everything side 0 sent was consumed by an all-idle
//!   side 1, and everything side 1 sent was consumed by side 0). It writes
//!   [`BridgeState::decision`]; each bridge copies that into its side's
//!   [`crate::SharedState::decision`], which its workers poll in their own memory.
//!
//! docs/design.md ("Two sides without shared atomics") argues why this is exact, and
//! `tests/loom.rs` checks it with twins that must fail.

use crate::exec::WorkerCore;
use crate::operation::Operation;
use crate::platform::{AtomicWord, Ordering, Platform, Scope};
use crate::spec::Spec;

/// Tasks one reply carries at most (the mailbox's slots per direction).
pub const BRIDGE_CAPACITY: u64 = 16;

/// Busy loop iterations between two looks of a bridge worker at its peer's requests. A look is
/// one load of mapped host memory, about a microsecond from a GPU, paid by the bridge worker
/// alone; an iteration runs one task, and with long tasks a worker runs few (SKEW's 65,536
/// tasks are about 31 per GPU worker), so the interval is short. Every other worker only tests
/// its id against the bridge worker's on these iterations.
pub const BRIDGE_INTERVAL: u64 = 8;

/// Idle rounds a bridge worker waits after an empty reply before it asks again.
pub const BRIDGE_RETRY_ROUNDS: u32 = 32;

/// One direction of transfer, into the side that owns `requests`.
#[repr(C)]
pub struct Mailbox<W> {
    /// Requests the receiving side made (written by the receiver's bridge only).
    pub requests: W,
    /// The last request the sending side answered (written by the sender's bridge only).
    pub replies: W,
    /// Tasks in that answer, 0..=[`BRIDGE_CAPACITY`] (written by the sender's bridge only,
    /// before `replies`).
    pub reply_len: W,
    _pad: [W; 5],
}

/// What both sides share: all-zero bytes are the initial state.
#[repr(C)]
pub struct BridgeState<W> {
    /// `mailbox[s]` carries tasks into side `s`.
    pub mailbox: [Mailbox<W>; 2],
    /// Side 1's idle report ([`IdleReport::pack`]; written by side 1's bridge only).
    pub report: W,
    /// 1 once side 0's bridge decided that no work is left anywhere (written by it only).
    pub decision: W,
    _pad: [W; 6],
}

impl<W: AtomicWord> BridgeState<W> {
    /// The initial state (all zero).
    pub fn new() -> Self {
        let z = || W::new(0);
        let mailbox = || Mailbox {
            requests: z(),
            replies: z(),
            reply_len: z(),
            _pad: [z(), z(), z(), z(), z()],
        };
        BridgeState {
            mailbox: [mailbox(), mailbox()],
            report: z(),
            decision: z(),
            _pad: [z(), z(), z(), z(), z(), z()],
        }
    }
}

impl<W: AtomicWord> Default for BridgeState<W> {
    fn default() -> Self {
        Self::new()
    }
}

/// Side 1's report of an all-idle moment: the non-empty replies it had consumed from side 0 and
/// sent to it. Counts are kept modulo 2^31; at most one reply per direction is ever open, so
/// equality modulo 2^31 is equality.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleReport {
    pub received: u64,
    pub sent: u64,
}

impl IdleReport {
    const MASK: u64 = (1 << 31) - 1;
    const VALID: u64 = 1 << 63;

    /// The report as one word (so that it is read whole, with no torn halves).
    pub fn pack(self) -> u64 {
        Self::VALID | (self.received & Self::MASK) << 31 | (self.sent & Self::MASK)
    }

    /// The report in `word`, or `None` if side 1 has not reported yet.
    pub fn unpack(word: u64) -> Option<IdleReport> {
        (word & Self::VALID != 0).then_some(IdleReport {
            received: word >> 31 & Self::MASK,
            sent: word & Self::MASK,
        })
    }

    /// True if this report and side 0's ledger agree: every transfer either way was consumed.
    pub fn matches(self, side0: &BridgeLedger) -> bool {
        self.received == side0.sent & Self::MASK && self.sent == side0.received & Self::MASK
    }
}

/// A bridge worker's own bookkeeping (lane 0's, kept across loop iterations).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BridgeLedger {
    /// Requests this side made (the value of its inbox's `requests`).
    pub requested: u64,
    /// The last of its own requests whose reply this side took.
    pub taken: u64,
    /// The last request of the peer this side answered.
    pub answered: u64,
    /// Non-empty replies this side sent.
    pub sent: u64,
    /// Non-empty replies this side consumed.
    pub received: u64,
    /// Idle rounds left before the next request (after an empty reply).
    pub retry_wait: u32,
    /// Side 1: the last report written, packed (0: none).
    pub reported: u64,
}

/// One side's end of the bridge.
pub struct BridgeEnd<'a, W> {
    pub state: &'a BridgeState<W>,
    /// 0 (decides) or 1.
    pub side: usize,
    /// The scope of the bridge's accesses (`System`: the peer is another agent).
    pub scope: Scope,
}

impl<W: AtomicWord> BridgeEnd<'_, W> {
    #[inline(always)]
    fn inbox(&self) -> &Mailbox<W> {
        &self.state.mailbox[self.side]
    }

    #[inline(always)]
    fn outbox(&self) -> &Mailbox<W> {
        &self.state.mailbox[1 - self.side]
    }

    /// Sender: the peer's open request, if it made one since this side last answered.
    ///
    /// Acquire pairs with the peer's release in [`BridgeEnd::ask`]: the peer's copy out of the
    /// slots (its previous reply) happens before this side writes them again.
    #[inline(always)]
    pub fn open_request(&self, ledger: &BridgeLedger) -> Option<u64> {
        let requests = self.outbox().requests.load(Ordering::Acquire, self.scope);
        (requests != ledger.answered).then_some(requests)
    }

    /// Sender: answers `request` with `len` tasks, already copied into the outbox's slots.
    ///
    /// Release orders those copies (and `reply_len`) before the answer, for the peer's acquire
    /// in [`BridgeEnd::reply`].
    #[inline(always)]
    pub fn answer(&self, ledger: &mut BridgeLedger, request: u64, len: u64) {
        let out = self.outbox();
        out.reply_len.store(len, Ordering::Relaxed, self.scope);
        out.replies.store(request, Ordering::Release, self.scope);
        ledger.answered = request;
        if len > 0 {
            ledger.sent += 1;
        }
    }

    /// Receiver: true while this side's last request is unanswered.
    #[inline(always)]
    pub fn waiting(&self, ledger: &BridgeLedger) -> bool {
        ledger.requested != self.inbox().replies.load(Ordering::Relaxed, self.scope)
    }

    /// Receiver: asks the peer for work (the previous reply is consumed: see the module docs).
    ///
    /// Release orders this side's copies out of the inbox's slots before the request.
    #[inline(always)]
    pub fn ask(&self, ledger: &mut BridgeLedger) {
        ledger.requested += 1;
        self.inbox()
            .requests
            .store(ledger.requested, Ordering::Release, self.scope);
    }

    /// Receiver: the length of the answer to this side's last request, once it came.
    ///
    /// Acquire pairs with the sender's release in [`BridgeEnd::answer`]: the slots and the
    /// length are written before they are read.
    #[inline(always)]
    pub fn reply(&self, ledger: &BridgeLedger) -> Option<u64> {
        let inbox = self.inbox();
        if ledger.requested == 0
            || inbox.replies.load(Ordering::Acquire, self.scope) != ledger.requested
        {
            return None;
        }
        Some(inbox.reply_len.load(Ordering::Relaxed, self.scope))
    }

    /// Side 1: reports that every worker of its side is idle, with its ledger's counts. Only
    /// stores when the counts changed since the last report (the report stays true until then:
    /// an all-idle side gains work only by consuming a reply, which changes them).
    ///
    /// Release orders the side's idle counter reading (and the consumption of every counted
    /// reply) before the report, for side 0's acquire in [`BridgeEnd::try_decide`].
    #[inline(always)]
    pub fn report_idle(&self, ledger: &mut BridgeLedger) {
        let word = IdleReport {
            received: ledger.received,
            sent: ledger.sent,
        }
        .pack();
        if word != ledger.reported {
            self.state.report.store(word, Ordering::Release, self.scope);
            ledger.reported = word;
        }
    }

    /// Side 0, with every worker of its own side idle: decides "terminate" if side 1's report
    /// matches the ledger both ways. Returns true if it decided.
    #[inline(always)]
    pub fn try_decide(&self, ledger: &BridgeLedger) -> bool {
        let report = self.state.report.load(Ordering::Acquire, self.scope);
        match IdleReport::unpack(report) {
            Some(r) if r.matches(ledger) => {
                self.state.decision.store(1, Ordering::Release, self.scope);
                true
            }
            _ => false,
        }
    }

    /// True once side 0 decided. Acquire pairs with the decision's release.
    #[inline(always)]
    pub fn decided(&self) -> bool {
        self.state.decision.load(Ordering::Acquire, self.scope) != 0
    }
}

/// The bridge worker's steps (bridged runs only; `Worker::start` gives them to one worker per
/// side). `serve`, `receive` and `decide` are functions of their own (`inline(never)`): inlined,
/// they sat in the same GPU function as every follower's loop and raised its spills, and the
/// GPU side of a bridged run ran slower than the GPU alone (docs/results.md).
impl<'e, P: Platform, T: Copy, S: Spec> WorkerCore<'e, P, T, S> {
    #[inline(always)]
    pub(crate) fn bridge_end(&self) -> BridgeEnd<'e, P::Word> {
        BridgeEnd {
            // SAFETY: in a bridged run the host points `Env::bridge` at live bridge state for
            // the whole run.
            state: unsafe { &*self.env.bridge },
            side: self.env.bridge_side as usize,
            // The peer is another agent (the CPU, or the GPUs).
            scope: Scope::System,
        }
    }

    /// The bridge worker answers the other side's open request, if any, with up to
    /// [`BRIDGE_CAPACITY`] of its local tasks (none when it holds fewer than two): on side 0 (the
    /// GPUs, the fast side) its newest, which in depth-first order root the smallest subtrees,
    /// so that the slow side never holds the run's tail; on side 1 its oldest, the largest.
    /// Side 0 gives nothing while one of its own workers is idle: a task the GPUs can run
    /// now would only run slower on the CPU, and a latency-bound tree waits for it.
    #[inline(never)]
    pub(crate) fn bridge_serve(&mut self) {
        let mut plan = [0u64; 3];
        if self.p.is_leader() {
            let end = self.bridge_end();
            if let Some(request) = self.with_leader(|l| end.open_request(&l.bridge)) {
                let spare = end.side != 0 || !self.idle_count().is_some_and(|c| c.any_idle());
                let give = if spare && self.local_len() >= 2 {
                    (self.local_len() / 2).min(BRIDGE_CAPACITY)
                } else {
                    0
                };
                plan = [1, request, give];
            }
        }
        let [open, request, give] = self.exchange(plan);
        if open == 0 {
            return;
        }
        let out = self.env.bridge_slots[1 - self.env.bridge_side as usize];
        let newest = self.env.bridge_side == 0;
        let from = if newest {
            self.local_head.wrapping_sub(give as u32) as u64
        } else {
            self.local_tail as u64
        };
        let ring = self.local_ring();
        // SAFETY: the peer's inbox holds BRIDGE_CAPACITY slots, free until this answer (the peer
        // copied the previous reply out before it asked again); local positions
        // from..from+give hold this worker's tasks.
        self.copy_tasks(
            give,
            |j| ring.slot(from + j) as *const T,
            |j| unsafe { out.add(j as usize) },
        );
        self.p.barrier();
        if newest {
            self.local_head = self.local_head.wrapping_sub(give as u32);
        } else {
            self.local_tail = self.local_tail.wrapping_add(give as u32);
        }
        if self.p.is_leader() {
            let end = self.bridge_end();
            self.with_leader(|l| {
                end.answer(&mut l.bridge, request, give);
                l.stats.tasks_bridged_out += give;
            });
        }
    }

    /// The bridge worker's turn on its idle path: answers an open request (with nothing), takes
    /// the tasks of a reply into its local queue, or asks the other side for work. Returns true
    /// if it took tasks.
    #[inline(never)]
    pub(crate) fn bridge_receive(&mut self) -> bool {
        self.bridge_serve();
        let mut plan = [0u64; 1];
        if self.p.is_leader() {
            let end = self.bridge_end();
            plan[0] = self.with_leader(|l| {
                let ledger = &mut l.bridge;
                if end.waiting(ledger) {
                    return 0;
                }
                if ledger.taken != ledger.requested {
                    // The answer to the last request came: take it (an empty one makes the
                    // next request wait a while).
                    let len = end.reply(ledger).unwrap_or(0);
                    ledger.taken = ledger.requested;
                    if len == 0 {
                        ledger.retry_wait = BRIDGE_RETRY_ROUNDS;
                    }
                    return len.min(BRIDGE_CAPACITY);
                }
                if ledger.retry_wait > 0 {
                    ledger.retry_wait -= 1;
                } else {
                    end.ask(ledger);
                }
                0
            });
        }
        let [len] = self.exchange(plan);
        if len == 0 {
            return false;
        }
        let inbox = self.env.bridge_slots[self.env.bridge_side as usize];
        let head = self.local_head as u64;
        // SAFETY: the reply's `len` slots were written by the peer before its answer, which lane
        // 0 read with acquire; the local queue is empty (idle path) and holds at least
        // BRIDGE_CAPACITY tasks (the host checks the local capacity of bridged runs).
        self.copy_tasks(
            len,
            |j| unsafe { inbox.add(j as usize) as *const T },
            |j| self.local_slot(head + j),
        );
        self.p.barrier();
        self.local_head = self.local_head.wrapping_add(len as u32);
        self.leave_idle();
        if self.p.is_leader() {
            self.with_leader(|l| {
                l.bridge.received += 1;
                l.stats.tasks_bridged_in += len;
            });
        }
        self.set_operation(Operation::RunTask);
        true
    }

    /// Termination of a bridged run, by its bridge worker (lane 0): `side_all_idle` is this
    /// side's detector's answer. Side 0's bridge decides, side 1's reports; both copy the decision
    /// into their side's `SharedState::decision`, which the side's other workers poll in their
    /// own memory ([`Self::bridge_decision`]).
    #[inline(never)]
    pub(crate) fn bridge_decide(&mut self, side_all_idle: bool) -> bool {
        // SAFETY: the shared state outlives the run.
        let shared = unsafe { self.env.shared() };
        let end = self.bridge_end();
        let decided = self.with_leader(|l| {
            if side_all_idle && !end.waiting(&l.bridge) {
                if end.side == 0 {
                    return end.try_decide(&l.bridge) || end.decided();
                }
                end.report_idle(&mut l.bridge);
            }
            end.decided()
        });
        if decided {
            // Release: orders nothing this side's workers read; the decision itself is all they
            // need (the bridge state's release carried the ledger).
            shared.decision.store(1, Ordering::Release, self.scope);
        }
        decided
    }

    /// Whether this side's bridge worker has decided that a bridged run is over (lane 0).
    #[inline(always)]
    pub(crate) fn bridge_decision(&self) -> bool {
        // SAFETY: the shared state outlives the run.
        let shared = unsafe { self.env.shared() };
        // Acquire pairs with the bridge worker's store in `bridge_decide`.
        shared.decision.load(Ordering::Acquire, self.scope) != 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::HostWord;

    #[test]
    fn reports_pack_and_compare_modulo_2_31() {
        let r = IdleReport {
            received: 5,
            sent: (1 << 31) + 3,
        };
        let back = IdleReport::unpack(r.pack()).unwrap();
        assert_eq!(
            back,
            IdleReport {
                received: 5,
                sent: 3
            }
        );
        assert_eq!(IdleReport::unpack(0), None);
        let ledger = BridgeLedger {
            sent: 5,
            received: 3,
            ..BridgeLedger::default()
        };
        assert!(back.matches(&ledger));
        assert!(!back.matches(&BridgeLedger { sent: 6, ..ledger }));
        assert!(!back.matches(&BridgeLedger {
            received: 4,
            ..ledger
        }));
    }

    #[test]
    fn a_request_is_answered_once_and_read_once() {
        let state = BridgeState::<HostWord>::new();
        let cpu = BridgeEnd {
            state: &state,
            side: 1,
            scope: Scope::System,
        };
        let gpu = BridgeEnd {
            state: &state,
            side: 0,
            scope: Scope::System,
        };
        let (mut c, mut g) = (BridgeLedger::default(), BridgeLedger::default());
        assert_eq!(gpu.open_request(&g), None);
        assert_eq!(cpu.reply(&c), None);
        cpu.ask(&mut c);
        assert!(cpu.waiting(&c));
        let request = gpu.open_request(&g).unwrap();
        gpu.answer(&mut g, request, 7);
        assert_eq!(gpu.open_request(&g), None);
        assert!(!cpu.waiting(&c));
        assert_eq!(cpu.reply(&c), Some(7));
        c.received += 1;
        // Side 1 reports; side 0 decides only when the counts agree.
        cpu.report_idle(&mut c);
        assert!(gpu.try_decide(&g));
        assert!(cpu.decided());
    }
}
