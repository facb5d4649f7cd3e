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
//! - [`task`](macro@task): the attribute that makes a struct a task type (plain data that fits the
//!   parameter area).
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
pub use mgws_core::{Context, DataMut, ResultTable, TaskError};
pub use mgws_tasks_macros::{registry, task};
pub use registry::Registry;
pub use task::{
    FitsParams, Tagged, TaskFunctor, TaskStruct, DESCRIPTORS, PARAM_ALIGN, PARAM_BYTES,
};
pub use workloads::{ContainsTasks, FibTasks, MemsetTasks, SkewTasks, StallTasks, UtsTasks};

/// The task context a functor receives: a [`Context`] whose tasks are [`TaskStruct`]s. Write
/// functors against `&mut impl Ctx`; every scheduler (the mgws loop, the baselines, CPU and GPU)
/// passes its own implementation.
pub trait Ctx: Context<Task = TaskStruct> {
    /// Spawns, for each lane `0..count`, a task with `like`'s tag and data descriptors whose
    /// functor is this lane's `functor()`: what `spawn_each(count, &like.with_params(&f))` does,
    /// with each task written straight into its slot (the head in words, then the parameters)
    /// instead of built whole first. On a GPU that saves registers: no whole task is held in
    /// them before its copy, and UTS's worker entries took fewer (docs/results.md). Every lane
    /// calls it with the same `count`; lanes `>= count` run `functor` too, and their result is
    /// dropped.
    /// `functor` may run more than once on a lane (see [`Context::spawn_each_in_place`]).
    #[inline(always)]
    fn spawn_each_like<F: Pod>(&mut self, count: u32, like: &TaskStruct, functor: impl Fn() -> F) {
        let fill = |slot: Option<*mut TaskStruct>| {
            if let Some(slot) = slot {
                // SAFETY: the context's slot is valid for writes of a whole task.
                unsafe { like.write_head(slot) };
            }
            let params = TaskStruct::params_of(&functor());
            if let Some(slot) = slot {
                // SAFETY: as above; with `write_head`'s, every byte of the task is written.
                unsafe { TaskStruct::write_params(slot, params) };
            }
        };
        // SAFETY: `fill` writes every byte of the slot it is given (`write_head`, then
        // `write_params`) and calls nothing on the context.
        unsafe { self.spawn_each_in_place(count, fill) }
    }
}

impl<C: Context<Task = TaskStruct> + ?Sized> Ctx for C {}

/// What [`TaskFunctor::run`] returns.
pub type TaskResult = Result<(), TaskError>;
