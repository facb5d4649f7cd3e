//! The PE side of a multi-process run: a process the launcher started maps the shared heap,
//! says it is ready, waits for the launcher's go, runs its own workers over the heap and reports
//! how it ended in its [`PeRecord`](super::layout::PeRecord). The launcher supervises, reads the
//! results back and reports errors; a PE only prints what it cannot report through the heap.

use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::time::{Duration, Instant};

use mgws_core::launch::Go;
use mgws_tasks::Registry;

use super::heap::SharedHeap;
use super::layout::{Header, HeapLayout, PeKind, StartStage, MAGIC};
use crate::cpu::device::{request_abort, run_lane, CpuMethod, LaneRun};
use crate::cpu::panics::FirstPanic;
use crate::cpu::platform::LaneGroup;
use crate::cpu::threads::{RunClock, ThreadSet};
use crate::error::{Error, Result};
use crate::scheduler::Chaos;

/// The environment variable that names the inherited heap descriptor of a PE process.
pub const HEAP_FD_VAR: &str = "MGWS_PE_HEAP_FD";
/// The environment variable that names a PE process's index.
pub const PE_VAR: &str = "MGWS_PE";

/// The exit code of a PE process that could not take part in its run (it printed why).
pub const EXIT_PE_FAILED: i32 = 70;

/// How much longer than the launcher's own start-up limit (`Header::start_limit_ms`) a PE waits
/// for the gate before it gives up: the launcher opens or cancels it within its limit.
const GATE_MARGIN: Duration = Duration::from_secs(10);

/// Set by the first [`Pe::from_env`] that found a PE: the heap's descriptor is taken once.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// This process as a PE of a multi-process run, when the launcher started it as one.
///
/// A program that runs jobs over PE processes ([`crate::ProcessLayout::Pes`]) starts copies of
/// itself, one per PE: call [`Pe::from_env`] first in `main`, and when it returns a PE, serve it
/// and exit.
///
/// ```no_run
/// # use mgws::{Ctx, TaskFunctor, TaskResult, TaskStruct};
/// # #[mgws::task]
/// # struct Leaf { n: u64 }
/// # impl TaskFunctor for Leaf {
/// #     fn run(&self, _: &TaskStruct, _: &mut impl Ctx) -> TaskResult { Ok(()) }
/// # }
/// #[mgws::registry]
/// enum MyTasks {
///     Leaf(Leaf),
/// }
///
/// fn main() {
///     if let Some(pe) = mgws::processes::Pe::from_env() {
///         std::process::exit(pe.serve::<MyTasks>());
///     }
///     // ... the program itself, which may run jobs on Backend::cpu().processes(2)
/// }
/// ```
#[derive(Debug)]
pub struct Pe {
    index: u32,
    heap: Result<SharedHeap>,
}

impl Pe {
    /// The PE this process is, if a launcher started it as one (the environment names the heap
    /// descriptor and the PE index); `None` for any other process.
    pub fn from_env() -> Option<Pe> {
        let fd = std::env::var(HEAP_FD_VAR).ok()?;
        let index = std::env::var(PE_VAR).ok().and_then(|i| i.parse().ok());
        // A program this PE starts must not take itself for the PE too.
        std::env::remove_var(HEAP_FD_VAR);
        std::env::remove_var(PE_VAR);
        let heap = match (fd.parse(), index) {
            _ if TAKEN.swap(true, AtomicOrdering::Relaxed) => Err(Error::Config(
                "this process's PE was taken already (Pe::from_env is called once)".into(),
            )),
            // SAFETY: the launcher passed this descriptor to this process for the heap alone,
            // and the flag above lets only the first call take it.
            (Ok(fd), Some(_)) => unsafe { SharedHeap::attach(fd) },
            _ => Err(Error::Config(format!(
                "{HEAP_FD_VAR}={fd:?} and {PE_VAR} do not name a descriptor and a PE index"
            ))),
        };
        Some(Pe {
            index: index.unwrap_or(0),
            heap,
        })
    }

    /// Refuses to serve this PE, with `reason` (a program that cannot serve the run's registry,
    /// for example); the launcher's error quotes it. Returns the process's exit code.
    pub fn refuse(self, reason: &str) -> i32 {
        let e = Error::Config(reason.into());
        if let Ok(heap) = &self.heap {
            report_failure(heap, self.index, &e);
        }
        failed(self.index, &e)
    }

    /// This PE's index (0-based).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The name of the registry the run's tasks belong to (`Registry::NAME`), for a program of
    /// several registries to pick the one to serve; an error when the heap cannot be read.
    pub fn registry_name(&self) -> Result<String> {
        let heap = self
            .heap
            .as_ref()
            .map_err(|e| Error::Config(e.to_string()))?;
        Ok(name_of(checked_header(heap)?))
    }

    /// Runs this PE's workers with registry `R` until the run ends; returns the exit code for
    /// the process: 0 when the PE reported to the launcher (even a failed run: the launcher
    /// reports it), [`EXIT_PE_FAILED`] when it could not take part (it printed why).
    pub fn serve<R: Registry>(self) -> i32 {
        let index = self.index;
        let heap = match self.heap {
            Ok(heap) => heap,
            Err(e) => return failed(index, &e),
        };
        match serve_pe::<R>(&heap, index) {
            Ok(()) => 0,
            Err(e) => {
                report_failure(&heap, index, &e);
                failed(index, &e)
            }
        }
    }
}

/// Waits for the launcher to open the gate (true) or cancel the run (false), at most
/// `patience`: the launcher opens or cancels it within its own start-up limit.
pub(crate) fn wait_for_gate(header: &Header, patience: Duration) -> Result<bool> {
    let waiting = Instant::now();
    match header.gate.wait(|| {
        std::thread::sleep(Duration::from_micros(50));
        waiting.elapsed() < patience
    }) {
        Go::Run => Ok(true),
        Go::Cancel => Ok(false),
        Go::GaveUp => Err(Error::Process(format!(
            "the launcher neither opened nor cancelled the run within {patience:?}"
        ))),
    }
}

/// The monotonic clock every process of the machine shares (`CLOCK_MONOTONIC`), in
/// nanoseconds: PEs record their start on it.
pub(crate) fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Tells the launcher why PE `index` cannot take part, where the heap names the PE.
fn report_failure(heap: &SharedHeap, index: u32, e: &Error) {
    if let Ok(header) = checked_header(heap) {
        if let Some(record) = header.pes.get(index as usize) {
            record.fail_with(&e.to_string());
        }
    }
}

/// Reports why PE `index` cannot take part (an error event: the PE process's subscriber, the
/// CLI's, writes it to its stderr); returns its exit code.
fn failed(index: u32, e: &Error) -> i32 {
    tracing::error!(pe = index, "{e}");
    EXIT_PE_FAILED
}

/// The heap's header, if the heap is large enough to hold one and carries this layout's magic.
fn checked_header(heap: &SharedHeap) -> Result<&Header> {
    if heap.len() < std::mem::size_of::<Header>() {
        return Err(Error::Config(format!(
            "the shared heap ({} bytes) is smaller than its header",
            heap.len()
        )));
    }
    // SAFETY: the mapping is page-aligned and holds a header (checked above).
    let header = unsafe { HeapLayout::header(heap.base()) };
    if header.magic != MAGIC {
        return Err(Error::Config(
            "the shared heap was not laid out by this version of mgws".into(),
        ));
    }
    Ok(header)
}

/// The registry name the header holds.
fn name_of(header: &Header) -> String {
    let name = header
        .registry_name
        .split(|&b| b == 0)
        .next()
        .unwrap_or(&[]);
    String::from_utf8_lossy(name).into_owned()
}

/// Binds this process to its PE's share of the CPUs it may use, so that the thread sets of all
/// PEs bind to different CPUs, as one process's would (`cpu_binding`). Returns whether it did:
/// not when the run has more threads than CPUs (then no thread is bound, as in one process) or
/// the OS refused.
fn bind_to_share(first_thread: usize, threads: usize, total_threads: usize) -> bool {
    let cpus = crate::cpu::threads::cpu_binding(total_threads, true);
    cpus.get(first_thread..first_thread + threads)
        .is_some_and(crate::cpu::threads::bind_current_thread)
}

/// Runs PE `pe` of the run in `heap`: its workers on host threads, or its GPU (`gpu::pe`).
fn serve_pe<R: Registry>(heap: &SharedHeap, pe: u32) -> Result<()> {
    let header = checked_header(heap)?;
    if header.registry_fingerprint != R::FINGERPRINT {
        return Err(Error::Config(format!(
            "the run's tasks belong to registry `{}`, but this program served it with `{}`",
            name_of(header),
            R::NAME
        )));
    }
    let topology = header.topology;
    if pe >= topology.devices {
        return Err(Error::Config(format!(
            "PE {pe} does not exist: the run has {} PEs",
            topology.devices
        )));
    }
    let record = &header.pes[pe as usize];
    record.enter(StartStage::Checking);
    let kind = header.kind()?;
    let layout = HeapLayout::new(
        kind,
        &header.config,
        &topology,
        header.heap_tasks(),
        &header.area_limits,
    )?;
    if layout.total > heap.len() as u64 {
        return Err(Error::Config(format!(
            "the shared heap holds {} bytes, less than its layout's {}",
            heap.len(),
            layout.total
        )));
    }
    record.enter(StartStage::MappingHeap);
    heap.populate();
    let patience = Duration::from_millis(header.start_limit_ms) + GATE_MARGIN;
    if kind == PeKind::Cuda {
        #[cfg(feature = "cuda")]
        return super::gpu::pe::serve_gpu_pe::<R>(heap.base(), header, &layout, pe, patience);
        #[cfg(not(feature = "cuda"))]
        return Err(Error::BackendUnavailable(
            "this program was built without mgws's `cuda` feature: it cannot serve a GPU PE".into(),
        ));
    }
    // SAFETY: the heap holds the layout (checked above), made from the header's values, and
    // outlives every use of the env below.
    let env = unsafe { layout.env(heap.base(), header) };
    let lanes = header.lanes;
    let first = topology.first_worker[pe as usize];
    let workers = topology.workers_on(pe as usize);
    let threads = (workers * lanes) as usize;
    // Bound to the PE's share, each thread then to one CPU of it; else none is bound.
    let pin = header.pin_threads != 0
        && bind_to_share(
            (first * lanes) as usize,
            threads,
            (topology.workers() * lanes) as usize,
        );
    let set = ThreadSet::new(threads, &format!("mgws-pe{pe}"), pin)?;
    let groups = LaneGroup::for_workers(
        workers,
        lanes,
        header.config.local_capacity,
        topology.device_queues_max(),
    );
    let chaos = (header.chaos_on != 0).then(|| Chaos {
        seed: header.chaos[0],
        yield_per_1024: header.chaos[1] as u32,
        sleep_per_1024: header.chaos[2] as u32,
        max_sleep_us: header.chaos[3] as u32,
    });

    record.enter(StartStage::Ready);
    record.state.attach();
    header.gate.arrive();
    if !wait_for_gate(header, patience)? {
        return Ok(());
    }

    // Relaxed: published by the release store of the state at the end.
    record
        .started_ns
        .store(monotonic_ns(), AtomicOrdering::Relaxed);
    let clock = RunClock::start();
    let start = clock.started_at();
    let panicked = FirstPanic::default();
    set.broadcast(|i| {
        let (w, lane) = (first + i as u32 / lanes, i as u32 % lanes);
        run_lane(
            LaneRun {
                method: CpuMethod::Mgws,
                lane,
                lanes,
                group: &groups[(w - first) as usize],
                start,
                chaos,
            },
            &env,
            &R::default(),
            (w, w),
            &panicked,
            || request_abort(&env),
        );
        clock.finished();
    });

    // Relaxed: published by the release store of the state below.
    record
        .elapsed_ns
        .store(clock.elapsed().as_nanos() as u64, AtomicOrdering::Relaxed);
    if let Some((worker, message)) = panicked.into_first() {
        record.set_panic_message(&message);
        record
            .panic_worker
            .store(u64::from(worker) + 1, AtomicOrdering::Relaxed);
    }
    // Publishes the record, the statistics and progress records and every task's writes to the
    // data areas (program order after the workers joined) to the launcher.
    record.state.finish();
    Ok(())
}
