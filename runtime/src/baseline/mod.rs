//! Baselines that mgws is measured against in the same process: sequential execution, static
//! assignment (thesis 6.8) and rayon.
//!
//! All of them run the same per-task code as the mgws task functors (the public no_std functions
//! of `mgws_tasks::workloads`), so only the scheduling differs:
//! - **static**: the task set is split evenly and in advance over `threads` plain threads. For
//!   spawning workloads it runs level by level: each level's tasks are split evenly, every thread
//!   expands its share, and a barrier separates the levels.
//! - **rayon**: `par_iter` over the articles for CONTAINS, `rayon::join` recursion for the
//!   spawning workloads, in a pool of `threads` threads.
//! - **sequential**: one thread, also the reference for speedups.

pub mod contains;
pub mod fib;
pub mod uts;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::RwLock;

use crate::error::{Error, Result};

/// A rayon pool of `threads` threads with stacks deep enough for the recursion of deep trees
/// (UTS T3 is 1572 levels deep).
pub fn rayon_pool(threads: u32) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads as usize)
        .stack_size(256 << 20)
        .thread_name(|i| format!("rayon-{i}"))
        .build()
        .map_err(|e| Error::Config(format!("cannot build a rayon pool: {e}")))
}

/// A sense-reversing barrier that spins, then yields (like the CPU backend's lane barrier), so
/// the static baseline does not pay futex wake-ups between levels.
pub struct SpinBarrier {
    threads: u32,
    arrived: AtomicU32,
    generation: AtomicU32,
}

impl SpinBarrier {
    pub fn new(threads: u32) -> Self {
        SpinBarrier {
            threads,
            arrived: AtomicU32::new(0),
            generation: AtomicU32::new(0),
        }
    }

    pub fn wait(&self) {
        if self.threads == 1 {
            return;
        }
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.threads {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            spins += 1;
            if spins < 256 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Static assignment of a spawning workload, level by level: level 0 is `roots`; each level is
/// split evenly (in contiguous shares) over `threads` threads; `expand(task, out, acc)` runs one
/// task, pushing its children to `out`; a barrier separates levels. Returns every thread's
/// accumulator.
pub fn static_levels<N, A>(
    roots: Vec<N>,
    threads: u32,
    expand: impl Fn(&N, &mut Vec<N>, &mut A) + Sync,
) -> Vec<A>
where
    N: Copy + Send + Sync,
    A: Default + Send,
{
    let threads = threads.max(1);
    let mut first = vec![roots];
    first.resize_with(threads as usize, Vec::new);
    // cur[t]: what thread t produced in the previous level.
    let cur: Vec<RwLock<Vec<N>>> = first.into_iter().map(RwLock::new).collect();
    let barrier = SpinBarrier::new(threads);
    let (cur, barrier, expand) = (&cur, &barrier, &expand);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads as usize)
            .map(|t| {
                s.spawn(move || {
                    let mut acc = A::default();
                    let mut out: Vec<N> = Vec::new();
                    loop {
                        let parts: Vec<_> = cur.iter().map(|c| c.read().unwrap()).collect();
                        let total: usize = parts.iter().map(|p| p.len()).sum();
                        if total == 0 {
                            break;
                        }
                        let n = threads as usize;
                        let (lo, hi) = (t * total / n, (t + 1) * total / n);
                        // Walk the concatenation of the parts over [lo, hi).
                        let mut skip = lo;
                        let mut left = hi - lo;
                        for p in &parts {
                            if left == 0 {
                                break;
                            }
                            if skip >= p.len() {
                                skip -= p.len();
                                continue;
                            }
                            let take = (p.len() - skip).min(left);
                            for task in &p[skip..skip + take] {
                                expand(task, &mut out, &mut acc);
                            }
                            left -= take;
                            skip = 0;
                        }
                        drop(parts);
                        barrier.wait();
                        {
                            let mut mine = cur[t].write().unwrap();
                            std::mem::swap(&mut *mine, &mut out);
                        }
                        out.clear();
                        barrier.wait();
                    }
                    acc
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a static-assignment thread panicked"))
            .collect()
    })
}

/// Static assignment of a flat task set: `tasks` split evenly in contiguous shares over
/// `threads` threads, each running `run` on its share. Returns every thread's accumulator.
pub fn static_flat<N, A>(tasks: &[N], threads: u32, run: impl Fn(&N, &mut A) + Sync) -> Vec<A>
where
    N: Sync,
    A: Default + Send,
{
    let n = threads.max(1) as usize;
    let run = &run;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|t| {
                let share = &tasks[t * tasks.len() / n..(t + 1) * tasks.len() / n];
                s.spawn(move || {
                    let mut acc = A::default();
                    for task in share {
                        run(task, &mut acc);
                    }
                    acc
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a static-assignment thread panicked"))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_levels_expands_every_task_once() {
        // A complete binary tree of depth 10, counted on 1 and 3 threads.
        for threads in [1, 3] {
            let counts = static_levels(vec![0u32], threads, |&d, out, acc: &mut u64| {
                *acc += 1;
                if d < 10 {
                    out.push(d + 1);
                    out.push(d + 1);
                }
            });
            assert_eq!(counts.iter().sum::<u64>(), (1 << 11) - 1);
        }
    }

    #[test]
    fn static_flat_runs_every_task_once() {
        let tasks: Vec<u64> = (0..1001).collect();
        let sums = static_flat(&tasks, 4, |&x, acc: &mut u64| *acc += x);
        assert_eq!(sums.len(), 4);
        assert_eq!(sums.iter().sum::<u64>(), 1000 * 1001 / 2);
    }
}
