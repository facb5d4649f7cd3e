//! # mgws
//!
//! The host side of MGWS, a work-stealing runtime in which GPUs schedule their own work: the public
//! API ([`Scheduler`], [`Job`], [`Backend`]), the CPU backend, the built-in workloads' drivers and
//! the `mgws` command line.
//!
//! ```no_run
//! use mgws::{Backend, Scheduler};
//! let sched = Scheduler::builder().workers(4).build()?;
//! let outcome = mgws::workload::memset::run(&sched, &Backend::Cpu, 1 << 20)?;
//! assert!(outcome.verified);
//! # Ok::<(), mgws::Error>(())
//! ```

pub mod backend;
pub mod baseline;
pub mod bench;
pub mod cli;
pub mod corpus;
pub mod cpu;
pub mod cuda;
pub mod error;
pub mod job;
pub mod report;
pub mod scheduler;
pub mod watchdog;
pub mod workload;

pub use backend::Backend;
pub use error::{Error, Result};
pub use job::{AreaBytes, Job};
pub use mgws_core::{OverflowMode, TerminationMode};
pub use report::{RunReport, WorkerReport};
pub use scheduler::{Chaos, Scheduler, SchedulerBuilder, VictimPolicy};
