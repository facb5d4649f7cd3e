//! Sizing a persistent kernel's grid: how many blocks of the run's lanes and scratch fit on each
//! GPU at once (the occupancy API), and the topology of the workers over the GPUs.

use mgws_core::Topology;

use super::driver::{self, FuncAttr, Function, Gpu};
use super::plan;
use super::session::Session;
use crate::error::{Error, Result};

/// How a run's workers are laid out on its GPUs.
#[derive(Clone, Debug)]
pub struct Grid {
    /// Workers and public queues per GPU.
    pub topology: Topology,
    /// Workers (blocks) per run device.
    pub workers: Vec<u32>,
    /// Dynamic shared memory per block (the scratch layout).
    pub smem: usize,
    /// Blocks co-resident per SM, per run device.
    pub blocks_per_sm: Vec<u32>,
}

/// Sizes the grid: `total` workers split over the run's GPUs (refused if they do not all fit at
/// once), or, for `None`, the most workers that are co-resident on each GPU with `lanes` threads
/// and the scratch layout's shared memory. The scratch holds a bit per public queue of the
/// worker's own GPU, so the blocks that fit do not depend on how many GPUs (or PEs) the run has.
pub fn size_grid(
    s: &Session,
    funcs: &[Function],
    local_capacity: u32,
    workers_per_queue: u32,
    lanes: u32,
    total: Option<u32>,
) -> Result<Grid> {
    let wpq = workers_per_queue;
    let gpus = &s.gpus[..s.run_devices];
    let requested = total
        .map(|t| crate::device::split_workers(t, gpus.len(), wpq))
        .transpose()?;
    // The most queues any one GPU can get.
    let queues_ub: u32 = match &requested {
        Some(r) => r.iter().map(|w| w.div_ceil(wpq)).max().unwrap_or(0),
        None => gpus
            .iter()
            .map(|g| plan::worker_upper_bound(g.sms).div_ceil(wpq))
            .max()
            .unwrap_or(0),
    };
    let smem_ub = plan::scratch_bytes(local_capacity, lanes, queues_ub);
    let mut workers = Vec::new();
    let mut blocks_per_sm = Vec::new();
    for (d, (g, f)) in gpus.iter().zip(funcs).enumerate() {
        let per_sm = blocks_per_sm_for(g, f, lanes, smem_ub, local_capacity)?;
        let what = format!("GPU {} ({})", g.ordinal, g.name);
        let want = requested.as_ref().map(|r| r[d]);
        workers.push(plan::fit_workers(want, per_sm, g.sms, wpq, &what)?);
        blocks_per_sm.push(per_sm);
    }
    let topology = Topology::split(&workers, wpq);
    // No GPU has more queues than the bound, so this needs at most `smem_ub`: it fits.
    let smem = plan::scratch_bytes(local_capacity, lanes, topology.device_queues_max());
    debug_assert!(smem <= smem_ub);
    Ok(Grid {
        topology,
        workers,
        smem,
        blocks_per_sm,
    })
}

/// How many blocks of `f` with `lanes` threads and `smem` bytes of dynamic shared memory fit on
/// one SM of `g`, after raising the kernel's dynamic shared memory limit where needed and
/// reserving its local memory (`Gpu::reserve_local_memory`): every kernel is prepared here
/// before its timed launch.
pub fn blocks_per_sm_for(
    g: &Gpu,
    f: &Function,
    lanes: u32,
    smem: usize,
    local_capacity: u32,
) -> Result<u32> {
    g.make_current()?;
    let max_threads = f.attr(FuncAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?;
    if lanes as i32 > max_threads {
        return Err(Error::Config(format!(
            "the kernel can run at most {max_threads} threads per block on GPU {} (it uses {} \
             registers per thread), not {lanes}; lower --lanes",
            g.ordinal,
            f.attr(FuncAttr::CU_FUNC_ATTRIBUTE_NUM_REGS)?
        )));
    }
    let static_smem = f.attr(FuncAttr::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)? as usize;
    let optin =
        g.attr(driver::Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as usize;
    if smem + static_smem > optin {
        return Err(Error::Config(format!(
            "a worker needs {} of shared memory (local queue of {local_capacity} tasks, {lanes} \
             lanes), more than the {} a block may have on GPU {}; lower --local-capacity (a \
             power of two)",
            driver::human_bytes(smem + static_smem),
            driver::human_bytes(optin),
            g.ordinal
        )));
    }
    let local_bytes = f.attr(FuncAttr::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?.max(0) as usize;
    tracing::debug!(
        registers = f.attr(FuncAttr::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
        local_bytes,
        static_smem,
        "the kernel's resources after the JIT"
    );
    g.reserve_local_memory(local_bytes)?;
    if smem > 48 * 1024 {
        f.set_attr(
            FuncAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem as i32,
        )?;
    }
    f.max_blocks_per_sm(lanes, smem)
}
