//! The process's opened GPUs and loaded modules, and the lookup its other caches share (the
//! kernel texts, `super::ptx`). A CLI run asks the backend for its defaults
//! (the occupancy of the kernel), then runs, then may run baselines: all of them share one
//! primary-context retain per GPU and one JIT compile per (GPU, PTX text, register cap), where the
//! text is the module pruned to the one entry a run launches (`ptx::prune_to_entry`): a run and
//! each of its baselines compile their own entry once.
//!
//! Neither lock is held while a GPU opens or a module compiles, so that the GPUs of a run open
//! and compile at the same time (`Session::open` does each GPU on its own thread); two threads
//! asking for the same entry at once may both build it, and the second copy is dropped.
//!
//! Entries live until the process exits: a module is valid only while its context is, and a
//! kernel that ignored an abort may still use both (see `device::Supervised::Leak`).

use std::sync::{Arc, Mutex, PoisonError};

use super::driver::{Gpu, Module};
use super::load_notice;
use super::ptx::EntryPtx;
use crate::error::Result;

/// Which module: the GPU, and a digest and the length of the PTX text with the register cap,
/// or the address and length of an embedded cubin.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct ModuleKey {
    ordinal: u32,
    image: Image,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Image {
    Ptx {
        digest: u64,
        len: usize,
        max_registers: Option<u32>,
    },
    Cubin {
        addr: usize,
        len: usize,
    },
}

static GPUS: Mutex<Vec<(u32, Arc<Gpu>)>> = Mutex::new(Vec::new());
static MODULES: Mutex<Vec<(ModuleKey, Arc<Module>)>> = Mutex::new(Vec::new());
/// Embedded cubins the driver refused to load, per GPU.
static UNLOADABLE: Mutex<Vec<ModuleKey>> = Mutex::new(Vec::new());

/// GPU `ordinal` if the process has opened it.
pub fn opened_gpu(ordinal: u32) -> Option<Arc<Gpu>> {
    lookup(&GPUS, &ordinal)
}

/// GPU `ordinal` with its primary context retained (opened on first use).
pub fn gpu(ordinal: u32) -> Result<Arc<Gpu>> {
    if let Some(g) = opened_gpu(ordinal) {
        return Ok(g);
    }
    let _span = tracing::debug_span!("cuda.open_gpu", ordinal).entered();
    let opened = Arc::new(Gpu::open(ordinal)?);
    Ok(remember(&GPUS, ordinal, opened))
}

/// `ptx`, the text of kernel `entry`, JIT-compiled for `gpu` with `max_registers` (compiled on
/// first use, with a warning while a compile runs long: [`load_notice::watched_load`]; the
/// driver's own JIT cache, `CUDA_CACHE_PATH`, keeps the compiled code for later processes).
pub fn module(
    gpu: &Gpu,
    entry: &str,
    ptx: &EntryPtx,
    max_registers: Option<u32>,
) -> Result<Arc<Module>> {
    let src = &ptx.src;
    let key = ModuleKey {
        ordinal: gpu.ordinal,
        image: Image::Ptx {
            digest: ptx.digest,
            len: src.text.len(),
            max_registers,
        },
    };
    cached(key, || {
        let _span =
            tracing::debug_span!("cuda.module_load", gpu = gpu.ordinal, origin = %src.origin)
                .entered();
        load_notice::watched_load(gpu.ordinal, entry, src, false, || {
            Module::load(gpu, &src.text, &src.origin, max_registers)
        })
    })
}

/// The embedded cubin `cubin` loaded on `gpu` (loaded on first use), if it holds kernel `entry`
/// within `max_registers` registers per thread: `None` when the run needs the PTX compiled
/// instead (an entry over the cap, or a cubin the driver refused before). The driver's first
/// refusal (a cubin for another architecture) is the error.
pub fn cubin_module(
    gpu: &Gpu,
    cubin: &'static [u8],
    origin: &str,
    entry: &str,
    max_registers: Option<u32>,
) -> Result<Option<Arc<Module>>> {
    let key = ModuleKey {
        ordinal: gpu.ordinal,
        image: Image::Cubin {
            addr: cubin.as_ptr() as usize,
            len: cubin.len(),
        },
    };
    if UNLOADABLE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(&key)
    {
        return Ok(None);
    }
    let module = cached(key, || {
        let _span = tracing::debug_span!("cuda.cubin_load", gpu = gpu.ordinal, origin).entered();
        Module::load_cubin(gpu, cubin, origin)
    })
    .inspect_err(|_| {
        // Built for another architecture, or by a newer ptxas than the driver knows: asked
        // once per process.
        UNLOADABLE
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(key);
    })?;
    let Some(f) = module.function(entry)? else {
        return Ok(None);
    };
    let registers = f.attr(super::driver::FuncAttr::CU_FUNC_ATTRIBUTE_NUM_REGS)?;
    let fits = max_registers.is_none_or(|cap| registers as u32 <= cap);
    tracing::debug!(
        entry,
        registers,
        ?max_registers,
        fits,
        "the embedded cubin's entry"
    );
    Ok(fits.then_some(module))
}

/// The module under `key`, made by `load` on first use.
fn cached(key: ModuleKey, load: impl FnOnce() -> Result<Module>) -> Result<Arc<Module>> {
    if let Some(m) = lookup(&MODULES, &key) {
        return Ok(m);
    }
    let loaded = Arc::new(load()?);
    Ok(remember(&MODULES, key, loaded))
}

/// The value under `key` in `cache`, if there is one.
pub(super) fn lookup<K: PartialEq, V>(cache: &Mutex<Vec<(K, Arc<V>)>>, key: &K) -> Option<Arc<V>> {
    let held = cache.lock().unwrap_or_else(PoisonError::into_inner);
    held.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| Arc::clone(v))
}

/// Adds `value` under `key` unless another thread did first; returns the cached value. No lock
/// is held while the value is made: two threads may make it, and the second copy is dropped.
pub(super) fn remember<K: PartialEq, V>(
    cache: &Mutex<Vec<(K, Arc<V>)>>,
    key: K,
    value: Arc<V>,
) -> Arc<V> {
    let mut held = cache.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, v)) = held.iter().find(|(k, _)| *k == key) {
        return Arc::clone(v);
    }
    held.push((key, Arc::clone(&value)));
    value
}
