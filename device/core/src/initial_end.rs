//! The end of the initial set on several devices: when every home range has been claimed to its
//! end (`docs/design.md` section 4).
//!
//! On one device a worker reads the run-wide count of claimed ranges itself. On several, that
//! count lives on the first device, and every idle worker of the others read it over NVLink in a
//! loop, thousands of reads queued on one word; the ranges' own increments waited behind them.
//! A 2-GPU run learned that a 2-task set was claimed 113-181 us after its start, where one GPU
//! takes 3-7 us (docs/results.md). So here:
//! - each device counts its own home ranges in its own memory, and adds them to the run-wide
//!   count in one step once all of them are claimed;
//! - on each device at most one worker at a time reads the run-wide count, and the first that
//!   sees it complete sets the device's relay word, which the device's other workers read in
//!   their own memory.
//!
//! Safety (no worker sees the set claimed while a range is not): the relay is set only after a
//! read of the run-wide count found every range counted; a device adds its ranges only after its
//! own count found each of them counted, and a range is counted once, by the claim that reached
//! its end. Every access is Relaxed: claims hand out tasks by fetch-adds on the ranges' cursors,
//! which read the latest value whatever was seen here, and the answer only lets a worker release
//! tasks and count itself idle, where its counter's own orderings decide (a late answer only
//! delays both).

use crate::layout::DeviceIdle;
use crate::platform::{AtomicWord, Ordering, Scope};

/// One device's view of the initial set's end.
pub struct InitialSetEnd<'a, W> {
    /// The device's words, in its own memory.
    pub device: &'a DeviceIdle<W>,
    /// The device's home ranges that hold tasks ([`crate::Env::device_initial_ranges`]).
    pub device_ranges: u64,
    /// The run-wide count of claimed ranges (`SharedState::initial_ranges_done`).
    pub global: &'a W,
    /// The ranges of the run that hold tasks ([`crate::Env::initial_ranges`]).
    pub ranges: u64,
    /// The scope of the run's queues: other devices' claimers reach `device.ranges_done`, and
    /// every device the global count.
    pub scope: Scope,
}

impl<W: AtomicWord> InitialSetEnd<'_, W> {
    /// A claim reached the end of one of this device's home ranges (call once per range, from
    /// the claim that took its last task, on any device).
    #[inline(always)]
    pub fn range_done(&self) {
        let before = self
            .device
            .ranges_done
            .fetch_add(1, Ordering::Relaxed, self.scope);
        if before + 1 == self.device_ranges {
            self.global
                .fetch_add(self.device_ranges, Ordering::Relaxed, self.scope);
        }
    }

    /// Whether every home range of the run is claimed, as one of this device's workers sees it;
    /// false may be stale.
    #[inline(always)]
    pub fn all_claimed(&self) -> bool {
        // Device scope: only this device's workers touch its relay and reader words.
        let local = Scope::Device;
        if self.device.initial_over.load(Ordering::Relaxed, local) != 0 {
            return true;
        }
        // One reader at a time: the others go on with their loop and look again.
        if self.device.initial_reader.load(Ordering::Relaxed, local) != 0
            || self
                .device
                .initial_reader
                .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed, local)
                .is_err()
        {
            return false;
        }
        let all = self.global.load(Ordering::Relaxed, self.scope) >= self.ranges;
        if all {
            self.device.initial_over.store(1, Ordering::Relaxed, local);
        }
        self.device
            .initial_reader
            .store(0, Ordering::Relaxed, local);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostWord;

    fn read(w: &HostWord) -> u64 {
        w.load(Ordering::Relaxed, Scope::System)
    }

    /// A device's view with `device_ranges` of the run's `ranges`.
    fn end<'a>(
        device: &'a DeviceIdle<HostWord>,
        global: &'a HostWord,
        device_ranges: u64,
        ranges: u64,
    ) -> InitialSetEnd<'a, HostWord> {
        InitialSetEnd {
            device,
            device_ranges,
            global,
            ranges,
            scope: Scope::System,
        }
    }

    #[test]
    fn a_device_adds_its_ranges_once_all_are_claimed() {
        let (d0, d1, global) = (DeviceIdle::new(), DeviceIdle::new(), HostWord::new(0));
        let (e0, e1) = (end(&d0, &global, 3, 5), end(&d1, &global, 2, 5));
        e0.range_done();
        e0.range_done();
        e1.range_done();
        assert_eq!(read(&global), 0, "no device has all its ranges claimed");
        assert!(!e0.all_claimed() && !e1.all_claimed());
        e0.range_done();
        assert_eq!(read(&global), 3);
        assert!(!e1.all_claimed());
        e1.range_done();
        assert_eq!(read(&global), 5);
        assert!(e1.all_claimed());
        assert_eq!((read(&d1.initial_over), read(&d1.initial_reader)), (1, 0));
        // Device 0 learns it from the run-wide count; from then on from its relay alone.
        assert_eq!(read(&d0.initial_over), 0);
        assert!(e0.all_claimed());
        global.store(0, Ordering::Relaxed, Scope::System);
        assert!(e0.all_claimed() && e1.all_claimed());
    }

    #[test]
    fn only_one_worker_of_a_device_reads_the_run_wide_count_at_a_time() {
        let (device, global) = (DeviceIdle::new(), HostWord::new(1));
        let end = end(&device, &global, 1, 1);
        // Another worker of the device is reading: this one does not, and sees nothing yet.
        device
            .initial_reader
            .store(1, Ordering::Relaxed, Scope::System);
        assert!(!end.all_claimed());
        assert_eq!(read(&device.initial_over), 0);
        device
            .initial_reader
            .store(0, Ordering::Relaxed, Scope::System);
        assert!(end.all_claimed());
    }

    #[test]
    fn a_set_without_tasks_is_claimed_from_the_start() {
        let (device, global) = (DeviceIdle::new(), HostWord::new(0));
        assert!(end(&device, &global, 0, 0).all_claimed());
    }
}
