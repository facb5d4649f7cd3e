//! # mgws-core
//!
//! The MGWS scheduler core (thesis chapters 4-5), written once and compiled both for host threads
//! and for `nvptx64-nvidia-cuda` persistent kernels. What differs per platform is behind
//! [`Platform`]: scoped atomics, the worker's lanes, their barrier and broadcast, and scratch
//! memory. See `docs/design.md` for the protocols and their invariants.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(asm_experimental_arch, stdarch_nvptx))]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(core_intrinsics, gpu_intrinsics, gpu_launch_sized_workgroup_mem)
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

pub mod baseline;
pub mod bridge;
pub mod config;
pub mod context;
pub mod data;
pub mod error;
pub mod exec;
pub mod host_word;
pub mod initial_end;
pub mod launch;
pub mod layout;
pub mod leader;
pub mod local_ring;
pub mod narrow;
#[cfg(target_arch = "nvptx64")]
pub mod nvptx;
#[cfg(not(target_arch = "nvptx64"))]
pub mod one_lane;
pub mod operation;
pub mod platform;
pub mod public_queue;
pub mod scratch;
pub mod share;
pub mod spec;
pub mod termination;
pub mod victim;
pub mod window;
pub mod word;
pub mod worker;

pub use baseline::lean_static::LeanStatic;
pub use baseline::levels::LevelWorker;
pub use baseline::static_share;
pub use bytemuck;
pub use config::{ConfigError, OverflowMode, RunFlags, SchedConfig, TerminationMode, MAX_DEVICES};
pub use context::{accumulator_stride, Context, DataMut, Tagged, TaskContext, TaskExecutor};
pub use data::{Access, DataDescriptor, ResultTable};
pub use error::{RunError, TaskError, CORE_CODES};
pub use exec::{LevelSink, WorkerCore};
pub use host_word::HostWord;
pub use layout::{
    DeviceIdle, Env, LevelArgs, QueueHeader, SharedState, Topology, WorkerProgress, WorkerStats,
    AREA_WRITABLE, DATA_AREAS, INITIAL_LISTED,
};
pub use leader::LeaderState;
pub use local_ring::ring_index;
pub use narrow::{spawn_place, NarrowContext, SpawnPlace};
pub use operation::Operation;
pub use platform::{AtomicWord, Ordering, Platform, ProtocolStep, Scope};
pub use public_queue::{Claim, Locked, OwnerView, PublicQueue};
pub use scratch::{ScratchLayout, EXCHANGE_WORDS};
pub use share::{claimed_by, max_successful_steals, remaining_after, share, StealShare};
pub use spec::{
    bridge_entry_error, entry_suffix, scope_suffix, BridgeFollower, Fixed, FromConfig, ScopeOnly,
    Spec, BRIDGED_ENTRY_SUFFIXES, STATIC_ENTRY_SUFFIXES, WORKER_ENTRY_SUFFIXES,
};
pub use window::{PeWindow, Remote, WindowPlatform, WindowWord};
pub use word::{QueueWord, WordFlags, MAX_FIELD};
pub use worker::Worker;
