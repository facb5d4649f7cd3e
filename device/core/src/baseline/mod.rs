//! The baselines the evaluation compares mgws with. Each drives a [`crate::exec::WorkerCore`]
//! with its own small loop and shares the task context (so tasks run identically), but none of
//! the mgws loop: no public queue, no stealing, no termination protocol.
//!
//! - [`static_assign`]: **static** — the initial tasks are split into equal contiguous shares in
//!   advance; each worker runs its share and everything those tasks spawn, depth-first, alone.
//! - [`levels`]: **levels** — the tasks of one level (a frontier) are split over the workers; the
//!   tasks they spawn form the next frontier, and the host runs one level after the other (one
//!   kernel launch, or one barrier step, per level).

pub mod levels;
pub mod static_assign;
