//! The public-queue protocol (thesis 5.1, SWS): lockless steal-half claims on the packed word,
//! owner-side locking and epoch turnover, and the completion counters that say when a ring slot
//! may be reused.
//!
//! These are the operations of one lane (lane 0 of a worker): they touch only the queue header.
//! Copying the tasks themselves is done by all lanes of the worker, between a claim and its
//! completion, or between a lock and the reopen of the queue.
//!
//! Invariants (with `t = epoch_tail[e]` and `n` the tasks the epoch opened with):
//! 1. While epoch `e` is open, ring positions `t..t+n` hold published tasks; the k-th steal of
//!    the epoch owns positions `t + share(n, k)`, and the owner never writes them again until
//!    `completed[e] == claimed[e]`.
//! 2. Only a lock holder writes `head`, `epoch_tail`, `claimed` and `total_claimed`, and the word
//!    (other than the steal counter, which thieves add to).
//! 3. Epoch `e` is reopened only after every task claimed in its previous use was copied out.

use crate::layout::QueueHeader;
use crate::local_ring::ring_slot_after;
use crate::platform::{AtomicWord, Ordering, Platform, ProtocolStep, Scope};
use crate::share::{claimed_by, steal_share, StealShare};
use crate::word::{QueueWord, WordFlags, STEAL_INCREMENT};

/// What a steal attempt found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The owner held the lock; nothing was claimed.
    Locked,
    /// Every task of the epoch was already claimed.
    Empty,
    /// The thief owns `share` of the epoch described by `word` and must complete it.
    Claimed { word: QueueWord, share: StealShare },
}

/// What [`PublicQueue::lock`] found. A struct rather than an `Option`: the view is defined on
/// both outcomes, which keeps it out of the registers a GPU worker carries around its loop (an
/// `Option`'s payload is undefined when empty, and the compiler merged it into loop-carried
/// registers; docs/results.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Locked {
    /// The owner's view of the queue, meaningful only when `held`.
    pub view: OwnerView,
    /// The lock is held. False when `abort` ended the wait: the lock is not held and the view
    /// was read without it.
    pub held: bool,
}

impl Locked {
    /// The view, if the lock is held.
    #[inline(always)]
    pub fn held_view(self) -> Option<OwnerView> {
        self.held.then_some(self.view)
    }
}

/// What the owner learned when it took the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnerView {
    /// The word as it was when the lock was taken.
    pub word: QueueWord,
    /// Tasks thieves claimed in the epoch that is ending.
    pub claimed: u64,
    /// Ring position where the epoch opened.
    pub epoch_tail: u64,
    /// Ring position of the first unclaimed public task.
    pub first_unclaimed: u64,
    /// Ring position one past the newest public task.
    pub head: u64,
}

impl OwnerView {
    /// The view of a lock that found `word`, with the ending epoch opened at `epoch_tail` and
    /// the newest public task before `head`: the rest follows from the word.
    #[inline(always)]
    pub fn new(word: QueueWord, epoch_tail: u64, head: u64) -> Self {
        let claimed = claimed_by(word.initial(), word.steals());
        OwnerView {
            word,
            claimed,
            epoch_tail,
            first_unclaimed: epoch_tail + claimed,
            head,
        }
    }

    /// What determines the view, as words: `[word, epoch_tail, head]`. A worker hands these to
    /// its other lanes and reads them back after copying tasks, rather than holding the whole
    /// view in registers meanwhile ([`OwnerView::from_parts`]).
    #[inline(always)]
    pub fn parts(&self) -> [u64; 3] {
        [self.word.0, self.epoch_tail, self.head]
    }

    /// The view [`OwnerView::parts`] describes.
    #[inline(always)]
    pub fn from_parts([word, epoch_tail, head]: [u64; 3]) -> Self {
        OwnerView::new(QueueWord(word), epoch_tail, head)
    }

    /// Unclaimed public tasks.
    #[inline(always)]
    pub fn available(&self) -> u64 {
        self.head - self.first_unclaimed
    }
}

/// A public queue seen through its header.
pub struct PublicQueue<'a, W> {
    pub header: &'a QueueHeader<W>,
    pub capacity: u64,
    pub scope: Scope,
}

impl<'a, W: AtomicWord> PublicQueue<'a, W> {
    #[inline(always)]
    pub fn new(header: &'a QueueHeader<W>, capacity: u64, scope: Scope) -> Self {
        PublicQueue {
            header,
            capacity,
            scope,
        }
    }

    /// The current word. Relaxed: callers use it as a hint, or re-check it with an RMW.
    #[inline]
    pub fn peek(&self) -> QueueWord {
        QueueWord(self.header.word.load(Ordering::Relaxed, self.scope))
    }

    /// True if the word shows unclaimed tasks and no lock.
    #[inline]
    pub fn looks_stealable(word: QueueWord) -> bool {
        !word.locked() && claimed_by(word.initial(), word.steals()) < word.initial()
    }

    /// One steal attempt: a single fetch-add on the word claims the next steal-half share.
    ///
    /// Acquire: the owner published the tasks with a release store of the word that opened the
    /// epoch, so the thief's later reads of the slots see them.
    #[inline]
    pub fn claim<P: Platform>(&self, p: &P) -> Claim {
        p.protocol_step(ProtocolStep::StealClaim);
        let word = QueueWord(self.header.word.fetch_add(
            STEAL_INCREMENT,
            Ordering::Acquire,
            self.scope,
        ));
        // Worked out before the tests, so that it is defined on every outcome (see `lock`).
        let share = steal_share(word.initial(), word.steals());
        if word.locked() {
            Claim::Locked
        } else if share.count == 0 {
            Claim::Empty
        } else {
            Claim::Claimed { word, share }
        }
    }

    /// Ring index of the `j`-th task of a claimed share, as a thief's copy computes it: the
    /// word's tail is a ring slot and the share lies within one epoch (at most the capacity), so
    /// the share's first slot, and each of its tasks from there, is at most one wrap away.
    #[inline]
    pub fn claimed_index(&self, word: QueueWord, share: StealShare, j: u64) -> u64 {
        let first = ring_slot_after(word.tail(), share.offset, self.capacity);
        ring_slot_after(first, j, self.capacity)
    }

    /// Marks a claimed share as copied out.
    ///
    /// Release: the thief's reads of the slots happen-before the owner's acquire load of the
    /// counter, after which it may overwrite them.
    #[inline]
    pub fn complete<P: Platform>(&self, p: &P, word: QueueWord, count: u64) {
        p.protocol_step(ProtocolStep::StealComplete);
        self.header.completed[word.epoch() as usize].fetch_add(
            count,
            Ordering::Release,
            self.scope,
        );
    }

    /// Takes the owner lock (spinning while a co-owner holds it) and reports the ending epoch.
    ///
    /// Acquire on the RMW: a co-owner's bookkeeping and slot writes, published by the release
    /// store that unlocked the queue, are visible afterwards. The lock is not held if `abort`
    /// said so; the view is then read all the same (two relaxed loads of this queue's header),
    /// so that it is defined on both outcomes (see [`Locked`]).
    #[inline(always)]
    pub fn lock<P: Platform>(&self, p: &P, abort: &impl Fn() -> bool) -> Locked {
        p.protocol_step(ProtocolStep::Lock);
        let mut held = true;
        let word = loop {
            let old = QueueWord(self.header.word.fetch_or(
                WordFlags::LOCK.bits(),
                Ordering::Acquire,
                self.scope,
            ));
            if !old.locked() {
                break old;
            }
            if abort() {
                held = false;
                break old;
            }
            p.relax();
        };
        let epoch_tail =
            self.header.epoch_tail[word.epoch() as usize].load(Ordering::Relaxed, self.scope);
        let head = self.header.head.load(Ordering::Relaxed, self.scope);
        Locked {
            view: OwnerView::new(word, epoch_tail, head),
            held,
        }
    }

    /// Waits until every task claimed in the previous use of epoch index `epoch` is copied out.
    ///
    /// Acquire: pairs with the thieves' release adds in [`PublicQueue::complete`].
    #[inline(always)]
    pub fn wait_drained<P: Platform>(
        &self,
        p: &P,
        epoch: usize,
        abort: &impl Fn() -> bool,
    ) -> bool {
        let claimed = self.header.claimed[epoch].load(Ordering::Relaxed, self.scope);
        while self.header.completed[epoch].load(Ordering::Acquire, self.scope) != claimed {
            if abort() {
                return false;
            }
            p.relax();
        }
        true
    }

    /// Waits until every claim of the ending epoch (`view`) is copied out.
    #[inline(always)]
    pub fn wait_drained_current<P: Platform>(
        &self,
        p: &P,
        view: &OwnerView,
        abort: &impl Fn() -> bool,
    ) -> bool {
        while !self.ending_epoch_drained(view) {
            if abort() {
                return false;
            }
            p.relax();
        }
        true
    }

    /// True if every claim of the ending epoch (`view`) is already copied out.
    #[inline(always)]
    pub fn ending_epoch_drained(&self, view: &OwnerView) -> bool {
        self.header.completed[view.word.epoch() as usize].load(Ordering::Acquire, self.scope)
            == view.claimed
    }

    /// Free ring slots after the lock holder waited for the other epoch to drain: the ending epoch's
    /// claimed slots still count as used until its thieves finish.
    #[inline(always)]
    pub fn free_slots(&self, view: &OwnerView) -> u64 {
        let live_start = if self.ending_epoch_drained(view) {
            view.first_unclaimed
        } else {
            view.epoch_tail
        };
        self.capacity - (view.head - live_start)
    }

    /// Counts `tasks` that the lock holder took out of the queue for itself in
    /// `total_claimed`, so that co-owners sharing the queue see them as work taken since their
    /// last vote. The caller holds the lock.
    #[inline(always)]
    pub fn note_owner_take(&self, tasks: u64) {
        let total = self
            .header
            .total_claimed
            .load(Ordering::Relaxed, self.scope);
        self.header
            .total_claimed
            .store(total + tasks, Ordering::Relaxed, self.scope);
    }

    /// Opens the next epoch with the public tasks at positions `tail..head` and releases the lock.
    ///
    /// The caller holds the lock, has waited with [`PublicQueue::wait_drained`] for the next epoch
    /// index, and has finished writing the slots. Release on the final store publishes those slots
    /// and the bookkeeping to thieves and co-owners.
    #[inline(always)]
    pub fn reopen<P: Platform>(&self, p: &P, view: &OwnerView, tail: u64, head: u64) {
        let h = self.header;
        let ending = view.word.epoch() as usize;
        let next = 1 - ending;
        h.claimed[ending].store(view.claimed, Ordering::Relaxed, self.scope);
        let total = h.total_claimed.load(Ordering::Relaxed, self.scope);
        h.total_claimed
            .store(total + view.claimed, Ordering::Relaxed, self.scope);
        // No thief can be inside epoch `next`: its previous use drained, and the word still names
        // `ending` (locked). Resetting its counters is therefore race-free.
        h.completed[next].store(0, Ordering::Relaxed, self.scope);
        h.claimed[next].store(0, Ordering::Relaxed, self.scope);
        h.epoch_tail[next].store(tail, Ordering::Relaxed, self.scope);
        h.head.store(head, Ordering::Relaxed, self.scope);
        p.protocol_step(ProtocolStep::Unlock);
        let word = QueueWord::open(
            next as u32,
            head - tail,
            crate::local_ring::ring_index(tail, self.capacity),
        );
        h.word.store(word.0, Ordering::Release, self.scope);
    }

    /// If the queue is empty and no steal from it is still copying, the tasks ever claimed from it
    /// (for the voting tree's "targeted" test); otherwise `None`.
    ///
    /// `ignore_in_flight` skips the in-flight test (only to show that tests catch the race).
    #[inline(always)]
    pub fn quiescent(&self, ignore_in_flight: bool) -> Option<u64> {
        let h = self.header;
        let word = QueueWord(h.word.load(Ordering::Acquire, self.scope));
        if word.locked() {
            return None;
        }
        let claimed = claimed_by(word.initial(), word.steals());
        if claimed < word.initial() {
            return None;
        }
        let ending = word.epoch() as usize;
        let total = h.total_claimed.load(Ordering::Relaxed, self.scope) + claimed;
        if ignore_in_flight {
            return Some(total);
        }
        if h.completed[ending].load(Ordering::Acquire, self.scope) != claimed {
            return None;
        }
        let other = 1 - ending;
        let other_claimed = h.claimed[other].load(Ordering::Relaxed, self.scope);
        if h.completed[other].load(Ordering::Acquire, self.scope) != other_claimed {
            return None;
        }
        // A co-owner may have turned the epoch over while we read: only an unchanged word makes
        // the reads above one consistent snapshot.
        let again = QueueWord(h.word.load(Ordering::Acquire, self.scope));
        if again.0 & !(u64::MAX << crate::word::STEALS_SHIFT)
            != word.0 & !(u64::MAX << crate::word::STEALS_SHIFT)
        {
            return None;
        }
        Some(total)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::host_word::HostWord;
    use crate::one_lane::OneLane;

    fn never() -> bool {
        false
    }

    #[test]
    fn an_aborted_lock_wait_holds_nothing() {
        let header = QueueHeader::<HostWord>::new();
        let q = PublicQueue::new(&header, 4, Scope::Device);
        let p = OneLane::without_scratch();
        let first = q.lock(&p, &never);
        assert!(first.held);
        // A co-owner's wait, aborted while the first lock is held.
        let second = q.lock(&p, &|| true);
        assert!(!second.held);
        assert_eq!(second.held_view(), None);
        assert!(q.peek().locked());
        // The view was still read, from the same header: defined, as the GPU path needs.
        assert_eq!(second.view.head, first.view.head);
    }

    #[test]
    fn epochs_turn_over_and_claims_are_accounted() {
        let header = QueueHeader::<HostWord>::new();
        let q = PublicQueue::new(&header, 4, Scope::Device);
        let p = OneLane::without_scratch();
        // Publish three tasks.
        let v = q.lock(&p, &never).held_view().unwrap();
        assert!(q.wait_drained(&p, 1 - v.word.epoch() as usize, &never));
        q.reopen(&p, &v, v.first_unclaimed, v.head + 3);
        assert_eq!((q.peek().initial(), q.peek().epoch()), (3, 1));
        // A thief claims the first share (1 of 3), completes it.
        let Claim::Claimed { word, share } = q.claim(&p) else {
            panic!("claim failed")
        };
        assert_eq!((share.offset, share.count), (0, 1));
        q.complete(&p, word, share.count);
        // The owner takes the rest.
        let v = q.lock(&p, &never).held_view().unwrap();
        assert_eq!((v.claimed, v.available()), (1, 2));
        assert!(q.wait_drained(&p, 1 - v.word.epoch() as usize, &never));
        q.reopen(&p, &v, v.first_unclaimed, v.first_unclaimed);
        assert!(!q.peek().locked());
        assert_eq!(q.quiescent(false), Some(1));
        let v = q.lock(&p, &never).held_view().unwrap();
        assert_eq!(v.available(), 0);
        assert!(q.wait_drained(&p, 1 - v.word.epoch() as usize, &never));
        q.reopen(&p, &v, v.first_unclaimed, v.head);
        // Steals on an empty or locked queue fail.
        assert_eq!(q.claim(&p), Claim::Empty);
    }
}
