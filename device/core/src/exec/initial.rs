//! Initial tasks: claiming chunks of this worker's home range, and of other ranges once it is
//! claimed, and loading them into the local queue.

use super::{IndexedClaim, WorkerCore};
use crate::config::{INITIAL_COPY_BATCH, INITIAL_VICTIM_TRIES};
use crate::layout::{claim_is_full_chunk, claim_size};
use crate::leader::NO_RANGE;
use crate::operation::Operation;
use crate::platform::{AtomicWord, Ordering, Platform, ProtocolStep};
use crate::spec::Spec;

impl<'e, P: Platform, T: Copy, S: Spec> WorkerCore<'e, P, T, S> {
    /// Claims the next chunk of initial tasks: from this worker's own home range (its queue's
    /// contiguous share of the initial set, one fetch-add on its own queue header), else from the
    /// other range whose claim last found tasks and up to [`INITIAL_VICTIM_TRIES`] others. Workers
    /// claim through their own counters while their ranges last, so they do not contend on one
    /// shared cursor. A claim takes at least `step` tasks where that many remain: the tasks the
    /// worker runs side by side. `initial_exhausted` is set once every range has been claimed to
    /// its end. With `in_place` (the registry runs indexed tasks in place, all of one narrow
    /// width) a claim of an indexed set is not copied but goes to `in_place`, whose tasks the
    /// worker's narrow batches then make from the template.
    #[inline(always)]
    pub(crate) fn load_initial(&mut self, step: u64, in_place: Option<&mut IndexedClaim>) -> bool {
        self.set_operation(Operation::LoadInitial);
        self.p.protocol_step(ProtocolStep::LoadInitial);
        let mut plan = [0u64; 4];
        if self.p.is_leader() {
            // `(first task, count)`, count 0 for none (see `claim_initial`).
            let mut claim = (0, 0);
            let mut own_done = self.own_range_exhausted;
            if !own_done {
                claim = self.claim_initial(self.queue, step);
                own_done = claim.1 == 0;
            }
            if self.own_range_exhausted {
                // The range that gave the last claim first: near the end of the initial set
                // most ranges are claimed, and random picks find the few left ever more rarely.
                let hint = self.with_leader(|l| l.initial_hint);
                if hint != NO_RANGE {
                    claim = self.claim_initial(hint, step);
                    if claim.1 == 0 {
                        self.with_leader(|l| l.initial_hint = NO_RANGE);
                    }
                }
                // Victims are picked one at a time, only while no claim succeeded: an array of
                // picks indexed in a loop lived in local memory on a GPU (a stack frame written
                // and read on every claim).
                let topology = &self.env.topology;
                let mut tries = 0;
                while claim.1 == 0 && tries < INITIAL_VICTIM_TRIES {
                    tries += 1;
                    if let Some(q) = self.with_leader(|l| l.picker.pick_initial(topology)) {
                        claim = self.claim_initial(q, step);
                        let found = claim.1 != 0;
                        self.with_leader(|l| {
                            l.picker.record_initial(found);
                            if found {
                                l.initial_hint = q;
                            }
                        });
                    }
                }
            }
            let (start, count) = claim;
            // The run-wide count lives in the shared state (on the first GPU of a multi-GPU run):
            // read only once the own range is claimed, since until then not every range is, and
            // only after a claim that found nothing. After a claim the worker has tasks to run,
            // and the read, a round trip over NVLink off the first GPU, delayed their copy.
            let all_done = own_done && count == 0 && self.initial_set_claimed();
            plan = [start, count, own_done as u64, all_done as u64];
        }
        // A bridged run's followers that run claims in place copy a listed chunk word by word:
        // the compiler outlined the batched copy in their loop, and the call took the core's
        // address, which put the whole core in local memory. Their claims in place then ran at
        // half speed (docs/results.md).
        let batched = !(in_place.is_some() && S::follows_bridge(&self.env.config));
        let [start, count, own_done, all_done] = self.exchange(plan);
        self.own_range_exhausted = own_done != 0;
        if all_done != 0 {
            self.initial_exhausted = true;
        }
        if count == 0 {
            return false;
        }
        if let Some(claim) = in_place.filter(|_| self.env.initial_indexed()) {
            *claim = IndexedClaim {
                next: start,
                left: count as u32,
            };
            self.count(|s| s.initial_loads += 1);
            self.set_operation(Operation::RunTask);
            return true;
        }
        let head = self.local_head as u64;
        if !self.env.initial_indexed() {
            // The next chunk of the same range is likely this worker's next claim.
            let next = (start + count).min(self.env.initial_len);
            let ahead = count.min(self.env.initial_len - next);
            // SAFETY: next + ahead <= initial_len, so the hinted range lies within the set.
            self.p.prefetch(
                unsafe { self.env.initial.add(next as usize) } as *const u8,
                (ahead as usize) * core::mem::size_of::<T>(),
            );
        }
        // Read forwards (the prefetcher follows), written reversed, so that the LIFO local
        // queue also runs the chunk in its original order (the tasks' own data, e.g. the
        // articles of consecutive CONTAINS tasks, is then walked forwards too).
        self.copy_initial::<INITIAL_COPY_BATCH>(
            count,
            |j| start + j,
            |j| self.local_slot(head + count - 1 - j),
            batched,
        );
        self.p.barrier();
        self.local_head = self.local_head.wrapping_add(count as u32);
        self.count(|s| s.initial_loads += 1);
        self.set_operation(Operation::RunTask);
        true
    }

    /// Lane 0: claims up to one chunk of queue `q`'s home range, at least `step` tasks where
    /// that many remain; `(first task, count)`, with a count of 0 when that range has been
    /// claimed to its end. Not an `Option`, whose payload
    /// the compiler left undefined on the empty path and merged into registers carried around
    /// a GPU worker's whole loop (see `PublicQueue::lock`).
    #[inline(always)]
    pub(crate) fn claim_initial(&self, q: u32, step: u64) -> (u64, u64) {
        let (lo, hi) = if q == self.queue {
            self.with_leader(|l| l.own_range)
        } else {
            self.env.initial_range(q)
        };
        let len = hi - lo;
        let own = q == self.queue;
        // SAFETY: q is a queue of the env's topology (this worker's or the picker's choice).
        let claimed = &unsafe { self.env.header(q) }.initial_claimed;
        let per_queue = if S::shared_queues(&self.env.config) {
            self.env.config.workers_per_queue
        } else {
            1
        };
        let chunk = self.env.config.initial_chunk as u64;
        // Far from the own range's end the guided share is the full chunk: the count is not
        // read, so a claim costs one round trip to memory rather than two.
        let known = if own {
            self.with_leader(|l| l.own_claimed_at_least)
        } else {
            0
        };
        let chunk = if own && claim_is_full_chunk(chunk, len.saturating_sub(known), per_queue) {
            chunk
        } else {
            // Relaxed throughout: the initial tasks were written by the host before the run,
            // and each fetch-add hands out a disjoint interval of the range.
            let seen = claimed.load(Ordering::Relaxed, self.scope);
            if len == 0 || seen >= len {
                return (0, 0);
            }
            // Sized by what remained when read: a stale count only makes this claim larger than
            // its guided share (a claim past the range's end is cut to it below).
            claim_size(chunk, len - seen, per_queue, step)
        };
        let offset = claimed.fetch_add(chunk, Ordering::Relaxed, self.scope);
        if own {
            self.with_leader(|l| l.own_claimed_at_least = offset + chunk);
        }
        if offset >= len {
            return (0, 0);
        }
        if offset + chunk >= len {
            // The claim that reaches the range's end is unique: count the range as done.
            let t = &self.env.topology;
            if S::may_span_devices(&self.env.config) && t.devices > 1 {
                self.initial_set_end(t.device_of_queue(q)).range_done();
            } else {
                // SAFETY: the shared state outlives the run.
                unsafe { self.env.shared() }.initial_ranges_done.fetch_add(
                    1,
                    Ordering::Relaxed,
                    self.scope,
                );
            }
        }
        (lo + offset, chunk.min(len - offset))
    }
}
