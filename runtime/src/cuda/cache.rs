//! The process's opened GPUs and loaded modules. A CLI run asks the backend for its defaults
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
//! kernel that ignored an abort may still use both (see `persistent::Supervised::Leak`).

use std::sync::{Arc, Mutex, PoisonError};

use super::driver::{Gpu, Module};
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
    GPUS.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .find(|(o, _)| *o == ordinal)
        .map(|(_, g)| Arc::clone(g))
}

/// GPU `ordinal` with its primary context retained (opened on first use).
pub fn gpu(ordinal: u32) -> Result<Arc<Gpu>> {
    let find = |gpus: &[(u32, Arc<Gpu>)]| {
        gpus.iter()
            .find(|(o, _)| *o == ordinal)
            .map(|(_, g)| Arc::clone(g))
    };
    if let Some(g) = find(&GPUS.lock().unwrap_or_else(PoisonError::into_inner)) {
        return Ok(g);
    }
    let opened = {
        let _span = tracing::debug_span!("cuda.open_gpu", ordinal).entered();
        Arc::new(Gpu::open(ordinal)?)
    };
    let mut gpus = GPUS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(g) = find(&gpus) {
        return Ok(g);
    }
    gpus.push((ordinal, Arc::clone(&opened)));
    Ok(opened)
}

/// `src` JIT-compiled for `gpu` with `max_registers` (compiled on first use; the driver's own
/// JIT cache, `CUDA_CACHE_PATH`, keeps the compiled code for later processes).
pub fn module(gpu: &Gpu, ptx: &EntryPtx, max_registers: Option<u32>) -> Result<Arc<Module>> {
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
        Module::load(gpu, &src.text, &src.origin, max_registers)
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
    let find = |modules: &[(ModuleKey, Arc<Module>)]| {
        modules
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, m)| Arc::clone(m))
    };
    if let Some(m) = find(&MODULES.lock().unwrap_or_else(PoisonError::into_inner)) {
        return Ok(m);
    }
    let loaded = Arc::new(load()?);
    let mut modules = MODULES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(m) = find(&modules) {
        return Ok(m);
    }
    modules.push((key, Arc::clone(&loaded)));
    Ok(loaded)
}
