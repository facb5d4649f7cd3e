//! A GPU PE of a multi-process run ([`crate::ProcessLayout::Pes`] on CUDA): one process, one GPU,
//! one persistent kernel, joined to the other PEs through NVSHMEM.
//!
//! The launcher's shared heap is the control plane (settings, the launch gate, progress records
//! for the watchdog, results); the orchestration memory lives in NVSHMEM's symmetric heap:
//!
//! - each PE's part holds its public queues, its idle counter, and (used on PE 0 only) the
//!   run-wide shared state, the voting tree and the writable data areas;
//! - every PE maps every other PE's part (`nvshmem_ptr`) and builds the same env a
//!   single-process multi-GPU run builds from peer pointers: a steal from another PE is the same
//!   system-scope fetch-add on the victim's queue word, over NVLink (or PCIe peer access);
//! - progress records, statistics, task tags and overflow stacks are the PE's own, in its GPU's
//!   memory; its main thread copies the records into the control heap every few milliseconds
//!   and forwards the launcher's abort request to the shared state.
//!
//! Read-only data areas are copied to every PE's GPU, and each PE's own home ranges of initial
//! tasks to its GPU (its workers claim from no other: `RunFlags::INITIAL_OWN_DEVICE`).
//!
//! Over NVSHMEM's device API ([`PeTransport::DeviceApi`], docs/design.md 5.8) the parts are not
//! mapped: every PE allocates a window of one part per PE ([`PeWindow`]), whose address names
//! the PE, and the kernel reaches the PEs NVSHMEM does not map through NVSHMEM's calls; each PE
//! writes its own copy of the writable data areas, whose changes it adds into the launcher's
//! areas after the run ([`Replica`]).

use std::mem::size_of;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::time::{Duration, Instant};

use mgws_core::{
    AtomicWord, DeviceIdle, Env, HostWord, Ordering, PeWindow, QueueHeader, RunFlags, Scope,
    SharedState, Topology, WorkerProgress, WorkerStats, AREA_WRITABLE, DATA_AREAS, MAX_DEVICES,
};
use mgws_tasks::{Registry, TaskStruct};

use super::nvshmem::{Nvshmem, UniqueId};
use crate::cuda::driver::{self, DeviceBuffer, Event, Stream};
use crate::cuda::link_wake::{self, LinkWake};
use crate::cuda::memory;
use crate::cuda::plan::{self, shared_field};
use crate::cuda::session::Session;
use crate::cuda::{CudaBackend, Method, PeTransport, Placement};
use crate::error::{Error, Result};
use crate::initial::task_bytes;
use crate::processes::layout::{Header, HeapLayout, StartStage};

use super::mirror::Mirror;
use super::replica::Replica;
use super::symmetric::{symmetric_of, Parts, SymmetricLayout, CALLS_ONLY_VAR};
use crate::processes::monotonic_ns;

/// How often the PE copies its progress records into the control heap and looks for an abort.
const MIRROR_EVERY: Duration = Duration::from_millis(5);

/// The CUDA backend a GPU PE runs with: its one GPU, the symmetric placement, the mgws kernel,
/// the launcher's PTX and register cap.
pub(crate) fn pe_backend(header: &Header, pe: u32) -> Result<CudaBackend> {
    Ok(CudaBackend {
        devices: vec![header.gpus[pe as usize]],
        placement: Placement::Symmetric,
        ptx: header.ptx_path(),
        max_registers: (header.max_registers != 0).then_some(header.max_registers),
        pe_transport: header.pe_transport()?,
        ..CudaBackend::new()
    })
}

/// What a GPU PE allocated on its GPU, besides the symmetric heap.
pub(super) struct Local {
    pub(super) progress: DeviceBuffer,
    pub(super) stats: Option<DeviceBuffer>,
    pub(super) task_tags: DeviceBuffer,
    pub(super) _spill: DeviceBuffer,
    /// This PE's rows of `Env::remote_damping` (none for a lone PE).
    pub(super) _remote_damping: Option<DeviceBuffer>,
    pub(super) _initial: DeviceBuffer,
    pub(super) _read_only: Vec<DeviceBuffer>,
    /// Over the device-API transport: this PE's copies of the writable data areas.
    pub(super) replicas: Vec<Replica>,
    pub(super) env: DeviceBuffer,
}

/// Writes the run's window into the kernel's global `mgws_pe_window`, which its NVSHMEM calls
/// route by.
fn set_window(s: &Session, gpu: &driver::Gpu, window: &PeWindow) -> Result<()> {
    let global = super::nvshmem_link::WINDOW_GLOBAL;
    let (at, bytes) = s.modules[0].global(global)?.ok_or_else(|| {
        Error::BackendUnavailable(format!(
            "{} has no global `{global}`: it was not built with `cargo xtask ptx --nvshmem` from \
             this version of mgws",
            s.ptx.src.origin
        ))
    })?;
    if bytes != size_of::<PeWindow>() {
        return Err(Error::BackendUnavailable(format!(
            "the kernel's `{global}` has {bytes} bytes, not {}: rebuild it with `cargo xtask ptx \
             --nvshmem` from this version of mgws",
            size_of::<PeWindow>()
        )));
    }
    // SAFETY: the module's global, `bytes` bytes on this GPU, alive as long as the module.
    unsafe { DeviceBuffer::borrowed(gpu, at, bytes) }.write(0, bytemuck::bytes_of(window))
}

/// Serves GPU PE `pe` of the run the control heap at `base` describes (its header checked by the
/// caller), until its kernel and every other PE's are done.
pub(crate) fn serve_gpu_pe<R: Registry>(
    base: *mut u8,
    header: &Header,
    layout: &HeapLayout,
    pe: u32,
    patience: Duration,
) -> Result<()> {
    let began = Instant::now();
    let record = &header.pes[pe as usize];
    record.enter(StartStage::OpeningGpu);
    let topology = header.topology;
    let config = header.config;
    let lanes = header.lanes;
    let (p, pes) = (pe as usize, topology.devices);
    let backend = pe_backend(header, pe)?;
    let transport = backend.pe_transport;
    let entry = Method::Mgws.entry::<R>(&config);
    let s = Session::open_for_transport::<R>(&backend, lanes, &entry)?;
    let function = s
        .functions(&entry, &crate::cuda::device::WORKER_PARAMS)?
        .remove(0);
    let gpu = s.gpus[0].clone();
    let workers = topology.workers_on(p);
    let smem = plan::scratch_bytes(config.local_capacity, lanes, topology.device_queues_max());
    let per_sm =
        crate::cuda::grid::blocks_per_sm_for(&gpu, &function, lanes, smem, config.local_capacity)?;
    let what = format!("GPU {} ({}) of PE {pe}", gpu.ordinal, gpu.name);
    plan::fit_workers(
        Some(workers),
        per_sm,
        gpu.sms,
        config.workers_per_queue,
        &what,
    )?;

    tracing::debug!(
        pe,
        seconds = began.elapsed().as_secs_f64(),
        "GPU open, kernel loaded"
    );
    // Join the other PEs: PE 0 makes the unique ID and hands it over through the heap.
    record.enter(StartStage::JoiningNvshmem);
    let mut nvshmem = Nvshmem::load()?;
    gpu.make_current()?;
    let id = if pe == 0 {
        let id = nvshmem.unique_id()?;
        header.publish_unique_id(&id.0);
        id
    } else {
        let waiting = Instant::now();
        let id = header.wait_unique_id(|| {
            std::thread::sleep(Duration::from_micros(100));
            waiting.elapsed() < patience && !header.gate.cancelled()
        });
        match id {
            Some(id) => UniqueId(id),
            None if header.gate.cancelled() => return Ok(()),
            None => {
                return Err(Error::Process(format!(
                    "PE 0 did not hand out NVSHMEM's unique ID within {patience:?}"
                )))
            }
        }
    };
    nvshmem.init(pe, pes, &id)?;
    if transport == PeTransport::DeviceApi {
        // The module's copy of NVSHMEM's device state, which its device calls read.
        nvshmem.cumodule_init(s.modules[0].raw() as *mut std::ffi::c_void)?;
    }
    record.enter(StartStage::Allocating);
    tracing::debug!(
        pe,
        seconds = began.elapsed().as_secs_f64(),
        "NVSHMEM initialised"
    );
    let (sym, bytes) = symmetric_of(
        transport,
        &topology,
        config.public_capacity,
        &header.area_limits,
        header.area_copies,
    );
    let allocation = match transport {
        PeTransport::Mapped if sym.areas_at.iter().any(|&at| at != 0) => {
            "the public queues, the termination state and the writable data areas"
        }
        PeTransport::Mapped => "the public queues and the termination state",
        PeTransport::DeviceApi => {
            "the window of every PE's public queues and termination state (one part per PE)"
        }
    };
    let served = nvshmem.malloc(bytes as usize, allocation).and_then(|at| {
        Joined {
            base,
            header,
            layout,
            pe,
            s: &s,
            function,
            smem,
            nvshmem: &nvshmem,
            symmetric: at,
            sym: &sym,
            patience,
        }
        .run()
        .map(|served| (at, served))
    });
    match served {
        Ok((at, Served::Finished)) => {
            // Collective, and only once every PE's kernel is done with the memory (the
            // barrier in `serve`).
            // SAFETY: allocated above; no kernel of any PE uses it after that barrier.
            unsafe { nvshmem.free(at) };
            nvshmem.finalize();
            Ok(())
        }
        // The collective free and finalize would wait for PEs that may never come (a PE that
        // failed, a launcher that gave up): the process ends without them, and its memory
        // with it. Dropping `nvshmem` leaves the library loaded.
        Ok((_, Served::Cancelled)) => Ok(()),
        Err(e) => {
            // Tell the launcher now, before the session is dropped: releasing the GPU under a
            // kernel that may still run can block, and the launcher would then see a hang
            // instead of this error. The session stays for the same reason; the process ends
            // soon (its caller reports the error again, the same, and exits).
            record.fail_with(&e.to_string());
            std::mem::forget(s);
            Err(e)
        }
    }
}

/// How a PE's part of a run ended.
enum Served {
    /// Its kernel ran and every PE passed the final barrier.
    Finished,
    /// The launcher cancelled the run before the gate opened.
    Cancelled,
}

/// A GPU PE that joined the others, with its symmetric allocation.
struct Joined<'a> {
    base: *mut u8,
    header: &'a Header,
    layout: &'a HeapLayout,
    pe: u32,
    s: &'a Session,
    function: driver::Function,
    /// Dynamic shared memory per block (the scratch layout of the whole run's queues).
    smem: usize,
    nvshmem: &'a Nvshmem,
    /// This PE's symmetric block (`sym.total` bytes).
    symmetric: u64,
    sym: &'a SymmetricLayout,
    /// How long to wait for the launcher's gate.
    patience: Duration,
}

impl Joined<'_> {
    /// Fills this PE's memory, waits for the gate, runs the kernel while mirroring its records,
    /// and reports the results once every PE's kernel is done.
    fn run(self) -> Result<Served> {
        let Joined {
            base,
            header,
            layout,
            pe,
            s,
            function,
            smem,
            nvshmem,
            symmetric,
            sym,
            patience,
        } = self;
        let topology = header.topology;
        let p = pe as usize;
        let pes = topology.devices as usize;
        let gpu = &s.gpus[0];
        // Every PE's part of the heap, as this process's kernel reaches it.
        let mut parts = [0u64; MAX_DEVICES];
        let layout_of_parts = match header.pe_transport()? {
            PeTransport::Mapped => Parts::Mapped,
            PeTransport::DeviceApi => {
                let mut window = PeWindow::new(symmetric, sym.total as u64, topology.devices);
                // The own part by the GPU's own operations where every PE is mapped (one node):
                // NVSHMEM's calls then perform those same atomics on the caller's memory. Where
                // some PE is not mapped, its NIC may update this PE's words, and NVSHMEM's
                // atomics are atomic only with respect to each other: the own part through the
                // calls too. MGWS_NVSHMEM_CALLS_ONLY=1 does that on one node, to check the path.
                let all_mapped =
                    (0..topology.devices).all(|e| nvshmem.peer_ptr(window.part(e), e).is_some());
                if all_mapped && std::env::var_os(CALLS_ONLY_VAR).is_none_or(|v| v != "1") {
                    window.me = pe;
                }
                tracing::debug!(pe, own_part_direct = window.me == pe, "the window");
                Parts::Window(window)
            }
        };
        for (e, part) in parts.iter_mut().enumerate().take(pes) {
            *part = match layout_of_parts {
                Parts::Window(window) => window.part(e as u32),
                Parts::Mapped => nvshmem.peer_ptr(symmetric, e as u32).ok_or_else(|| {
                    Error::Config(format!(
                        "PE {e} is not reachable by loads and stores from PE {pe} (NVSHMEM \
                         gives no mapping: another node, or no peer access between their \
                         GPUs); mgws runs PEs of one node whose GPUs have peer access (the \
                         device-API transport reaches unmapped PEs, but runs across nodes lack \
                         a control plane yet: docs/design.md 5.8)"
                    ))
                })?,
            };
        }
        if let Parts::Window(window) = layout_of_parts {
            set_window(s, gpu, &window)?;
        }
        // Read before the gate, so that a bad value stops this PE before any kernel starts
        // (on either transport: the device-API one copies nothing, its parts are not mapped).
        let wake_links = link_wake::wake_wanted()? && layout_of_parts == Parts::Mapped;
        let own_at = match layout_of_parts {
            Parts::Window(window) => window.part(pe),
            Parts::Mapped => symmetric,
        };
        // SAFETY: this PE's own part, `sym.total` bytes on its GPU (the block itself, or part
        // `pe` of its window); it is freed only after the final barrier (`serve`'s caller) or
        // never.
        let own = unsafe { DeviceBuffer::borrowed(gpu, own_at, sym.total) };
        own.zero()?;
        // SAFETY: the heap holds the layout and the header's data areas (checked by the caller).
        let heap_env = unsafe { layout.env(base, header) };
        if pe == 0 {
            for (i, &at) in sym.areas_at.iter().enumerate() {
                let (src, len) = layout.area(base, i, &header.area_limits);
                if at != 0 && len > 0 {
                    // SAFETY: the area lies in the heap (its layout), which the launcher filled.
                    own.write(at, unsafe { std::slice::from_raw_parts(src, len) })?;
                }
            }
        }

        let mut local = allocate_local(header, layout, base, pe, gpu, &parts, sym)?;
        gpu.synchronize()?;
        let stream = Stream::new(gpu)?;
        let (start, end) = (Event::new(gpu)?, Event::new(gpu)?);
        let record = &header.pes[p];

        tracing::debug!(pe, "memory allocated and filled; ready");
        // Ready: every PE's memory is zeroed and filled before any kernel starts (the gate).
        record.enter(StartStage::Ready);
        record.state.attach();
        header.gate.arrive();
        if !crate::processes::wait_for_gate(header, patience)? {
            return Ok(Served::Cancelled);
        }
        // The links to the other PEs' GPUs woken before this PE's start (a single process wakes
        // its GPUs' links before its gate opens: `cuda/link_wake.rs`). After the gate, since
        // every PE zeroed its part before it arrived there; over the mapped transport only, whose
        // parts are the other GPUs' memory as this process maps it.
        if wake_links {
            // SAFETY: over the mapped transport `parts` are every PE's block as this process
            // maps it, each `sym.total` bytes like `own`, whose layout (the same on every PE)
            // reserves the wake region for these copies alone; the blocks stay mapped until the
            // final barrier.
            let wake =
                unsafe { LinkWake::start_to_peers(gpu, &own, sym.wake_at, p, &parts[..pes]) };
            if let Some(wake) = wake? {
                wake.finish()?;
            }
        }
        let mut env_ptr = local.env.ptr;
        let mut scratch = smem as u32;
        let mut device = pe;
        let mut params = [
            &mut env_ptr as *mut u64 as *mut std::ffi::c_void,
            &mut scratch as *mut u32 as *mut std::ffi::c_void,
            &mut device as *mut u32 as *mut std::ffi::c_void,
        ];
        // The PE's start on the shared clock, right before its start event: the stream is
        // empty, so the event completes at once, and the window between the events holds the
        // launch call as well as the kernel. The start is taken here so that the run's span
        // (earliest start to latest start plus window) counts each PE's launch call once.
        // A single-process run holds its streams behind a launch gate and leaves the launch
        // call out, so a PE's times carry its cooperative launch call and a single process's
        // do not (docs/results.md).
        let started_ns = monotonic_ns();
        start.record(&stream)?;
        let workers = topology.workers_on(p);
        // SAFETY: the parameters match WORKER_PARAMS (checked by `Session::functions`); the env
        // and everything it points to (this PE's buffers, every PE's block) stay allocated
        // until every PE's kernel has exited: the blocks until after the final barrier, this
        // PE's buffers until then too, or for ever if the kernel's end is not seen (they are
        // leaked below).
        let r = unsafe {
            function.launch(
                true,
                workers,
                header.lanes,
                smem as u32,
                &stream,
                &mut params,
            )
        };
        driver::check(r, || {
            format!(
                "launching {workers} blocks of {} threads cooperatively on GPU {} (PE {pe})",
                header.lanes, gpu.ordinal
            )
        })?;
        // PE 0's shared state as this process reaches it: over mappings PE 0's block on every
        // PE; over the window PE 0's own part on PE 0, and on any other PE an unused part of its
        // own window, which it never reads and (`forwards_abort`) never writes.
        let shared_of_pe0 = parts[0] + (sym.run_at + sym.run.shared) as u64;
        // SAFETY: the memory is allocated until after the final barrier (PE 0 frees its own
        // block only after it, and PE 0 alone reads `shared` after it).
        let shared = unsafe {
            DeviceBuffer::borrowed(gpu, shared_of_pe0, size_of::<SharedState<HostWord>>())
        };
        let mirror = Mirror {
            s,
            header,
            heap_env: &heap_env,
            local: &local,
            own: &own,
            shared: &shared,
            sym,
            pe,
            // Over the window, part 0 of a PE's window is PE 0's memory only on PE 0.
            forwards_abort: pe == 0 || layout_of_parts == Parts::Mapped,
        };
        let ran = supervise(&mirror, &stream, &start, &end, gpu, pe);
        let elapsed_ns = match ran {
            Ok(elapsed_ns) => elapsed_ns,
            Err(e) => {
                // The kernel may still run: its memory must outlive it, and a free would wait
                // for it. The process ends soon (the PE reports the error and exits).
                std::mem::forget(local);
                std::mem::forget(stream);
                return Err(e);
            }
        };
        mirror.copy();
        mirror.final_records()?;
        // Every PE's kernel is done: PE 0's shared state and data areas are final, and no kernel
        // reads any block any more.
        nvshmem.barrier_all();
        if pe == 0 {
            mirror.results()?;
        }
        for replica in std::mem::take(&mut local.replicas) {
            replica.merge_into(layout, base, header)?;
        }
        // Relaxed: published by the release store of the state below.
        record.started_ns.store(started_ns, AtomicOrdering::Relaxed);
        record.elapsed_ns.store(elapsed_ns, AtomicOrdering::Relaxed);
        // Release: publishes the records, results and times above to the launcher.
        record.state.finish();
        Ok(Served::Finished)
    }
}

/// Watches a launched kernel until it exits: mirrors the records into the control heap and
/// forwards the launcher's abort. Returns the time between the start and end events, in
/// nanoseconds.
fn supervise(
    mirror: &Mirror<'_>,
    stream: &Stream,
    start: &Event,
    end: &Event,
    gpu: &driver::Gpu,
    pe: u32,
) -> Result<u64> {
    end.record(stream)?;
    let mut forwarded = false;
    loop {
        match stream.query() {
            Ok(true) => break,
            Ok(false) => {}
            Err(code) => {
                return Err(Error::Cuda(format!(
                    "the kernel on GPU {} ({}) of PE {pe} stopped with {}",
                    gpu.ordinal,
                    gpu.name,
                    driver::describe(code)
                )))
            }
        }
        mirror.copy();
        // SAFETY: the heap's shared state lives as long as the heap.
        let heap_shared = unsafe { mirror.heap_env.shared() };
        // Relaxed: a request; the abort store below is what the kernels act on.
        if mirror.forwards_abort
            && !forwarded
            && heap_shared.abort.load(Ordering::Relaxed, Scope::System) != 0
        {
            let copied = mirror.shared.write_async(
                shared_field::ABORT,
                &1u64.to_ne_bytes(),
                &mirror.s.controls[0],
            );
            match copied {
                Ok(()) => forwarded = true,
                // Tried again at the next poll; the launcher's grace ends a PE that never
                // gets it through.
                Err(e) => tracing::warn!(pe, error = %e, "forwarding the abort failed"),
            }
        }
        std::thread::sleep(MIRROR_EVERY);
    }
    Ok((start.seconds_until(end)? * 1e9) as u64)
}

/// Allocates and fills PE `pe`'s own buffers and its env.
// The PE's view of the heap (header, layout, base) and of its GPU (pe, gpu, parts, sym)
// are the run's own values; bundling them would only rename them.
#[allow(clippy::too_many_arguments)]
fn allocate_local(
    header: &Header,
    layout: &HeapLayout,
    base: *mut u8,
    pe: u32,
    gpu: &driver::Gpu,
    parts: &[u64; MAX_DEVICES],
    sym: &SymmetricLayout,
) -> Result<Local> {
    let topology = header.topology;
    let config = header.config;
    let p = pe as usize;
    let workers = topology.workers_on(p) as usize;
    let zeroed = |bytes: usize, what: &str| -> Result<DeviceBuffer> {
        let b = DeviceBuffer::alloc(gpu, bytes, what)?;
        b.zero()?;
        Ok(b)
    };
    let progress = zeroed(
        workers * size_of::<WorkerProgress>(),
        "worker progress records",
    )?;
    let stats = if config.run_flags().contains(RunFlags::STATS) {
        Some(zeroed(
            workers * size_of::<WorkerStats>(),
            "worker statistics",
        )?)
    } else {
        None
    };
    let task_tags = zeroed(workers * 8, "the task-tag words")?;
    let task = size_of::<TaskStruct>();
    let spill_per_worker = config.spill_capacity as usize * task;
    let spill = DeviceBuffer::alloc(
        gpu,
        workers * spill_per_worker,
        &format!(
            "the overflow stacks (--spill-capacity {} x {workers} workers)",
            config.spill_capacity
        ),
    )?;
    let damping_row = memory::damping_row_bytes(&topology);
    let remote_damping = memory::damping_rows(gpu, &topology, workers, "other PEs' queues")?;
    let initial_len = header.initial_len as usize;
    // Only this PE's home ranges, in a buffer of their size: its workers claim from no other
    // (`INITIAL_OWN_DEVICE`, set by the launcher).
    if !config.run_flags().contains(RunFlags::INITIAL_OWN_DEVICE) {
        return Err(Error::Config(
            "a GPU PE holds only its own initial tasks, but the run lets PEs claim each other's \
             (the launcher sets INITIAL_OWN_DEVICE)"
                .into(),
        ));
    }
    // Indexed: only the template, from which the workers make the tasks; else this PE's home
    // ranges, and `initial_at` the address of task 0 (the kernel indexes tasks by their place
    // in the whole set, and only within its own ranges).
    let (initial, initial_at, counted_word) = if header.initial_indexed != 0 {
        let buf = DeviceBuffer::alloc(gpu, task, "the initial tasks' template")?;
        buf.write(
            0,
            task_bytes(std::slice::from_ref(&header.initial_template)),
        )?;
        let at = buf.ptr;
        (buf, at, TaskStruct::INDEXED_WORD)
    } else {
        let own = own_initial_tasks(&header.topology, pe, initial_len as u64);
        let buf = DeviceBuffer::alloc(
            gpu,
            own.len() * task,
            "the initial tasks of its home ranges",
        )?;
        // SAFETY: the heap holds `initial_len` initial tasks (its layout), plain 64-byte
        // structs, and `own` lies within them.
        let own_bytes = unsafe {
            std::slice::from_raw_parts(
                (layout.initial(base) as *const u8).add(own.start * task),
                own.len() * task,
            )
        };
        buf.write(0, own_bytes)?;
        let at = buf.ptr.wrapping_sub((own.start * task) as u64);
        (buf, at, mgws_core::INITIAL_LISTED)
    };
    let mut read_only = Vec::new();
    let mut replicas = Vec::new();
    let mut areas = [0u64; DATA_AREAS];
    for (i, area) in areas.iter_mut().enumerate() {
        let (src, len) = layout.area(base, i, &header.area_limits);
        if len == 0 {
            continue;
        }
        if sym.areas_at[i] != 0 {
            // Writable: PE 0's copy in the symmetric heap, shared by all.
            *area = parts[0] + sym.areas_at[i] as u64;
        } else if header.area_limits[i] & AREA_WRITABLE != 0 {
            // Writable, copied (the device-API transport, or `Header::area_copies`): this PE's
            // own copy.
            // SAFETY: the area lies in the heap (its layout), which the launcher filled; no PE
            // changes it before every kernel ended.
            let replica = Replica::place(gpu, i, unsafe { std::slice::from_raw_parts(src, len) })?;
            *area = replica.buffer.ptr;
            replicas.push(replica);
        } else {
            let buf = DeviceBuffer::alloc(gpu, len, &format!("data area {i}"))?;
            // SAFETY: the area lies in the heap (its layout), which the launcher filled.
            buf.write(0, unsafe { std::slice::from_raw_parts(src, len) })?;
            *area = buf.ptr;
            read_only.push(buf);
        }
    }
    let mut queue_headers = [std::ptr::null(); MAX_DEVICES];
    let mut queue_slots = [std::ptr::null_mut(); MAX_DEVICES];
    let mut device_idle = [std::ptr::null(); MAX_DEVICES];
    for e in 0..topology.devices as usize {
        let queues = parts[e] + sym.queues_at as u64;
        queue_headers[e] = (queues + sym.queues.headers as u64) as *const QueueHeader<HostWord>;
        queue_slots[e] = (queues + sym.queues.slots as u64) as *mut TaskStruct;
        device_idle[e] = (parts[e] + sym.idle_at as u64) as *const DeviceIdle<HostWord>;
    }
    let run = parts[0] + sym.run_at as u64;
    // Indexed by global worker id: offset by this PE's first worker.
    let by_worker = |buf: &DeviceBuffer, size: usize| {
        crate::cuda::memory::by_worker(buf.ptr, topology.first_worker[p], size)
    };
    let env: Env<HostWord, TaskStruct> = Env {
        config,
        topology,
        shared: (run + sym.run.shared as u64) as *const SharedState<HostWord>,
        queue_headers,
        queue_slots,
        tree: (run + sym.run.tree as u64) as *const HostWord,
        device_idle,
        // The shared abort word: the PEs' copies would need forwarding like the word itself.
        abort: (run + (sym.run.shared + shared_field::ABORT) as u64) as *const HostWord,
        device_abort: [std::ptr::null(); MAX_DEVICES],
        bridge: std::ptr::null(),
        bridge_slots: [std::ptr::null_mut(); 2],
        bridge_side: 0,
        bridge_worker: 0,
        worker_base: 0,
        spill: by_worker(&spill, spill_per_worker) as *mut TaskStruct,
        initial: initial_at as *const TaskStruct,
        initial_len: initial_len as u64,
        initial_counted_word: counted_word,
        progress: by_worker(&progress, size_of::<WorkerProgress>()) as *mut WorkerProgress,
        stats: stats.as_ref().map_or(std::ptr::null_mut(), |b| {
            by_worker(b, size_of::<WorkerStats>()) as *mut WorkerStats
        }),
        task_tags: by_worker(&task_tags, 8) as *mut u64,
        areas,
        area_limits: header.area_limits,
        remote_damping: remote_damping.as_ref().map_or(std::ptr::null_mut(), |b| {
            by_worker(b, damping_row) as *mut u64
        }),
    };
    let env_buf = DeviceBuffer::alloc(gpu, size_of::<Env<HostWord, TaskStruct>>(), "env")?;
    env_buf.write(0, crate::cuda::memory::env_bytes(&env))?;
    Ok(Local {
        progress,
        stats,
        task_tags,
        _spill: spill,
        _remote_damping: remote_damping,
        _initial: initial,
        _read_only: read_only,
        replicas,
        env: env_buf,
    })
}

/// The initial tasks of PE `pe`'s home ranges (`Env::initial_range` of its queues, which are
/// contiguous): from the first task of its first queue's share to the first of the next PE's.
fn own_initial_tasks(topology: &Topology, pe: u32, initial_len: u64) -> std::ops::Range<usize> {
    let queues = topology.queues();
    let start_of = |q: u32| mgws_core::static_share(q, queues, initial_len).0 as usize;
    start_of(topology.first_queue[pe as usize])..start_of(topology.first_queue[pe as usize + 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::processes::gpu::replica::{add_changes, all_zero};
    use crate::processes::gpu::symmetric::{area_copies, check_device_api_layouts};

    #[test]
    fn a_replica_adds_its_changes_from_zero_or_from_the_bytes_before() {
        // 3 words and 3 tail bytes; the heap's area already holds another PE's additions.
        let before: Vec<u8> = (0..27u8).collect();
        for initial in [None, Some(before.as_slice())] {
            let start = initial.map_or(vec![0u8; 27], <[u8]>::to_vec);
            let mut copy = start.clone();
            copy[0..8].copy_from_slice(
                &(u64::from_ne_bytes(start[0..8].try_into().unwrap()) + 5).to_ne_bytes(),
            );
            copy[25] = 0xee;
            let mut heap = vec![0u64; 4];
            let dst = heap.as_mut_ptr() as *mut u8;
            // SAFETY: 32 bytes, 8-byte aligned, used by this thread alone.
            unsafe {
                std::ptr::copy_nonoverlapping(start.as_ptr(), dst, 27);
                *(dst as *mut u64) += 100; // another PE's addition to word 0
                add_changes(dst, &copy, initial);
            }
            // SAFETY: as above.
            let bytes = unsafe { std::slice::from_raw_parts(dst, 27) };
            let word0 = u64::from_ne_bytes(bytes[0..8].try_into().unwrap());
            let start0 = u64::from_ne_bytes(start[0..8].try_into().unwrap());
            assert_eq!(word0, start0 + 105, "{initial:?}");
            assert_eq!(
                &bytes[8..25],
                &start[8..25],
                "unchanged words and bytes stay"
            );
            assert_eq!((bytes[25], bytes[26]), (0xee, start[26]));
        }
        assert!(all_zero(&[0; 13]) && !all_zero(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]));
    }

    #[test]
    fn each_pe_copies_exactly_its_queues_home_ranges() {
        for (workers, n) in [
            (vec![4, 4, 4, 4], 1000u64),
            (vec![6, 2], 7),
            (vec![3, 5, 1], 1 << 20),
        ] {
            let t = Topology::split(&workers, 1);
            let q = u64::from(t.queues());
            let mut next = 0;
            for pe in 0..workers.len() as u32 {
                let own = own_initial_tasks(&t, pe, n);
                assert_eq!(own.start, next, "PE {pe} starts where the one before ended");
                let first = u64::from(t.first_queue[pe as usize]);
                let last = u64::from(t.first_queue[pe as usize + 1]) - 1;
                // Env::initial_range of its first and last queue.
                assert_eq!(own.start as u64, first * n / q);
                assert_eq!(own.end as u64, (last + 1) * n / q);
                next = own.end;
            }
            assert_eq!(next as u64, n);
        }
    }

    #[test]
    fn the_symmetric_layout_fits_the_pe_with_most_queues_and_writable_areas_only() {
        let topology = Topology::split(&[4, 8], 2);
        let mut limits = [0; DATA_AREAS];
        limits[0] = 100;
        limits[2] = 24 | AREA_WRITABLE;
        let l = SymmetricLayout::new(&topology, 16, &limits, true);
        assert_eq!(l.queues.queues, 4);
        assert!(l.run_at >= l.queues.total);
        assert!(l.idle_at >= l.run_at + l.run.total);
        assert_eq!(l.areas_at[0], 0, "read-only areas are copied to every PE");
        assert!(l.areas_at[2] > l.idle_at);
        assert!(l.wake_at >= l.areas_at[2] + 24);
        assert!(l.total >= l.wake_at + link_wake::region_bytes(2));
        assert_eq!(SymmetricLayout::new(&topology, 16, &limits, true), l);
        // The device-API transport copies nothing through the heap: no wake region.
        let api = SymmetricLayout::new(&topology, 16, &limits, false);
        assert_eq!((api.wake_at, api.total), (l.wake_at, l.wake_at));
    }

    #[test]
    fn the_device_api_refuses_combines_it_would_add_and_copies_follow_the_layouts() {
        use crate::{AreaLayout, Combine, Job, PerWorker};
        let mut slots = [0u64; 8];
        let mut table = PerWorker::with_workers(crate::ResultTable::<u64>::in_area(1), 4);
        let job = Job::new(&[])
            .output(0, &mut slots)
            .layout(0, AreaLayout::Replicated(Combine::MinU64))
            .results(&mut table);
        let e = check_device_api_layouts(&job, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("data area 0 is laid out replicated-min-u64"),
            "{e}"
        );
        let add = Some(AreaLayout::Replicated(Combine::AddU64));
        assert!(check_device_api_layouts(&job, add).is_ok());
        // The mapped transport copies per-worker and additive areas only: area 1 (per worker),
        // not area 0 (a minimum stays one area in PE 0's part).
        assert_eq!(area_copies(&job, None), 0b10);
        assert_eq!(area_copies(&job, add), 0b11);
        assert_eq!(area_copies(&job, Some(AreaLayout::Partitioned)), 0);
    }
}
