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
pub use uts::{UtsNode, UtsTask};

/// The MEMSET registry: one kernel entry set with only the MEMSET functor inlined. A MEMSET task
/// is one atomic: it runs on one lane, a worker runs one per lane. Its GPU workers hold 128
/// tasks, so that one claim of initial tasks (half the local queue) feeds two batches: it ran
/// faster than 64. The static baseline keeps 64, at which 32 of its workers fit an SM (22 at
/// 128). Its kernels are capped at 80 registers, where the worker spills nothing and 23 workers
/// still fit an H200 SM: it ran 2% faster than at 64, and 96 leaves room for 20 (the static
/// kernel needs 64 either way; docs/results.md). Its jobs are indexed, and its workers run their
/// claims from the template (`indexed_in_place`).
#[crate::registry(
    kernel = "memset",
    max_registers = 80,
    local_capacity = 128,
    static_local_capacity = 64,
    indexed_in_place
)]
pub enum MemsetTasks {
    #[width(1)]
    Memset(MemsetTask),
}

/// The CONTAINS registry. Its kernels are capped at 64 registers (32 blocks of 32 threads per
/// SM), where the worker spills 8 bytes (ptxas sm_90, the code of 3806e44; none at 80, where 25
/// blocks fit; not measured on a GPU against 64). The cap of 112 that kept the driver's
/// JIT off a slow form of the scan is gone with the cause: a scan loop whose lanes never met
/// again after a first-byte match (docs/results.md).
#[crate::registry(kernel = "contains", max_registers = 64)]
pub enum ContainsTasks {
    Contains(ContainsTask),
}

/// The UTS registry. Its kernels are capped at 96 registers, where the narrow worker entries
/// spill 4 bytes (128 at 80; ptxas sm_90) and its 12 workers per SM still fit. On an H200 the
/// kernel-per-level baseline, which shares the cap, ran T1L 10% faster at 96 than at 80, and mgws
/// as fast or faster (on an H100 at b9184f2, 80 had been the faster; docs/results.md).
///
/// A node runs on one lane and hashes once, its own state: a worker expands one node per lane.
/// A batch of 32 nodes spawns about 128 children: its GPU workers hold 256 tasks (12 per H100
/// SM), where T1L ran fastest, and their public queues 512, where T2L, whose thieves found
/// little to steal, ran faster on one GPU and on four, and the other trees as fast
/// (docs/results.md). A batch's lanes spawn irregular counts, so its slots are written in plain
/// order (`plain_slots`): without the rotation T1L took 5-12% less time, T3 24%, T3L 19%.
#[crate::registry(
    kernel = "uts",
    max_registers = 96,
    local_capacity = 256,
    public_capacity = 512,
    plain_slots
)]
pub enum UtsTasks {
    #[width(1)]
    Uts(UtsTask),
}

/// The FIB registry. Its kernels are capped at 80 registers, where the narrow worker spills
/// nothing or 4 bytes (60 at 64; ptxas sm_90) and its 12 workers per SM, and the 22 of its
/// kernel per level, still fit: FIB(40) ran 1-6% faster than at 64 on an H200 (docs/results.md).
/// A FIB task is two row updates and one reservation for its two children: it runs on one lane.
/// Its GPU workers hold 256 tasks: room for a batch's spawns, fewer overflow spills, and fewer
/// workers per SM (12 on an H100), as fast on one GPU as 128 and faster on several. Its kernel
/// per level, which holds one batch and its spawns, keeps 128 and twice the workers, where it
/// ran 1.5 times as fast. Its publishing copies keep 4 words of each lane in flight, where FIB
/// ran 1-2% faster (UTS's did not; docs/results.md).
#[crate::registry(
    kernel = "fib",
    max_registers = 80,
    local_capacity = 256,
    levels_local_capacity = 128,
    publish_copy_batch = 4
)]
pub enum FibTasks {
    #[width(1)]
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
