//! FIB baselines, built on `FibTask::children` and `FibTask::leaf_value`.

use mgws_tasks::workloads::fib::FibTask;
use mgws_tasks::{Builtin, TaskStruct};

/// (sum of leaves, nodes).
pub type FibCounts = (u64, u64);

fn add(a: FibCounts, b: FibCounts) -> FibCounts {
    (a.0 + b.0, a.1 + b.1)
}

/// Plain recursion.
pub fn sequential(n: u64) -> FibCounts {
    fn go(t: FibTask) -> FibCounts {
        match t.children() {
            None => (t.leaf_value(), 1),
            Some([a, b]) => {
                let (x, y) = (go(a), go(b));
                (x.0 + y.0, x.1 + y.1 + 1)
            }
        }
    }
    go(FibTask { n })
}

/// Static assignment, level by level over `threads` threads, on the same 64-byte task structs
/// the mgws run moves.
pub fn static_levels(n: u64, threads: u32) -> FibCounts {
    let root = Builtin::task(&FibTask { n });
    super::static_levels(
        vec![root],
        threads,
        |task: &TaskStruct, out, acc: &mut FibCounts| {
            let t: FibTask = task.params_as();
            acc.0 += t.leaf_value();
            acc.1 += 1;
            if let Some([a, b]) = t.children() {
                out.push(task.with_params(&a));
                out.push(task.with_params(&b));
            }
        },
    )
    .into_iter()
    .fold((0, 0), add)
}

/// rayon: `rayon::join` at every call.
pub fn rayon(n: u64, pool: &rayon::ThreadPool) -> FibCounts {
    fn go(t: FibTask) -> FibCounts {
        match t.children() {
            None => (t.leaf_value(), 1),
            Some([a, b]) => {
                let (x, y) = rayon::join(|| go(a), || go(b));
                (x.0 + y.0, x.1 + y.1 + 1)
            }
        }
    }
    pool.install(|| go(FibTask { n }))
}
