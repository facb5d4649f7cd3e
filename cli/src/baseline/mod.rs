//! Baselines that mgws is measured against in the same process, besides **static** and **levels**
//! (methods of the backend, [`mgws::Method::Static`] and [`mgws::Method::Levels`], because they
//! run the scheduler core's baseline loops): rayon and sequential execution.
//!
//! Both run the same per-task code as the mgws task functors (the public no_std functions of
//! `mgws_tasks::workloads`), so only the scheduling differs:
//! - **rayon**: `par_iter` over the articles for CONTAINS, `rayon::join` recursion for the
//!   spawning workloads, in a pool of `threads` threads.
//! - **sequential**: one thread, also the reference for speedups.

pub mod contains;
pub mod fib;
pub mod uts;

use mgws::error::{Error, Result};

/// A rayon pool of `threads` threads with stacks deep enough for the recursion of deep trees
/// (UTS T3 is 1572 levels deep); with `pin`, each bound to one CPU when they fit.
pub fn rayon_pool(threads: u32, pin: bool) -> Result<rayon::ThreadPool> {
    // Bound like the CPU backend's threads (`cpu::threads`), so that neither side of a comparison
    // waits for the kernel to move a woken thread off a busy CPU.
    let cpus = mgws::cpu::threads::cpu_binding(threads as usize, pin);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads as usize)
        .stack_size(256 << 20)
        .thread_name(|i| format!("rayon-{i}"))
        .start_handler(move |i| {
            if let Some(&cpu) = cpus.get(i) {
                mgws::cpu::threads::pin_current_thread(cpu);
            }
        })
        .build()
        .map_err(|e| Error::Config(format!("cannot build a rayon pool: {e}")))
}
