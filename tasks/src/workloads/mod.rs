//! The built-in workloads and their registry.

pub mod contains;
pub mod fib;
pub mod memset;
pub mod rows;
pub mod stall;
pub mod uts;

pub use contains::ContainsTask;
pub use fib::FibTask;
pub use memset::MemsetTask;
pub use stall::StallTask;
pub use uts::UtsNode;

/// The registry of the built-in task functors.
#[crate::registry]
pub enum Builtin {
    Memset(MemsetTask),
    Contains(ContainsTask),
    Uts(UtsNode),
    Fib(FibTask),
    Stall(StallTask),
}
