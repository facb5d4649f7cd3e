//! The device side: the worker entry, the panic handler and the memory builtins.

use core::arch::nvptx;

use mgws_core::nvptx::{GpuBlockPlatform, NvptxWord};
use mgws_core::{
    Env, LeanStatic, LevelArgs, LevelSink, LevelWorker, Platform, ScratchLayout, Spec,
    TaskExecutor, Worker,
};
use mgws_tasks::TaskStruct;

/// The platform of the persistent entries: a thread block, and with the `nvshmem` feature its
/// orchestration words routed through NVSHMEM's device API ([`crate::nvshmem`]).
#[cfg(not(feature = "nvshmem"))]
pub type KernelPlatform = GpuBlockPlatform;
/// The platform of the persistent entries (see above).
#[cfg(feature = "nvshmem")]
pub type KernelPlatform =
    mgws_core::WindowPlatform<GpuBlockPlatform, crate::nvshmem::NvshmemRemote>;
/// The atomic word of the persistent entries' env.
pub type KernelWord = <KernelPlatform as Platform>::Word;

/// The calling block's platform, with `scratch_len` bytes of dynamic shared memory.
///
/// # Safety
/// As for [`GpuBlockPlatform::new`].
#[inline(always)]
unsafe fn block_platform(scratch_len: u32) -> KernelPlatform {
    // SAFETY: the caller's guarantee.
    let p = unsafe { GpuBlockPlatform::new(scratch_len as usize) };
    #[cfg(feature = "nvshmem")]
    let p = mgws_core::WindowPlatform::new(p);
    p
}

/// The thread block under a persistent entry's platform.
#[inline(always)]
fn block_of(p: &KernelPlatform) -> &GpuBlockPlatform {
    #[cfg(feature = "nvshmem")]
    let p = p.inner();
    p
}

/// The calling block's index in the grid (`GpuBlockPlatform::block_index`).
#[inline(always)]
fn block_index() -> u32 {
    // SAFETY: reads the block index register.
    unsafe { nvptx::_block_idx_x() as u32 }
}

/// Runs the calling block as one worker of `env` with `exec` as the task executor, compiled for
/// the hot-loop options `S` (a worker whose configuration names others stops the run with
/// `RunError::WrongEntry`).
///
/// # Safety
/// Called by every thread of a one-dimensional block launched with `scratch_len` bytes of dynamic
/// shared memory; `env` points to a live, correctly laid out [`Env`] on this device and `device`
/// is this GPU's index in its topology (see [`crate::worker_kernel!`]).
#[inline(always)]
pub unsafe fn run_worker<X: TaskExecutor<TaskStruct>, S: Spec>(
    exec: &X,
    env: *const Env<KernelWord, TaskStruct>,
    scratch_len: u32,
    device: u32,
) {
    // SAFETY: guaranteed by the caller.
    let (p, env) = unsafe { (block_platform(scratch_len), &*env) };
    let topology = &env.topology;
    let d = device as usize;
    let id = topology.first_worker[d] + block_index();
    if id >= topology.first_worker[d + 1] {
        return;
    }
    check_scratch(
        block_of(&p),
        env.config.local_capacity,
        topology.device_queues_max(),
    );
    // SAFETY: `id` is a worker of this device, the scratch holds the layout (checked above), and
    // every lane makes the same call; the rest is the caller's guarantee.
    unsafe { Worker::<_, _, _, S>::start(p, env, exec, id) };
}

/// Runs the calling block as worker `blockIdx.x` of the static-assignment baseline
/// ([`LeanStatic`]): the same initial tasks and task execution as [`run_worker`], split into
/// contiguous equal shares in advance, no stealing.
///
/// # Safety
/// As for [`run_worker`].
#[inline(always)]
pub unsafe fn run_static<X: TaskExecutor<TaskStruct>, S: Spec>(
    exec: &X,
    env: *const Env<KernelWord, TaskStruct>,
    scratch_len: u32,
    device: u32,
) {
    // SAFETY: guaranteed by the caller.
    let (p, env) = unsafe { (block_platform(scratch_len), &*env) };
    let d = device as usize;
    let id = env.topology.first_worker[d] + block_index();
    if id >= env.topology.first_worker[d + 1] {
        return;
    }
    check_scratch(
        block_of(&p),
        env.config.local_capacity,
        env.topology.device_queues_max(),
    );
    // SAFETY: as in `run_worker`.
    unsafe { LeanStatic::<_, _, S>::new(p, env, id) }.run(exec);
}

/// Runs one level of the kernel-per-level baseline: block `b` of the grid runs frontier tasks
/// `b, b + gridDim.x, ...`; spawned tasks are appended to the next frontier.
///
/// # Safety
/// `args` points to a live [`LevelArgs`] in device memory whose buffers are valid; the launch
/// gives each block `scratch_len` bytes of dynamic shared memory.
#[inline(always)]
pub unsafe fn run_level<X: TaskExecutor<TaskStruct>, S: Spec>(
    exec: &X,
    args: *const LevelArgs,
    scratch_len: u32,
) {
    // SAFETY: guaranteed by the caller.
    let (p, args) = unsafe { (GpuBlockPlatform::new(scratch_len as usize), &*args) };
    let blocks = p.block_count();
    check_scratch(&p, args.config.local_capacity, blocks);
    let env = Env::<NvptxWord, TaskStruct>::bare(
        args.config,
        blocks,
        args.frontier as *const TaskStruct,
        args.frontier_len,
        args.areas,
    )
    .with_area_limits(args.area_limits);
    let sink = LevelSink {
        out: args.out as *mut TaskStruct,
        out_capacity: args.out_capacity,
        counters: args.counters as *const NvptxWord,
    };
    let block = p.block_index();
    // SAFETY: the bare env has every pointer a level run uses (frontier, areas), the sink's
    // buffers are the launch's; block < blocks.
    unsafe { LevelWorker::<_, _, _, S>::new(p, &env, exec, block, sink) }
        .run(block as u64, blocks as u64);
}

/// Writes tasks `first..first + count` of the indexed set whose task 0 is `template` to `dst`
/// (`dst[k]` is `template.indexed(first + k)`): thread `t` of the grid writes tasks `t`, `t +`
/// the grid's threads, and so on.
///
/// # Safety
/// `dst` is valid device memory for `count` tasks, which nothing else touches until the kernel
/// ends.
#[inline(always)]
pub unsafe fn fill_indexed(dst: *mut TaskStruct, template: &TaskStruct, first: u64, count: u64) {
    // SAFETY: these read the thread's special registers.
    let (thread, block, threads, blocks) = unsafe {
        (
            nvptx::_thread_idx_x() as u64,
            nvptx::_block_idx_x() as u64,
            nvptx::_block_dim_x() as u64,
            nvptx::_grid_dim_x() as u64,
        )
    };
    let mut k = block * threads + thread;
    while k < count {
        // SAFETY: k < count, and the caller gives `dst` room for `count` tasks.
        unsafe { dst.add(k as usize).write(template.indexed(first + k)) };
        k += threads * blocks;
    }
}

/// Traps if the launch gave less shared memory than the scratch layout needs, a block of fewer
/// than `GpuBlockPlatform::MIN_LANES` threads, or a local capacity that is not a power of two
/// (the local ring reduces positions with a mask: any other capacity would reuse slots).
///
/// On the block itself, not generic over the platform: a generic version changed LLVM's inlining
/// in every entry of the built-in kernel (shorter PTX, but the UTS entries took more registers
/// uncapped).
fn check_scratch(p: &GpuBlockPlatform, local_capacity: u32, queues: u32) {
    if p.lane_count() < GpuBlockPlatform::MIN_LANES || !local_capacity.is_power_of_two() {
        // SAFETY: aborts the kernel.
        unsafe { nvptx::trap() }
    }
    let needed = ScratchLayout::new(
        local_capacity,
        core::mem::size_of::<TaskStruct>(),
        p.lane_count(),
        queues,
    )
    .total;
    if needed > p.scratch_len() {
        // SAFETY: aborts the kernel.
        unsafe { nvptx::trap() }
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    // SAFETY: `trap` aborts the kernel; there is nothing to unwind to.
    unsafe { nvptx::trap() }
}

/// `memcmp` and `bcmp`, which core calls for slice and string comparisons and which no library
/// provides on `nvptx64-nvidia-cuda`. Behind the `mem-builtins` feature because every `#[no_mangle]`
/// function of a cdylib is exported: with them always present, every kernel's PTX would carry two
/// unused visible functions. (`memcpy`/`memset`/`memmove` are never needed: the NVPTX backend
/// expands those intrinsics into loops.)
#[cfg(feature = "mem-builtins")]
mod mem {
    /// # Safety
    /// As C's `memcmp`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        let mut i = 0;
        while i < n {
            // SAFETY: both ranges are valid for `n` bytes (the caller's contract).
            let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
            if x != y {
                return x as i32 - y as i32;
            }
            i += 1;
        }
        0
    }

    /// # Safety
    /// As C's `bcmp`.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        // SAFETY: same contract.
        unsafe { memcmp(a, b, n) }
    }
}
