//! The process's opened GPUs and loaded modules. A CLI run asks the backend for its defaults
//! (the occupancy of the kernel), then runs, then may run baselines: all of them share one
//! primary-context retain per GPU and one JIT compile per (GPU, PTX text, register cap), where the
//! text is the module pruned to the one entry a run launches (`ptx::prune_to_entry`): a run and
//! each of its baselines compile their own entry once.
//!
//! Entries live until the process exits: a module is valid only while its context is, and a
//! kernel that ignored an abort may still use both (see `persistent::Supervised::Leak`).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use super::driver::{Gpu, Module};
use super::ptx::PtxSource;
use crate::error::Result;

/// Which module: the GPU, a digest and the length of the PTX text, and the register cap.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct ModuleKey {
    ordinal: u32,
    digest: u64,
    len: usize,
    max_registers: Option<u32>,
}

static GPUS: Mutex<Vec<(u32, Arc<Gpu>)>> = Mutex::new(Vec::new());
static MODULES: Mutex<Vec<(ModuleKey, Arc<Module>)>> = Mutex::new(Vec::new());

/// GPU `ordinal` with its primary context retained (opened on first use).
pub fn gpu(ordinal: u32) -> Result<Arc<Gpu>> {
    let mut gpus = GPUS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, g)) = gpus.iter().find(|(o, _)| *o == ordinal) {
        return Ok(Arc::clone(g));
    }
    let g = Arc::new(Gpu::open(ordinal)?);
    gpus.push((ordinal, Arc::clone(&g)));
    Ok(g)
}

/// `src` JIT-compiled for `gpu` with `max_registers` (compiled on first use). The lock is held
/// while compiling, so two threads asking for the same module compile it once.
pub fn module(gpu: &Gpu, src: &PtxSource, max_registers: Option<u32>) -> Result<Arc<Module>> {
    let mut h = DefaultHasher::new();
    src.text.hash(&mut h);
    let key = ModuleKey {
        ordinal: gpu.ordinal,
        digest: h.finish(),
        len: src.text.len(),
        max_registers,
    };
    let mut modules = MODULES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, m)) = modules.iter().find(|(k, _)| *k == key) {
        return Ok(Arc::clone(m));
    }
    tracing::debug!(gpu = gpu.ordinal, origin = %src.origin, "JIT-compiling the kernel PTX");
    let m = Arc::new(Module::load(gpu, &src.text, &src.origin, max_registers)?);
    modules.push((key, Arc::clone(&m)));
    Ok(m)
}
