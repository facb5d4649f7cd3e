//! Host allocations of the orchestration data for the CPU backend.

use mgws_core::{
    AtomicWord, DeviceIdle, Env, HostWord, QueueHeader, SchedConfig, SharedState, Topology,
    WorkerProgress, WorkerStats, DATA_AREAS, MAX_DEVICES,
};
use mgws_tasks::TaskStruct;

use crate::error::Result;
use crate::initial::InitialTasks;
use crate::memory::{bytes_of, check_host, try_with_capacity};

/// Orchestration memory that outlives a CPU run: the words zero-initialised, the task storage
/// (public queue slots, overflow stacks) only reserved.
pub struct Arena {
    pub shared: Box<SharedState<HostWord>>,
    pub headers: Vec<QueueHeader<HostWord>>,
    /// `queues * public_capacity` tasks of capacity, length 0: a slot is written by its queue's
    /// owner before any read (the queue protocol), so zeroing it would only cost time before every
    /// run (and, for the overflow stacks below, megabytes of cache and fresh pages).
    slots: Vec<TaskStruct>,
    pub tree: Vec<HostWord>,
    /// `Env::device_idle`: one idle counter and relay per device (CPU domain), each device's on
    /// its own cache lines.
    pub device_idle: Vec<Lone<DeviceIdle<HostWord>>>,
    /// `Env::abort`: a copy of the abort flag that every worker reads, as each GPU of a run in
    /// one process reads its own, so that the CPU twin runs that path too (one env serves all
    /// domains here, so one copy).
    pub abort_copy: Box<Lone<HostWord>>,
    /// `workers * spill_capacity` tasks of capacity, length 0, like `slots`.
    spill: Vec<TaskStruct>,
    pub progress: Vec<WorkerProgress>,
    /// `Env::task_tags`: one word per worker.
    pub task_tags: Vec<u64>,
    pub stats: Vec<WorkerStats>,
    /// `Env::remote_damping`: `Topology::remote_damping_words` words per worker (none with one
    /// domain).
    remote_damping: Vec<u64>,
    /// An indexed set's template, where the env points (boxed: the arena moves after `env`).
    template: Box<TaskStruct>,
}

/// A value alone on its cache lines: a device's idle counter and relay (its device's workers
/// hammer the counter), or the copy of the abort flag that every worker reads. `repr(C)`: the
/// value sits at offset 0, where the multi-process heap's env points.
#[repr(C, align(128))]
pub struct Lone<T>(pub T);

/// A value of `T` whose bytes are all zero.
///
/// # Safety
/// All-zero bytes must be a valid `T`: true of the orchestration structs (`repr(C)` over
/// `HostWord`s, which are `repr(transparent)` atomics) and of task structs.
unsafe fn zeroed<T>() -> T {
    // SAFETY: guaranteed by the caller.
    unsafe { std::mem::zeroed() }
}

fn zeroed_vec<T>(n: usize) -> Vec<T> {
    // SAFETY: only instantiated below with types valid as zero bytes (see `zeroed`).
    (0..n).map(|_| unsafe { zeroed::<T>() }).collect()
}

impl Arena {
    /// The orchestration memory of a run, checked against the host memory available first (a
    /// size beyond it is an [`crate::Error::OutOfMemory`] naming the flags that set it).
    pub fn new(config: &SchedConfig, topology: &Topology) -> Result<Self> {
        let queues = topology.queues() as usize;
        let workers = topology.workers() as usize;
        let slots = queues as u64 * config.public_capacity as u64;
        let spill = workers as u64 * config.spill_capacity as u64;
        let per_worker = bytes_of::<WorkerProgress>(1) + bytes_of::<WorkerStats>(1);
        check_host(
            format_args!(
                "--workers {workers} with --public-capacity {} and --spill-capacity {}",
                config.public_capacity, config.spill_capacity
            ),
            bytes_of::<TaskStruct>(slots)
                .saturating_add(bytes_of::<TaskStruct>(spill))
                .saturating_add(per_worker.saturating_mul(workers as u64)),
        )?;
        Ok(Arena {
            // SAFETY: SharedState<HostWord> is repr(C) over HostWords; zero is its initial state.
            shared: Box::new(unsafe { zeroed() }),
            headers: zeroed_vec(queues),
            slots: try_with_capacity(
                format_args!("--public-capacity {}", config.public_capacity),
                slots,
            )?,
            tree: (0..Env::<HostWord, TaskStruct>::tree_words(
                topology.workers(),
                topology.devices,
            ))
                .map(|_| HostWord::new(0))
                .collect(),
            device_idle: (0..topology.devices)
                .map(|_| Lone(DeviceIdle::new()))
                .collect(),
            abort_copy: Box::new(Lone(HostWord::new(0))),
            spill: try_with_capacity(
                format_args!(
                    "--spill-capacity {} x {workers} workers",
                    config.spill_capacity
                ),
                spill,
            )?,
            progress: vec![WorkerProgress::default(); workers],
            task_tags: vec![0; workers],
            stats: vec![WorkerStats::default(); workers],
            remote_damping: vec![0; workers * topology.remote_damping_words()],
            template: Box::new(TaskStruct::new(0, &0u64)),
        })
    }

    /// The environment all workers receive; `initial` and `areas` are the job's. An indexed
    /// set's template is kept in the arena; a listed set stays where it is, and must outlive the
    /// env's use.
    pub fn env(
        &mut self,
        config: SchedConfig,
        topology: Topology,
        initial: InitialTasks<'_>,
        areas: ([u64; DATA_AREAS], [u64; DATA_AREAS]),
    ) -> Env<HostWord, TaskStruct> {
        let first = match initial {
            InitialTasks::Listed(tasks) => tasks.as_ptr(),
            InitialTasks::Indexed { template, .. } => {
                *self.template = template;
                &*self.template as *const TaskStruct
            }
        };
        let queues = topology.queues() as usize;
        assert!(queues * config.public_capacity as usize <= self.slots.capacity());
        assert!(
            topology.workers() as usize * config.spill_capacity as usize <= self.spill.capacity()
        );
        assert!(
            topology.workers() as usize * topology.remote_damping_words()
                <= self.remote_damping.len()
        );
        let mut device_idle = [std::ptr::null(); MAX_DEVICES];
        for (d, word) in self.device_idle.iter().enumerate() {
            device_idle[d] = &word.0 as *const DeviceIdle<HostWord>;
        }
        let abort: *const HostWord = &self.abort_copy.0;
        let mut device_abort = [std::ptr::null(); MAX_DEVICES];
        device_abort[0] = abort;
        let sections = Sections {
            shared: &*self.shared,
            headers: self.headers.as_ptr(),
            slots: self.slots.as_mut_ptr(),
            tree: self.tree.as_ptr(),
            device_idle,
            abort,
            device_abort,
            spill: self.spill.as_mut_ptr(),
            progress: self.progress.as_mut_ptr(),
            task_tags: self.task_tags.as_mut_ptr(),
            stats: self.stats.as_mut_ptr(),
            remote_damping: self.remote_damping.as_mut_ptr(),
        };
        // SAFETY: the arena was sized for this configuration and topology (`Arena::new`; the
        // reservations are asserted above) and outlives the env's use (the caller keeps it).
        unsafe {
            sections.env(
                config,
                topology,
                (first, initial.len(), initial.counted_word()),
                areas,
            )
        }
    }
}

/// Where the orchestration memory of one run lies, as host pointers, wherever it came from (an
/// [`Arena`] on the heap, or the shared heap of a multi-process run).
pub(crate) struct Sections {
    pub shared: *const SharedState<HostWord>,
    /// One header per public queue.
    pub headers: *const QueueHeader<HostWord>,
    /// `queues * public_capacity` tasks.
    pub slots: *mut TaskStruct,
    /// `Env::tree_words` words.
    pub tree: *const HostWord,
    /// One idle counter and relay per device (null past the topology's devices).
    pub device_idle: [*const DeviceIdle<HostWord>; MAX_DEVICES],
    /// The abort flag the workers read (`Env::abort`): the shared word or a copy.
    pub abort: *const HostWord,
    /// The copies of the abort flag (`Env::device_abort`), null past the last.
    pub device_abort: [*const HostWord; MAX_DEVICES],
    /// `workers * spill_capacity` tasks.
    pub spill: *mut TaskStruct,
    /// One record, tag word and statistics block per worker.
    pub progress: *mut WorkerProgress,
    pub task_tags: *mut u64,
    pub stats: *mut WorkerStats,
    /// `Topology::remote_damping_words` words per worker.
    pub remote_damping: *mut u64,
}

impl Sections {
    /// The env over these sections; `initial` is the env's `(initial, initial_len,
    /// initial_counted_word)`, `areas` are the job's data-area pointers and limits.
    ///
    /// # Safety
    /// Every section holds what its field says for `config` and `topology`, and stays alive
    /// while the env is used.
    pub unsafe fn env(
        self,
        config: SchedConfig,
        topology: Topology,
        (initial, initial_len, initial_counted_word): (*const TaskStruct, u64, u64),
        (areas, area_limits): ([u64; DATA_AREAS], [u64; DATA_AREAS]),
    ) -> Env<HostWord, TaskStruct> {
        let mut queue_headers = [std::ptr::null(); MAX_DEVICES];
        let mut queue_slots = [std::ptr::null_mut(); MAX_DEVICES];
        for d in 0..topology.devices as usize {
            let q = topology.first_queue[d] as usize;
            // SAFETY: q is a queue of the topology, so the offset lies within the headers'
            // section (the caller's guarantee).
            unsafe { queue_headers[d] = self.headers.add(q) };
            // Not `add`: a heap laid out for GPU PEs has no slot section (their slots live in
            // NVSHMEM's heap), and there the pointer, never dereferenced, may lie past the
            // mapping. Elsewhere the offset lies within the slots' section.
            queue_slots[d] = self.slots.wrapping_add(q * config.public_capacity as usize);
        }
        Env {
            config,
            topology,
            shared: self.shared,
            queue_headers,
            queue_slots,
            tree: self.tree,
            device_idle: self.device_idle,
            abort: self.abort,
            device_abort: self.device_abort,
            bridge: std::ptr::null(),
            bridge_slots: [std::ptr::null_mut(); 2],
            bridge_side: 0,
            bridge_worker: 0,
            worker_base: 0,
            spill: self.spill,
            initial,
            initial_len,
            initial_counted_word,
            progress: self.progress,
            task_tags: self.task_tags,
            stats: self.stats,
            areas,
            area_limits,
            remote_damping: self.remote_damping,
        }
    }
}
