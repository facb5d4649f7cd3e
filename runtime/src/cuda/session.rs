//! What every CUDA run sets up first: the GPUs (run devices, plus the GPUs whose memory holds
//! remote-placed queues), the loaded PTX, peer access between them, and memory that the host can
//! read and write while a kernel runs.

use std::sync::Arc;

use mgws_tasks::Registry;

use super::driver::{self, Attr, DeviceBuffer, Function, Gpu, HostBuffer, Module, Stream};
use super::plan::{self, Param, Placement};
use super::ptx::EntryPtx;
use super::{cache, CudaBackend};
use crate::error::{Error, Result};

/// GPUs and modules of one run. Field order is drop order: modules and streams go before the
/// contexts they live in.
pub struct Session {
    /// One loaded module per run device (shared with the process's module cache).
    pub modules: Vec<Arc<Module>>,
    /// A non-blocking control stream per GPU (copies while kernels run).
    pub controls: Vec<Stream>,
    /// The entry's PTX text and where it came from (shared with the process's cache).
    pub ptx: Arc<EntryPtx>,
    /// Run devices first (`0..run_devices`), then GPUs that only hold remote-placed memory
    /// (shared with the process's GPU cache).
    pub gpus: Vec<Arc<Gpu>>,
    pub run_devices: usize,
    /// For each run device, the index in `gpus` of the GPU whose memory holds its queues
    /// (itself unless the placement is remote).
    pub homes: Vec<usize>,
    /// Seconds the slowest GPU spent loading its module (0 where the process had it loaded).
    pub module_load_s: f64,
}

impl Session {
    /// Initialises the driver, opens the GPUs of `b` and loads kernel entry `entry` of registry
    /// `R`'s PTX (alone: [`super::ptx::prune_to_entry`]) on each run device for blocks of `lanes`
    /// threads (see [`CudaBackend::register_cap`]). GPUs and modules come from the process's
    /// cache: each is opened and JIT-compiled once.
    ///
    /// A registry that embeds a cubin ([`Registry::KERNEL_CUBIN`]) and runs without an explicit
    /// PTX file loads the cubin where it was built for the GPU and its entry fits the register
    /// cap: no JIT compile. Otherwise, or if it cannot be loaded, the PTX is compiled.
    pub fn open<R: Registry>(b: &CudaBackend, lanes: u32, entry: &str) -> Result<Session> {
        // The cubin was built from the embedded PTX: only a run of that PTX may use it.
        let cubin =
            R::KERNEL_CUBIN.filter(|c| !c.is_empty() && b.ptx.is_none() && R::KERNEL_PTX.is_some());
        Self::open_with::<R>(b, lanes, entry, false, |gpu, ptx, cap| {
            if let Some(cubin) = cubin {
                let origin = format!("the cubin embedded in registry {}", R::NAME);
                match cache::cubin_module(gpu, cubin, &origin, entry, cap) {
                    Ok(Some(module)) => return Ok(module),
                    Ok(None) => {}
                    Err(e) => tracing::info!(%e, "the embedded cubin: compiling the PTX instead"),
                }
            }
            cache::module(gpu, entry, ptx, cap)
        })
    }

    /// [`Session::open`] with `load` making each GPU's module; `device_api` says whether the PTX
    /// must call NVSHMEM's device API (or must not).
    pub(crate) fn open_with<R: Registry>(
        b: &CudaBackend,
        lanes: u32,
        entry: &str,
        device_api: bool,
        load: impl Fn(&Gpu, &EntryPtx, Option<u32>) -> Result<Arc<Module>> + Sync,
    ) -> Result<Session> {
        driver::init()?;
        let visible = driver::device_count()?;
        let devices = b.device_list();
        if devices.len() > mgws_core::MAX_DEVICES {
            return Err(Error::Config(format!(
                "a run spans at most {} GPUs",
                mgws_core::MAX_DEVICES
            )));
        }
        if let Some(&d) = devices.iter().find(|&&d| d >= visible) {
            return Err(Error::BackendUnavailable(format!(
                "GPU {d} does not exist: {visible} GPU(s) visible"
            )));
        }
        let ptx = super::ptx::entry_source::<R>(b.ptx.as_deref(), entry)?;
        super::ptx::check_transport(&ptx.src.text, &ptx.src.origin, device_api)?;
        // Each GPU opens (context retain) and compiles its module on a thread of its own, so
        // that the set-up of several GPUs takes about as long as that of one.
        let cap = b.register_cap::<R>(lanes);
        let opened = super::on_each_thread(&devices, |&d| {
            let gpu = cache::gpu(d)?;
            check_gpu(&gpu)?;
            let loading = std::time::Instant::now();
            let module = load(&gpu, &ptx, cap)?;
            Ok((gpu, module, loading.elapsed().as_secs_f64()))
        });
        let mut gpus = Vec::new();
        let mut modules = Vec::new();
        let mut module_load_s = 0.0f64;
        for result in opened {
            let (gpu, module, load_s) = result?;
            modules.push(module);
            gpus.push(gpu);
            module_load_s = module_load_s.max(load_s);
        }
        let run_devices = gpus.len();
        let mut homes: Vec<usize> = (0..run_devices).collect();
        if b.placement == Placement::Remote {
            for (d, home) in homes.iter_mut().enumerate() {
                let ordinal = plan::remote_home(&devices, visible, d)?;
                *home = match gpus.iter().position(|g| g.ordinal == ordinal) {
                    Some(i) => i,
                    None => {
                        gpus.push(cache::gpu(ordinal)?);
                        gpus.len() - 1
                    }
                };
            }
        }
        let controls = gpus
            .iter()
            .map(|g| Stream::new(g))
            .collect::<Result<Vec<_>>>()?;
        Ok(Session {
            modules,
            controls,
            ptx,
            gpus,
            run_devices,
            homes,
            module_load_s,
        })
    }

    /// The kernel `name` on every run device, after checking its parameters against `params`.
    pub fn functions(&self, name: &str, params: &[Param]) -> Result<Vec<Function>> {
        let origin = &self.ptx.src.origin;
        if !plan::check_entry(&self.ptx.src.text, origin, name, params)? {
            return Err(Error::BackendUnavailable(format!(
                "{origin} has no kernel `{name}`; rebuild it with `cargo xtask ptx` from a tree \
                 whose kernel crate defines it"
            )));
        }
        self.modules
            .iter()
            .map(|m| {
                m.function(name)?.ok_or_else(|| {
                    Error::Cuda(format!("the driver found no kernel `{name}` in {origin}"))
                })
            })
            .collect()
    }

    /// Checks that the placement is legal on these GPUs and enables the peer access it needs.
    ///
    /// - Several run devices: each must reach every other's memory with native atomics (thieves
    ///   fetch-add on remote queue words; the shared state lives on the first GPU).
    /// - `host`: mapped host memory must be supported; with several GPUs their atomics on host
    ///   memory must be native, which the H100/H200 here are not (docs/background.md section 3: updates are
    ///   lost), so that is refused.
    /// - `remote`: each run device must reach its home GPU with native atomics.
    ///
    /// Returns those pairs `(from, to)` of indices into `gpus`: `from` reaches `to`'s memory.
    pub fn prepare_placement(&self, placement: Placement) -> Result<Vec<(usize, usize)>> {
        let n = self.run_devices;
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        if n > 1 {
            for a in 0..n {
                for b in 0..n {
                    if a != b {
                        pairs.push((a, b));
                    }
                }
            }
        }
        match placement {
            // A PE's session has its one GPU; NVSHMEM maps the other PEs' parts of the heap.
            Placement::Global | Placement::Symmetric => {}
            Placement::Host => {
                for g in &self.gpus[..n] {
                    if g.attr(Attr::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY)? == 0 {
                        return Err(Error::Config(format!(
                            "GPU {} cannot map host memory, which --placement host needs",
                            g.ordinal
                        )));
                    }
                    if n > 1 && g.attr(Attr::CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED)? == 0
                    {
                        return Err(Error::Config(format!(
                            "--placement host with {n} GPUs needs atomics on host memory that are \
                             atomic across agents, and GPU {} ({}) reports \
                             HOST_NATIVE_ATOMIC_SUPPORTED = 0 (its atomics on mapped host memory \
                             lose updates when another GPU or the CPU touches the same word); \
                             use one GPU with host placement, or global or remote placement",
                            g.ordinal, g.name
                        )));
                    }
                }
            }
            Placement::Remote => {
                for (d, &home) in self.homes.iter().enumerate() {
                    if home != d && !pairs.contains(&(d, home)) {
                        pairs.push((d, home));
                    }
                }
            }
        }
        for &(a, b) in &pairs {
            let (ga, gb) = (&self.gpus[a], &self.gpus[b]);
            let (can, atomics) = driver::peer_caps(ga.dev, gb.dev)?;
            if !can {
                return Err(Error::Config(format!(
                    "GPU {} cannot access GPU {}'s memory (no peer access between them), which \
                     this run needs (several GPUs, or --placement remote)",
                    ga.ordinal, gb.ordinal
                )));
            }
            if !atomics {
                return Err(Error::Config(format!(
                    "GPU {}'s atomics on GPU {}'s memory are not native \
                     (P2P NATIVE_ATOMIC_SUPPORTED = 0), so queue words shared between them could \
                     lose updates",
                    ga.ordinal, gb.ordinal
                )));
            }
            ga.enable_peer_access(gb)?;
        }
        Ok(pairs)
    }
}

/// Where a piece of memory is allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loc {
    /// Device memory of `gpus[i]`.
    Gpu(usize),
    /// Mapped pinned host memory.
    Host,
}

/// Memory that kernels use and the host reads or writes while they run.
pub enum Placed {
    Gpu { buf: DeviceBuffer, owner: usize },
    Host(HostBuffer),
}

impl Placed {
    /// `bytes` zeroed bytes at `loc`.
    pub fn zeroed(s: &Session, loc: Loc, bytes: usize, what: &str) -> Result<Placed> {
        match loc {
            Loc::Gpu(i) => {
                let buf = DeviceBuffer::alloc(&s.gpus[i], bytes, what)?;
                buf.zero()?;
                Ok(Placed::Gpu { buf, owner: i })
            }
            Loc::Host => {
                s.gpus[0].make_current()?;
                Ok(Placed::Host(HostBuffer::alloc(bytes, what)?))
            }
        }
    }

    /// The address kernels on `gpus[i]` use (device pointers are the same in every context with
    /// unified addressing once peer access is enabled).
    pub fn device_ptr(&self, s: &Session, i: usize) -> Result<u64> {
        match self {
            Placed::Gpu { buf, .. } => Ok(buf.ptr),
            Placed::Host(h) => h.device_ptr(&s.gpus[i]),
        }
    }

    /// Reads bytes while kernels may run (a copy on the owner's control stream, or a volatile
    /// read of host memory).
    pub fn read_live(&self, s: &Session, offset: usize, dst: &mut [u8]) -> Result<()> {
        match self {
            Placed::Gpu { buf, owner } => buf.read_async(offset, dst, &s.controls[*owner]),
            Placed::Host(h) => {
                for (i, b) in dst.iter_mut().enumerate() {
                    // SAFETY: in range (the caller's offsets come from the area layouts).
                    *b = unsafe { h.read_volatile::<u8>(offset + i) };
                }
                Ok(())
            }
        }
    }

    /// Writes a `u64` while kernels may run.
    pub fn write_u64_live(&self, s: &Session, offset: usize, value: u64) -> Result<()> {
        match self {
            Placed::Gpu { buf, owner } => {
                buf.write_async(offset, &value.to_ne_bytes(), &s.controls[*owner])
            }
            Placed::Host(h) => {
                // SAFETY: in range and 8-byte aligned (a SharedState field).
                unsafe { h.write_volatile::<u64>(offset, value) };
                std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                Ok(())
            }
        }
    }

    /// Reads a `u64` while kernels may run.
    pub fn read_u64_live(&self, s: &Session, offset: usize) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read_live(s, offset, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }
}

/// Refuses a GPU that cannot run the persistent kernel.
fn check_gpu(gpu: &Gpu) -> Result<()> {
    if gpu.cc < (7, 0) {
        return Err(Error::BackendUnavailable(format!(
            "GPU {} ({}) has compute capability {}.{}; the kernel needs 7.0 or newer",
            gpu.ordinal, gpu.name, gpu.cc.0, gpu.cc.1
        )));
    }
    if gpu.attr(Attr::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? == 0 {
        return Err(Error::BackendUnavailable(format!(
            "GPU {} ({}) does not support cooperative launches, which guarantee that every \
             worker is resident",
            gpu.ordinal, gpu.name
        )));
    }
    Ok(())
}
