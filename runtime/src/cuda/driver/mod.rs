//! A thin layer over the CUDA driver API: cudarc's `result` layer (typed wrappers of the driver
//! calls; libcuda is loaded at run time) where it has the call, cudarc's `sys` layer where it does
//! not (each such call says why). Every call's result becomes an [`Error`] that names the call,
//! and every resource is freed on drop with errors ignored (after a kernel trapped, the context
//! is dead and every call fails).
//!
//! The `sys` calls left: `cuGetErrorName` of any raw code, `cuDriverGetVersion`, `cuFuncLoad`,
//! the peer queries and `cuCtxEnablePeerAccess`, `cuMemHostGetDevicePointer` (mapped pinned
//! memory), `cuModuleLoadDataEx` (JIT options: `CU_JIT_MAX_REGISTERS`, the error log) and
//! `cuStreamQuery` (`result` wraps none of them).
//!
//! cudarc's safe layer (`CudaContext`, `CudaStream`, `CudaSlice`, `CudaModule`) is not used: it
//! frees memory and synchronises streams on drop and records events around every copy, while a
//! run here must be able to leave a kernel that ignores the abort running and leak its memory
//! (`Supervised::Leak`), must copy on a stream while a persistent kernel occupies another, and
//! needs mapped pinned memory and `CU_JIT_MAX_REGISTERS`, which the safe layer does not offer.
//!
//! Nothing here is specific to MGWS; the run logic lives in the sibling modules.

use std::ffi::CStr;

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys::{self, CUresult};

use super::pool;
use crate::error::{Error, Result};

mod memory;
mod module;
mod stream;

pub use memory::{DeviceBuffer, HostBuffer};
pub use module::{Function, Module};
pub use stream::{Event, Stream};
pub use sys::{
    CUdevice_P2PAttribute as P2pAttr, CUdevice_attribute as Attr, CUfunction_attribute as FuncAttr,
};

/// The driver's name for `r`, e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`.
pub fn error_name(r: CUresult) -> String {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorName writes a pointer to a static string or leaves it null.
    // sys: the name of any raw code, also of codes that never became a DriverError.
    let ok = unsafe { sys::cuGetErrorName(r, &mut p) } == CUresult::CUDA_SUCCESS;
    if ok && !p.is_null() {
        // SAFETY: the driver returned a NUL-terminated static string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    } else {
        format!("{r:?}")
    }
}

/// What a failed call means for a user, for the codes a run can end with.
pub fn explain(r: CUresult) -> &'static str {
    use CUresult::*;
    match r {
        CUDA_ERROR_LAUNCH_FAILED => {
            "the kernel trapped: a task panicked or failed a bounds check (PTX `trap`), or the \
             launch gave the kernel less shared memory than its scratch layout needs"
        }
        CUDA_ERROR_ILLEGAL_ADDRESS => {
            "the kernel accessed memory it may not (a bad data-area offset in a task, or \
             orchestration memory the device cannot reach)"
        }
        CUDA_ERROR_MISALIGNED_ADDRESS => "the kernel made a misaligned memory access",
        CUDA_ERROR_ILLEGAL_INSTRUCTION => "the kernel executed an illegal instruction",
        CUDA_ERROR_INVALID_PC => "the kernel jumped to an invalid program counter",
        CUDA_ERROR_HARDWARE_STACK_ERROR => "the kernel overflowed its call stack",
        CUDA_ERROR_ASSERT => "a device-side assertion failed",
        CUDA_ERROR_LAUNCH_TIMEOUT => {
            "the kernel ran longer than the display watchdog allows on this GPU"
        }
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => {
            "the block needs more registers or shared memory than an SM has: lower --lanes or \
             --local-capacity (a power of two)"
        }
        CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE => {
            "more blocks than fit on the GPU at once were launched cooperatively"
        }
        CUDA_ERROR_OUT_OF_MEMORY => "the GPU is out of memory",
        CUDA_ERROR_INVALID_PTX | CUDA_ERROR_UNSUPPORTED_PTX_VERSION => {
            "the driver could not compile the PTX: rebuild it with `cargo xtask ptx` for this GPU's \
             architecture, or update the driver"
        }
        CUDA_ERROR_NO_BINARY_FOR_GPU => {
            "the PTX was built for a newer architecture than this GPU (see `cargo xtask ptx --arch`)"
        }
        CUDA_ERROR_PEER_ACCESS_UNSUPPORTED => "the GPUs cannot access each other's memory",
        _ => "",
    }
}

/// The error's name and what it means, for the message of a kernel that stopped with it.
pub fn describe(r: CUresult) -> String {
    match explain(r) {
        "" => format!("{}: an unexpected driver error", error_name(r)),
        why => format!("{}: {why}", error_name(r)),
    }
}

/// `Ok` for `CUDA_SUCCESS`, else an [`Error::Cuda`] naming `what` and the error.
pub fn check(r: CUresult, what: impl FnOnce() -> String) -> Result<()> {
    if r == CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let why = explain(r);
    Err(Error::Cuda(if why.is_empty() {
        format!("{} failed: {}", what(), error_name(r))
    } else {
        format!("{} failed: {} ({why})", what(), error_name(r))
    }))
}

/// [`check`] for a call of cudarc's `result` layer.
fn ok<T>(r: std::result::Result<T, DriverError>, what: impl FnOnce() -> String) -> Result<T> {
    r.map_err(|DriverError(code)| match check(code, what) {
        Err(e) => e,
        Ok(()) => Error::Cuda("a driver call failed with CUDA_SUCCESS".into()),
    })
}

/// Loads libcuda and initialises the driver. Errors are [`Error::BackendUnavailable`].
pub fn init() -> Result<()> {
    let _span = tracing::debug_span!("cuda.init").entered();
    // SAFETY: only tries to dlopen the library under its usual names.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::BackendUnavailable(
            "the CUDA driver library (libcuda.so.1) could not be loaded: no NVIDIA driver is \
             installed here, or it is not on the loader path (LD_LIBRARY_PATH)"
                .into(),
        ));
    }
    if let Err(DriverError(r)) = result::init() {
        return Err(Error::BackendUnavailable(format!(
            "the CUDA driver did not initialise: {}{}",
            error_name(r),
            if r == CUresult::CUDA_ERROR_NO_DEVICE {
                " (no CUDA-capable GPU is visible; check CUDA_VISIBLE_DEVICES)"
            } else {
                ""
            }
        )));
    }
    Ok(())
}

/// The driver's CUDA version as (major, minor).
pub fn driver_version() -> Result<(u32, u32)> {
    let mut v = 0;
    // sys: the result layer has no cuDriverGetVersion.
    // SAFETY: writes one int.
    check(unsafe { sys::cuDriverGetVersion(&mut v) }, || {
        "cuDriverGetVersion".into()
    })?;
    Ok((v as u32 / 1000, (v as u32 % 1000) / 10))
}

/// Number of visible GPUs (after [`init`]).
pub fn device_count() -> Result<u32> {
    let n = ok(result::device::get_count(), || "cuDeviceGetCount".into())?;
    Ok(n.max(0) as u32)
}

/// The name of GPU `ordinal` (after [`init`]; retains no context).
pub fn device_name(ordinal: u32) -> Result<String> {
    let dev = ok(result::device::get(ordinal as i32), || {
        format!("cuDeviceGet({ordinal})")
    })?;
    name_of(dev, ordinal)
}

/// The name of `dev`, GPU `ordinal`.
fn name_of(dev: sys::CUdevice, ordinal: u32) -> Result<String> {
    ok(result::device::get_name(dev), || {
        format!("cuDeviceGetName({ordinal})")
    })
}

/// Whether GPU `a` can access GPU `b`'s memory, and whether its atomics there are native.
pub fn peer_caps(a: sys::CUdevice, b: sys::CUdevice) -> Result<(bool, bool)> {
    let mut can = 0;
    // sys: the result layer has no peer-capability queries.
    check(
        // SAFETY: writes one int.
        unsafe { sys::cuDeviceCanAccessPeer(&mut can, a, b) },
        || "cuDeviceCanAccessPeer".into(),
    )?;
    let mut atomics = 0;
    if can != 0 {
        check(
            // SAFETY: writes one int.
            unsafe {
                sys::cuDeviceGetP2PAttribute(
                    &mut atomics,
                    P2pAttr::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED,
                    a,
                    b,
                )
            },
            || "cuDeviceGetP2PAttribute(NATIVE_ATOMIC_SUPPORTED)".into(),
        )?;
    }
    Ok((can != 0, atomics != 0))
}

/// One GPU with its primary context retained.
pub struct Gpu {
    pub ordinal: u32,
    pub dev: sys::CUdevice,
    pub ctx: sys::CUcontext,
    pub name: String,
    pub sms: u32,
    pub cc: (u32, u32),
}

// SAFETY: a CUDA context handle may be used from any thread (every call that needs it current
// makes it current on the calling thread first, `make_current`); the struct's other fields are
// plain data.
unsafe impl Send for Gpu {}
// SAFETY: as for Send; `&Gpu` methods only read the handles and call thread-safe driver entry
// points.
unsafe impl Sync for Gpu {}

impl Gpu {
    /// Retains GPU `ordinal`'s primary context and makes it current.
    pub fn open(ordinal: u32) -> Result<Gpu> {
        let dev = ok(result::device::get(ordinal as i32), || {
            format!("cuDeviceGet({ordinal})")
        })?;
        let name = name_of(dev, ordinal)?;
        // SAFETY: `dev` came from cuDeviceGet; the retain is balanced by the release in Drop.
        let ctx = ok(unsafe { result::primary_ctx::retain(dev) }, || {
            format!("cuDevicePrimaryCtxRetain(GPU {ordinal})")
        })?;
        let mut gpu = Gpu {
            ordinal,
            dev,
            ctx,
            name,
            sms: 0,
            cc: (0, 0),
        };
        gpu.make_current()?;
        gpu.sms = gpu.attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        gpu.cc = (
            gpu.attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? as u32,
            gpu.attr(Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)? as u32,
        );
        Ok(gpu)
    }

    pub fn make_current(&self) -> Result<()> {
        // SAFETY: the context is retained for the lifetime of self.
        ok(unsafe { result::ctx::set_current(self.ctx) }, || {
            format!("cuCtxSetCurrent(GPU {})", self.ordinal)
        })
    }

    pub fn attr(&self, a: Attr) -> Result<i32> {
        // SAFETY: `self.dev` came from cuDeviceGet.
        ok(
            unsafe { result::device::get_attribute(self.dev, a) },
            || format!("cuDeviceGetAttribute({a:?}) on GPU {}", self.ordinal),
        )
    }

    /// Lets this GPU's kernels access `peer`'s memory (idempotent).
    pub fn enable_peer_access(&self, peer: &Gpu) -> Result<()> {
        self.make_current()?;
        // sys: the result layer has no cuCtxEnablePeerAccess.
        // SAFETY: both contexts are retained.
        let r = unsafe { sys::cuCtxEnablePeerAccess(peer.ctx, 0) };
        if r == CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
            return Ok(());
        }
        check(r, || {
            format!(
                "enabling peer access from GPU {} to GPU {}",
                self.ordinal, peer.ordinal
            )
        })
    }

    /// Makes sure each thread of this GPU's kernels has at least `bytes` of local memory
    /// reserved (the context's stack-size limit). A launch whose kernel needs more than is
    /// reserved makes the driver grow the reservation inside the launch call, which held a UTS
    /// launch (its entries need more than the default 1,024 bytes per thread) while its start
    /// event had already been recorded, so the run's time counted it. Doing it here moves that
    /// cost into setup. Never shrinks the reservation.
    pub fn reserve_local_memory(&self, bytes: usize) -> Result<()> {
        self.make_current()?;
        let limit = sys::CUlimit::CU_LIMIT_STACK_SIZE;
        let current = ok(result::ctx::get_limit(limit), || {
            format!("cuCtxGetLimit(CU_LIMIT_STACK_SIZE) on GPU {}", self.ordinal)
        })?;
        if bytes <= current {
            return Ok(());
        }
        let _span =
            tracing::debug_span!("cuda.reserve_local_memory", gpu = self.ordinal, bytes).entered();
        ok(result::ctx::set_limit(limit, bytes), || {
            format!(
                "reserving {bytes} bytes of local memory per thread on GPU {} \
                 (cuCtxSetLimit(CU_LIMIT_STACK_SIZE))",
                self.ordinal
            )
        })
    }

    /// Frees the device memory the process keeps for this GPU's later runs ([`pool`]).
    pub fn release_kept_memory(&self) -> Result<()> {
        self.make_current()?;
        for ptr in pool::drain(pool::Owner::Device(self.ctx as usize)) {
            // SAFETY: kept allocations are unused and owned by nobody else.
            let _ = unsafe { result::free_sync(ptr) };
        }
        Ok(())
    }

    /// Free and total device memory in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.make_current()?;
        ok(result::mem_get_info(), || "cuMemGetInfo".into())
    }

    /// Waits for all work of this GPU's context.
    pub fn synchronize(&self) -> Result<()> {
        self.make_current()?;
        ok(result::ctx::synchronize(), || {
            format!("synchronizing GPU {}", self.ordinal)
        })
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: balances the retain in `open`; errors are ignored (the context may be dead).
        let _ = unsafe { result::primary_ctx::release(self.dev) };
    }
}

/// Makes `ctx` current on the calling thread (the handles below remember their context, and the
/// `result` helpers leave making it current to the caller).
fn set_current(ctx: sys::CUcontext) -> Result<()> {
    // SAFETY: every context handle here is a primary context retained by its `Gpu`.
    ok(unsafe { result::ctx::set_current(ctx) }, || {
        "cuCtxSetCurrent".into()
    })
}

/// `n` bytes for humans (`crate::error::human_bytes`).
pub fn human_bytes(n: usize) -> String {
    crate::error::human_bytes(n as u64)
}
