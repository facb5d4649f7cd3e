//! criterion micro-benchmarks of the queue operations of the CPU backend: release, acquire and
//! steal on one public queue through `mgws_core::PublicQueue` (the protocol calls a worker makes,
//! with the 64-byte task copies), and the per-task cost of the whole worker loop (local-queue
//! dequeue, dispatch, spawn) measured by small MEMSET, FIB and UTS runs.
//!
//! The local queue's dequeue (`pop_local`) is private to the core's worker loop, so it is measured
//! only as part of the per-task cost of those runs.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mgws::{Backend, Scheduler};
use mgws_benches::{tasks, Queue};
use mgws_cli::workload::uts::{Preset, UtsConfig};
use mgws_cli::workload::{fib, memset, uts};

fn queue_ops(c: &mut Criterion) {
    let mut g = c.benchmark_group("public_queue");
    let batch = tasks(16);
    g.throughput(Throughput::Elements(16));
    g.bench_function("release_16", |b| {
        b.iter_batched_ref(
            || Queue::new(256),
            |q| black_box(q.release(&batch)),
            BatchSize::SmallInput,
        )
    });
    g.throughput(Throughput::Elements(8));
    g.bench_function("acquire_8_of_16", |b| {
        b.iter_batched_ref(
            || {
                let q = Queue::new(256);
                q.release(&batch);
                (q, Vec::with_capacity(16))
            },
            |(q, dst)| black_box(q.acquire(dst, 16)),
            BatchSize::SmallInput,
        )
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("steal_from_16", |b| {
        b.iter_batched_ref(
            || {
                let q = Queue::new(256);
                q.release(&batch);
                (q, Vec::with_capacity(16))
            },
            |(q, dst)| black_box(q.steal(dst)),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("steal_empty", |b| {
        let q = Queue::new(256);
        let mut dst = Vec::new();
        b.iter(|| black_box(q.steal(&mut dst)))
    });
    g.finish();
}

fn per_task(c: &mut Criterion) {
    let mut g = c.benchmark_group("worker_loop");
    g.sample_size(20);
    for workers in [1u32, 2] {
        let sched = Scheduler::builder()
            .workers(workers)
            .spill_capacity(16384)
            .build()
            .unwrap();
        let n = 1 << 16;
        g.throughput(Throughput::Elements(n));
        g.bench_function(format!("memset_65536_w{workers}"), |b| {
            b.iter(|| assert!(memset::run(&sched, &Backend::cpu(), n).unwrap().verified))
        });
        g.throughput(Throughput::Elements(
            mgws_tasks::workloads::fib::tree_nodes(20),
        ));
        g.bench_function(format!("fib_20_w{workers}"), |b| {
            b.iter(|| assert!(fib::run(&sched, &Backend::cpu(), 20).unwrap().verified))
        });
        let cfg = UtsConfig::preset(Preset::Default);
        g.throughput(Throughput::Elements(1732));
        g.bench_function(format!("uts_default_w{workers}"), |b| {
            b.iter(|| assert!(uts::run(&sched, &Backend::cpu(), &cfg).unwrap().verified))
        });
    }
    g.finish();
}

criterion_group!(benches, queue_ops, per_task);
criterion_main!(benches);
