//! A user's own program running its own registry over PE processes ([`Backend::processes`]):
//! the program serves its PE first thing in `main`, as `mgws::processes::Pe` documents. This
//! test is such a program (`harness = false`: its `main` is ours, so the copies of it that the
//! launcher starts serve their PE instead of running the tests again).

use std::time::{Duration, Instant};

use mgws::processes::{Pe, ProcessDevice};
use mgws::{Backend, Ctx, Error, Job, PerWorker, Scheduler, TaskFunctor, TaskResult, TaskStruct};

/// Counts the calls of a naive Fibonacci recursion.
#[mgws::task]
struct Fib {
    n: u64,
}

impl TaskFunctor for Fib {
    fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> TaskResult {
        ctx.accumulate(MyTasks::CALLS, |calls| *calls += 1)?;
        if self.n >= 2 {
            ctx.spawn(&task.with_params(&Fib { n: self.n - 1 }));
            ctx.spawn(&task.with_params(&Fib { n: self.n - 2 }));
        }
        Ok(())
    }
}

/// Panics: a task that fails on a PE.
#[mgws::task]
struct Boom {
    code: u64,
}

impl TaskFunctor for Boom {
    fn run(&self, _: &TaskStruct, _: &mut impl Ctx) -> TaskResult {
        panic!("boom {}", self.code);
    }
}

/// Fails if its PE's environment still names the heap (a program the PE started would take
/// itself for the PE).
#[mgws::task]
struct EnvCheck {
    _unused: u64,
}

impl TaskFunctor for EnvCheck {
    fn run(&self, _: &TaskStruct, _: &mut impl Ctx) -> TaskResult {
        let named = [mgws::processes::HEAP_FD_VAR, mgws::processes::PE_VAR]
            .iter()
            .any(|v| std::env::var_os(v).is_some());
        if named {
            return Err(mgws::TaskError::Failed(1));
        }
        Ok(())
    }
}

#[mgws::registry(results(calls: u64))]
enum MyTasks {
    Fib(Fib),
    Boom(Boom),
    EnvCheck(EnvCheck),
}

/// A task of another registry.
#[mgws::task]
struct Nothing {
    _unused: u64,
}

impl TaskFunctor for Nothing {
    fn run(&self, _: &TaskStruct, _: &mut impl Ctx) -> TaskResult {
        Ok(())
    }
}

/// Another registry: a PE serving it must refuse a run of `MyTasks`.
#[mgws::registry]
enum OtherTasks {
    Nothing(Nothing),
}

/// Set in the launcher's environment (so its PEs inherit it): the PEs serve `OtherTasks`.
const SERVE_OTHER: &str = "MGWS_TEST_SERVE_OTHER";

/// Calls of fib(n)'s recursion: 2 fib(n + 1) - 1.
fn calls(n: u64) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n + 1 {
        (a, b) = (b, a + b);
    }
    2 * a - 1
}

fn run_fib(sched: &Scheduler, processes: u32, n: u64) -> mgws::Result<(u64, u64)> {
    let mut counts = PerWorker::of(MyTasks::CALLS, sched);
    let root = MyTasks::task(&Fib { n });
    let report = Backend::cpu().processes(processes).run(
        sched,
        &MyTasks,
        Job::new(&[root]).results(&mut counts),
    )?;
    assert_eq!(report.backend, "cpu-processes");
    Ok((counts.sum(), report.tasks_run))
}

fn empty_data_areas_are_placed_and_read_back() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let mut counts = PerWorker::of(MyTasks::CALLS, &sched);
    let mut empty_out: [u64; 0] = [];
    let root = MyTasks::task(&Fib { n: 10 });
    let job = Job::new(std::slice::from_ref(&root))
        .results(&mut counts)
        .input::<u64>(1, &[])
        .output(2, &mut empty_out);
    Backend::cpu()
        .processes(2)
        .run(&sched, &MyTasks, job)
        .unwrap();
    assert_eq!(counts.sum(), calls(10));
}

fn an_embedded_registry_is_exact_over_processes() {
    for (processes, workers, lanes) in [(1, 2, 1), (2, 4, 1), (3, 3, 2), (4, 8, 1)] {
        let sched = Scheduler::builder()
            .workers(workers)
            .lanes(lanes)
            .termination(mgws::TerminationMode::Hierarchical)
            .build()
            .unwrap();
        for n in [1, 15, 22] {
            let (sum, tasks) = run_fib(&sched, processes, n).unwrap();
            assert_eq!(
                (sum, tasks),
                (calls(n), calls(n)),
                "{processes} PEs, fib({n})"
            );
        }
    }
}

fn a_pe_leaves_no_trace_of_the_heap_for_programs_it_starts() {
    let sched = Scheduler::builder().workers(4).build().unwrap();
    let tasks = vec![MyTasks::task(&EnvCheck { _unused: 0 }); 64];
    let report = Backend::cpu()
        .processes(2)
        .run(&sched, &MyTasks, Job::new(&tasks))
        .unwrap();
    assert_eq!(report.tasks_run, 64);
}

fn chaos_delays_on_every_pe_lose_nothing() {
    for seed in 0..6 {
        let sched = Scheduler::builder()
            .workers(4)
            .lanes(1 + seed as u32 % 2)
            .termination(mgws::TerminationMode::Hierarchical)
            .chaos(mgws::Chaos {
                seed,
                yield_per_1024: 64,
                sleep_per_1024: 4,
                max_sleep_us: 50,
            })
            .build()
            .unwrap();
        let (sum, tasks) = run_fib(&sched, 2, 14).unwrap();
        assert_eq!((sum, tasks), (calls(14), calls(14)), "seed {seed}");
    }
}

fn a_panic_on_a_pe_is_the_runs_error_naming_the_pe() {
    let sched = Scheduler::builder().workers(4).build().unwrap();
    let mut counts = PerWorker::of(MyTasks::CALLS, &sched);
    let mut tasks: Vec<TaskStruct> = (0..64).map(|_| MyTasks::task(&Fib { n: 12 })).collect();
    tasks.push(MyTasks::task(&Boom { code: 7 }));
    let e = Backend::cpu()
        .processes(2)
        .run(&sched, &MyTasks, Job::new(&tasks).results(&mut counts))
        .unwrap_err();
    match &e {
        Error::TaskPanicked { message, .. } => {
            assert!(
                message.contains("boom 7") && message.contains("(PE "),
                "{message}"
            )
        }
        other => panic!("expected a panic, got {other}"),
    }
}

fn a_pe_serving_another_registry_is_refused_with_its_reason() {
    std::env::set_var(SERVE_OTHER, "1");
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let e = run_fib(&sched, 2, 10).unwrap_err();
    std::env::remove_var(SERVE_OTHER);
    let message = e.to_string();
    assert!(matches!(e, Error::Process(_)), "{message}");
    assert!(
        // Both PEs refuse; whichever the launcher sees first is reported.
        (message.contains("PE 0 (pid") || message.contains("PE 1 (pid"))
            && message.contains("failed: ")
            && message.contains("MyTasks")
            && message.contains("OtherTasks"),
        "{message}"
    );
}

fn a_program_that_does_not_serve_its_pe_is_refused() {
    let sched = Scheduler::builder().workers(2).build().unwrap();
    let mut counts = PerWorker::of(MyTasks::CALLS, &sched);
    let root = MyTasks::task(&Fib { n: 5 });
    let mut device = ProcessDevice::<MyTasks>::new(&sched, 2, "true".into(), None);
    let job = Job::new(std::slice::from_ref(&root)).results(&mut counts);
    let e = mgws::pipeline::run(&mut device, &sched, job, Instant::now()).unwrap_err();
    let message = e.to_string();
    assert!(message.contains("before it joined the run"), "{message}");
    // A program that neither serves nor exits: after the start-up timeout, each PE is named as
    // one that never read the run's heap.
    let script = std::env::temp_dir().join(format!("mgws-no-serve-{}.sh", std::process::id()));
    std::fs::write(&script, "#!/bin/sh\nexec sleep 30\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let quick = Scheduler::builder()
        .workers(2)
        .watchdog(Duration::from_millis(200))
        .start_timeout(Duration::from_millis(400))
        .build()
        .unwrap();
    let mut device = ProcessDevice::<MyTasks>::new(&quick, 2, script.clone(), None);
    let job = Job::new(std::slice::from_ref(&root)).results(&mut counts);
    let started = Instant::now();
    let e = mgws::pipeline::run(&mut device, &quick, job, Instant::now()).unwrap_err();
    std::fs::remove_file(&script).unwrap();
    let message = e.to_string();
    assert!(
        message.contains("ready after 400ms")
            && message.contains("PE 0 (pid ")
            && message.contains("PE 1 (pid ")
            && message.contains("never read the run's heap"),
        "{message}"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "{message}");
    // A program killed by a signal before it read the heap is not blamed for not serving.
    std::fs::write(&script, "#!/bin/sh\nkill -9 $$\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut device = ProcessDevice::<MyTasks>::new(&quick, 2, script.clone(), None);
    let job = Job::new(std::slice::from_ref(&root)).results(&mut counts);
    let e = mgws::pipeline::run(&mut device, &quick, job, Instant::now()).unwrap_err();
    std::fs::remove_file(&script).unwrap();
    let message = e.to_string();
    assert!(
        message.contains("was ended (signal: 9 (SIGKILL)) before it read the run's heap")
            && !message.contains("Pe::from_env()"),
        "{message}"
    );
    // And a program that cannot be started at all.
    let mut device = ProcessDevice::<MyTasks>::new(&sched, 2, "/nonexistent/mgws".into(), None);
    let job = Job::new(std::slice::from_ref(&root)).results(&mut counts);
    let e = mgws::pipeline::run(&mut device, &sched, job, Instant::now()).unwrap_err();
    assert!(e.to_string().contains("cannot start PE 0"), "{e}");
}

fn main() {
    if let Some(pe) = Pe::from_env() {
        let code = if std::env::var_os(SERVE_OTHER).is_some() {
            pe.serve::<OtherTasks>()
        } else {
            pe.serve::<MyTasks>()
        };
        std::process::exit(code);
    }
    let tests: [(&str, fn()); 7] = [
        (
            "a_pe_leaves_no_trace_of_the_heap_for_programs_it_starts",
            a_pe_leaves_no_trace_of_the_heap_for_programs_it_starts,
        ),
        (
            "empty_data_areas_are_placed_and_read_back",
            empty_data_areas_are_placed_and_read_back,
        ),
        (
            "an_embedded_registry_is_exact_over_processes",
            an_embedded_registry_is_exact_over_processes,
        ),
        (
            "chaos_delays_on_every_pe_lose_nothing",
            chaos_delays_on_every_pe_lose_nothing,
        ),
        (
            "a_panic_on_a_pe_is_the_runs_error_naming_the_pe",
            a_panic_on_a_pe_is_the_runs_error_naming_the_pe,
        ),
        (
            "a_pe_serving_another_registry_is_refused_with_its_reason",
            a_pe_serving_another_registry_is_refused_with_its_reason,
        ),
        (
            "a_program_that_does_not_serve_its_pe_is_refused",
            a_program_that_does_not_serve_its_pe_is_refused,
        ),
    ];
    for (name, test) in tests {
        test();
        println!("test {name} ... ok");
    }
    println!("processes: {} tests passed", tests.len());
}
