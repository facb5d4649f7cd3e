//! FIB baselines, built on `FibTask::children` and `FibTask::leaf_value`.

use mgws_tasks::workloads::fib::FibTask;

/// (sum of leaves, nodes).
pub type FibCounts = (u64, u64);

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
