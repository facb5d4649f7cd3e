//! The example's counts on the CPU, with one and several lanes per worker.

use mgws::{Backend, Job, PerWorker, Scheduler};
use mgws_example_nqueens::{NQueens, Queens};

#[test]
fn counts_match_the_known_ones_with_1_2_and_4_lanes() {
    for lanes in [1, 2, 4] {
        let backend = Backend::cpu();
        let sched =
            Scheduler::builder().workers(2).lanes(lanes).build_for::<NQueens>(&backend).unwrap();
        for (n, known) in [(1, 1), (4, 2), (6, 4), (8, 92), (9, 352)] {
            let mut solutions = PerWorker::of(NQueens::SOLUTIONS, &sched);
            let root = NQueens::task(&Queens { n, cols: 0, diag: 0, anti: 0 });
            backend.run(&sched, &NQueens, Job::new(&[root]).results(&mut solutions)).unwrap();
            assert_eq!(solutions.sum(), known, "{n}-queens, {lanes} lanes");
        }
    }
}
