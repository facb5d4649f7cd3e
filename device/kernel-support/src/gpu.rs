//! The device side: the worker entry, the panic handler and the memory builtins.

use core::arch::nvptx;

use mgws_core::nvptx::{GpuBlockPlatform, NvptxWord};
use mgws_core::{Env, Platform, ScratchLayout, TaskExecutor, Worker};
use mgws_tasks::TaskStruct;

/// Runs the calling block as one worker of `env` with `exec` as the task executor.
///
/// # Safety
/// Called by every thread of a one-dimensional block launched with `scratch_len` bytes of dynamic
/// shared memory; `env` points to a live, correctly laid out [`Env`] on this device and `device`
/// is this GPU's index in its topology (see [`crate::worker_kernel!`]).
#[inline(always)]
pub unsafe fn run_worker<X: TaskExecutor<TaskStruct>>(
    exec: &X,
    env: *const Env<NvptxWord, TaskStruct>,
    scratch_len: u32,
    device: u32,
) {
    // SAFETY: guaranteed by the caller.
    let (p, env) = unsafe { (GpuBlockPlatform::new(scratch_len as usize), &*env) };
    let topology = &env.topology;
    let d = device as usize;
    let id = topology.first_worker[d] + p.block_index();
    if id >= topology.first_worker[d + 1] {
        return;
    }
    let needed = ScratchLayout::new(
        env.config.local_capacity,
        core::mem::size_of::<TaskStruct>(),
        p.lane_count(),
        topology.queues(),
    )
    .total;
    if needed > p.scratch_len() {
        // The launch gave too little shared memory: the local queue would overrun it.
        // SAFETY: aborts the kernel.
        unsafe { nvptx::trap() }
    }
    // SAFETY: `id` is a worker of this device, the scratch holds the layout (checked above), and
    // every lane makes the same call; the rest is the caller's guarantee.
    unsafe { Worker::new(p, env, exec, id) }.run();
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
