//! SKEW: independent tasks whose costs are skewed by a knob, to show where stealing pays.
//!
//! Task `x` does `cost(x)` units of work, each one round of a 64-bit mixing function, spread
//! over the worker's lanes, and writes the wrapping sum of its units' results plus one to slot
//! `x` of its output descriptor; the host recomputes every slot.
//!
//! The cost comes from the entropy-reduction trick of GPU radix-sort studies: `cost(x)` is the
//! AND of `k + 1` pseudo-random `bits`-bit words (hashes of the seed, `x` and the word's index).
//! Each bit of the cost is then 1 with probability `2^-(k+1)`: with `k = 0` costs are uniform on
//! `[0, 2^bits)`, mean `(2^bits - 1) / 2`; every further AND halves the mean,
//! `(2^bits - 1) / 2^(k+1)`, while the largest cost stays `2^bits - 1`, so the total work of a
//! contiguous share of tasks varies more and more from share to share. Static assignment pays for
//! that imbalance with idle workers; work stealing evens it out.

use mgws_core::TaskError;

use crate::data::{Access, DataDescriptor};
use crate::task::{TaskFunctor, TaskStruct};
use crate::Ctx;

/// The largest `bits`: a task costs at most `2^MAX_BITS - 1` units.
pub const MAX_BITS: u32 = 24;
/// The largest `k` (beyond it nearly every cost is 0 for any `bits` the runs use).
pub const MAX_K: u32 = 32;

/// Error code of a SKEW task whose slot lies outside its output descriptor.
pub const SKEW_OUT_OF_BOUNDS: u32 = 0x534b_0001;

/// One SKEW task.
#[mgws_tasks::task]
#[derive(Debug, PartialEq, Eq)]
pub struct SkewTask {
    /// The task's index: its slot, and part of its cost's hash.
    pub index: u64,
    /// The run's seed.
    pub seed: u64,
    /// Number of ANDs.
    pub k: u32,
    /// Bits of a cost word.
    pub bits: u32,
}

/// SplitMix64's finalizer: the mixing round a unit of work runs, and the hash of the costs.
#[inline(always)]
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl SkewTask {
    /// The task's cost in units: the AND of `k + 1` hashed `bits`-bit words.
    #[inline(always)]
    pub fn cost(&self) -> u64 {
        let mask = (1u64 << self.bits.min(MAX_BITS)) - 1;
        let mut cost = mask;
        let mut j = 0;
        while j <= self.k.min(MAX_K) {
            cost &= mix(self.seed ^ mix(self.index ^ ((j as u64) << 40)));
            j += 1;
        }
        cost
    }

    /// The result of unit `u` of this task.
    #[inline(always)]
    pub fn unit(&self, u: u64) -> u64 {
        mix(self.seed.wrapping_add(self.index << 24).wrapping_add(u))
    }

    /// What slot `index` holds after the task ran: the wrapping sum of its units plus one (so a
    /// task that never ran, slot 0, is told apart from one of cost 0).
    pub fn expected_slot(&self) -> u64 {
        (0..self.cost())
            .fold(0u64, |s, u| s.wrapping_add(self.unit(u)))
            .wrapping_add(1)
    }
}

impl TaskFunctor for SkewTask {
    #[inline(always)]
    fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        let out = task.data[0];
        if (self.index + 1) * 8 > out.size as u64 {
            return Err(TaskError::Failed(SKEW_OUT_OF_BOUNDS));
        }
        let mut partial = 0u64;
        for u in ctx.lane_range(self.cost()) {
            partial = partial.wrapping_add(self.unit(u));
        }
        let total = ctx.sum(partial);
        let slots = ctx.write::<u64>(&out)?;
        ctx.leader(|| slots.set(self.index as usize, total.wrapping_add(1)))
            .unwrap_or(Ok(()))
    }
}

/// The output descriptor of a SKEW run of `tasks` slots in data area `area`.
pub fn output_descriptor(area: u8, tasks: u64) -> DataDescriptor {
    DataDescriptor::new(area, 0, (tasks * 8) as u32, Access::ReadWrite)
}

/// The mean cost of a task, `(2^bits - 1) / 2^(k+1)` (in expectation).
pub fn mean_cost(k: u32, bits: u32) -> f64 {
    ((1u64 << bits.min(MAX_BITS)) - 1) as f64 / (1u64 << (k.min(MAX_K) + 1)) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_and_halves_the_mean_cost_and_keeps_costs_below_the_mask() {
        let bits = 10;
        let mut means = [0f64; 4];
        for (k, mean) in means.iter_mut().enumerate() {
            let n = 20_000u64;
            let total: u64 = (0..n)
                .map(|index| {
                    SkewTask {
                        index,
                        seed: 7,
                        k: k as u32,
                        bits,
                    }
                    .cost()
                })
                .inspect(|&c| assert!(c < 1 << bits))
                .sum();
            *mean = total as f64 / n as f64;
            let want = mean_cost(k as u32, bits);
            assert!(
                (*mean - want).abs() < 0.05 * want + 2.0,
                "k={k}: {mean} vs {want}"
            );
        }
        assert!(means.windows(2).all(|w| w[1] < w[0] * 0.6), "{means:?}");
    }

    #[test]
    fn the_slot_depends_on_every_unit() {
        let t = SkewTask {
            index: 3,
            seed: 1,
            k: 0,
            bits: 8,
        };
        let cheap = SkewTask { k: 7, ..t };
        assert_ne!(t.expected_slot(), 0);
        assert_ne!(t.expected_slot(), cheap.expected_slot());
    }
}
