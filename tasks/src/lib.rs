//! # mgws-tasks
//!
//! The task model of MGWS (thesis 4.5, 5.2) and the built-in workloads, all `#![no_std]` so the
//! same code runs in CPU workers and GPU kernels.
//!
//! - [`TaskStruct`]: a fixed-size, 64-byte task: a tag, a 24-byte parameter area holding the functor
//!   and two [`DataDescriptor`]s. It is plain bytes, valid on every device: descriptors hold offsets
//!   into numbered data areas, never raw pointers (thesis 5.3's offset pointers).
//! - [`TaskFunctor`]: what a task does. Its `run` executes on every lane of a worker and may spawn
//!   subtasks through its [`Ctx`].
//! - [`registry`](macro@registry): the attribute that turns a list of functor types into a dispatcher by tag.
#![no_std]

// Lets `#[registry]` name this crate as `::mgws_tasks` from inside it too.
extern crate self as mgws_tasks;

#[doc(hidden)]
pub use mgws_core as __core;

pub mod data;
pub mod registry;
pub mod task;
pub mod workloads;

pub use bytemuck::{self, Pod, Zeroable};
pub use data::{Access, DataDescriptor};
pub use mgws_core::{Context, DataMut, TaskError};
pub use mgws_tasks_macros::registry;
pub use registry::Registry;
pub use task::{Tagged, TaskFunctor, TaskStruct, DESCRIPTORS, PARAM_ALIGN, PARAM_BYTES};
pub use workloads::{ContainsTasks, FibTasks, MemsetTasks, SkewTasks, StallTasks, UtsTasks};

/// The task context a functor receives: a [`Context`] whose tasks are [`TaskStruct`]s. Write
/// functors against `&mut impl Ctx`; every scheduler (the mgws loop, the baselines, CPU and GPU)
/// passes its own implementation.
pub trait Ctx: Context<Task = TaskStruct> {}

impl<C: Context<Task = TaskStruct> + ?Sized> Ctx for C {}

/// What [`TaskFunctor::run`] returns.
pub type TaskResult = Result<(), TaskError>;
