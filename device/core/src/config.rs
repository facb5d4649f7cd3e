//! The scheduler's run-time configuration, shared verbatim by the host and every worker.
//!
//! Everything is plain `u32`/`u64` in `#[repr(C)]` structs so that the host can pass it to a GPU
//! kernel by value. The host validates a configuration before a run (`validate`); the core trusts it.

use bitflags::bitflags;

use crate::word::MAX_FIELD;

/// How workers agree that no work is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum TerminationMode {
    /// An atomic counter of idle workers (thesis 5.6.1).
    IdleCounter = 0,
    /// Voting trees: one per device plus a global tree of the device roots (thesis 5.6.2).
    VotingTree = 1,
    /// An idle counter per device plus a global count of all-idle devices
    /// ([`crate::termination::HierarchicalCounter`]).
    Hierarchical = 2,
}

impl TerminationMode {
    /// The mode a configuration's `termination` field names (an unknown value, which `validate`
    /// refuses, reads as the idle counter).
    #[inline(always)]
    pub const fn from_u32(value: u32) -> TerminationMode {
        match value {
            1 => TerminationMode::VotingTree,
            2 => TerminationMode::Hierarchical,
            _ => TerminationMode::IdleCounter,
        }
    }
}

/// How thieves keep the 24-bit steal counter from overflowing (thesis 4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum OverflowMode {
    /// Always load the victim's word first and fetch-add only if it shows work.
    TwoAtomics = 0,
    /// SWS steal damping: load first only for victims that were empty last time.
    Damping = 1,
}

bitflags! {
    /// Boolean switches of a run.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct RunFlags: u32 {
        /// Collect per-worker statistics.
        const STATS = 1 << 0;
        /// Only steal from workers of the same device.
        const SAME_DEVICE_ONLY = 1 << 1;
        /// One side of a bridged run (`Env::bridge`): termination is decided across both sides.
        const BRIDGED = 1 << 2;
        /// Initial tasks are claimed from the own device's home ranges only, so that a device
        /// needs only its own ranges' tasks in its memory (PE runs, where each PE copies them
        /// into its GPU).
        const INITIAL_OWN_DEVICE = 1 << 3;
        /// TESTING ONLY: let a worker count itself idle while steals from its queue are in flight
        /// (breaks termination; used to show that the loom models catch the race).
        const BREAK_IN_FLIGHT_RULE = 1 << 30;
        /// TESTING ONLY: let a worker that was stolen from this round vote "idle".
        const BREAK_TARGETED_RULE = 1 << 31;
    }
}

// ----- tuning constants of the worker loop -------------------------------------------------

/// Loop iterations between two checks of whether the own public queue ran empty (a power of two):
/// the interval a worker starts with and returns to whenever a check finds the queue empty.
///
/// Each check that finds the queue still holding tasks no thief took doubles the interval, up to
/// the platform's [`Platform::RELEASE_CHECK_INTERVAL_MAX`](crate::platform::Platform::RELEASE_CHECK_INTERVAL_MAX): nobody is short of work. On a GPU
/// the check (a load of the queue word from L2 and an exchange) sat on the path of many of
/// UTS's nodes, and nearly every check found the queue stocked. A check that finds it empty
/// releases and goes back to this interval, so a worker whose thieves keep up checks as often as
/// before (docs/results.md).
pub const RELEASE_CHECK_INTERVAL: u64 = 4;

/// Local tasks a worker must hold (or a full local queue, if it holds fewer) to release half of
/// them to its empty public queue. Listing 5 releases from 2; a queue of 2 or 3 tasks deep in a
/// tree holds small subtrees, whose release and later acquire or steal cost more than running
/// them, so 4 keeps them local and ran FIB and the UTS trees faster on a GPU. 6 and 8 helped the
/// UTS trees further but not FIB: a thief's small FIB subtree rarely holds that many tasks, so
/// work stopped spreading (docs/results.md).
pub const RELEASE_MIN_LOCAL: u64 = 4;

/// Words of an initial chunk each lane loads before it stores any (`copy_tasks_batched`).
pub const INITIAL_COPY_BATCH: usize = 4;

/// Other workers' home ranges a worker tries per `load_initial` once its own is claimed.
pub const INITIAL_VICTIM_TRIES: usize = 2;

/// An idle worker's first pause between two idle rounds, in nanoseconds
/// ([`Platform::idle_pause`](crate::platform::Platform::idle_pause)); each further idle round in a row doubles it, up to
/// [`IDLE_PAUSE_MAX_NS`].
pub const IDLE_PAUSE_MIN_NS: u32 = 64;

/// The longest pause between two idle rounds. It bounds how late an idle worker notices new
/// work or the end of the run.
pub const IDLE_PAUSE_MAX_NS: u32 = 1024;

/// The most devices (GPUs, or the one CPU "device") a run may span.
pub const MAX_DEVICES: usize = 8;

/// Scheduler parameters of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct SchedConfig {
    /// Workers across all devices.
    pub workers: u32,
    /// Workers that share one public queue: 1, 2 or 4.
    pub workers_per_queue: u32,
    /// Tasks the local queue (scratch memory) holds: a power of two from 2 to 65536.
    pub local_capacity: u32,
    /// Tasks a public queue holds.
    pub public_capacity: u32,
    /// Tasks of a worker's overflow stack, used when both of its queues are full.
    pub spill_capacity: u32,
    /// The most initial tasks a worker claims with one fetch-add on a home range's cursor
    /// ([`crate::layout::claim_size`]).
    pub initial_chunk: u32,
    /// [`TerminationMode`] as `u32`.
    pub termination: u32,
    /// [`OverflowMode`] as `u32`.
    pub overflow: u32,
    /// Probability, in 1/1000, that a victim is drawn from the thief's own device (multi-device
    /// runs); ignored while `local_first_tries` is set.
    pub same_device_bias_permille: u16,
    /// Local first (multi-device runs): a thief draws victims on its own device until this many
    /// attempts in a row found nothing, then one off it ([`crate::victim::VictimPicker`]); 0
    /// for the bias above.
    pub local_first_tries: u16,
    /// [`RunFlags`] bits.
    pub flags: u32,
    /// [`crate::Scope`] of the atomics on orchestration data (public queues, termination state).
    pub queue_scope: u32,
    /// Loop iterations between two progress reports of a worker (a power of two).
    pub progress_interval: u32,
    /// Seed of the victim-selection generators.
    pub seed: u64,
}

/// Why a configuration cannot run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    NoWorkers,
    BadQueueSharing(u32),
    WorkersNotDivisibleBySharing { workers: u32, sharing: u32 },
    LocalCapacity(u32),
    PublicCapacity(u32),
    InitialChunk(u32),
    Termination(u32),
    Overflow(u32),
    Bias(u32),
    ProgressInterval(u32),
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ConfigError::NoWorkers => write!(f, "at least one worker is needed"),
            ConfigError::BadQueueSharing(s) => {
                write!(f, "workers per public queue must be 1, 2 or 4, not {s}")
            }
            ConfigError::WorkersNotDivisibleBySharing { workers, sharing } => write!(
                f,
                "the workers of each device ({workers}) must be a multiple of the workers per queue ({sharing})"
            ),
            ConfigError::LocalCapacity(c) => {
                write!(f, "local capacity must be a power of two from 2 to 65536 tasks, not {c}")
            }
            ConfigError::PublicCapacity(c) => write!(
                f,
                "public capacity must be between 2 and {MAX_FIELD} tasks (19-bit epoch fields), not {c}"
            ),
            ConfigError::InitialChunk(c) => write!(
                f,
                "the initial-task chunk must be between 1 and half the local capacity, not {c}"
            ),
            ConfigError::Termination(t) => write!(f, "unknown termination mode {t}"),
            ConfigError::Overflow(o) => write!(f, "unknown overflow mode {o}"),
            ConfigError::Bias(b) => write!(f, "same-device bias must be at most 1000 per mille, not {b}"),
            ConfigError::ProgressInterval(p) => {
                write!(f, "the progress interval must be a power of two, not {p}")
            }
        }
    }
}

impl SchedConfig {
    /// The thesis defaults: local 32, public 256, idle counter, steal damping.
    pub const fn new(workers: u32) -> SchedConfig {
        SchedConfig {
            workers,
            workers_per_queue: 1,
            local_capacity: 32,
            public_capacity: 256,
            spill_capacity: 16384,
            initial_chunk: 16,
            termination: TerminationMode::IdleCounter as u32,
            overflow: OverflowMode::Damping as u32,
            same_device_bias_permille: 0,
            local_first_tries: 0,
            flags: 0,
            queue_scope: crate::Scope::Device as u32,
            progress_interval: 256,
            seed: 0x6d67_7773,
        }
    }

    /// Checks every field against the limits of the queue word and the worker loop.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.workers == 0 {
            return Err(ConfigError::NoWorkers);
        }
        if !matches!(self.workers_per_queue, 1 | 2 | 4) {
            return Err(ConfigError::BadQueueSharing(self.workers_per_queue));
        }
        if !(2..=65536).contains(&self.local_capacity) || !self.local_capacity.is_power_of_two() {
            return Err(ConfigError::LocalCapacity(self.local_capacity));
        }
        if !(2..=MAX_FIELD as u32).contains(&self.public_capacity) {
            return Err(ConfigError::PublicCapacity(self.public_capacity));
        }
        if self.initial_chunk == 0 || self.initial_chunk > self.local_capacity / 2 {
            return Err(ConfigError::InitialChunk(self.initial_chunk));
        }
        if self.termination > 2 {
            return Err(ConfigError::Termination(self.termination));
        }
        if self.overflow > 1 {
            return Err(ConfigError::Overflow(self.overflow));
        }
        if self.same_device_bias_permille > 1000 {
            return Err(ConfigError::Bias(u32::from(self.same_device_bias_permille)));
        }
        if !self.progress_interval.is_power_of_two() {
            return Err(ConfigError::ProgressInterval(self.progress_interval));
        }
        Ok(())
    }

    pub fn termination_mode(&self) -> TerminationMode {
        TerminationMode::from_u32(self.termination)
    }

    pub fn overflow_mode(&self) -> OverflowMode {
        if self.overflow == 1 {
            OverflowMode::Damping
        } else {
            OverflowMode::TwoAtomics
        }
    }

    pub fn run_flags(&self) -> RunFlags {
        RunFlags::from_bits_truncate(self.flags)
    }
}
