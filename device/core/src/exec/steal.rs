//! Stealing: picking victims, claiming half of a victim's public tasks with one fetch-add, and
//! copying them into the local queue (design section 3.2).

use super::WorkerCore;
use crate::config::OverflowMode;
use crate::error::RunError;
use crate::local_ring::ring_slot_after;
use crate::operation::Operation;
use crate::platform::{Platform, ProtocolStep};
use crate::public_queue::{Claim, PublicQueue};
use crate::spec::Spec;
use crate::word::QueueWord;

impl<'e, P: Platform, T: Copy, S: Spec> WorkerCore<'e, P, T, S> {
    #[inline(always)]
    pub(crate) fn damping_bit(&self, queue: u32) -> (*mut u64, u64) {
        let words = self.scratch_at::<u64>(self.layout.damping);
        // SAFETY: the damping bitmap has one bit per queue.
        (
            unsafe { words.add(queue as usize / 64) },
            1u64 << (queue % 64),
        )
    }

    #[inline(always)]
    pub(crate) fn clear_damping(&self) {
        let words = (self.env.topology.queues() as usize).div_ceil(64);
        let base = self.scratch_at::<u64>(self.layout.damping);
        let mut i = self.p.lane_id() as usize;
        while i < words {
            // SAFETY: i indexes the damping bitmap of this worker's scratch.
            unsafe { base.add(i).write(0) };
            i += self.p.lane_count() as usize;
        }
        self.p.barrier();
    }

    /// Lane 0's steal attempt on `victim`, with the configured overflow prevention: the claim as
    /// `[word, share offset, share count, victim]`, all 0 when nothing was claimed. Every word is
    /// defined on both outcomes: an `Option` whose payload is undefined when empty let the
    /// compiler merge the payload into registers carried around the whole worker loop on a GPU.
    #[inline(always)]
    pub(crate) fn claim_from(&mut self, victim: u32) -> [u64; 4] {
        // SAFETY: the picker returns valid queue indices.
        let header = unsafe { self.env.header(victim) };
        let queue = PublicQueue::new(header, self.env.config.public_capacity as u64, self.scope);
        let damping = S::overflow(&self.env.config) == OverflowMode::Damping;
        let (word, bit) = self.damping_bit(victim);
        // SAFETY: the bitmap word is in this worker's scratch and only lane 0 uses it.
        let marked_empty = damping && unsafe { word.read() } & bit != 0;
        if !damping || marked_empty {
            self.p.protocol_step(ProtocolStep::StealLoad);
            if !PublicQueue::<P::Word>::looks_stealable(queue.peek()) {
                return [0; 4];
            }
        }
        self.count(|s| s.steal_attempts += 1);
        let plan = match queue.claim(&self.p) {
            Claim::Claimed { word, share } => [word.0, share.offset, share.count, victim as u64],
            Claim::Empty | Claim::Locked => [0; 4],
        };
        if damping {
            // SAFETY: as above.
            unsafe {
                let w = word.read();
                word.write(if plan[2] != 0 { w & !bit } else { w | bit });
            }
        }
        plan
    }

    /// One steal attempt. The stolen tasks go to the local queue (up to half its capacity) and the
    /// rest onto the overflow stack as this worker's `surplus`, which the loop's next iteration
    /// publishes to its public queue, where others can steal them again.
    #[inline(always)]
    pub(crate) fn steal(&mut self) -> bool {
        self.set_operation(Operation::Steal);
        let mut plan = [0u64; 4];
        if self.p.is_leader() {
            let topology = &self.env.topology;
            if let Some(victim) = self.with_leader(|l| l.picker.pick(topology)) {
                plan = self.claim_from(victim);
                let found = plan[2] != 0;
                self.with_leader(|l| l.picker.record(found));
            }
        }
        let [word, offset, count, victim] = self.exchange(plan);
        if count == 0 {
            return false;
        }
        self.p.protocol_step(ProtocolStep::StealCopy);
        let capacity = self.env.config.public_capacity as u64;
        // The victim's ring and the share's first position, worked out once: the copies below
        // then hold two values instead of the claim's four and the topology lookup of every
        // copied word's queue.
        // SAFETY: victim is a valid queue index, and every ring has a slot 0.
        let ring = unsafe { self.env.slot(victim as u32, 0) } as *const T;
        // The word's tail is a ring slot and the share lies within one epoch (at most the
        // capacity), so the share's first slot is one wrap away (as `claimed_index` says).
        let start = ring_slot_after(QueueWord(word).tail(), offset, capacity);
        let src = move |j: u64| -> *const T {
            // SAFETY: the claimed share's slots belong to this thief until it completes the steal.
            unsafe { ring.add(ring_slot_after(start, j, capacity) as usize) }
        };
        // Up to half the local queue goes there; the rest onto the overflow stack, in the same
        // copy, so that the claim completes before this worker waits for anything: a thief
        // never waits while holding a claim, which is what keeps owners' waits for drained
        // epochs free of cycles.
        let to_local = count.min((self.local_capacity / 2).max(1));
        let rest = count - to_local;
        let (head, top) = (self.local_head as u64, self.spill_len as u64);
        let spilled = rest > 0 && top + rest <= self.spill_capacity();
        let copied = if spilled { count } else { to_local };
        self.copy_tasks(copied, src, |j| {
            if j < to_local {
                self.local_slot(head + j)
            } else {
                self.spill_slot(top + (j - to_local))
            }
        });
        self.p.barrier();
        self.local_head = self.local_head.wrapping_add(to_local as u32);
        if spilled {
            self.spill_len += rest as u32;
        }
        self.leave_idle();
        if self.p.is_leader() {
            // The claim, as exchanged, read again rather than kept in registers across the
            // copies (on a GPU they pushed worker state into local memory).
            let [word, _, count, victim] = self.exchanged::<4>();
            // SAFETY: victim is a valid queue index.
            let header = unsafe { self.env.header(victim as u32) };
            PublicQueue::new(header, capacity, self.scope).complete(
                &self.p,
                QueueWord(word),
                count,
            );
            self.count(|s| {
                s.steals += 1;
                s.tasks_stolen += count;
            });
        }
        if rest > 0 && !spilled {
            let (worker, capacity) = (self.id, self.spill_capacity() as u32);
            self.fail(RunError::SpillOverflow { worker, capacity });
        } else {
            // Published at the next iteration (`publish_surplus_or_release`), before any task
            // runs: the local queue is not empty, so the loop takes that branch first.
            self.surplus = rest as u32;
        }
        self.set_operation(Operation::RunTask);
        true
    }
}
