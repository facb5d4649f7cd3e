//! What the shared heap holds, and where: a [`Header`] that the launcher writes before any PE
//! starts, then the run's orchestration memory (the sections of `crate::cpu::arena::Sections`),
//! the initial tasks and the data areas. Offsets follow from the header's values alone
//! ([`HeapLayout::new`]), so the launcher and every PE compute the same ones, each over its own
//! mapping.

use std::sync::atomic::AtomicU64;

use mgws_core::launch::{LaunchGate, PeState};
use mgws_core::{
    DeviceIdle, Env, HostWord, QueueHeader, SchedConfig, SharedState, Topology, WorkerProgress,
    WorkerStats, AREA_WRITABLE, DATA_AREAS, MAX_DEVICES,
};
use mgws_tasks::TaskStruct;

use crate::cpu::arena::{Lone, Sections};
use crate::error::{Error, Result};

/// `b"mgwsPE"` and the layout's version: a PE refuses a heap of another version.
pub const MAGIC: u64 = u64::from_le_bytes(*b"mgwsPE\x00\x06");

/// What a PE runs its workers on: [`Header::kind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum PeKind {
    /// Host threads over the orchestration memory in the heap (the CPU twin).
    Cpu = 0,
    /// One GPU per PE: the orchestration memory in NVSHMEM's symmetric heap, the heap only the
    /// control plane (settings, handshake, progress, results).
    Cuda = 1,
}

impl PeKind {
    /// The kind a header's word names, if any.
    pub fn from_word(word: u32) -> Option<PeKind> {
        match word {
            0 => Some(PeKind::Cpu),
            1 => Some(PeKind::Cuda),
            _ => None,
        }
    }
}

/// Bytes of [`Header::ptx_path`].
pub const PTX_PATH_BYTES: usize = 512;

/// Every section starts on its own 128-byte line (two cache lines: no false sharing between
/// them, as the arena's counters have).
const ALIGN: u64 = 128;

/// Words of a panic message a PE reports, 8 bytes each (longer messages are cut).
pub const PANIC_WORDS: usize = 29;

/// The run-wide settings and the launch handshake, at offset 0 of the heap.
#[repr(C)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: u64,
    /// `Registry::FINGERPRINT` of the registry every PE must run.
    pub registry_fingerprint: u64,
    /// `Registry::NAME`, UTF-8, zero-padded (for messages).
    pub registry_name: [u8; 64],
    pub config: SchedConfig,
    pub topology: Topology,
    pub lanes: u32,
    /// Whether PEs bind their threads to CPUs (1) or not (0).
    pub pin_threads: u32,
    /// [`PeKind`] of every PE.
    pub kind: u32,
    /// GPU PEs: the register cap of the kernel's JIT compile (0: the backend's default).
    pub max_registers: u32,
    /// GPU PEs: how they reach each other's memory (`PeTransport::to_word`).
    pub pe_transport: u32,
    /// GPU PEs: the GPU ordinal each PE runs on.
    pub gpus: [u32; MAX_DEVICES],
    /// GPU PEs: the PTX file to load, its path's bytes, zero-padded (empty: the usual search).
    pub ptx_path: [u8; PTX_PATH_BYTES],
    /// `[seed, yield_per_1024, sleep_per_1024, max_sleep_us]` of the run's chaos; `chaos_on`
    /// says whether there is any.
    pub chaos: [u64; 4],
    pub chaos_on: u64,
    /// The run's initial tasks; the heap holds them unless they are indexed.
    pub initial_len: u64,
    /// 1 where the initial tasks are indexed ([`crate::InitialTasks::Indexed`]): task `k` is
    /// `initial_template.indexed(k)`, which the workers make from the template
    /// (`Env::initial_counted_word`), and the heap holds none.
    pub initial_indexed: u64,
    pub initial_template: TaskStruct,
    /// Per data area, its length with [`AREA_WRITABLE`] where tasks may write it (0: none), as
    /// `Env::area_limits` holds them.
    pub area_limits: [u64; DATA_AREAS],
    /// GPU PEs over the mapped transport: bit `i` set for writable area `i` that each PE writes
    /// a copy of its own, whose changes it adds into the heap's area after the run (areas laid
    /// out per worker or replicated with additions; `cuda::pe::Replica`). Over the device API
    /// every writable area is copied so.
    pub area_copies: u64,
    /// How long the launcher waits for every PE to be ready, in milliseconds (a PE waits for
    /// the gate a little longer).
    pub start_limit_ms: u64,
    /// The launch handshake (`mgws_core::launch`).
    pub gate: LaunchGate<HostWord>,
    /// GPU PEs: NVSHMEM's unique ID, which PE 0 makes and the others join with (the unique-ID
    /// bootstrap), and whether it is there yet (1, stored with release after the ID).
    pub unique_id_ready: AtomicU64,
    pub unique_id: [AtomicU64; 16],
    /// One record per PE.
    pub pes: [PeRecord; MAX_DEVICES],
}

impl Header {
    /// The initial tasks the heap holds: all of them, or none where they are indexed.
    pub fn heap_tasks(&self) -> u64 {
        if self.initial_indexed != 0 {
            0
        } else {
            self.initial_len
        }
    }

    /// The kind of PE this run has; an error for a word no kind has.
    pub fn kind(&self) -> Result<PeKind> {
        PeKind::from_word(self.kind).ok_or_else(|| {
            Error::Config(format!(
                "the shared heap names PE kind {}, which is none",
                self.kind
            ))
        })
    }

    /// How GPU PEs reach each other's memory; an error for a word no transport has.
    #[cfg(feature = "cuda")]
    pub fn pe_transport(&self) -> Result<crate::cuda::PeTransport> {
        crate::cuda::PeTransport::from_word(self.pe_transport).ok_or_else(|| {
            Error::Config(format!(
                "the shared heap names PE transport {}, which is none",
                self.pe_transport
            ))
        })
    }

    /// The PTX file GPU PEs load, if the launcher named one.
    #[cfg(feature = "cuda")]
    pub fn ptx_path(&self) -> Option<std::path::PathBuf> {
        let bytes = self.ptx_path.split(|&b| b == 0).next().unwrap_or(&[]);
        (!bytes.is_empty()).then(|| {
            use std::os::unix::ffi::OsStrExt;
            std::path::PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
        })
    }

    /// Encodes `path` for [`Header::ptx_path`]; an error when it does not fit.
    pub fn encode_ptx_path(path: &std::path::Path) -> Result<[u8; PTX_PATH_BYTES]> {
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_os_str().as_bytes();
        if bytes.len() >= PTX_PATH_BYTES || bytes.contains(&0) {
            return Err(Error::Config(format!(
                "the PTX path {} is longer than the {} bytes a multi-process run passes to its PEs",
                path.display(),
                PTX_PATH_BYTES - 1
            )));
        }
        let mut out = [0u8; PTX_PATH_BYTES];
        out[..bytes.len()].copy_from_slice(bytes);
        Ok(out)
    }

    /// PE 0: hands NVSHMEM's unique ID to the other PEs.
    pub fn publish_unique_id(&self, id: &[u8; 128]) {
        for (word, chunk) in self.unique_id.iter().zip(id.chunks_exact(8)) {
            // Relaxed: published by the release store below.
            word.store(
                u64::from_le_bytes(chunk.try_into().expect("8 bytes")),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        // Release: a PE that acquires the flag reads the whole ID.
        self.unique_id_ready
            .store(1, std::sync::atomic::Ordering::Release);
    }

    /// The unique ID PE 0 published, once it is there; `None` if `keep_waiting` says to stop
    /// first (it is called between looks).
    pub fn wait_unique_id(&self, mut keep_waiting: impl FnMut() -> bool) -> Option<[u8; 128]> {
        // Acquire: pairs with the release in `publish_unique_id`.
        while self
            .unique_id_ready
            .load(std::sync::atomic::Ordering::Acquire)
            == 0
        {
            if !keep_waiting() {
                return None;
            }
        }
        let mut id = [0u8; 128];
        for (chunk, word) in id.chunks_exact_mut(8).zip(&self.unique_id) {
            chunk.copy_from_slice(
                &word
                    .load(std::sync::atomic::Ordering::Relaxed)
                    .to_le_bytes(),
            );
        }
        Some(id)
    }
}

/// Where a PE is in its start-up ([`PeRecord::stage`]): what the launcher reports of a PE that
/// was not ready within its start-up limit. Each step may wait on others (NVSHMEM's bootstrap is
/// collective), so the stage says where a PE waits, not which PE is at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum StartStage {
    /// The PE has not read the run's heap: the program did not call `Pe::from_env()` first, or
    /// has not got there yet.
    NotStarted = 0,
    /// The PE attached the heap and checks the run against its registry.
    Checking = 1,
    /// The PE maps every page of the heap into its address space.
    MappingHeap = 2,
    /// A GPU PE opens its GPU and loads its kernel entry.
    OpeningGpu = 3,
    /// A GPU PE waits for NVSHMEM's unique ID (PE 0 makes it) or joins NVSHMEM with it.
    JoiningNvshmem = 4,
    /// A GPU PE allocates and maps the symmetric heap and fills its buffers.
    Allocating = 5,
    /// The PE is set up and waits at the gate.
    Ready = 6,
}

impl StartStage {
    /// The stage a record's word names (a word no stage has reads as `NotStarted`).
    pub fn from_word(word: u64) -> StartStage {
        match word {
            1 => StartStage::Checking,
            2 => StartStage::MappingHeap,
            3 => StartStage::OpeningGpu,
            4 => StartStage::JoiningNvshmem,
            5 => StartStage::Allocating,
            6 => StartStage::Ready,
            _ => StartStage::NotStarted,
        }
    }

    /// What the PE is doing in this stage, for the launcher's report.
    pub fn describe(self) -> &'static str {
        match self {
            StartStage::NotStarted => {
                "never read the run's heap (does the program call \
                 mgws::processes::Pe::from_env() first in main?)"
            }
            StartStage::Checking => "checking the run against its registry",
            StartStage::MappingHeap => "mapping the run's heap",
            StartStage::OpeningGpu => "opening its GPU and loading the kernel",
            StartStage::JoiningNvshmem => {
                "joining NVSHMEM (its bootstrap; NVSHMEM prints why it fails on stderr, \
                 NVSHMEM_DEBUG=INFO tells more)"
            }
            StartStage::Allocating => "allocating and mapping NVSHMEM's symmetric heap",
            StartStage::Ready => "ready, at the gate",
        }
    }
}

/// What one PE reports to the launcher.
#[repr(C)]
pub struct PeRecord {
    /// The PE's state (`mgws_core::launch::PeState`): the fields below are final once it is
    /// `PE_DONE` or `PE_FAILED`.
    pub state: PeState<HostWord>,
    /// Its [`StartStage`], for the launcher's report of a start-up that did not finish in time;
    /// see [`Self::enter`].
    pub stage: AtomicU64,
    /// Nanoseconds from the PE's start (the gate opened) until its last worker left its loop.
    pub elapsed_ns: AtomicU64,
    /// When the PE started, on the machine's monotonic clock (`CLOCK_MONOTONIC`, which every
    /// process of the machine shares), in nanoseconds: the run spans from the earliest start to
    /// the latest end.
    pub started_ns: AtomicU64,
    /// The worker whose task panicked first on this PE, plus one (0: none; the message field
    /// then holds a failed PE's reason, if any).
    pub panic_worker: AtomicU64,
    /// Bytes of `panic_message` in use.
    pub panic_len: AtomicU64,
    /// The panic's message, UTF-8, 8 bytes per word (little-endian), cut at [`PANIC_WORDS`]
    /// words.
    pub panic_message: [AtomicU64; PANIC_WORDS],
}

impl PeRecord {
    /// Records that the PE entered `stage`. Relaxed: a diagnostic the launcher reads only to
    /// describe a PE that is late; nothing is published with it.
    pub fn enter(&self, stage: StartStage) {
        self.stage
            .store(stage as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// The stage the PE last entered (relaxed, as written).
    pub fn stage(&self) -> StartStage {
        StartStage::from_word(self.stage.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Stores `message` (cut to the record's size) and its length, relaxed: the state's
    /// release store publishes them.
    pub fn set_panic_message(&self, message: &str) {
        let bytes = &message.as_bytes()[..message.len().min(PANIC_WORDS * 8)];
        for (word, chunk) in self.panic_message.iter().zip(bytes.chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            word.store(u64::from_le_bytes(b), std::sync::atomic::Ordering::Relaxed);
        }
        self.panic_len
            .store(bytes.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// Reports the PE failed, with `reason`: the message, then the failed state, whose release
    /// store publishes it to the launcher.
    pub fn fail_with(&self, reason: &str) {
        self.set_panic_message(reason);
        self.state.fail();
    }

    /// The message [`Self::set_panic_message`] stored (read after an acquire load of the
    /// state).
    pub fn panic_message(&self) -> String {
        let len = (self.panic_len.load(std::sync::atomic::Ordering::Relaxed) as usize)
            .min(PANIC_WORDS * 8);
        let bytes: Vec<u8> = self
            .panic_message
            .iter()
            .flat_map(|w| w.load(std::sync::atomic::Ordering::Relaxed).to_le_bytes())
            .take(len)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Byte offsets of everything in the heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapLayout {
    shared: u64,
    headers: u64,
    slots: u64,
    tree: u64,
    device_idle: u64,
    spill: u64,
    progress: u64,
    task_tags: u64,
    stats: u64,
    remote_damping: u64,
    initial: u64,
    /// Offset of each data area (0: the area is absent).
    areas: [u64; DATA_AREAS],
    /// The heap's size.
    pub total: u64,
}

/// Appends `count` values of `T` at `*end` (aligned to [`ALIGN`]) and returns their offset;
/// `None` when the size overflows.
fn section<T>(end: &mut u64, count: u64) -> Option<u64> {
    let at = end.checked_next_multiple_of(ALIGN)?;
    *end = at.checked_add(count.checked_mul(std::mem::size_of::<T>() as u64)?)?;
    Some(at)
}

impl HeapLayout {
    /// The layout of a run of `config` over `topology` with `initial_len` initial tasks and data
    /// areas of `area_limits` (lengths, with [`AREA_WRITABLE`] bits), for PEs of `kind` (GPU PEs
    /// keep their queue slots and overflow stacks in GPU memory: the heap has none). An error
    /// when the size does not fit 64 bits.
    pub fn new(
        kind: PeKind,
        config: &SchedConfig,
        topology: &Topology,
        initial_len: u64,
        area_limits: &[u64; DATA_AREAS],
    ) -> Result<HeapLayout> {
        let on_cpu = u64::from(kind == PeKind::Cpu);
        let queues = u64::from(topology.queues());
        let workers = u64::from(topology.workers());
        let tree = Env::<HostWord, TaskStruct>::tree_words(topology.workers(), topology.devices);
        let layout = (|| {
            let mut end = std::mem::size_of::<Header>() as u64;
            let shared = section::<SharedState<HostWord>>(&mut end, 1)?;
            let headers = section::<QueueHeader<HostWord>>(&mut end, queues)?;
            let slots = section::<TaskStruct>(
                &mut end,
                on_cpu * queues.checked_mul(u64::from(config.public_capacity))?,
            )?;
            let tree = section::<HostWord>(&mut end, tree as u64)?;
            let device_idle =
                section::<Lone<DeviceIdle<HostWord>>>(&mut end, u64::from(topology.devices))?;
            let spill = section::<TaskStruct>(
                &mut end,
                on_cpu * workers.checked_mul(u64::from(config.spill_capacity))?,
            )?;
            let progress = section::<WorkerProgress>(&mut end, workers)?;
            let task_tags = section::<u64>(&mut end, workers)?;
            let stats = section::<WorkerStats>(&mut end, workers)?;
            let remote_damping = section::<u64>(
                &mut end,
                on_cpu * workers.checked_mul(topology.remote_damping_words() as u64)?,
            )?;
            let initial = section::<TaskStruct>(&mut end, initial_len)?;
            let mut areas = [0; DATA_AREAS];
            for (at, &limit) in areas.iter_mut().zip(area_limits) {
                let len = limit & !AREA_WRITABLE;
                if len > 0 {
                    *at = section::<u8>(&mut end, len)?;
                }
            }
            Some(HeapLayout {
                shared,
                headers,
                slots,
                tree,
                device_idle,
                spill,
                progress,
                task_tags,
                stats,
                remote_damping,
                initial,
                areas,
                total: end.checked_next_multiple_of(ALIGN)?,
            })
        })();
        layout.ok_or_else(|| {
            Error::Config(format!(
                "the shared heap of {workers} workers, {queues} public queues and \
                 {initial_len} initial tasks does not fit a 64-bit size"
            ))
        })
    }

    /// The header at the start of the heap at `base`.
    ///
    /// # Safety
    /// `base` is the start of a mapped heap of at least [`HeapLayout::total`] bytes (or, before
    /// the layout is known, of `size_of::<Header>()`), aligned to a page.
    pub unsafe fn header<'h>(base: *mut u8) -> &'h Header {
        // SAFETY: the caller's guarantee; every field of the header is valid as any bits
        // (integers and atomics), and it is shared only through its atomics once PEs run.
        unsafe { &*(base as *const Header) }
    }

    /// Data area `index` in the heap at `base`: its address (0: absent) and length.
    pub fn area(
        &self,
        base: *mut u8,
        index: usize,
        limits: &[u64; DATA_AREAS],
    ) -> (*mut u8, usize) {
        let len = (limits[index] & !AREA_WRITABLE) as usize;
        if len == 0 {
            return (std::ptr::null_mut(), 0);
        }
        (base.wrapping_add(self.areas[index] as usize), len)
    }

    /// The env's `(initial, initial_len, initial_counted_word)` of the run whose heap is mapped
    /// at `base` with `header`'s values: the tasks in the heap, or an indexed set's template in
    /// the heap's own header (at `base`, whichever copy `header` is).
    pub fn initial_tasks(&self, base: *mut u8, header: &Header) -> (*const TaskStruct, u64, u64) {
        if header.initial_indexed != 0 {
            let at = std::mem::offset_of!(Header, initial_template);
            let template = base.wrapping_add(at) as *const TaskStruct;
            (template, header.initial_len, TaskStruct::INDEXED_WORD)
        } else {
            (
                self.initial(base),
                header.initial_len,
                mgws_core::INITIAL_LISTED,
            )
        }
    }

    /// The first initial task in the heap at `base`.
    pub fn initial(&self, base: *mut u8) -> *mut TaskStruct {
        base.wrapping_add(self.initial as usize) as *mut TaskStruct
    }

    /// The env of the run whose heap is mapped at `base`, as this process sees it.
    ///
    /// # Safety
    /// `base` is a mapped heap of at least [`HeapLayout::total`] bytes laid out for `header`'s
    /// values (this layout was made from them), alive while the env is used.
    pub unsafe fn env(&self, base: *mut u8, header: &Header) -> Env<HostWord, TaskStruct> {
        let at = |offset: u64| base.wrapping_add(offset as usize);
        let mut device_idle = [std::ptr::null(); MAX_DEVICES];
        for (d, word) in device_idle
            .iter_mut()
            .enumerate()
            .take(header.topology.devices as usize)
        {
            *word =
                at(self.device_idle
                    + (d * std::mem::size_of::<Lone<DeviceIdle<HostWord>>>()) as u64)
                    as *const DeviceIdle<HostWord>;
        }
        let mut areas = [0u64; DATA_AREAS];
        for (i, area) in areas.iter_mut().enumerate() {
            *area = self.area(base, i, &header.area_limits).0 as u64;
        }
        let sections = Sections {
            shared: at(self.shared) as *const SharedState<HostWord>,
            headers: at(self.headers) as *const QueueHeader<HostWord>,
            slots: at(self.slots) as *mut TaskStruct,
            tree: at(self.tree) as *const HostWord,
            device_idle,
            // The PEs read the shared word: it is in their common heap.
            abort: at(self.shared + std::mem::offset_of!(SharedState<HostWord>, abort) as u64)
                as *const HostWord,
            device_abort: [std::ptr::null(); MAX_DEVICES],
            spill: at(self.spill) as *mut TaskStruct,
            progress: at(self.progress) as *mut WorkerProgress,
            task_tags: at(self.task_tags) as *mut u64,
            stats: at(self.stats) as *mut WorkerStats,
            remote_damping: at(self.remote_damping) as *mut u64,
        };
        // SAFETY: each section was laid out by `new` for this configuration and topology, inside
        // the heap (the caller's guarantee; a GPU PE's heap has empty slot and spill sections,
        // whose pointers `Sections::env` forms without dereferencing); the heap's zero bytes are
        // every word's initial state.
        unsafe {
            sections.env(
                header.config,
                header.topology,
                self.initial_tasks(base, header),
                (areas, header.area_limits),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_aligned_disjoint_and_in_order() {
        let config = SchedConfig::new(6);
        let topology = Topology::split(&[4, 2], 1);
        let mut limits = [0; DATA_AREAS];
        limits[0] = 1000;
        limits[3] = 24 | AREA_WRITABLE;
        let l = HeapLayout::new(PeKind::Cpu, &config, &topology, 5, &limits).unwrap();
        let offsets = [
            l.shared,
            l.headers,
            l.slots,
            l.tree,
            l.device_idle,
            l.spill,
            l.progress,
            l.task_tags,
            l.stats,
            l.remote_damping,
            l.initial,
            l.areas[0],
            l.areas[3],
        ];
        assert!(offsets[0] >= std::mem::size_of::<Header>() as u64);
        for pair in offsets.windows(2) {
            assert!(pair[0] < pair[1], "{offsets:?}");
        }
        assert!(offsets.iter().all(|o| o % ALIGN == 0));
        assert_eq!(l.areas[1], 0);
        assert!(l.areas[3] + 24 <= l.total);
        // The same values give the same layout (what every PE relies on).
        assert_eq!(
            HeapLayout::new(PeKind::Cpu, &config, &topology, 5, &limits).unwrap(),
            l
        );
        // GPU PEs keep queue slots and overflow stacks on their GPUs.
        let g = HeapLayout::new(PeKind::Cuda, &config, &topology, 5, &limits).unwrap();
        assert_eq!(g.slots, g.tree);
        assert!(g.total < l.total);
    }

    #[test]
    fn a_size_beyond_64_bits_is_an_error() {
        let mut config = SchedConfig::new(4);
        config.spill_capacity = u32::MAX;
        let limits = [u64::MAX >> 2; DATA_AREAS];
        let e = HeapLayout::new(
            PeKind::Cpu,
            &config,
            &Topology::single(4, 1),
            u64::MAX / 2,
            &limits,
        );
        assert!(e.unwrap_err().to_string().contains("does not fit"));
    }
}
