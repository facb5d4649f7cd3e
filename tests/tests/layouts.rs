//! Data-area layouts on several CPU domains, which lay areas out as several GPUs do (docs/design.md
//! 7.1): replicated and per-worker areas get a copy per domain, merged after the run. Spawned
//! MEMSET tasks are stolen across domains, so a task often writes its slot in another domain's
//! copy than the one that spawned it. Each layout must stay exact; the twins show that the
//! copies are real, by merging them in a way that does not match how tasks wrote them.

use mgws::{AreaLayout, Backend, Chaos, Combine, Job, PerWorker, Scheduler};
use mgws_tests::{spawned_memset_laid_out, Queens, TestTasks};

fn sched(domains: u32, seed: u64) -> Scheduler {
    Scheduler::builder()
        .workers(6)
        .local_capacity(4)
        .public_capacity(6)
        .cpu_domains(domains)
        .seed(seed)
        // Short sleeps at some protocol steps: with more workers than cores, one thread could
        // otherwise run a whole tree before the others are scheduled, and no task would move
        // between workers (CI saw a run of 12 with no steal on 2 cores).
        .chaos(Chaos {
            seed,
            yield_per_1024: 32,
            sleep_per_1024: 8,
            max_sleep_us: 50,
        })
        .build()
        .unwrap()
}

#[test]
fn every_layout_keeps_memset_exact_on_several_domains() {
    for domains in [1, 2, 3] {
        let mut steals = 0;
        for layout in [
            None,
            Some(AreaLayout::SingleHome),
            Some(AreaLayout::Partitioned),
            Some(AreaLayout::Replicated(Combine::AddU64)),
        ] {
            for seed in 0..3 {
                let s = sched(domains, seed);
                let (report, check) = spawned_memset_laid_out(&s, 20_000, 2, 4, layout).unwrap();
                let label = format!("{domains} domains, {layout:?}, seed {seed}");
                assert!(check.ok(), "{label}: {check:?}");
                steals += report.total(|w| w.steals);
            }
        }
        // Tasks moved between workers (and so, with several domains, between copies).
        assert!(steals > 0, "{domains} domains: no steal in 12 runs");
    }
}

#[test]
fn twin_copies_merged_by_minimum_lose_the_slots_other_domains_wrote() {
    // Each slot is written in one domain's copy; the smallest value over the copies is the 0 of
    // every copy that did not write it. With one shared buffer nothing would be lost.
    let (_, check) = spawned_memset_laid_out(
        &sched(3, 1),
        20_000,
        2,
        4,
        Some(AreaLayout::Replicated(Combine::MinU64)),
    )
    .unwrap();
    assert!(check.lost > 1000, "{check:?}");
    // On one domain there is one buffer, whatever the layout.
    let (_, check) = spawned_memset_laid_out(
        &sched(1, 1),
        20_000,
        2,
        4,
        Some(AreaLayout::Replicated(Combine::MinU64)),
    )
    .unwrap();
    assert!(check.ok(), "{check:?}");
}

#[test]
fn twin_slots_laid_out_per_worker_keep_only_each_domains_rows() {
    // MEMSET's slots are not rows of workers: a per-worker layout keeps, from domain d's copy,
    // only the bytes of domain d's workers' rows, so slots written elsewhere are lost.
    let (_, check) = spawned_memset_laid_out(
        &sched(2, 2),
        20_000,
        2,
        4,
        Some(AreaLayout::PerWorker { row_bytes: 64 }),
    )
    .unwrap();
    assert!(check.lost > 1000, "{check:?}");
}

#[test]
fn per_worker_tables_sum_exactly_on_several_domains() {
    // N-Queens counts solutions in a PerWorker table, one slot per worker: each domain's workers
    // count into their domain's copy; the merged table holds every domain's rows (that the
    // copies are real, the twin above shows).
    for (domains, n, solutions) in [(2, 9, 352), (3, 10, 724), (3, 11, 2680)] {
        let s = sched(domains, 7);
        let mut counts = PerWorker::of(TestTasks::SOLUTIONS, &s);
        let tasks = [Queens::root(n)];
        Backend::cpu()
            .run(&s, &TestTasks, Job::new(&tasks).results(&mut counts))
            .unwrap();
        assert_eq!(counts.sum(), solutions, "{domains} domains");
    }
}
