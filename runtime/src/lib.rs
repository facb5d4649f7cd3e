//! # mgws
//!
//! A work-stealing scheduler for irregular tasks that spawn subtasks, on CPU threads and on GPUs
//! that schedule their own work (MGWS: one persistent kernel per GPU, one worker per thread
//! block). This crate is what a user embeds: the task model ([`TaskFunctor`], [`registry`](macro@registry),
//! [`TaskStruct`], checked data views through [`Ctx`]), jobs ([`Job`]), results ([`PerWorker`],
//! [`RunReport`]) and backends ([`Backend`]: CPU threads, CUDA GPUs).
//!
//! ```
//! use mgws::{Backend, Ctx, Job, PerWorker, Scheduler, TaskFunctor, TaskResult, TaskStruct};
//!
//! /// Counts the calls of a naive Fibonacci recursion: fib(n) spawns fib(n - 1) and fib(n - 2).
//! #[mgws::task]
//! struct Fib {
//!     n: u64,
//! }
//!
//! impl TaskFunctor for Fib {
//!     fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> TaskResult {
//!         // This worker's slot of the result table, updated by one lane.
//!         ctx.accumulate(MyTasks::CALLS, |calls| *calls += 1)?;
//!         if self.n >= 2 {
//!             ctx.spawn(&task.with_params(&Fib { n: self.n - 1 }));
//!             ctx.spawn(&task.with_params(&Fib { n: self.n - 2 }));
//!         }
//!         Ok(())
//!     }
//! }
//!
//! // The task types, and a result table of one `u64` per worker.
//! #[mgws::registry(results(calls: u64))]
//! enum MyTasks {
//!     Fib(Fib),
//! }
//!
//! let backend = Backend::cpu();
//! let sched = Scheduler::builder().workers(2).build_for::<MyTasks>(&backend)?;
//! let mut calls = PerWorker::of(MyTasks::CALLS, &sched);
//! let root = MyTasks::task(&Fib { n: 20 });
//! let report = backend.run(&sched, &MyTasks, Job::new(&[root]).results(&mut calls))?;
//! assert_eq!(calls.sum(), 21_891); // 2 fib(21) - 1 calls
//! assert_eq!(report.tasks_run, 21_891);
//! # Ok::<(), mgws::Error>(())
//! ```
//!
//! `docs/embedding.md` (the [`guide`] module in the documentation) puts N-Queens and a tree sum
//! beside their rayon versions; `docs/kernels.md` shows how a crate builds the GPU kernel of its
//! own registry with `mgws-builder`. The command line, the benchmarks, the corpus readers and the
//! built-in workloads' drivers live in the `mgws-cli` crate.
//!
//! On `nvptx64-nvidia-cuda` this crate is `#![no_std]` and holds only the task model and
//! [`worker_kernel!`], so a kernel crate needs no other mgws dependency; the host modules exist on
//! every other target.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![warn(missing_docs)]

#[cfg(not(target_arch = "nvptx64"))]
pub mod area_layout;
#[cfg(not(target_arch = "nvptx64"))]
pub mod backend;
#[cfg(not(target_arch = "nvptx64"))]
pub mod cpu;
#[cfg(all(not(target_arch = "nvptx64"), feature = "cuda"))]
pub mod cuda;
#[cfg(not(target_arch = "nvptx64"))]
pub mod device;
#[cfg(all(not(target_arch = "nvptx64"), feature = "cuda"))]
pub(crate) mod disk_cache;
#[cfg(not(target_arch = "nvptx64"))]
pub mod error;
#[cfg(not(target_arch = "nvptx64"))]
pub mod initial;
#[cfg(not(target_arch = "nvptx64"))]
pub mod job;
#[cfg(not(target_arch = "nvptx64"))]
pub mod levels;
#[cfg(not(target_arch = "nvptx64"))]
pub mod memory;
#[cfg(not(target_arch = "nvptx64"))]
pub mod pipeline;
#[cfg(all(not(target_arch = "nvptx64"), feature = "processes"))]
pub mod processes;
#[cfg(not(target_arch = "nvptx64"))]
pub mod report;
#[cfg(not(target_arch = "nvptx64"))]
pub mod rows;
#[cfg(not(target_arch = "nvptx64"))]
pub mod scheduler;
#[cfg(not(target_arch = "nvptx64"))]
pub mod watchdog;

/// N-Queens and a tree sum with mgws, beside their rayon versions (`docs/embedding.md`; its code
/// runs as doctests).
#[cfg(not(target_arch = "nvptx64"))]
#[doc = include_str!("../../docs/embedding.md")]
pub mod guide {}
// The README's library example runs as a doctest too.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

#[cfg(not(target_arch = "nvptx64"))]
pub use {
    area_layout::{AreaLayout, Combine},
    backend::{Backend, Device, Method, ProcessLayout},
    error::{Error, Result},
    initial::InitialTasks,
    job::{AreaBytes, Job},
    mgws_core::{OverflowMode, TerminationMode},
    report::{RunReport, SetupTimes, WorkerReport},
    rows::PerWorker,
    scheduler::{
        Chaos, Scheduler, SchedulerBuilder, VictimPolicy, DEFAULT_LOCAL_FIRST_TRIES,
        DEFAULT_MAX_INITIAL_CHUNK, DEFAULT_START_TIMEOUT,
    },
};

// The task model and the kernel macros, on the host and in kernels alike.
#[doc(hidden)]
pub use mgws_tasks as __tasks;
pub use {
    mgws_core::Platform,
    mgws_kernel_support::{kernel_cubin, kernel_ptx, worker_kernel},
    mgws_tasks::{
        bytemuck, registry, task, Access, Context, Ctx, DataDescriptor, Pod, Registry, ResultTable,
        TaskError, TaskFunctor, TaskResult, TaskStruct, Zeroable,
    },
};
