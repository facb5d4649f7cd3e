//! Victim selection (thesis 5.5): uniform over all other public queues, optionally biased toward
//! queues of the thief's own device, local first (the own device until a few attempts in a row
//! found nothing, then one other device's queue), or restricted to the own device. In a run
//! across nodes the bias has a second tier: a victim off the own device is drawn from the own
//! node's other devices with the same probability, else from the other nodes
//! (`Topology::devices_per_node`).

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg32;

use crate::layout::Topology;

/// Initial claims that found nothing in a row on the own device before
/// [`VictimPicker::pick_initial`] tries other devices' home ranges (local first). Initial claims
/// keep their own count, apart from the steals': a device whose ranges are all claimed then
/// helps the ranges of a slower device instead of waiting for it (docs/design.md 7.1).
pub const INITIAL_LOCAL_FIRST_TRIES: u32 = 16;

/// A per-worker victim picker. Only lane 0 of a worker has one (in its `LeaderState`); it draws
/// each victim and hands it to the other lanes with the rest of the steal plan.
#[derive(Clone, Debug)]
pub struct VictimPicker {
    rng: Pcg32,
    own_queue: u32,
    own_device: u32,
    bias_permille: u32,
    /// Local first: failed attempts in a row on the own device before one off it (0: off).
    local_first_tries: u32,
    /// Local first: attempts in a row on the own device that found nothing.
    misses: u32,
    /// Local first: whether the last pick was off the own device (its outcome starts a new
    /// round of local attempts either way).
    went_remote: bool,
    /// Local first: initial claims in a row that found nothing (see
    /// [`VictimPicker::record_initial`]).
    initial_misses: u32,
    same_device_only: bool,
    /// [`crate::RunFlags::INITIAL_OWN_DEVICE`]: initial picks never leave the own device.
    initial_own_device: bool,
}

impl VictimPicker {
    #[inline(always)]
    pub fn new(
        seed: u64,
        worker: u32,
        own_queue: u32,
        topology: &Topology,
        bias_permille: u32,
        local_first_tries: u32,
        same_device_only: bool,
    ) -> Self {
        let mut rng =
            Pcg32::seed_from_u64(seed ^ (worker as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        rng.next_u32();
        VictimPicker {
            rng,
            own_queue,
            own_device: topology.device_of_worker(worker),
            bias_permille,
            local_first_tries,
            misses: 0,
            went_remote: false,
            initial_misses: 0,
            same_device_only,
            initial_own_device: false,
        }
    }

    /// Keeps [`VictimPicker::pick_initial`] on the own device (`on`), whatever the policy.
    #[inline(always)]
    pub fn initial_on_own_device(mut self, on: bool) -> Self {
        self.initial_own_device = on;
        self
    }

    /// Tells the picker whether the attempt on its last pick found tasks (local first counts the
    /// misses in a row; the other policies ignore it).
    #[inline(always)]
    pub fn record(&mut self, found: bool) {
        self.misses = if found || self.went_remote {
            0
        } else {
            self.misses.saturating_add(1)
        };
        self.went_remote = false;
    }

    /// The device of the picker's worker.
    #[inline(always)]
    pub fn own_device(&self) -> u32 {
        self.own_device
    }

    /// Tells the picker whether the initial claim on its last [`VictimPicker::pick_initial`]
    /// found tasks. After [`INITIAL_LOCAL_FIRST_TRIES`] misses in a row, initial picks leave the
    /// own device until one finds tasks.
    #[inline(always)]
    pub fn record_initial(&mut self, found: bool) {
        self.initial_misses = if found {
            0
        } else {
            self.initial_misses.saturating_add(1)
        };
    }

    /// A uniform integer in `0..n` (`n > 0`) by multiply-shift, without division.
    #[inline]
    fn below(&mut self, n: u32) -> u32 {
        ((self.rng.next_u32() as u64 * n as u64) >> 32) as u32
    }

    /// The queue to steal from next, or `None` if this worker has no possible victim.
    #[inline(always)]
    pub fn pick(&mut self, t: &Topology) -> Option<u32> {
        self.pick_with(t, self.local_first_tries)
    }

    /// The home range of initial tasks to claim from next, once the own one is claimed. Under
    /// local first: the own device's ranges until [`INITIAL_LOCAL_FIRST_TRIES`] claims in a row
    /// found nothing there, then other devices' ranges until one finds tasks (a remote range's
    /// tasks read and write their data over NVLink, so they come last). Under the other
    /// policies, as [`VictimPicker::pick`]. Only the own device's ranges with
    /// [`VictimPicker::initial_on_own_device`].
    #[inline(always)]
    pub fn pick_initial(&mut self, t: &Topology) -> Option<u32> {
        if self.initial_own_device {
            return self.pick_on_own_device(t);
        }
        if self.local_first_tries == 0 {
            return self.pick_with(t, 0);
        }
        let d = self.own_device as usize;
        let (dev_start, dev_end) = (t.first_queue[d], t.first_queue[d + 1]);
        let dev_len = dev_end - dev_start;
        let others = t.queues() - dev_len;
        if others == 0
            || self.same_device_only
            || (self.initial_misses < INITIAL_LOCAL_FIRST_TRIES && dev_len >= 2)
        {
            return self.pick_on_own_device(t);
        }
        let r = self.below(others);
        Some(if r >= dev_start { r + dev_len } else { r })
    }

    #[inline(always)]
    fn pick_with(&mut self, t: &Topology, local_first_tries: u32) -> Option<u32> {
        let d = self.own_device as usize;
        let (dev_start, dev_end) = (t.first_queue[d], t.first_queue[d + 1]);
        let dev_len = dev_end - dev_start;
        let total = t.queues();
        let others = total - dev_len;
        let local = if others == 0 || self.same_device_only {
            true
        } else if local_first_tries > 0 {
            // The own device while its queues may still hold tasks; one other device's queue
            // after `local_first_tries` misses in a row (or where the device has no other queue).
            if self.misses < local_first_tries && dev_len >= 2 {
                true
            } else {
                self.went_remote = true;
                let r = self.below(others);
                return Some(if r >= dev_start { r + dev_len } else { r });
            }
        } else if self.bias_permille == 0 {
            // Uniform over all other queues of the system.
            let r = self.below(total - 1);
            let q = if r >= self.own_queue { r + 1 } else { r };
            return Some(q);
        } else {
            self.below(1000) < self.bias_permille
        };
        if local {
            self.pick_on_own_device(t)
        } else {
            // The own node's queues (a run across nodes), if it has other devices and there are
            // other nodes: the bias again between the two; else uniform over the other devices.
            let per_node = t.devices_per_node;
            if per_node > 0 && per_node < t.devices {
                let first = (self.own_device / per_node) * per_node;
                let end = (first + per_node).min(t.devices);
                let (node_start, node_end) =
                    (t.first_queue[first as usize], t.first_queue[end as usize]);
                let node_len = node_end - node_start;
                let (node_others, remote) = (node_len - dev_len, total - node_len);
                if node_others > 0 && remote > 0 {
                    if self.below(1000) < self.bias_permille {
                        let r = node_start + self.below(node_others);
                        return Some(if r >= dev_start { r + dev_len } else { r });
                    }
                    let r = self.below(remote);
                    return Some(if r >= node_start { r + node_len } else { r });
                }
            }
            let r = self.below(others);
            Some(if r >= dev_start { r + dev_len } else { r })
        }
    }

    /// Another queue of the own device, uniformly; `None` where the device has no other.
    #[inline(always)]
    fn pick_on_own_device(&mut self, t: &Topology) -> Option<u32> {
        let d = self.own_device as usize;
        let (dev_start, dev_len) = (t.first_queue[d], t.first_queue[d + 1] - t.first_queue[d]);
        if dev_len < 2 {
            return None;
        }
        let r = dev_start + self.below(dev_len - 1);
        Some(if r >= self.own_queue { r + 1 } else { r })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_picks_itself_and_reaches_every_other_queue() {
        let t = Topology::single(5, 1);
        let mut p = VictimPicker::new(1, 2, 2, &t, 0, 0, false);
        let mut seen = [0u32; 5];
        for _ in 0..5000 {
            seen[p.pick(&t).unwrap() as usize] += 1;
        }
        assert_eq!(seen[2], 0);
        assert!(
            seen.iter().enumerate().all(|(i, &n)| i == 2 || n > 1000),
            "{seen:?}"
        );
    }

    #[test]
    fn across_nodes_the_bias_prefers_the_own_device_then_the_own_node() {
        // 2 nodes of 2 devices, 2 queues each: queues 0-1 and 2-3 on node 0, 4-7 on node 1.
        let mut t = Topology::split(&[2, 2, 2, 2], 1);
        t.devices_per_node = 2;
        // Worker 5 (device 2, node 1), bias 0.8: own device 80%, the node's other device 16%,
        // node 0 4%.
        let mut p = VictimPicker::new(3, 5, 5, &t, 800, 0, false);
        let mut seen = [0u32; 8];
        for _ in 0..20_000 {
            seen[p.pick(&t).unwrap() as usize] += 1;
        }
        assert_eq!(seen[5], 0);
        let own = seen[4];
        let node = seen[6] + seen[7];
        let remote: u32 = seen[..4].iter().sum();
        assert!((15_500..16_500).contains(&own), "{seen:?}");
        assert!((2_900..3_500).contains(&node), "{seen:?}");
        assert!((600..1_000).contains(&remote), "{seen:?}");
        assert!(
            seen[..4].iter().all(|&n| n > 100),
            "every remote queue: {seen:?}"
        );
        // Without a bias: uniform over every other queue, nodes or not.
        let mut uniform = VictimPicker::new(3, 5, 5, &t, 0, 0, false);
        let mut seen = [0u32; 8];
        for _ in 0..16_000 {
            seen[uniform.pick(&t).unwrap() as usize] += 1;
        }
        assert!(
            seen.iter()
                .enumerate()
                .all(|(q, &n)| q == 5 || (2_000..2_600).contains(&n)),
            "{seen:?}"
        );
        // One device per node: off the own device, every other queue is another node's.
        let mut t = Topology::split(&[2, 2], 1);
        t.devices_per_node = 1;
        let mut p = VictimPicker::new(3, 0, 0, &t, 500, 0, false);
        for _ in 0..1000 {
            assert_ne!(p.pick(&t), Some(0));
        }
    }

    #[test]
    fn bias_and_same_device_only_prefer_the_own_device() {
        let t = Topology::split(&[4, 4], 1);
        let mut biased = VictimPicker::new(7, 1, 1, &t, 900, 0, false);
        let mut only = VictimPicker::new(7, 1, 1, &t, 0, 0, true);
        let (mut own, mut own_only) = (0, 0);
        for _ in 0..10_000 {
            own += (biased.pick(&t).unwrap() < 4) as u32;
            let q = only.pick(&t).unwrap();
            assert_ne!(q, 1);
            own_only += (q < 4) as u32;
        }
        assert!((8700..9300).contains(&own), "{own}");
        assert_eq!(own_only, 10_000);
        let single = Topology::single(1, 1);
        assert_eq!(
            VictimPicker::new(0, 0, 0, &single, 0, 0, false).pick(&single),
            None
        );
    }

    #[test]
    fn local_first_stays_on_the_own_device_until_misses_in_a_row_then_goes_off_once() {
        // 2 devices of 4 queues; worker 1 on device 0; 3 misses in a row before a remote pick.
        let t = Topology::split(&[4, 4], 1);
        let mut p = VictimPicker::new(5, 1, 1, &t, 0, 3, false);
        // Every attempt finds tasks: never off the device.
        for _ in 0..1000 {
            let q = p.pick(&t).unwrap();
            assert!(q < 4 && q != 1, "{q}");
            p.record(true);
        }
        // Every attempt misses: 3 local picks, then 1 remote, again and again.
        for i in 0..40 {
            let q = p.pick(&t).unwrap();
            assert_ne!(q, 1);
            assert_eq!(q >= 4, i % 4 == 3, "attempt {i} picked {q}");
            p.record(false);
        }
        // A success resets the count: after 2 misses and a find, 3 more local picks.
        for found in [false, false, true] {
            assert!(p.pick(&t).unwrap() < 4);
            p.record(found);
        }
        for _ in 0..3 {
            assert!(p.pick(&t).unwrap() < 4);
            p.record(false);
        }
        assert!(p.pick(&t).unwrap() >= 4);
        // A device with one queue (no local victim) picks off the device at once; one device
        // has nothing off it.
        let lonely = Topology::split(&[1, 4], 1);
        let mut p = VictimPicker::new(5, 0, 0, &lonely, 0, 3, false);
        assert!(p.pick(&lonely).unwrap() >= 1);
        let single = Topology::single(4, 1);
        let mut p = VictimPicker::new(5, 0, 0, &single, 0, 3, false);
        for _ in 0..100 {
            assert!((1..4).contains(&p.pick(&single).unwrap()));
            p.record(false);
        }
    }

    #[test]
    fn initial_claims_keep_their_own_count_and_leave_the_device_until_one_finds_tasks() {
        let t = Topology::split(&[4, 4], 1);
        let mut p = VictimPicker::new(9, 1, 1, &t, 0, 1, false);
        // Steals' misses do not count: a steal going off the device leaves initial picks local.
        for _ in 0..100 {
            p.pick(&t);
            p.record(false);
            let q = p.pick_initial(&t).unwrap();
            assert!(q < 4 && q != 1, "{q}");
        }
        // INITIAL_LOCAL_FIRST_TRIES misses in a row (100 misses of steals did not add to them),
        // then off the device until a claim finds tasks, then local again.
        for _ in 0..INITIAL_LOCAL_FIRST_TRIES {
            assert!(p.pick_initial(&t).unwrap() < 4);
            p.record_initial(false);
        }
        for _ in 0..50 {
            assert!(p.pick_initial(&t).unwrap() >= 4);
            p.record_initial(false);
        }
        assert!(p.pick_initial(&t).unwrap() >= 4);
        p.record_initial(true);
        assert!(p.pick_initial(&t).unwrap() < 4);
        // One device: always local, however many misses.
        let single = Topology::single(4, 1);
        let mut one = VictimPicker::new(9, 1, 1, &single, 0, 1, false);
        for _ in 0..100 {
            assert!(one.pick_initial(&single).unwrap() < 4);
            one.record_initial(false);
        }
        // Kept on the own device, initial picks never leave it, under any policy; steals do.
        for (bias, tries) in [(0, 0), (0, 1), (900, 0)] {
            let mut kept =
                VictimPicker::new(9, 1, 1, &t, bias, tries, false).initial_on_own_device(true);
            for _ in 0..1000 {
                let q = kept.pick_initial(&t).unwrap();
                assert!(q < 4 && q != 1, "{q}");
                kept.record_initial(false);
            }
            assert!((0..1000).any(|_| {
                let remote = kept.pick(&t).unwrap() >= 4;
                kept.record(false);
                remote
            }));
        }
        // A device with one queue has nothing else to claim from.
        let lonely = Topology::split(&[1, 4], 1);
        let mut alone =
            VictimPicker::new(9, 0, 0, &lonely, 0, 1, false).initial_on_own_device(true);
        assert_eq!(alone.pick_initial(&lonely), None);
        // Without local first (uniform), initial picks leave the device as often as steals.
        let mut u = VictimPicker::new(9, 1, 1, &t, 0, 0, false);
        let remote = (0..4000)
            .filter(|_| u.pick_initial(&t).unwrap() >= 4)
            .count();
        assert!((2000..2600).contains(&remote), "{remote}");
    }
}
