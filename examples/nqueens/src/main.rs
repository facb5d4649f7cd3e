//! `nqueens [N [--cuda]]`: counts the solutions of N-Queens (N from 1 to 16, default 12) on the
//! CPU, or on GPU 0 with `--cuda`, and checks the count. A wrong count, a failed run or a bad
//! argument ends with exit code 1 and says why.
use mgws::{cuda::CudaBackend, Backend, Job, PerWorker, Scheduler};
use mgws_example_nqueens::{NQueens, Queens};

/// Solutions of N-Queens for N = 1..=16 (OEIS A000170).
const KNOWN: [u64; 16] =
    [1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596, 2279184, 14772512];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u32 =
        std::env::args().nth(1).map_or(Ok(12), |n| n.parse()).map_err(|e| format!("N: {e}"))?;
    let known = *KNOWN.get((n as usize).wrapping_sub(1)).ok_or("N is from 1 to 16")?;
    let cuda = std::env::args().any(|a| a == "--cuda");
    let backend = if cuda { Backend::cuda(CudaBackend::new()) } else { Backend::cpu() };
    let sched = Scheduler::for_backend::<NQueens>(&backend)?;
    let mut solutions = PerWorker::of(NQueens::SOLUTIONS, &sched);
    let root = NQueens::task(&Queens { n, cols: 0, diag: 0, anti: 0 });
    let report = backend.run(&sched, &NQueens, Job::new(&[root]).results(&mut solutions))?;
    println!("{n}-queens: {} solutions in {:.4} s", solutions.sum(), report.elapsed_s);
    (solutions.sum() == known).then_some(()).ok_or_else(|| format!("expected {known}").into())
}
