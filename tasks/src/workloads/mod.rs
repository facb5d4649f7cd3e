//! The built-in workloads and their registry.

pub mod memset;

pub use memset::MemsetTask;

/// The registry of the built-in task functors.
#[crate::registry]
pub enum Builtin {
    Memset(MemsetTask),
}
