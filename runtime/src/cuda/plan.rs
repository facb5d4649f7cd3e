//! The arithmetic of a CUDA run, kept apart from the driver so that it is unit-tested without a
//! GPU: how many workers fit, where orchestration data lives and how big it is, which atomics scope
//! it needs, and whether the PTX's kernel entries have the parameters the host passes.

use std::mem::size_of;

use mgws_core::{Env, HostWord, QueueHeader, Scope, ScratchLayout, SharedState, Topology};
use mgws_tasks::TaskStruct;

use crate::error::{Error, Result};

/// Where the orchestration data (public queues, their words and counters, termination state)
/// lives, as in the thesis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Placement {
    /// Each GPU's queues in its own device memory.
    #[default]
    Global,
    /// Mapped pinned host memory: legal only while a single agent does atomics on it, i.e. one
    /// GPU, unless the GPUs report native host atomics.
    Host,
    /// Another GPU's memory over NVLink (the thesis's P2P approximation); needs 2 GPUs.
    Remote,
    /// NVSHMEM's symmetric heap, one part per PE process, each on its PE's GPU: the placement
    /// of runs over GPU PE processes ([`crate::ProcessLayout::Pes`] on CUDA), which set it.
    Symmetric,
}

impl Placement {
    /// The placement's name, as `--placement` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Global => "global",
            Placement::Host => "host",
            Placement::Remote => "remote",
            Placement::Symmetric => "symmetric",
        }
    }
}

/// Where the initial task set lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum TasksIn {
    /// A copy in each GPU's memory.
    #[default]
    Device,
    /// One copy in mapped pinned host memory, read over PCIe.
    Host,
}

/// The scope of the atomics on orchestration data: `Device` only when one GPU's own memory holds
/// everything and no other agent touches it; `System` as soon as a second GPU or the host is
/// involved (peer atomics from another GPU are coherent only at system scope), or where
/// `force_system` ([`system_scope_forced`]).
pub fn queue_scope(placement: Placement, devices: usize, force_system: bool) -> Scope {
    if placement == Placement::Global && devices == 1 && !force_system {
        Scope::Device
    } else {
        Scope::System
    }
}

/// Whether `MGWS_QUEUE_SCOPE` (its value is `setting`) asks for system scope where one GPU would
/// use device scope: a diagnostic that measures on one GPU what the scope of a several-GPU run
/// costs. Unset, empty or `auto`: no; `system`: yes; anything else is a configuration error (a
/// run that needs system scope cannot be narrowed).
pub fn system_scope_forced(setting: Option<&str>) -> Result<bool> {
    match setting.map(str::trim) {
        None | Some("" | "auto") => Ok(false),
        Some("system") => Ok(true),
        Some(other) => Err(Error::Config(format!(
            "MGWS_QUEUE_SCOPE={other:?}: expected auto or system"
        ))),
    }
}

/// The workers of one GPU: `requested` if given (refused if they do not all fit at once), else
/// every block that fits (`blocks_per_sm * sms`), rounded down to a multiple of the queue sharing.
pub fn fit_workers(
    requested: Option<u32>,
    blocks_per_sm: u32,
    sms: u32,
    workers_per_queue: u32,
    what: &str,
) -> Result<u32> {
    let fit = blocks_per_sm * sms;
    if fit == 0 {
        return Err(Error::Config(format!(
            "not one worker block fits on {what}: the kernel's block needs more registers or \
             shared memory than an SM has; lower --lanes or --local-capacity (a power of two)"
        )));
    }
    match requested {
        Some(0) => Err(Error::Config("at least one worker is needed".into())),
        Some(n) if n > fit => Err(Error::Config(format!(
            "{n} workers do not fit on {what} at once: at most {fit} blocks are co-resident \
             ({blocks_per_sm} per SM x {sms} SMs at this block size and shared memory), and a \
             persistent kernel needs every worker resident; ask for {fit} workers per GPU or \
             fewer, or leave --workers out for the maximum"
        ))),
        Some(n) if !n.is_multiple_of(workers_per_queue) => Err(Error::Config(format!(
            "the workers of each GPU ({n}) must be a multiple of the workers per queue \
             ({workers_per_queue})"
        ))),
        Some(n) => Ok(n),
        None => {
            let n = fit - fit % workers_per_queue;
            if n == 0 {
                Err(Error::Config(format!(
                    "only {fit} worker blocks fit on {what}, fewer than the {workers_per_queue} \
                     that share a queue"
                )))
            } else {
                Ok(n)
            }
        }
    }
}

/// An upper bound on the blocks of one GPU, used to size the scratch layout before the
/// occupancy is known (the damping bitmap grows with the number of queues). 32 resident blocks
/// per SM is the hardware limit of every architecture since Maxwell.
pub fn worker_upper_bound(sms: u32) -> u32 {
    sms * 32
}

/// Registers per SM on every architecture since Kepler.
pub const REGISTERS_PER_SM: u32 = 65536;

/// Registers per thread when neither the user nor the registry gives a cap. Chosen for the
/// earlier single worker entry, to which ptxas left alone gave 255 registers (8 blocks of 32
/// threads per SM): at 128 twice as many workers fit, at the price of spills. The extra workers
/// outweighed the spills on MEMSET and UTS, and caps of 96, 112 and 168 ran UTS slower than 128
/// (docs/results.md).
pub const DEFAULT_MAX_REGISTERS: u32 = 128;

/// The default register cap for blocks of `lanes` threads: [`DEFAULT_MAX_REGISTERS`], lowered
/// where one block would not otherwise fit on an SM.
pub fn default_register_cap(lanes: u32) -> Option<u32> {
    let fit = (REGISTERS_PER_SM / lanes.max(1)) & !7;
    Some(fit.clamp(16, DEFAULT_MAX_REGISTERS))
}

/// The register cap of a run: the one it names, else the registry's (no higher than what lets a
/// block of `lanes` threads fit), else the default for `lanes`.
pub fn register_cap(named: Option<u32>, registry: Option<u32>, lanes: u32) -> Option<u32> {
    let default = default_register_cap(lanes);
    named.or_else(|| match (registry, default) {
        (Some(r), Some(d)) => Some(r.min(d)),
        (r, d) => r.or(d),
    })
}

/// Dynamic shared memory per block where a GPU has at most `device_queues` public queues (the
/// scratch holds a damping bit for each; `Topology::device_queues_max`).
pub fn scratch_bytes(local_capacity: u32, lanes: u32, device_queues: u32) -> usize {
    ScratchLayout::new(
        local_capacity,
        size_of::<TaskStruct>(),
        lanes,
        device_queues,
    )
    .total
}

/// The byte layout of one GPU's public queues in its placement memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueArea {
    pub queues: u32,
    pub headers: usize,
    pub slots: usize,
    pub total: usize,
}

impl QueueArea {
    pub fn new(queues: u32, public_capacity: u32) -> QueueArea {
        let headers = 0;
        let slots = round_up(queues as usize * size_of::<QueueHeader<HostWord>>(), 256);
        let total = slots + queues as usize * public_capacity as usize * size_of::<TaskStruct>();
        QueueArea {
            queues,
            headers,
            slots,
            total,
        }
    }

    /// Byte offset of queue `local`'s header (its index among this GPU's queues).
    pub fn header_offset(&self, local: u32) -> usize {
        self.headers + local as usize * size_of::<QueueHeader<HostWord>>()
    }
}

/// The byte layout of the run-wide state: the shared state and the voting tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunArea {
    pub shared: usize,
    pub tree: usize,
    pub total: usize,
}

impl RunArea {
    pub fn new(topology: &Topology) -> RunArea {
        let shared = 0;
        let tree = round_up(size_of::<SharedState<HostWord>>(), 128);
        let words = Env::<HostWord, TaskStruct>::tree_words(topology.workers(), topology.devices);
        RunArea {
            shared,
            tree,
            total: tree + words * 8,
        }
    }
}

/// Byte offsets of the [`SharedState`] fields the host reads or writes during a run.
pub mod shared_field {
    use mgws_core::{HostWord, SharedState};
    use std::mem::offset_of;
    pub const INITIAL_RANGES_DONE: usize = offset_of!(SharedState<HostWord>, initial_ranges_done);
    pub const IDLE_WORKERS: usize = offset_of!(SharedState<HostWord>, idle_workers);
    pub const ABORT: usize = offset_of!(SharedState<HostWord>, abort);
    pub const ERROR: usize = offset_of!(SharedState<HostWord>, error);
    pub const EXITED_WORKERS: usize = offset_of!(SharedState<HostWord>, exited_workers);
}

/// For `--placement remote`: the GPU (an ordinal) whose memory holds the queues of run device
/// `devices[d]`: the next run device when the run has several, else the first other visible GPU.
pub fn remote_home(devices: &[u32], visible: u32, d: usize) -> Result<u32> {
    if devices.len() > 1 {
        return Ok(devices[(d + 1) % devices.len()]);
    }
    (0..visible).find(|&g| g != devices[0]).ok_or_else(|| {
        Error::Config(format!(
            "--placement remote keeps the queues in another GPU's memory, but only {visible} GPU \
             is visible; it needs two GPUs joined by NVLink"
        ))
    })
}

/// Parses a device list such as `0,1` (unique ordinals, at most `MAX_DEVICES`).
pub fn parse_devices(list: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let d: u32 = part.parse().map_err(|_| {
            Error::Config(format!(
                "--devices takes GPU ordinals separated by commas (like 0,1), not {list:?}"
            ))
        })?;
        if out.contains(&d) {
            return Err(Error::Config(format!(
                "GPU {d} is listed twice in --devices"
            )));
        }
        out.push(d);
    }
    if out.is_empty() {
        return Err(Error::Config("--devices names no GPU".into()));
    }
    if out.len() > mgws_core::MAX_DEVICES {
        return Err(Error::Config(format!(
            "a run spans at most {} GPUs, not {}",
            mgws_core::MAX_DEVICES,
            out.len()
        )));
    }
    Ok(out)
}

/// A kernel parameter's PTX type, as far as the host's argument passing cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    U32,
    U64,
    /// A by-value aggregate of this many bytes.
    Bytes(usize),
}

/// The parameter list of `.entry name(...)` in a PTX module, or `None` if there is no such entry.
pub fn ptx_entry_params(ptx: &str, name: &str) -> Option<Vec<Param>> {
    let mut at = 0;
    let start = loop {
        let i = at + ptx[at..].find(".entry")?;
        let rest = ptx[i + ".entry".len()..].trim_start();
        if rest.starts_with(name)
            && rest[name.len()..]
                .trim_start()
                .starts_with(['(', '{', '\n', '.'])
        {
            let after = i + ".entry".len() + (ptx[i + ".entry".len()..].len() - rest.len());
            break after + name.len();
        }
        at = i + ".entry".len();
    };
    let body = &ptx[start..];
    let open = body.trim_start();
    if !open.starts_with('(') {
        return Some(Vec::new());
    }
    let close = open.find(')')?;
    let list = &open[1..close];
    let mut params = Vec::new();
    for decl in list.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        // e.g. `.param .u64 mgws_fib_worker_counter_damping_single_device_param_0`,
        // `.param .align 8 .b8 p[400]`, `.param .u64 .ptr .global .align 1 p`
        let words: Vec<&str> = decl.split_whitespace().collect();
        let ty = words
            .iter()
            .find(|w| {
                matches!(
                    **w,
                    ".u8"
                        | ".s8"
                        | ".b8"
                        | ".u16"
                        | ".s16"
                        | ".b16"
                        | ".u32"
                        | ".s32"
                        | ".b32"
                        | ".f32"
                        | ".u64"
                        | ".s64"
                        | ".b64"
                        | ".f64"
                )
            })
            .copied()
            .unwrap_or("");
        let last = words.last().copied().unwrap_or("");
        let array = last
            .find('[')
            .and_then(|i| last[i + 1..].trim_end_matches(']').parse::<usize>().ok());
        let elem = match ty {
            ".u8" | ".s8" | ".b8" => 1,
            ".u16" | ".s16" | ".b16" => 2,
            ".u32" | ".s32" | ".b32" | ".f32" => 4,
            _ => 8,
        };
        params.push(match (array, elem) {
            (Some(n), e) => Param::Bytes(n * e),
            (None, 4) => Param::U32,
            (None, 8) => Param::U64,
            (None, e) => Param::Bytes(e),
        });
    }
    Some(params)
}

/// Checks that `name` in the PTX at `origin` takes `expected`; a clear error otherwise.
pub fn check_entry(ptx: &str, origin: &str, name: &str, expected: &[Param]) -> Result<bool> {
    match ptx_entry_params(ptx, name) {
        None => Ok(false),
        Some(found) if found == expected => Ok(true),
        Some(found) => Err(Error::Config(format!(
            "kernel {name} in {origin} takes parameters {found:?}, but this host passes \
             {expected:?}: the PTX and the mgws binary come from different versions; rebuild both \
             (cargo build --release && cargo xtask ptx)"
        ))),
    }
}

/// `x` rounded up to a multiple of `to` (a power of two).
pub fn round_up(x: usize, to: usize) -> usize {
    (x + to - 1) & !(to - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_fill_the_gpu_unless_asked_and_refuse_what_does_not_fit() {
        assert_eq!(fit_workers(None, 32, 132, 1, "GPU 0").unwrap(), 4224);
        assert_eq!(fit_workers(None, 3, 3, 4, "GPU 0").unwrap(), 8);
        assert_eq!(fit_workers(Some(100), 32, 132, 4, "GPU 0").unwrap(), 100);
        let e = fit_workers(Some(5000), 32, 132, 1, "GPU 0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("4224") && e.contains("co-resident"), "{e}");
        let e = fit_workers(Some(6), 32, 132, 4, "GPU 0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("multiple"), "{e}");
        let e = fit_workers(None, 0, 132, 1, "GPU 0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--lanes"), "{e}");
        assert!(fit_workers(None, 1, 2, 4, "GPU 0").is_err());
    }

    #[test]
    fn registers_are_capped_only_where_a_block_would_not_fit() {
        assert_eq!(default_register_cap(32), Some(128));
        assert_eq!(default_register_cap(256), Some(128));
        assert_eq!(default_register_cap(512), Some(128));
        assert_eq!(default_register_cap(1024), Some(64));
        assert_eq!(default_register_cap(384), Some(128));
    }

    #[test]
    fn a_named_cap_beats_the_registrys_which_beats_the_default() {
        assert_eq!(register_cap(Some(96), Some(64), 32), Some(96));
        assert_eq!(register_cap(None, Some(64), 32), Some(64));
        assert_eq!(register_cap(None, None, 32), Some(128));
        // A registry's cap never lets a block too big to fit through.
        assert_eq!(register_cap(None, Some(96), 1024), Some(64));
        assert_eq!(register_cap(None, Some(32), 1024), Some(32));
    }

    #[test]
    fn scratch_grows_with_queues_so_the_upper_bound_is_safe() {
        // Sizing uses the upper bound of the queue count; the final, smaller count never needs
        // more shared memory than was used for the occupancy query.
        let ub = scratch_bytes(32, 32, worker_upper_bound(132));
        for q in [1, 64, 65, 528, 4224] {
            assert!(scratch_bytes(32, 32, q) <= ub);
        }
        // 32 tasks of 64 B, 32 lanes of 8 B, 8 exchange words, lane 0's state, the narrow
        // tasks' two words (16 B), the damping bitmap.
        let leader = size_of::<mgws_core::LeaderState>().next_multiple_of(16);
        assert!(leader >= size_of::<mgws_core::WorkerStats>());
        assert_eq!(
            scratch_bytes(32, 32, 64),
            2048 + 256 + 64 + leader + 16 + 16
        );
        assert_eq!(
            scratch_bytes(32, 32, 4224),
            2048 + 256 + 64 + leader + 16 + 528
        );
    }

    #[test]
    fn scope_is_device_only_for_one_gpu_in_its_own_memory() {
        assert_eq!(queue_scope(Placement::Global, 1, false), Scope::Device);
        assert_eq!(queue_scope(Placement::Global, 2, false), Scope::System);
        assert_eq!(queue_scope(Placement::Host, 1, false), Scope::System);
        assert_eq!(queue_scope(Placement::Remote, 1, false), Scope::System);
        // Other processes' GPUs reach a PE's queues, even a PE's alone.
        assert_eq!(queue_scope(Placement::Symmetric, 1, false), Scope::System);
        // The diagnostic widens one GPU's scope and never narrows.
        assert_eq!(queue_scope(Placement::Global, 1, true), Scope::System);
        assert_eq!(queue_scope(Placement::Global, 2, true), Scope::System);
    }

    #[test]
    fn the_scope_diagnostic_takes_auto_or_system() {
        for auto in [None, Some(""), Some("auto"), Some(" auto ")] {
            assert!(!system_scope_forced(auto).unwrap());
        }
        assert!(system_scope_forced(Some("system")).unwrap());
        for bad in ["device", "sys", "1"] {
            let e = system_scope_forced(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("MGWS_QUEUE_SCOPE") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn areas_are_aligned_and_sized() {
        let a = QueueArea::new(3, 256);
        assert_eq!(size_of::<QueueHeader<HostWord>>(), 128);
        assert_eq!(a.slots % 256, 0);
        assert!(a.slots >= 3 * 128);
        assert_eq!(a.total, a.slots + 3 * 256 * 64);
        assert_eq!(a.header_offset(2), 256);
        let t = Topology::split(&[4, 6], 2);
        let r = RunArea::new(&t);
        assert_eq!(size_of::<SharedState<HostWord>>(), 64);
        assert_eq!(r.tree, 128);
        assert_eq!(r.total, 128 + (10 + 4) * 8);
        assert_eq!(shared_field::ABORT, 16);
        assert_eq!(shared_field::ERROR, 24);
        assert_eq!(shared_field::EXITED_WORKERS, 40);
    }

    #[test]
    fn env_has_the_same_layout_for_every_word_type() {
        // The host builds the kernel's Env<NvptxWord, _> as an Env<HostWord, _>: every field that
        // depends on W is a pointer, so the layout cannot differ. Pin the size so a change shows.
        assert_eq!(size_of::<HostWord>(), 8);
        assert_eq!(size_of::<Env<HostWord, TaskStruct>>() % 8, 0);
        assert_eq!(
            std::mem::offset_of!(Env<HostWord, TaskStruct>, config),
            0,
            "the config comes first"
        );
    }

    #[test]
    fn remote_homes_pair_gpus() {
        assert_eq!(remote_home(&[0, 1], 2, 0).unwrap(), 1);
        assert_eq!(remote_home(&[0, 1], 2, 1).unwrap(), 0);
        assert_eq!(remote_home(&[1], 2, 0).unwrap(), 0);
        assert_eq!(remote_home(&[0], 4, 0).unwrap(), 1);
        let e = remote_home(&[0], 1, 0).unwrap_err().to_string();
        assert!(e.contains("two GPUs"), "{e}");
    }

    #[test]
    fn device_lists_parse_and_refuse_nonsense() {
        assert_eq!(parse_devices("0,1").unwrap(), vec![0, 1]);
        assert_eq!(parse_devices(" 3 ").unwrap(), vec![3]);
        assert!(parse_devices("0,0").is_err());
        assert!(parse_devices("a").is_err());
        assert!(parse_devices("").is_err());
        assert!(parse_devices("0,1,2,3,4,5,6,7,8").is_err());
    }

    const PTX: &str = r#"
//
// Generated by LLVM NVPTX Back-End
//
.version 8.4
.target sm_90
.address_size 64

.weak .shared .align 8 .b8 mgws_broadcast_slot[8];
.extern .shared .align 16 .b8 __dyn[];

	// .globl	mgws_worker
.visible .entry mgws_worker(
	.param .u64 mgws_worker_param_0,
	.param .u32 mgws_worker_param_1,
	.param .u32 mgws_worker_param_2
)
{
	ret;
}
.visible .entry mgws_static(
	.param .u64 .ptr .global .align 8 mgws_static_param_0,
	.param .align 8 .b8 mgws_static_param_1[64]
)
{
	ret;
}
.visible .entry mgws_worker2()
{
	ret;
}
"#;

    #[test]
    fn ptx_entries_are_found_with_their_parameters() {
        use Param::*;
        assert_eq!(
            ptx_entry_params(PTX, "mgws_worker"),
            Some(vec![U64, U32, U32])
        );
        assert_eq!(
            ptx_entry_params(PTX, "mgws_static"),
            Some(vec![U64, Bytes(64)])
        );
        assert_eq!(ptx_entry_params(PTX, "mgws_worker2"), Some(vec![]));
        assert_eq!(ptx_entry_params(PTX, "mgws_level"), None);
        assert!(check_entry(PTX, "k.ptx", "mgws_worker", &[U64, U32, U32]).unwrap());
        assert!(!check_entry(PTX, "k.ptx", "mgws_level", &[U64, U32]).unwrap());
        let e = check_entry(PTX, "k.ptx", "mgws_worker", &[U64, U32])
            .unwrap_err()
            .to_string();
        assert!(e.contains("cargo xtask ptx"), "{e}");
    }
}
