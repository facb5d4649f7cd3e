//! Helpers of the `mgws-benches` criterion benchmarks: a one-lane host platform and a public
//! queue with its task ring, driven through `mgws_core::PublicQueue` the way a worker drives it.
//!
//! Run them with `cargo bench -p mgws-benches`.

use std::cell::UnsafeCell;

use mgws_core::{Claim, HostWord, PublicQueue, QueueHeader, Scope};
use mgws_tasks::TaskStruct;

pub use mgws_core::one_lane::OneLane;

fn never() -> bool {
    false
}

/// A public queue of `capacity` task slots.
pub struct Queue {
    pub header: QueueHeader<HostWord>,
    pub ring: Vec<UnsafeCell<TaskStruct>>,
    pub capacity: u64,
}

// SAFETY: the ring's slots are only accessed under the queue protocol.
unsafe impl Sync for Queue {}

impl Queue {
    pub fn new(capacity: u64) -> Queue {
        let blank = TaskStruct::new(1, &0u64);
        Queue {
            header: QueueHeader::new(),
            ring: (0..capacity).map(|_| UnsafeCell::new(blank)).collect(),
            capacity,
        }
    }

    fn queue(&self) -> PublicQueue<'_, HostWord> {
        PublicQueue::new(&self.header, self.capacity, Scope::Device)
    }

    /// The owner publishes `src` (as `release` does): lock, wait for the next epoch to drain,
    /// copy into free slots, reopen. Returns the tasks published.
    pub fn release(&self, src: &[TaskStruct]) -> u64 {
        let (q, p) = (self.queue(), OneLane::without_scratch());
        let v = q.lock(&p, &never).held_view().expect("lock");
        let next = 1 - v.word.epoch() as usize;
        assert!(q.wait_drained(&p, next, &never));
        let n = (src.len() as u64).min(q.free_slots(&v));
        for (j, t) in src.iter().take(n as usize).enumerate() {
            // SAFETY: the slots past head are free and the queue is locked.
            unsafe { *self.ring[((v.head + j as u64) % self.capacity) as usize].get() = *t };
        }
        q.reopen(&p, &v, v.first_unclaimed, v.head + n);
        n
    }

    /// The owner takes back `min(ceil(n/2), max)` of the `n` unclaimed tasks (as `acquire`
    /// does) into `dst`. Returns the tasks taken.
    pub fn acquire(&self, dst: &mut Vec<TaskStruct>, max: u64) -> u64 {
        let (q, p) = (self.queue(), OneLane::without_scratch());
        let v = q.lock(&p, &never).held_view().expect("lock");
        let next = 1 - v.word.epoch() as usize;
        assert!(q.wait_drained(&p, next, &never));
        let take = v.available().div_ceil(2).min(max);
        let from = v.head - take;
        for j in 0..take {
            // SAFETY: unclaimed slots of the locked queue.
            dst.push(unsafe { *self.ring[((from + j) % self.capacity) as usize].get() });
        }
        q.reopen(&p, &v, v.first_unclaimed, from);
        take
    }

    /// One steal (claim, copy the share into `dst`, complete). Returns the tasks stolen.
    pub fn steal(&self, dst: &mut Vec<TaskStruct>) -> u64 {
        let (q, p) = (self.queue(), OneLane::without_scratch());
        match q.claim(&p) {
            Claim::Claimed { word, share } => {
                for j in 0..share.count {
                    let slot = (word.tail() + share.offset + j) % self.capacity;
                    // SAFETY: the claimed share belongs to this thief until it completes.
                    dst.push(unsafe { *self.ring[slot as usize].get() });
                }
                q.complete(&p, word, share.count);
                share.count
            }
            Claim::Empty | Claim::Locked => 0,
        }
    }
}

/// `n` distinct task structs.
pub fn tasks(n: u64) -> Vec<TaskStruct> {
    (0..n).map(|i| TaskStruct::new(1, &i)).collect()
}
