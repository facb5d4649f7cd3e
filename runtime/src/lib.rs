//! # mgws
//!
//! The host side of MGWS, a work-stealing runtime in which GPUs schedule their own work: the public
//! API ([`Scheduler`], [`Job`], [`Backend`]), the CPU backend and the CUDA backend.
//!
//! The command line, the benchmarks, the corpus readers and the built-in workloads' drivers live
//! in the `mgws-cli` crate.
//!
//! It is also the one dependency a crate with its own tasks needs, on the host and in its GPU
//! kernel: on `nvptx64-nvidia-cuda` this crate is `#![no_std]` and holds only the task model
//! ([`TaskStruct`], [`TaskFunctor`], [`registry`](macro@registry), ...) and [`worker_kernel!`]; the host modules
//! exist on every other target. See `docs/kernels.md`.
#![cfg_attr(target_arch = "nvptx64", no_std)]

#[cfg(not(target_arch = "nvptx64"))]
pub mod backend;
#[cfg(not(target_arch = "nvptx64"))]
pub mod cpu;
#[cfg(not(target_arch = "nvptx64"))]
pub mod cuda;
#[cfg(not(target_arch = "nvptx64"))]
pub mod device;
#[cfg(not(target_arch = "nvptx64"))]
pub mod error;
#[cfg(not(target_arch = "nvptx64"))]
pub mod job;
#[cfg(not(target_arch = "nvptx64"))]
pub mod levels;
#[cfg(not(target_arch = "nvptx64"))]
pub mod pipeline;
#[cfg(not(target_arch = "nvptx64"))]
pub mod report;
#[cfg(not(target_arch = "nvptx64"))]
pub mod rows;
#[cfg(not(target_arch = "nvptx64"))]
pub mod scheduler;
#[cfg(not(target_arch = "nvptx64"))]
pub mod watchdog;

#[cfg(not(target_arch = "nvptx64"))]
pub use {
    backend::Backend,
    error::{Error, Result},
    job::{AreaBytes, Job},
    mgws_core::{OverflowMode, TerminationMode},
    report::{RunReport, WorkerReport},
    rows::PerWorker,
    scheduler::{Chaos, Scheduler, SchedulerBuilder, VictimPolicy},
};

// The task model and the kernel macros, on the host and in kernels alike.
#[doc(hidden)]
pub use mgws_tasks as __tasks;
pub use {
    mgws_core::Platform,
    mgws_kernel_support::{kernel_ptx, worker_kernel},
    mgws_tasks::{
        bytemuck, registry, Access, Ctx, DataDescriptor, Pod, Registry, TaskContext, TaskError,
        TaskFunctor, TaskStruct, Zeroable,
    },
};
