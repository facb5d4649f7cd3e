//! The options that change a worker's hot loop, as a type: [`Spec`].
//!
//! A GPU kernel entry is compiled for one [`Fixed`] combination, so that it holds only the code
//! its run executes: the atomics of one scope (a run-time scope is a three-way branch around every
//! atomic), one termination detector, one overflow prevention, and the queue-sharing arithmetic
//! only where queues are shared. The host picks the entry whose spec the run's configuration
//! names ([`entry_suffix`]), and the worker checks that they agree before it starts
//! ([`Spec::matches`]). CPU workers use [`FromConfig`], which reads the same options from the
//! configuration at run time: one compiled worker serves every configuration there.

use core::marker::PhantomData;

use crate::config::{OverflowMode, RunFlags, SchedConfig, TerminationMode};
use crate::platform::Scope;

/// The hot-loop options of a worker: compile-time constants ([`Fixed`]) or the run's
/// configuration ([`FromConfig`]).
pub trait Spec: 'static {
    /// How workers agree that no work is left.
    fn termination(cfg: &SchedConfig) -> TerminationMode;
    /// How thieves keep the steal counter from overflowing.
    fn overflow(cfg: &SchedConfig) -> OverflowMode;
    /// Whether several workers share one public queue (`workers_per_queue > 1`).
    fn shared_queues(cfg: &SchedConfig) -> bool;
    /// The scope of the atomics on orchestration data and of the tasks' atomics.
    fn scope(cfg: &SchedConfig) -> Scope;
    /// Whether a run of this spec may span several devices. A GPU run over several GPUs has
    /// its queues at system scope, so a device-scope entry runs on one GPU only, and leaves
    /// the steps of several devices out of its code (they changed the one-GPU loop:
    /// docs/results.md). The CPU's domains run at any scope.
    #[inline(always)]
    fn may_span_devices(cfg: &SchedConfig) -> bool {
        widen(Self::scope(cfg)) == Scope::System
    }
    /// Whether the worker runs the bridged loop: the bridge worker of one side of a bridged run
    /// ([`crate::bridge`]).
    fn bridged(cfg: &SchedConfig) -> bool;
    /// Whether the worker is one of a bridged run's other workers ([`BridgeFollower`]): it runs
    /// the plain loop and takes the termination decision from its side's bridge worker.
    #[inline(always)]
    fn follows_bridge(_: &SchedConfig) -> bool {
        false
    }

    /// True if this spec runs `cfg` as its options say.
    #[inline(always)]
    fn matches(cfg: &SchedConfig) -> bool {
        Self::termination(cfg) == cfg.termination_mode()
            && Self::overflow(cfg) == cfg.overflow_mode()
            && Self::shared_queues(cfg) == (cfg.workers_per_queue > 1)
            && widen(Self::scope(cfg)) == widen(Scope::from_u32(cfg.queue_scope))
            && (Self::bridged(cfg) || Self::follows_bridge(cfg))
                == cfg.run_flags().contains(RunFlags::BRIDGED)
    }
}

/// The spec of a bridged run's workers other than its bridge worker: `S` with the bridge's steps
/// left out of the loop. Only the bridge worker serves the bridge, so the others need none of its
/// tests between tasks; at termination they wait for the decision the bridge worker copies into
/// their side's shared state.
pub struct BridgeFollower<S>(PhantomData<S>);

impl<S: Spec> Spec for BridgeFollower<S> {
    #[inline(always)]
    fn termination(cfg: &SchedConfig) -> TerminationMode {
        S::termination(cfg)
    }
    #[inline(always)]
    fn overflow(cfg: &SchedConfig) -> OverflowMode {
        S::overflow(cfg)
    }
    #[inline(always)]
    fn shared_queues(cfg: &SchedConfig) -> bool {
        S::shared_queues(cfg)
    }
    #[inline(always)]
    fn scope(cfg: &SchedConfig) -> Scope {
        S::scope(cfg)
    }
    #[inline(always)]
    fn may_span_devices(cfg: &SchedConfig) -> bool {
        S::may_span_devices(cfg)
    }
    #[inline(always)]
    fn bridged(_: &SchedConfig) -> bool {
        false
    }
    #[inline(always)]
    fn follows_bridge(cfg: &SchedConfig) -> bool {
        S::bridged(cfg)
    }
}

/// Orchestration atomics run at device or system scope: a block-scoped word is never shared
/// between workers, so `Block` counts as `Device` (as the GPU's atomics widen it).
#[inline(always)]
const fn widen(scope: Scope) -> Scope {
    match scope {
        Scope::Block | Scope::Device => Scope::Device,
        Scope::System => Scope::System,
    }
}

/// Reads every option from the run's configuration (CPU workers and tests).
pub struct FromConfig;

impl Spec for FromConfig {
    #[inline(always)]
    fn termination(cfg: &SchedConfig) -> TerminationMode {
        cfg.termination_mode()
    }
    #[inline(always)]
    fn overflow(cfg: &SchedConfig) -> OverflowMode {
        cfg.overflow_mode()
    }
    #[inline(always)]
    fn shared_queues(cfg: &SchedConfig) -> bool {
        cfg.workers_per_queue > 1
    }
    #[inline(always)]
    fn scope(cfg: &SchedConfig) -> Scope {
        Scope::from_u32(cfg.queue_scope)
    }
    #[inline(always)]
    fn may_span_devices(_: &SchedConfig) -> bool {
        true
    }
    #[inline(always)]
    fn bridged(cfg: &SchedConfig) -> bool {
        cfg.run_flags().contains(RunFlags::BRIDGED)
    }
}

/// Options fixed at compile time: `TERMINATION` and `OVERFLOW` are [`TerminationMode`] and
/// [`OverflowMode`] as `u32`, `SCOPE` a [`Scope`] as `u32` (`Device` or `System`), `BRIDGED`
/// whether the run is one side of a bridged run.
pub struct Fixed<
    const TERMINATION: u32,
    const OVERFLOW: u32,
    const SHARED: bool,
    const SCOPE: u32,
    const BRIDGED: bool = false,
>;

impl<
        const TERMINATION: u32,
        const OVERFLOW: u32,
        const SHARED: bool,
        const SCOPE: u32,
        const BRIDGED: bool,
    > Spec for Fixed<TERMINATION, OVERFLOW, SHARED, SCOPE, BRIDGED>
{
    #[inline(always)]
    fn termination(_: &SchedConfig) -> TerminationMode {
        TerminationMode::from_u32(TERMINATION)
    }
    #[inline(always)]
    fn overflow(_: &SchedConfig) -> OverflowMode {
        if OVERFLOW == OverflowMode::Damping as u32 {
            OverflowMode::Damping
        } else {
            OverflowMode::TwoAtomics
        }
    }
    #[inline(always)]
    fn shared_queues(_: &SchedConfig) -> bool {
        SHARED
    }
    #[inline(always)]
    fn scope(_: &SchedConfig) -> Scope {
        Scope::from_u32(SCOPE)
    }
    #[inline(always)]
    fn bridged(_: &SchedConfig) -> bool {
        BRIDGED
    }
}

/// Only the scope fixed (`SCOPE`: a [`Scope`] as `u32`), the rest read from the configuration:
/// for the baselines, whose loops use neither termination nor overflow prevention.
pub struct ScopeOnly<const SCOPE: u32>;

impl<const SCOPE: u32> Spec for ScopeOnly<SCOPE> {
    #[inline(always)]
    fn termination(cfg: &SchedConfig) -> TerminationMode {
        FromConfig::termination(cfg)
    }
    #[inline(always)]
    fn overflow(cfg: &SchedConfig) -> OverflowMode {
        FromConfig::overflow(cfg)
    }
    #[inline(always)]
    fn shared_queues(cfg: &SchedConfig) -> bool {
        FromConfig::shared_queues(cfg)
    }
    #[inline(always)]
    fn scope(_: &SchedConfig) -> Scope {
        Scope::from_u32(SCOPE)
    }
    #[inline(always)]
    fn bridged(cfg: &SchedConfig) -> bool {
        FromConfig::bridged(cfg)
    }
}

/// The scope part of a baseline entry's name: `device` or `system`.
pub fn scope_suffix(cfg: &SchedConfig) -> &'static str {
    match widen(Scope::from_u32(cfg.queue_scope)) {
        Scope::System => "system",
        _ => "device",
    }
}

/// The part of a kernel entry's name that names its spec:
/// `<counter|tree|hierarchical>_<twoatomics|damping>_<single|shared>_<device|system>`. The
/// kernel macro (`mgws-kernel-support`) exports one entry per combination under these names, and
/// the host asks for the one its configuration needs.
pub fn entry_suffix(cfg: &SchedConfig) -> &'static str {
    if cfg.run_flags().contains(RunFlags::BRIDGED) {
        // Bridged runs have entries for steal damping with the counter or hierarchical counters
        // only (the host refuses other configurations: `bridge_entry_error`).
        let hierarchical = (cfg.termination_mode() == TerminationMode::Hierarchical) as usize;
        let shared = (cfg.workers_per_queue > 1) as usize;
        let system = (widen(Scope::from_u32(cfg.queue_scope)) == Scope::System) as usize;
        return BRIDGED_ENTRY_SUFFIXES[hierarchical << 2 | shared << 1 | system];
    }
    let termination = cfg.termination_mode() as usize;
    let damping = (cfg.overflow_mode() == OverflowMode::Damping) as usize;
    let shared = (cfg.workers_per_queue > 1) as usize;
    let system = (widen(Scope::from_u32(cfg.queue_scope)) == Scope::System) as usize;
    WORKER_ENTRY_SUFFIXES[termination << 3 | damping << 2 | shared << 1 | system]
}

/// Every worker entry a kernel exports, in the order the kernel macro defines them: calls
/// `$callback!($($prefix,)* [suffix, TERMINATION, OVERFLOW, SHARED, SCOPE, BRIDGED], ...)` once
/// with all of them, the parameters those of [`Fixed`]. The one place the entries are named:
/// `mgws-kernel-support`'s `worker_kernel!` defines an entry for each, and
/// [`WORKER_ENTRY_SUFFIXES`] and [`BRIDGED_ENTRY_SUFFIXES`] index them for the host.
#[macro_export]
macro_rules! for_each_worker_entry {
    ($callback:path $(, $prefix:tt)*) => {
        $callback!(
            $($prefix,)*
            ["counter_twoatomics_single_device", 0, 0, false, 1, false],
            ["counter_twoatomics_single_system", 0, 0, false, 2, false],
            ["counter_twoatomics_shared_device", 0, 0, true, 1, false],
            ["counter_twoatomics_shared_system", 0, 0, true, 2, false],
            ["counter_damping_single_device", 0, 1, false, 1, false],
            ["counter_damping_single_system", 0, 1, false, 2, false],
            ["counter_damping_shared_device", 0, 1, true, 1, false],
            ["counter_damping_shared_system", 0, 1, true, 2, false],
            ["tree_twoatomics_single_device", 1, 0, false, 1, false],
            ["tree_twoatomics_single_system", 1, 0, false, 2, false],
            ["tree_twoatomics_shared_device", 1, 0, true, 1, false],
            ["tree_twoatomics_shared_system", 1, 0, true, 2, false],
            ["tree_damping_single_device", 1, 1, false, 1, false],
            ["tree_damping_single_system", 1, 1, false, 2, false],
            ["tree_damping_shared_device", 1, 1, true, 1, false],
            ["tree_damping_shared_system", 1, 1, true, 2, false],
            ["hierarchical_twoatomics_single_device", 2, 0, false, 1, false],
            ["hierarchical_twoatomics_single_system", 2, 0, false, 2, false],
            ["hierarchical_twoatomics_shared_device", 2, 0, true, 1, false],
            ["hierarchical_twoatomics_shared_system", 2, 0, true, 2, false],
            ["hierarchical_damping_single_device", 2, 1, false, 1, false],
            ["hierarchical_damping_single_system", 2, 1, false, 2, false],
            ["hierarchical_damping_shared_device", 2, 1, true, 1, false],
            ["hierarchical_damping_shared_system", 2, 1, true, 2, false],
            ["counter_damping_single_device_bridged", 0, 1, false, 1, true],
            ["hierarchical_damping_single_device_bridged", 2, 1, false, 1, true],
            ["counter_damping_single_system_bridged", 0, 1, false, 2, true],
            ["hierarchical_damping_single_system_bridged", 2, 1, false, 2, true],
            ["counter_damping_shared_device_bridged", 0, 1, true, 1, true],
            ["counter_damping_shared_system_bridged", 0, 1, true, 2, true],
            ["hierarchical_damping_shared_device_bridged", 2, 1, true, 1, true],
            ["hierarchical_damping_shared_system_bridged", 2, 1, true, 2, true]
        );
    };
}

/// One worker entry of [`for_each_worker_entry!`]: its suffix and its [`Fixed`] parameters.
#[derive(Clone, Copy, Debug)]
pub struct WorkerEntry {
    /// The name's spec part (`mgws_<kernel>_worker_<suffix>`).
    pub suffix: &'static str,
    /// `Fixed`'s `TERMINATION`: a [`TerminationMode`] as `u32`.
    pub termination: u32,
    /// `Fixed`'s `OVERFLOW`: an [`OverflowMode`] as `u32`.
    pub overflow: u32,
    /// `Fixed`'s `SHARED`: several workers per public queue.
    pub shared: bool,
    /// `Fixed`'s `SCOPE`: a [`Scope`] as `u32` (`Device` or `System`).
    pub scope: u32,
    /// `Fixed`'s `BRIDGED`: one side of a bridged run.
    pub bridged: bool,
}

macro_rules! worker_entry_list {
    ($([$suffix:literal, $t:literal, $o:literal, $s:literal, $sc:literal, $b:literal]),* $(,)?) => {
        /// Every worker entry, in the kernel macro's order.
        pub const WORKER_ENTRIES: &[WorkerEntry] = &[$(WorkerEntry {
            suffix: $suffix,
            termination: $t,
            overflow: $o,
            shared: $s,
            scope: $sc,
            bridged: $b,
        }),*];
    };
}
for_each_worker_entry!(worker_entry_list);

/// The suffixes of [`WORKER_ENTRIES`] whose `bridged` is `bridged`, each at the index
/// [`entry_suffix`] computes for it; a gap or a clash fails the build.
const fn suffix_table<const N: usize>(bridged: bool) -> [&'static str; N] {
    let mut table = [""; N];
    let mut i = 0;
    while i < WORKER_ENTRIES.len() {
        let e = WORKER_ENTRIES[i];
        if e.bridged == bridged {
            let system = (e.scope == Scope::System as u32) as usize;
            let index = if bridged {
                ((e.termination == TerminationMode::Hierarchical as u32) as usize) << 2
                    | (e.shared as usize) << 1
                    | system
            } else {
                (e.termination as usize) << 3
                    | (e.overflow as usize) << 2
                    | (e.shared as usize) << 1
                    | system
            };
            assert!(table[index].is_empty(), "two worker entries share an index");
            table[index] = e.suffix;
        }
        i += 1;
    }
    let mut k = 0;
    while k < N {
        assert!(!table[k].is_empty(), "a worker entry is missing");
        k += 1;
    }
    table
}

/// Every spec suffix of a worker entry (`mgws_<kernel>_worker_<suffix>`), indexed by
/// `termination << 3 | damping << 2 | shared << 1 | system` ([`TerminationMode`] as a number).
pub const WORKER_ENTRY_SUFFIXES: [&str; 24] = suffix_table(false);

/// The spec suffixes of the worker entries of bridged runs (the idle counter or hierarchical
/// counters, steal damping, one or several workers per queue, device or system scope for the
/// GPUs' own queues; the bridge itself is always accessed at system scope), indexed by
/// `hierarchical << 2 | shared << 1 | system`.
pub const BRIDGED_ENTRY_SUFFIXES: [&str; 8] = suffix_table(true);

/// Why a bridged run's configuration has no worker entry, or `None` if it has one.
pub fn bridge_entry_error(cfg: &SchedConfig) -> Option<&'static str> {
    if cfg.termination_mode() == TerminationMode::VotingTree {
        Some("a run with CPU workers beside the GPUs needs --termination counter or hierarchical")
    } else if cfg.overflow_mode() != OverflowMode::Damping {
        Some("a run with CPU workers beside the GPUs needs --overflow damping")
    } else {
        None
    }
}

/// The scope suffixes of a static-assignment entry (`mgws_<kernel>_static_<suffix>`).
pub const STATIC_ENTRY_SUFFIXES: [&str; 2] = ["device", "system"];

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::config::SchedConfig;

    fn config(termination: u32, overflow: u32, sharing: u32, scope: Scope) -> SchedConfig {
        let mut cfg = SchedConfig::new(8);
        cfg.termination = termination;
        cfg.overflow = overflow;
        cfg.workers_per_queue = sharing;
        cfg.queue_scope = scope as u32;
        cfg
    }

    #[test]
    fn each_fixed_spec_matches_exactly_the_configurations_its_name_says() {
        type CounterDampingSingleDevice = Fixed<0, 1, false, 1>;
        type TreeTwoSharedSystem = Fixed<1, 0, true, 2>;
        let a = config(0, 1, 1, Scope::Device);
        let b = config(1, 0, 4, Scope::System);
        assert!(CounterDampingSingleDevice::matches(&a));
        assert!(!CounterDampingSingleDevice::matches(&b));
        assert!(TreeTwoSharedSystem::matches(&b));
        assert!(!TreeTwoSharedSystem::matches(&a));
        assert!(FromConfig::matches(&a) && FromConfig::matches(&b));
        assert_eq!(entry_suffix(&a), "counter_damping_single_device");
        assert_eq!(entry_suffix(&b), "tree_twoatomics_shared_system");
        // A block scope is a device scope for orchestration words.
        assert!(CounterDampingSingleDevice::matches(&config(
            0,
            1,
            1,
            Scope::Block
        )));
    }

    #[test]
    fn a_bridge_follower_runs_the_plain_loop_of_a_bridged_spec_and_only_there() {
        type Bridged = Fixed<0, 1, false, 1, true>;
        type Plain = Fixed<0, 1, false, 1>;
        let plain = config(0, 1, 1, Scope::Device);
        let mut bridged = plain;
        bridged.flags |= RunFlags::BRIDGED.bits();
        assert!(Bridged::matches(&bridged) && !Bridged::matches(&plain));
        assert!(BridgeFollower::<Bridged>::matches(&bridged));
        assert!(!BridgeFollower::<Bridged>::bridged(&bridged));
        assert!(BridgeFollower::<Bridged>::follows_bridge(&bridged));
        // A follower of a plain spec is the plain spec.
        assert!(!BridgeFollower::<Plain>::follows_bridge(&plain));
        assert!(BridgeFollower::<Plain>::matches(&plain));
        assert!(BridgeFollower::<FromConfig>::matches(&bridged));
        assert!(BridgeFollower::<FromConfig>::follows_bridge(&bridged));
    }

    #[test]
    fn every_entry_is_named_for_its_parameters() {
        for e in WORKER_ENTRIES {
            let mut cfg = config(
                e.termination,
                e.overflow,
                if e.shared { 2 } else { 1 },
                Scope::from_u32(e.scope),
            );
            if e.bridged {
                cfg.flags |= RunFlags::BRIDGED.bits();
            }
            assert_eq!(entry_suffix(&cfg), e.suffix);
        }
        assert_eq!(WORKER_ENTRIES.len(), 24 + 8);
    }

    #[test]
    fn every_combination_has_its_own_name() {
        let mut names = [""; 24];
        let mut n = 0;
        for t in 0..3 {
            for o in 0..2 {
                for s in [1, 2] {
                    for scope in [Scope::Device, Scope::System] {
                        names[n] = entry_suffix(&config(t, o, s, scope));
                        n += 1;
                    }
                }
            }
        }
        for (i, a) in names.iter().enumerate() {
            assert!(names[i + 1..].iter().all(|b| a != b), "{a} twice");
        }
    }
}
