//! Stealing: picking victims, claiming half of a victim's public tasks with one fetch-add, and
//! copying them into the local queue (design section 3.2).

use super::WorkerCore;
use crate::config::OverflowMode;
use crate::context::TaskExecutor;
use crate::error::RunError;
use crate::local_ring::ring_slot_after;
use crate::operation::Operation;
use crate::platform::{Platform, ProtocolStep};
use crate::public_queue::{Claim, PublicQueue};
use crate::spec::Spec;
use crate::word::QueueWord;

impl<'e, P: Platform, T: Copy, S: Spec> WorkerCore<'e, P, T, S> {
    /// Lane 0: queue `queue`'s steal-damping bit, in the scratch for a queue of the own device,
    /// else bit `queue` of the worker's row of [`Env::remote_damping`](crate::Env::remote_damping).
    #[inline(always)]
    pub(crate) fn damping_bit(&self, queue: u32) -> (*mut u64, u64) {
        let d = self.with_leader(|l| l.picker.own_device()) as usize;
        let t = &self.env.topology;
        let (start, end) = (t.first_queue[d], t.first_queue[d + 1]);
        let (words, index) = if queue >= start && queue < end {
            (self.scratch_at::<u64>(self.layout.damping), queue - start)
        } else {
            (self.damping_row(), queue)
        };
        // SAFETY: the scratch has a bit for each queue of the own device, a row for each queue.
        (
            unsafe { words.add(index as usize / 64) },
            1u64 << (index % 64),
        )
    }

    /// The worker's row of [`Env::remote_damping`](crate::Env::remote_damping): a bit per queue,
    /// `Topology::remote_damping_words` words (none with one device, whose row is not used).
    #[inline(always)]
    pub(crate) fn damping_row(&self) -> *mut u64 {
        let row = self.env.topology.remote_damping_words();
        self.env.remote_damping.wrapping_add(self.id as usize * row)
    }

    /// Clears the worker's damping bits, in its scratch and in its row of other devices' bits.
    #[inline(always)]
    pub(crate) fn clear_damping(&self) {
        let t = &self.env.topology;
        let own = (t.queues_on(t.device_of_queue(self.queue) as usize) as usize).div_ceil(64);
        let scratch = self.scratch_at::<u64>(self.layout.damping);
        let (row, lanes) = (t.remote_damping_words(), self.p.lane_count() as usize);
        let mut i = self.p.lane_id() as usize;
        while i < own {
            // SAFETY: i indexes the damping bitmap of this worker's scratch.
            unsafe { scratch.add(i).write(0) };
            i += lanes;
        }
        let mut i = self.p.lane_id() as usize;
        while i < row {
            // SAFETY: i indexes this worker's row of the other devices' bits.
            unsafe { self.damping_row().add(i).write(0) };
            i += lanes;
        }
        // The barrier also orders the row's stores before lane 0 reads them (a block barrier
        // orders a block's global-memory accesses as well as its shared ones).
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
    pub(crate) fn steal<X: TaskExecutor<T>>(&mut self, _: &X) -> bool {
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
        self.copy_tasks_to_scratch(to_local, src, |j| self.local_slot(head + j));
        if spilled {
            self.copy_tasks_to_publish::<X>(
                rest,
                |j| src(to_local + j),
                |j| self.spill_slot(top + j),
            );
        }
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

#[cfg(test)]
mod tests {
    extern crate std;

    use crate::exec::{OnFull, WorkerCore};
    use crate::one_lane::OneLane;
    use crate::spec::FromConfig;
    use crate::{Env, HostWord, SchedConfig, ScratchLayout, Topology, DATA_AREAS};

    #[test]
    fn damping_bits_of_the_own_device_are_in_the_scratch_and_the_others_in_the_row() {
        // Two devices of 70 queues each: worker 75 (device 1) keeps 70 bits in its scratch and
        // those of device 0's in its row (3 words, a bit per queue) of the env's area.
        let t = Topology::split(&[70, 70], 1);
        let mut config = SchedConfig::new(t.workers());
        config.workers_per_queue = 1;
        let row = t.remote_damping_words();
        assert_eq!(row, 3);
        let mut rows = std::vec![u64::MAX; t.workers() as usize * row];
        let mut env = Env::<HostWord, [u64; 8]>::bare(
            config,
            t.workers(),
            core::ptr::null(),
            0,
            [0; DATA_AREAS],
        );
        env.topology = t;
        env.remote_damping = rows.as_mut_ptr();
        let layout = ScratchLayout::new(config.local_capacity, 64, 1, t.device_queues_max());
        let mut scratch = std::vec![u128::MAX; layout.total.div_ceil(16)];
        let p = OneLane::with_scratch(&mut scratch);
        // SAFETY: the env's topology, configuration and damping rows are sized for worker 75, and
        // the scratch for its layout; the worker touches nothing else here.
        let w = unsafe { WorkerCore::<_, _, FromConfig>::new(p, &env, 75, OnFull::Publish) };
        let damping = w.scratch_at::<u64>(w.layout.damping);
        let row_75 = rows.as_mut_ptr().wrapping_add(75 * row);
        // The own device's queues 70..140: bit q - 70 of the scratch.
        assert_eq!(w.damping_bit(70), (damping, 1));
        assert_eq!(w.damping_bit(139), (damping.wrapping_add(1), 1 << 5));
        // Device 0's queues 0..70: bit q of the row.
        assert_eq!(w.damping_bit(0), (row_75, 1));
        assert_eq!(w.damping_bit(69), (row_75.wrapping_add(1), 1 << 5));
        assert_eq!(w.damping_bit(64), (row_75.wrapping_add(1), 1));
        // Clearing zeroes the own scratch bits and the own row, no other worker's.
        w.clear_damping();
        // SAFETY: the scratch and the rows are live, and nothing else uses them.
        unsafe {
            assert_eq!((*damping, *damping.add(1)), (0, 0));
            assert_eq!((*row_75, *row_75.add(1), *row_75.add(2)), (0, 0, 0));
        }
        assert!(rows[..75 * row].iter().all(|&x| x == u64::MAX));
        assert!(rows[76 * row..].iter().all(|&x| x == u64::MAX));
    }
}
