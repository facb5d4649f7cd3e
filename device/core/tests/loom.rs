//! Loom models of the queue and termination protocols.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p mgws-core --release --test loom`.
//!
//! Task slots are modelled as relaxed loom atomics holding task ids, so a missing
//! acquire/release edge in the protocol shows up as a thief reading a stale or overwritten id.
//! Each model checks that every task is taken exactly once. The termination models check that no
//! worker decides "terminate" while another still holds a task; their `*_without_the_rule`
//! twins switch the rule of thesis 5.6.3 (or, for the hierarchical counters, the rule that a
//! worker leaves both levels at once) off and must fail.
#![cfg(loom)]

use std::collections::BTreeSet;

use loom::sync::atomic::AtomicU64;
use loom::sync::{Arc, Mutex};
use loom::thread;
use mgws_core::initial_end::InitialSetEnd;
use mgws_core::one_lane::OneLane;
use mgws_core::termination::{EndWatch, HierarchicalCounter, IdleCounter, VoteOutcome, VotingTree};
use mgws_core::{
    spawn_place, AtomicWord, Claim, DeviceIdle, HostWord, Ordering, PublicQueue, QueueHeader,
    Scope, SharedState, SpawnPlace, Topology,
};

const P: OneLane = OneLane::without_scratch();
const SCOPE: Scope = Scope::Device;
fn never() -> bool {
    false
}

/// A public queue with its ring of task ids.
struct Queue {
    header: QueueHeader<HostWord>,
    slots: Vec<AtomicU64>,
}

impl Queue {
    fn new(capacity: usize) -> Arc<Queue> {
        Arc::new(Queue {
            header: QueueHeader::new(),
            slots: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
        })
    }
    fn q(&self) -> PublicQueue<'_, HostWord> {
        PublicQueue::new(&self.header, self.slots.len() as u64, SCOPE)
    }
    fn slot(&self, position: u64) -> &AtomicU64 {
        &self.slots[(position % self.slots.len() as u64) as usize]
    }

    /// The owner publishes `ids` (as many as fit); returns the ids that did not fit.
    fn publish(&self, ids: &[u64]) -> Vec<u64> {
        let q = self.q();
        let view = q.lock(&P, &never).held_view().unwrap();
        assert!(q.wait_drained(&P, 1 - view.word.epoch() as usize, &never));
        let mut free = q.free_slots(&view);
        if free < ids.len() as u64 && !q.ending_epoch_drained(&view) {
            assert!(q.wait_drained_current(&P, &view, &never));
            free = q.free_slots(&view);
        }
        let n = free.min(ids.len() as u64);
        for j in 0..n {
            self.slot(view.head + j)
                .store(ids[j as usize], Ordering::Relaxed);
        }
        q.reopen(&P, &view, view.first_unclaimed, view.head + n);
        ids[n as usize..].to_vec()
    }

    /// The owner takes up to `max` of the newest public tasks.
    fn acquire(&self, max: u64) -> Vec<u64> {
        let q = self.q();
        let view = q.lock(&P, &never).held_view().unwrap();
        assert!(q.wait_drained(&P, 1 - view.word.epoch() as usize, &never));
        let take = view.available().min(max);
        let from = view.head - take;
        let ids = (0..take)
            .map(|j| self.slot(from + j).load(Ordering::Relaxed))
            .collect();
        q.reopen(&P, &view, view.first_unclaimed, from);
        ids
    }

    /// One steal attempt; the stolen ids.
    fn steal(&self) -> Vec<u64> {
        let q = self.q();
        match q.claim(&P) {
            Claim::Claimed { word, share } => {
                let ids = (0..share.count)
                    .map(|j| {
                        self.slots[q.claimed_index(word, share, j) as usize].load(Ordering::Relaxed)
                    })
                    .collect();
                q.complete(&P, word, share.count);
                ids
            }
            Claim::Empty | Claim::Locked => Vec::new(),
        }
    }
}

fn assert_exactly_once(taken: Vec<u64>, expected: std::ops::RangeInclusive<u64>) {
    let mut sorted = taken.clone();
    sorted.sort_unstable();
    let want: Vec<u64> = expected.collect();
    assert_eq!(sorted, want, "tasks taken {taken:?}");
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(3, f)
}

fn model_bounded(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    // Owners spin on the lock and on completion counters; spinning adds scheduling branches.
    b.max_branches = 100_000;
    b.check(f);
}

#[test]
fn steal_racing_release_takes_each_task_once() {
    model(|| {
        // Capacity 3 forces the release to wrap onto a slot that a thief may still be copying.
        let queue = Queue::new(3);
        assert!(queue.publish(&[1, 2]).is_empty());
        let thief = {
            let queue = queue.clone();
            thread::spawn(move || queue.steal())
        };
        let mut kept = queue.publish(&[3, 4]);
        let stolen = thief.join().unwrap();
        kept.extend(queue.acquire(u64::MAX));
        kept.extend(stolen);
        assert_exactly_once(kept, 1..=4);
    });
}

#[test]
fn steal_racing_acquire_takes_each_task_once() {
    model(|| {
        let queue = Queue::new(4);
        assert!(queue.publish(&[1, 2, 3]).is_empty());
        let thief = {
            let queue = queue.clone();
            thread::spawn(move || queue.steal())
        };
        let mut taken = queue.acquire(2);
        taken.extend(thief.join().unwrap());
        taken.extend(queue.acquire(u64::MAX));
        assert_exactly_once(taken, 1..=3);
    });
}

#[test]
fn two_thieves_on_one_victim_get_disjoint_shares() {
    model(|| {
        let queue = Queue::new(4);
        assert!(queue.publish(&[1, 2, 3, 4]).is_empty());
        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let queue = queue.clone();
                thread::spawn(move || queue.steal())
            })
            .collect();
        let mut taken: Vec<u64> = thieves
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        taken.extend(queue.acquire(u64::MAX));
        assert_exactly_once(taken, 1..=4);
    });
}

#[test]
fn shared_owners_serialise_on_the_lock() {
    model_bounded(2, || {
        let queue = Queue::new(4);
        assert!(queue.publish(&[1]).is_empty());
        let co_owner = {
            let queue = queue.clone();
            thread::spawn(move || queue.publish(&[2]))
        };
        let thief = {
            let queue = queue.clone();
            thread::spawn(move || queue.steal())
        };
        let mut taken = queue.acquire(1);
        taken.extend(co_owner.join().unwrap());
        taken.extend(thief.join().unwrap());
        taken.extend(queue.acquire(u64::MAX));
        assert_exactly_once(taken, 1..=2);
    });
}

/// Worker A of thesis Table 6, under any idle detector (`enter`, `all_idle`): its one public task
/// is gone (stolen) or it takes it back; it counts itself idle once its queue is quiescent (or at
/// once, `ignore_in_flight`), and "all idle" must not come while B's stolen task is unrun.
fn victim_goes_idle(
    queue: &Queue,
    ignore_in_flight: bool,
    enter: impl Fn(),
    all_idle: impl Fn() -> bool,
    b_done: &AtomicU64,
) {
    let mine = queue.acquire(1);
    loop {
        if queue.q().quiescent(ignore_in_flight).is_some() {
            enter();
            break;
        }
        thread::yield_now();
    }
    if all_idle() {
        assert!(
            !mine.is_empty() || b_done.load(Ordering::Relaxed) == 1,
            "terminated while B's stolen task was unrun"
        );
    }
}

/// Thesis Table 6: worker A holds one public task, worker B is idle and steals it. A must not
/// count itself idle while B's steal is in flight, or the counter reaches 2 and A terminates
/// with B's task unrun.
fn idle_counter_race(ignore_in_flight: bool) {
    model(move || {
        let queue = Queue::new(2);
        assert!(queue.publish(&[1]).is_empty());
        let counter = Arc::new(HostWord::new(1)); // B starts idle
        let b_done = Arc::new(AtomicU64::new(0));
        let b = {
            let (queue, counter, b_done) = (queue.clone(), counter.clone(), b_done.clone());
            thread::spawn(move || {
                let idle = IdleCounter {
                    counter: &*counter,
                    workers: 2,
                    scope: SCOPE,
                };
                let q = queue.q();
                if let Claim::Claimed { word, share } = q.claim(&P) {
                    idle.leave(); // regained work before the steal completes
                    q.complete(&P, word, share.count);
                    b_done.store(1, Ordering::Relaxed); // ran the task
                    idle.enter();
                }
            })
        };
        let idle = IdleCounter {
            counter: &*counter,
            workers: 2,
            scope: SCOPE,
        };
        victim_goes_idle(
            &queue,
            ignore_in_flight,
            || idle.enter(),
            || idle.all_idle(),
            &b_done,
        );
        b.join().unwrap();
    });
}

#[test]
fn idle_counter_waits_for_steals_in_flight() {
    idle_counter_race(false);
}

#[test]
#[should_panic(expected = "terminated while")]
fn idle_counter_without_the_rule_terminates_early() {
    idle_counter_race(true);
}

/// Thesis 5.6.3's tree scenario with two workers: T (worker 0, the root) holds a task; B
/// (worker 1, its child) votes idle, then steals T's task. T must vote "has work" because it was
/// stolen from in this round, or the root ends the run while B still holds the task.
fn voting_tree_race(break_targeted_rule: bool) {
    model(move || {
        let queue = Queue::new(2);
        assert!(queue.publish(&[1]).is_empty());
        let shared = Arc::new(SharedState::<HostWord>::new());
        let topology = Topology::single(2, 1);
        let tree: Arc<Vec<HostWord>> = Arc::new((0..4).map(|_| HostWord::new(0)).collect());
        let b_holds_task = Arc::new(AtomicU64::new(0));
        let b = {
            let (queue, shared, tree, holds) = (
                queue.clone(),
                shared.clone(),
                tree.clone(),
                b_holds_task.clone(),
            );
            thread::spawn(move || {
                let t = VotingTree {
                    tree: tree.as_ptr(),
                    shared: &shared,
                    topology: &topology,
                    scope: SCOPE,
                };
                let mut voted = 0;
                assert_eq!(t.step(1, true, &mut voted), VoteOutcome::Voted);
                let stolen = queue.steal();
                holds.store(stolen.len() as u64, Ordering::Relaxed);
                // B runs its task (if any), then keeps voting idle until the root decides.
                holds.store(0, Ordering::Relaxed);
                for _ in 0..3 {
                    if t.step(1, true, &mut voted) == VoteOutcome::Terminate {
                        break;
                    }
                    thread::yield_now();
                }
            })
        };
        let t = VotingTree {
            tree: tree.as_ptr(),
            shared: &shared,
            topology: &topology,
            scope: SCOPE,
        };
        let mut voted = 0;
        let mut claims_at_last_vote = 0;
        for _ in 0..3 {
            // T has nothing local; it votes idle only if quiescent and not stolen from.
            let Some(claims) = queue.q().quiescent(false) else {
                thread::yield_now();
                continue;
            };
            let targeted = claims != claims_at_last_vote && !break_targeted_rule;
            match t.step(0, !targeted, &mut voted) {
                VoteOutcome::Terminate => {
                    assert_eq!(
                        b_holds_task.load(Ordering::Relaxed),
                        0,
                        "terminated while B held a task"
                    );
                    break;
                }
                VoteOutcome::Voted => claims_at_last_vote = claims,
                VoteOutcome::Waiting => thread::yield_now(),
            }
        }
        b.join().unwrap();
        let _ = Mutex::new(()); // keep the import used on every cfg
        let _: BTreeSet<u8> = BTreeSet::new();
    });
}

#[test]
fn voting_tree_counts_a_stolen_from_worker_as_busy() {
    voting_tree_race(false);
}

#[test]
#[should_panic(expected = "terminated while")]
fn voting_tree_without_the_rule_terminates_early() {
    voting_tree_race(true);
}

/// One worker's view of hierarchical counters: its device's counter (of `device_workers`
/// workers) and the global word over `devices` devices, which it reads itself.
fn hierarchical<'a>(
    device: &'a HostWord,
    device_workers: u64,
    global: &'a HostWord,
    devices: u64,
) -> HierarchicalCounter<'a, HostWord> {
    HierarchicalCounter {
        device,
        device_workers,
        device_scope: SCOPE,
        global,
        devices,
        scope: SCOPE,
        end: EndWatch::Global,
    }
}

/// Thesis Table 6 across two devices of one worker each: A (device 0) holds one public task, B
/// (device 1) is idle, so device 1 counts as all idle, and steals it. B must take the global word
/// back down before it completes the steal; if it completes first (`global_after_complete`), A
/// can count itself idle, take device 0 to all idle and find both devices counted while B's task
/// is unrun.
fn hierarchical_race(global_after_complete: bool) {
    model(move || {
        let queue = Queue::new(2);
        assert!(queue.publish(&[1]).is_empty());
        let device0 = Arc::new(HostWord::new(0));
        let device1 = Arc::new(HostWord::new(1)); // B starts idle ...
        let global = Arc::new(HostWord::new(1)); // ... so device 1 counts as all idle
        let b_done = Arc::new(AtomicU64::new(0));
        let b = {
            let (queue, device1, global, b_done) = (
                queue.clone(),
                device1.clone(),
                global.clone(),
                b_done.clone(),
            );
            thread::spawn(move || {
                let idle = hierarchical(&device1, 1, &global, 2);
                let q = queue.q();
                if let Claim::Claimed { word, share } = q.claim(&P) {
                    if global_after_complete {
                        let crossed = idle.leave_device();
                        q.complete(&P, word, share.count);
                        if crossed {
                            idle.leave_global();
                        }
                    } else {
                        idle.leave(); // both levels before the steal completes
                        q.complete(&P, word, share.count);
                    }
                    b_done.store(1, Ordering::Relaxed); // ran the task
                    idle.enter();
                }
            })
        };
        let idle = hierarchical(&device0, 1, &global, 2);
        victim_goes_idle(&queue, false, || idle.enter(), || idle.all_idle(), &b_done);
        b.join().unwrap();
        // Whatever the interleaving, both devices end all idle, and the global word says so.
        assert_eq!(global.load(Ordering::Relaxed, SCOPE), 2);
    });
}

#[test]
fn hierarchical_counter_leaves_both_levels_before_completing_a_steal() {
    hierarchical_race(false);
}

#[test]
#[should_panic(expected = "terminated while")]
fn hierarchical_counter_without_the_rule_terminates_early() {
    hierarchical_race(true);
}

/// The bound on the global word: a device adds at most one more time than it subtracted. Device
/// 0 has workers A and Y; device 1's worker V stays busy, so the global word must never reach 2.
/// Y starts idle; A goes idle (taking device 0 to all idle) while Y leaves (as after a steal from
/// V) and goes idle again. With the rule, Y's global decrement precedes its next increment; if Y
/// defers it past that increment (`defer_global`), device 0 counts twice for a moment and the
/// run would end with V busy.
fn hierarchical_bound(defer_global: bool) {
    model(move || {
        let device0 = Arc::new(HostWord::new(1)); // Y idle
        let device1 = HostWord::new(0); // V busy
        let global = Arc::new(HostWord::new(0));
        let y = {
            let (device0, global) = (device0.clone(), global.clone());
            thread::spawn(move || {
                let idle = hierarchical(&device0, 2, &global, 2);
                let crossed = idle.leave_device();
                if crossed && !defer_global {
                    idle.leave_global();
                }
                idle.enter();
                let seen = idle.all_idle();
                if crossed && defer_global {
                    idle.leave_global();
                }
                assert!(!seen, "counted every device idle while V was busy");
            })
        };
        let idle = hierarchical(&device0, 2, &global, 2);
        idle.enter();
        assert!(
            !idle.all_idle(),
            "counted every device idle while V was busy"
        );
        y.join().unwrap();
        assert_eq!(device1.load(Ordering::Relaxed, SCOPE), 0);
        assert_eq!(global.load(Ordering::Relaxed, SCOPE), 1);
    });
}

#[test]
fn hierarchical_counter_counts_a_device_at_most_once() {
    hierarchical_bound(false);
}

#[test]
#[should_panic(expected = "counted every device idle")]
fn hierarchical_counter_with_a_deferred_global_decrement_counts_a_device_twice() {
    hierarchical_bound(true);
}

/// The relay of the end (`EndWatch`): device 0 has its watcher A and worker Y, device 1 has V,
/// which runs its last task and then counts itself idle. A and Y count themselves idle and look
/// once each. Whoever sees the end must see V's task run: Y learns it only through A's relay,
/// which A writes after it saw every device idle. If A relays once its own device is all idle
/// (`relay_device_only`), Y ends the run with V's task unrun.
fn hierarchical_relay(relay_device_only: bool) {
    model(move || {
        let device0 = Arc::new(HostWord::new(0));
        let device1 = Arc::new(HostWord::new(0));
        let global = Arc::new(HostWord::new(0));
        let over = Arc::new(HostWord::new(0));
        let v_done = Arc::new(AtomicU64::new(0));
        let v = {
            let (device1, global, v_done) = (device1.clone(), global.clone(), v_done.clone());
            thread::spawn(move || {
                v_done.store(1, Ordering::Relaxed); // V's last task
                hierarchical(&device1, 1, &global, 2).enter();
            })
        };
        let y = {
            let (device0, global, over, v_done) = (
                device0.clone(),
                global.clone(),
                over.clone(),
                v_done.clone(),
            );
            thread::spawn(move || {
                let idle = HierarchicalCounter {
                    end: EndWatch::Relayed(&*over),
                    ..hierarchical(&device0, 2, &global, 2)
                };
                idle.enter();
                if idle.all_idle() {
                    assert_eq!(
                        v_done.load(Ordering::Relaxed),
                        1,
                        "terminated while V's task was unrun"
                    );
                }
            })
        };
        let idle = HierarchicalCounter {
            end: EndWatch::Watch(&*over),
            ..hierarchical(&device0, 2, &global, 2)
        };
        idle.enter();
        let seen = if relay_device_only {
            let own = device0.load(Ordering::Acquire, SCOPE) == 2;
            if own {
                idle.relay_end(&over);
            }
            own && global.load(Ordering::Acquire, SCOPE) == 2
        } else {
            idle.all_idle()
        };
        if seen {
            assert_eq!(
                v_done.load(Ordering::Relaxed),
                1,
                "terminated while V's task was unrun"
            );
        }
        v.join().unwrap();
        y.join().unwrap();
        assert_eq!(global.load(Ordering::Relaxed, SCOPE), 2);
    });
}

#[test]
fn hierarchical_relay_follows_the_global_word() {
    hierarchical_relay(false);
}

#[test]
#[should_panic(expected = "terminated while")]
fn hierarchical_relay_of_the_own_device_alone_terminates_early() {
    hierarchical_relay(true);
}

/// The end of the initial set on two devices (`initial_end.rs`): device 0 holds ranges a and b,
/// device 1 range c, one task each. A worker of device 0 claims a; a worker of device 1 claims b
/// (on the other device) and then c; another worker of device 1 asks whether the set is claimed.
/// If it hears yes, every range must be claimed (read by fetch-adds, which see the latest value,
/// as a claimer's would). In the twin device 0 counts one range where it has two, so its first
/// range done counts the device as claimed.
fn initial_end_race(device0_ranges: u64) {
    model(move || {
        let ranges: Arc<[HostWord; 3]> = Arc::new([0, 0, 0].map(HostWord::new));
        let devices = Arc::new([DeviceIdle::<HostWord>::new(), DeviceIdle::new()]);
        let global = Arc::new(HostWord::new(0));
        let a = {
            let (ranges, devices, global) = (ranges.clone(), devices.clone(), global.clone());
            thread::spawn(move || claim_one(&ranges, &devices, &global, device0_ranges, 0, 0))
        };
        let bc = {
            let (ranges, devices, global) = (ranges.clone(), devices.clone(), global.clone());
            thread::spawn(move || {
                claim_one(&ranges, &devices, &global, device0_ranges, 1, 0);
                claim_one(&ranges, &devices, &global, device0_ranges, 2, 1);
            })
        };
        if initial_end(&devices, &global, device0_ranges, 1).all_claimed() {
            for (i, r) in ranges.iter().enumerate() {
                assert_ne!(
                    r.fetch_add(0, Ordering::Relaxed, SCOPE),
                    0,
                    "the set seen claimed while range {i} was not"
                );
            }
        }
        a.join().unwrap();
        bc.join().unwrap();
        assert!(initial_end(&devices, &global, device0_ranges, 1).all_claimed());
    });
}

/// Device `d`'s view in [`initial_end_race`].
fn initial_end<'a>(
    devices: &'a [DeviceIdle<HostWord>; 2],
    global: &'a HostWord,
    device0_ranges: u64,
    d: usize,
) -> InitialSetEnd<'a, HostWord> {
    InitialSetEnd {
        device: &devices[d],
        device_ranges: if d == 0 { device0_ranges } else { 1 },
        global,
        ranges: device0_ranges + 1,
        scope: SCOPE,
    }
}

/// Claims the one task of `range` (of device `home`); the claim that takes it counts the range
/// as done.
fn claim_one(
    ranges: &[HostWord; 3],
    devices: &[DeviceIdle<HostWord>; 2],
    global: &HostWord,
    device0_ranges: u64,
    range: usize,
    home: usize,
) {
    if ranges[range].fetch_add(1, Ordering::Relaxed, SCOPE) == 0 {
        initial_end(devices, global, device0_ranges, home).range_done();
    }
}

#[test]
fn initial_end_is_seen_only_once_every_range_is_claimed() {
    initial_end_race(2);
}

#[test]
#[should_panic(expected = "the set seen claimed while")]
fn initial_end_with_a_device_that_counts_too_few_ranges_ends_early() {
    initial_end_race(1);
}

/// Two sides without shared atomics (`bridge.rs`): side 0 holds tasks 1 and 2; side 1, idle from
/// the start, reports so and asks for work, and side 0 answers with one task. Side 0 decides
/// "terminate" once its own side is idle and side 1's report matches its ledger both ways. If it
/// takes any idle report as enough (`any_report`), side 1's first report, written before the
/// transfer, lets it end the run with the transferred task unrun.
fn bridge_race(any_report: bool) {
    use mgws_core::bridge::{BridgeEnd, BridgeLedger, BridgeState, IdleReport};
    model(move || {
        let state = Arc::new(BridgeState::<HostWord>::new());
        let slot = Arc::new(AtomicU64::new(0)); // the mailbox into side 1 (one task)
        let ran = Arc::new(AtomicU64::new(0)); // tasks run, both sides
        let side1 = {
            let (state, slot, ran) = (state.clone(), slot.clone(), ran.clone());
            thread::spawn(move || {
                let b = BridgeEnd {
                    state: &state,
                    side: 1,
                    scope: Scope::System,
                };
                let mut ledger = BridgeLedger::default();
                b.report_idle(&mut ledger); // all idle at the start
                b.ask(&mut ledger);
                for _ in 0..3 {
                    if let Some(len) = b.reply(&ledger) {
                        if len > 0 {
                            assert_ne!(slot.load(Ordering::Relaxed), 0, "read an unwritten slot");
                            ran.fetch_add(1, Ordering::Relaxed); // runs the task
                            ledger.received += 1;
                        }
                        b.report_idle(&mut ledger); // idle again
                        break;
                    }
                    thread::yield_now();
                }
            })
        };
        let a = BridgeEnd {
            state: &state,
            side: 0,
            scope: Scope::System,
        };
        let mut ledger = BridgeLedger::default();
        let mut mine = vec![1u64, 2];
        for _ in 0..4 {
            if let Some(request) = a.open_request(&ledger) {
                let give = mine.pop();
                if let Some(task) = give {
                    slot.store(task, Ordering::Relaxed);
                }
                a.answer(&mut ledger, request, give.is_some() as u64);
            }
            if mine.pop().is_some() {
                ran.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            // Side 0 is all idle.
            let decided = if any_report {
                IdleReport::unpack(state.report.load(Ordering::Acquire, Scope::System)).is_some()
            } else {
                a.try_decide(&ledger)
            };
            if decided {
                assert_eq!(
                    ran.load(Ordering::Relaxed),
                    2,
                    "terminated while side 1 held a transferred task"
                );
                break;
            }
            thread::yield_now();
        }
        side1.join().unwrap();
    });
}

#[test]
fn bridge_terminates_only_when_both_ledgers_agree() {
    bridge_race(false);
}

#[test]
#[should_panic(expected = "terminated while")]
fn bridge_without_the_ledger_check_terminates_early() {
    bridge_race(true);
}

/// The gate of a run over several processes (`launch.rs`, invariant 1), with two PEs: PE 0 a
/// thread, PE 1 on the launcher's thread (a launcher may serve a PE too; two threads keep the
/// model small). Each PE marks itself attached, arrives and waits; the launcher opens the gate
/// once both arrived. No PE may run before the other attached. Opening before every arrival
/// (`open_early`, here before PE 1 attached) lets PE 0 run first.
fn launch_gate_race(open_early: bool) {
    use mgws_core::launch::{Go, LaunchGate, PeState};

    model(move || {
        let gate = Arc::new(LaunchGate {
            ready: HostWord::new(0),
            go: HostWord::new(0),
        });
        let states = Arc::new([PeState(HostWord::new(0)), PeState(HostWord::new(0))]);
        let run = |pe: usize, gate: &LaunchGate<HostWord>, states: &[PeState<HostWord>; 2]| {
            let go = gate.wait(|| {
                thread::yield_now();
                true
            });
            assert_eq!(go, Go::Run);
            assert_ne!(
                states[1 - pe].0.load(Ordering::Relaxed, SCOPE),
                0,
                "a PE ran before the other attached"
            );
        };
        let pe0 = {
            let (gate, states) = (gate.clone(), states.clone());
            thread::spawn(move || {
                states[0].attach();
                gate.arrive();
                run(0, &gate, &states);
            })
        };
        if open_early {
            gate.open();
        }
        states[1].attach();
        gate.arrive();
        while !gate.all_ready(2) {
            thread::yield_now();
        }
        gate.open();
        run(1, &gate, &states);
        pe0.join().unwrap();
    });
}

#[test]
fn launch_gate_runs_no_pe_before_every_pe_attached() {
    launch_gate_race(false);
}

#[test]
#[should_panic(expected = "a PE ran before the other attached")]
fn launch_gate_opened_early_runs_a_pe_too_soon() {
    launch_gate_race(true);
}

/// A PE's results and the launcher (`launch.rs`, invariant 2): the PE writes its result (a plain
/// cell) and finishes; the launcher reads it once it sees the PE finished. Without the release
/// of `finish` (`finish_without_release`) the read races with the write, which loom reports as a
/// causality violation.
fn launch_finish_race(release: bool) {
    use loom::cell::UnsafeCell;
    use mgws_core::launch::PeState;

    model(move || {
        let state = Arc::new(PeState(HostWord::new(0)));
        let result = Arc::new(UnsafeCell::new(0u64));
        let pe = {
            let (state, result) = (state.clone(), result.clone());
            thread::spawn(move || {
                // SAFETY: the PE's own cell; the launcher reads it only after `finish`.
                result.with_mut(|r| unsafe { *r = 42 });
                if release {
                    state.finish();
                } else {
                    state.finish_without_release();
                }
            })
        };
        while !state.is_finished() {
            thread::yield_now();
        }
        // SAFETY: the PE finished; loom checks that its write happened before this read.
        assert_eq!(result.with(|r| unsafe { *r }), 42);
        pe.join().unwrap();
    });
}

#[test]
fn launch_publishes_a_pes_results_with_its_finish() {
    launch_finish_race(true);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn launch_without_the_release_of_finish_reads_a_result_early() {
    launch_finish_race(false);
}

/// Narrow tasks side by side: three lanes each spawn two tasks into a ring with room for three,
/// reserving their slots on the worker's spawn cursor (`Platform::lanes_fetch_add`, relaxed);
/// after the batch's barrier (the joins) the ring holds the first `min(total, room)` and the
/// overflow the rest. With a read-then-write reservation instead (the twin), two lanes can take
/// the same slots and a task is lost.
fn narrow_spawns(atomic_reservation: bool) {
    model(move || {
        use loom::sync::atomic::AtomicU32;
        const ROOM: u32 = 3;
        let cursor = Arc::new(AtomicU32::new(0));
        let ring: Arc<Vec<AtomicU64>> = Arc::new((0..ROOM).map(|_| AtomicU64::new(0)).collect());
        let overflow: Arc<Vec<AtomicU64>> = Arc::new((0..6).map(|_| AtomicU64::new(0)).collect());
        let lane = |id: u64| {
            let (cursor, ring, overflow) = (cursor.clone(), ring.clone(), overflow.clone());
            move || {
                let first = if atomic_reservation {
                    cursor.fetch_add(2, Ordering::Relaxed)
                } else {
                    let seen = cursor.load(Ordering::Relaxed);
                    cursor.store(seen + 2, Ordering::Relaxed);
                    seen
                };
                for k in 0..2 {
                    let task = 2 * id + k as u64 + 1;
                    match spawn_place(ROOM, first + k) {
                        SpawnPlace::Ring(i) => ring[i as usize].store(task, Ordering::Relaxed),
                        SpawnPlace::Overflow(j) => {
                            overflow[j as usize].store(task, Ordering::Relaxed)
                        }
                    }
                }
            }
        };
        let lanes: Vec<_> = (1..3).map(|id| thread::spawn(lane(id))).collect();
        lane(0)();
        for l in lanes {
            l.join().unwrap();
        }
        let total = cursor.load(Ordering::Relaxed);
        let in_ring = total.min(ROOM);
        let mut taken: Vec<u64> = (0..in_ring as usize)
            .map(|i| ring[i].load(Ordering::Relaxed))
            .collect();
        taken.extend((0..(total - in_ring) as usize).map(|j| overflow[j].load(Ordering::Relaxed)));
        assert_exactly_once(taken, 1..=6);
    });
}

#[test]
fn narrow_spawns_take_disjoint_slots() {
    narrow_spawns(true);
}

#[test]
#[should_panic(expected = "tasks taken")]
fn narrow_spawns_without_an_atomic_reservation_lose_tasks() {
    narrow_spawns(false);
}
