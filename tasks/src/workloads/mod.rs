//! The built-in workloads, each with its own registry: a kernel entry then inlines one task
//! functor, not every built-in one (the registers and instruction-cache footprint of a worker are
//! those of its largest task).

pub mod contains;
pub mod fib;
pub mod memset;
pub mod rows;
pub mod skew;
pub mod stall;
pub mod uts;
pub mod uts_hash;

pub use contains::ContainsTask;
pub use fib::FibTask;
pub use memset::MemsetTask;
pub use skew::SkewTask;
pub use stall::StallTask;
pub use uts::UtsNode;

/// The MEMSET registry: one kernel entry set with only the MEMSET functor inlined.
#[crate::registry(kernel = "memset", max_registers = 64)]
pub enum MemsetTasks {
    Memset(MemsetTask),
}

/// The CONTAINS registry. Its kernels are capped at 120 registers (16 blocks of 32 threads per
/// H100 SM, as at 128). At 128 the driver's JIT compiled the text scan of commit 8818f8f's worker
/// into 2.8 times the instructions, 0.33x as fast (the scan of the earlier worker fell off the
/// same cliff at 160 and 255); at 120 it ran the man pages as fast as before, the longest-first
/// corpus 3% and the 10,033 articles 7% faster (docs/results.md).
#[crate::registry(kernel = "contains", max_registers = 120)]
pub enum ContainsTasks {
    Contains(ContainsTask),
}

/// The UTS registry. Its kernels are capped at 96 registers (20 blocks of 32 threads per H100 SM):
/// there T1L ran 1.14x faster than at the default 128, T1 and T5 as fast, T3 at 0.91x
/// (docs/results.md); the kernel-per-level baseline shares the cap and gains as much.
#[crate::registry(kernel = "uts", max_registers = 96)]
pub enum UtsTasks {
    Uts(UtsNode),
}

/// The FIB registry.
#[crate::registry(kernel = "fib")]
pub enum FibTasks {
    Fib(FibTask),
}

/// The SKEW registry (tasks of skewed cost, `skew.rs`).
#[crate::registry(kernel = "skew")]
pub enum SkewTasks {
    Skew(SkewTask),
}

/// The registry of the stalling task (watchdog tests).
#[crate::registry(kernel = "stall")]
pub enum StallTasks {
    Stall(StallTask),
}
