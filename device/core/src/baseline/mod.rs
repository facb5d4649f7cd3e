//! The baselines the evaluation compares mgws with, with none of the mgws loop: no public queue,
//! no stealing, no termination protocol. Tasks run identically: every scheduler hands them a
//! [`crate::Context`].
//!
//! - [`lean_static`]: **static** — the initial tasks are split into equal contiguous shares in
//!   advance; each worker runs its share and everything those tasks spawn, depth-first, alone,
//!   with state of its own (no [`crate::exec::WorkerCore`]): the lean loop of a hand-written
//!   static kernel.
//! - [`levels`]: **levels** — the tasks of one level (a frontier) are split over the workers; the
//!   tasks they spawn form the next frontier, and the host runs one level after the other (one
//!   kernel launch, or one barrier step, per level). It drives a `WorkerCore`, whose local queue
//!   collects a task's children before they move to the next frontier.

pub mod lean_static;
pub mod levels;

/// Worker `id`'s contiguous share `[id n / W, (id + 1) n / W)` of `n` initial tasks.
#[inline(always)]
pub fn static_share(id: u32, workers: u32, n: u64) -> (u64, u64) {
    let w = workers.max(1) as u64;
    (id as u64 * n / w, (id as u64 + 1) * n / w)
}
