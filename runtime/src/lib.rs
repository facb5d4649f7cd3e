//! # mgws
//!
//! The host side of MGWS, a work-stealing runtime in which GPUs schedule their own work: the public
//! API ([`Scheduler`], [`Job`], [`Backend`]), the CPU backend and the CUDA backend.
//!
//! The command line, the benchmarks, the corpus readers and the built-in workloads' drivers live
//! in the `mgws-cli` crate.

pub mod backend;
pub mod cpu;
pub mod cuda;
pub mod error;
pub mod job;
pub mod report;
pub mod rows;
pub mod scheduler;
pub mod watchdog;

pub use backend::Backend;
pub use error::{Error, Result};
pub use job::{AreaBytes, Job};
pub use mgws_core::{OverflowMode, TerminationMode};
pub use report::{RunReport, WorkerReport};
pub use rows::PerWorker;
pub use scheduler::{Chaos, Scheduler, SchedulerBuilder, VictimPolicy};
