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

/// The CONTAINS registry. Its kernels are capped at 112 registers (16 blocks of 32 threads per
/// H100 SM, as at 128). Given the registers it would take (119 at commit 9d6813f), the driver's
/// JIT compiles the text scan into about 2.8 times the instructions and the worker runs at a
/// third of the speed; a cap below that keeps the fast schedule. On an H100 at 9d6813f: 112 ran
/// the man pages at 2.63-2.65e5 tasks/s, 116 at 2.68-2.81e5, 120 at 8.1-8.3e4
/// (docs/results.md). The cliff moves with the code: 8818f8f's worker fell off it at 128, not
/// at 120.
#[crate::registry(kernel = "contains", max_registers = 112)]
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

/// The FIB registry. Its kernels are capped at 96 registers (20 blocks of 32 threads per H100
/// SM), where the worker of commit 9d6813f spills nothing: FIB(30) ran 1.08x faster than at the
/// default 128 (docs/results.md).
#[crate::registry(kernel = "fib", max_registers = 96)]
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
