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

use std::ffi::{c_void, CStr, CString};

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys::{self, CUresult};

use super::pool;
use crate::error::{Error, Result};

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
        let name = ok(result::device::get_name(dev), || {
            format!("cuDeviceGetName({ordinal})")
        })?;
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

/// Device memory of one GPU.
pub struct DeviceBuffer {
    pub ptr: u64,
    pub bytes: usize,
    ctx: sys::CUcontext,
    /// Whether dropping the buffer frees it (false for [`DeviceBuffer::borrowed`]).
    owned: bool,
    /// The size class it was allocated with, where the process keeps it for later runs
    /// ([`pool`]).
    class: Option<usize>,
}

impl DeviceBuffer {
    /// `bytes` of device memory on `gpu` (at least 1 byte is allocated), not initialised.
    ///
    /// `what` names the buffer and the setting that sized it: a size beyond the GPU's free
    /// memory is an [`crate::Error::OutOfMemory`] with both sizes, before anything is allocated.
    pub fn alloc(gpu: &Gpu, bytes: usize, what: &str) -> Result<DeviceBuffer> {
        let owner = pool::Owner::Device(gpu.ctx as usize);
        let mut class = pool::class(owner, bytes);
        let _span = tracing::trace_span!("cuda.device_alloc", gpu = gpu.ordinal, bytes).entered();
        if let Some(ptr) = class.and_then(|c| pool::take(owner, c)) {
            return Ok(DeviceBuffer {
                ptr,
                bytes,
                ctx: gpu.ctx,
                owned: true,
                class,
            });
        }
        let mut free = gpu.mem_info()?.0;
        if class.unwrap_or(bytes) > free {
            // What this process keeps of its GPU's memory goes first.
            gpu.release_kept_memory()?;
            free = gpu.mem_info()?.0;
            if class.unwrap_or(bytes) > free {
                // The size class does not fit where the size does: allocate the size, not kept.
                class = None;
            }
        }
        if bytes > free {
            return Err(crate::Error::OutOfMemory {
                what: what.to_string(),
                where_: format!("GPU {} memory", gpu.ordinal),
                needed: bytes as u64,
                available: free as u64,
            });
        }
        gpu.make_current()?;
        // SAFETY: the memory is only ever accessed as bytes; freed (or kept) in Drop.
        let ptr = ok(
            unsafe { result::malloc_sync(class.unwrap_or(bytes).max(1)) },
            || {
                format!(
                    "allocating {what} ({}) on GPU {}",
                    human_bytes(bytes),
                    gpu.ordinal
                )
            },
        )?;
        Ok(DeviceBuffer {
            ptr,
            bytes,
            ctx: gpu.ctx,
            owned: true,
            class,
        })
    }

    /// Memory another allocator owns (NVSHMEM's symmetric heap, or another PE's part of it
    /// mapped into this process), `bytes` at `ptr`, used through `gpu`'s context; dropping the
    /// buffer does not free it.
    ///
    /// # Safety
    /// `ptr..ptr + bytes` is device memory `gpu`'s context can address, and stays allocated
    /// while the buffer is used.
    pub unsafe fn borrowed(gpu: &Gpu, ptr: u64, bytes: usize) -> DeviceBuffer {
        DeviceBuffer {
            ptr,
            bytes,
            ctx: gpu.ctx,
            owned: false,
            class: None,
        }
    }

    /// Sets every byte to zero (synchronously).
    pub fn zero(&self) -> Result<()> {
        let _span = tracing::trace_span!("cuda.zero", bytes = self.bytes).entered();
        set_current(self.ctx)?;
        // SAFETY: the buffer holds `bytes` bytes and is not freed before self is dropped.
        ok(
            unsafe { result::memset_d8_sync(self.ptr, 0, self.bytes) },
            || "zeroing device memory".into(),
        )
    }

    /// Copies `src` to byte `offset` (synchronously; no kernel of this context may be running).
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        assert!(offset + src.len() <= self.bytes);
        if src.is_empty() {
            return Ok(());
        }
        set_current(self.ctx)?;
        // SAFETY: the destination range lies inside the buffer (asserted), the source is a slice.
        ok(
            unsafe { result::memcpy_htod_sync(self.ptr + offset as u64, src) },
            || format!("copying {} to the GPU", human_bytes(src.len())),
        )
    }

    /// Copies from byte `offset` into `dst` (synchronously).
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        assert!(offset + dst.len() <= self.bytes);
        if dst.is_empty() {
            return Ok(());
        }
        set_current(self.ctx)?;
        // SAFETY: the source range lies inside the buffer (asserted), the destination is a slice.
        ok(
            unsafe { result::memcpy_dtoh_sync(dst, self.ptr + offset as u64) },
            || format!("copying {} from the GPU", human_bytes(dst.len())),
        )
    }

    /// Copies `src` to byte `offset` on `stream` and waits for that stream only: usable while a
    /// kernel runs on another (non-blocking) stream.
    pub fn write_async(&self, offset: usize, src: &[u8], stream: &Stream) -> Result<()> {
        assert!(offset + src.len() <= self.bytes);
        set_current(self.ctx)?;
        ok(
            // SAFETY: as in `write`; the source outlives the synchronisation below.
            unsafe { result::memcpy_htod_async(self.ptr + offset as u64, src, stream.raw) },
            || "writing to GPU memory while the kernel runs".into(),
        )?;
        stream.synchronize()
    }

    /// Reads into `dst` from byte `offset` on `stream` (see [`DeviceBuffer::write_async`]).
    pub fn read_async(&self, offset: usize, dst: &mut [u8], stream: &Stream) -> Result<()> {
        assert!(offset + dst.len() <= self.bytes);
        set_current(self.ctx)?;
        ok(
            // SAFETY: as in `read`; the destination outlives the synchronisation below.
            unsafe { result::memcpy_dtoh_async(dst, self.ptr + offset as u64, stream.raw) },
            || "reading GPU memory while the kernel runs".into(),
        )?;
        stream.synchronize()
    }
}

// SAFETY: the buffer is an address in a primary context that its `Gpu` keeps retained; context
// handles are valid on every thread, and each call on the buffer (copies, the free on drop) makes
// its context current on the calling thread first.
unsafe impl Send for DeviceBuffer {}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let owner = pool::Owner::Device(self.ctx as usize);
        let _span = tracing::trace_span!("cuda.device_free", bytes = self.bytes).entered();
        if self.class.is_some_and(|c| pool::give(owner, c, self.ptr)) {
            return;
        }
        // SAFETY: frees what `alloc` allocated, once; errors are ignored (the context may be
        // dead).
        unsafe {
            let _ = result::ctx::set_current(self.ctx);
            let _ = result::free_sync(self.ptr);
        }
    }
}

/// Pinned host memory mapped into every context's address space (`cuMemHostAlloc` with
/// `PORTABLE | DEVICEMAP`): the host reads and writes it directly while kernels run.
pub struct HostBuffer {
    pub host: *mut u8,
    pub bytes: usize,
    /// The size class it was allocated with, where the process keeps it for later runs
    /// ([`pool`]).
    class: Option<usize>,
}

// SAFETY: the buffer is plain memory; concurrent access follows the protocols of its users.
unsafe impl Send for HostBuffer {}

impl HostBuffer {
    /// `bytes` of zeroed, mapped, pinned host memory (a context must be current).
    pub fn alloc(bytes: usize, what: &str) -> Result<HostBuffer> {
        let class = pool::class(pool::Owner::Host, bytes);
        let host = match class.and_then(|c| pool::take(pool::Owner::Host, c)) {
            Some(addr) => addr as *mut u8,
            None => {
                // SAFETY: returns a host pointer to at least the size asked for; freed (or kept)
                // in Drop.
                let p = ok(
                    unsafe {
                        result::malloc_host(
                            class.unwrap_or(bytes).max(1),
                            sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP,
                        )
                    },
                    || {
                        format!(
                            "allocating {what} ({}) in pinned host memory",
                            human_bytes(bytes)
                        )
                    },
                )?;
                p as *mut u8
            }
        };
        // SAFETY: the allocation holds at least `bytes` bytes.
        unsafe { std::ptr::write_bytes(host, 0, bytes) };
        Ok(HostBuffer { host, bytes, class })
    }

    /// The address kernels of `gpu` use for this memory.
    pub fn device_ptr(&self, gpu: &Gpu) -> Result<u64> {
        gpu.make_current()?;
        let mut d = 0;
        // sys: the result layer has no cuMemHostGetDevicePointer.
        check(
            // SAFETY: the host pointer is a DEVICEMAP allocation; writes one device pointer.
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut d, self.host as *mut c_void, 0) },
            || format!("mapping pinned host memory into GPU {}", gpu.ordinal),
        )?;
        Ok(d)
    }

    /// Volatile read of the `T` at byte `offset` (the host's view while kernels write it).
    ///
    /// # Safety
    /// `offset` is in range and aligned for `T`, and any bytes are a valid `T`.
    pub unsafe fn read_volatile<T: Copy>(&self, offset: usize) -> T {
        debug_assert!(offset + std::mem::size_of::<T>() <= self.bytes);
        // SAFETY: guaranteed by the caller.
        unsafe { (self.host.add(offset) as *const T).read_volatile() }
    }

    /// Volatile write of `value` at byte `offset`.
    ///
    /// # Safety
    /// As for [`HostBuffer::read_volatile`].
    pub unsafe fn write_volatile<T: Copy>(&self, offset: usize, value: T) {
        debug_assert!(offset + std::mem::size_of::<T>() <= self.bytes);
        // SAFETY: guaranteed by the caller.
        unsafe { (self.host.add(offset) as *mut T).write_volatile(value) }
    }

    /// The whole buffer as bytes.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the allocation holds `bytes` initialised (zeroed) bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.host, self.bytes) }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if self
            .class
            .is_some_and(|c| pool::give(pool::Owner::Host, c, self.host as u64))
        {
            return;
        }
        // SAFETY: frees what `alloc` allocated, once; errors are ignored.
        let _ = unsafe { result::free_host(self.host as *mut c_void) };
    }
}

/// A PTX module loaded (JIT-compiled) into one context.
pub struct Module {
    raw: sys::CUmodule,
    ctx: sys::CUcontext,
}

// SAFETY: module and context handles may be used from any thread; `function` makes the context
// current on the calling thread before it looks a kernel up, and the driver's module calls are
// thread-safe.
unsafe impl Send for Module {}
// SAFETY: as for Send (`&Module` only looks kernels up).
unsafe impl Sync for Module {}

/// The JIT options of a module load or link: the error log into `log`, and the register cap.
/// The values point into `log`, which must outlive the driver call they are passed to.
fn jit_options(
    log: &mut [u8],
    max_registers: Option<u32>,
) -> (Vec<sys::CUjit_option>, Vec<*mut c_void>) {
    let mut options = vec![
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    // The size option's value is passed by value in the pointer slot.
    let mut values = vec![log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
    if let Some(n) = max_registers {
        options.push(sys::CUjit_option::CU_JIT_MAX_REGISTERS);
        values.push(n as usize as *mut c_void);
    }
    (options, values)
}

/// The driver's JIT log in `log` (NUL-terminated) as the tail of an error message: empty when
/// the driver wrote none.
fn jit_log(log: &[u8]) -> String {
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let text = String::from_utf8_lossy(&log[..end]);
    if text.trim().is_empty() {
        String::new()
    } else {
        format!("\nJIT log:\n{}", text.trim())
    }
}

/// The error of a module load of `origin` on `gpu` that the driver answered with `r`, with the
/// JIT's `log` where there is one.
fn load_failed(gpu: &Gpu, origin: &str, r: CUresult, log: &[u8]) -> Error {
    Error::Cuda(format!(
        "loading {origin} on GPU {} ({}) failed: {} {}{}",
        gpu.ordinal,
        gpu.name,
        error_name(r),
        explain(r),
        jit_log(log)
    ))
}

impl Module {
    /// JIT-compiles `ptx` for `gpu`, with at most `max_registers` registers per thread if given;
    /// a compile error carries the driver's log.
    pub fn load(gpu: &Gpu, ptx: &str, origin: &str, max_registers: Option<u32>) -> Result<Module> {
        gpu.make_current()?;
        let image = CString::new(ptx)
            .map_err(|_| Error::Input(format!("{origin} contains a NUL byte: not a PTX file")))?;
        let mut log = vec![0u8; 16 * 1024];
        let (mut options, mut values) = jit_options(&mut log, max_registers);
        let mut raw = std::ptr::null_mut();
        // sys: cuModuleLoadDataEx with JIT options (CU_JIT_MAX_REGISTERS, the error log), which
        // the result layer's `module::load_data` does not pass.
        // SAFETY: the image is NUL-terminated; the options point to a live log buffer of the
        // given size (the size option's value is passed by value in the pointer slot).
        let r = unsafe {
            sys::cuModuleLoadDataEx(
                &mut raw,
                image.as_ptr() as *const c_void,
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if r != CUresult::CUDA_SUCCESS {
            return Err(load_failed(gpu, origin, r, &log));
        }
        Ok(Module { raw, ctx: gpu.ctx })
    }

    /// Loads `cubin`, a module ptxas assembled ahead of time for this GPU's architecture: no JIT
    /// compile. `origin` names it in errors (a cubin built for another architecture is refused
    /// by the driver with `CUDA_ERROR_NO_BINARY_FOR_GPU`).
    pub fn load_cubin(gpu: &Gpu, cubin: &[u8], origin: &str) -> Result<Module> {
        gpu.make_current()?;
        // The driver reads the image as an ELF file: give it 8-byte alignment.
        let mut image = vec![0u64; cubin.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut image)[..cubin.len()].copy_from_slice(cubin);
        let mut raw = std::ptr::null_mut();
        // sys: the result layer's load_data takes a CString, not a binary image.
        // SAFETY: `image` holds the whole cubin and outlives the call.
        let r = unsafe { sys::cuModuleLoadData(&mut raw, image.as_ptr() as *const c_void) };
        if r != CUresult::CUDA_SUCCESS {
            return Err(load_failed(gpu, origin, r, &[]));
        }
        Ok(Module { raw, ctx: gpu.ctx })
    }

    /// Links `ptx` with the relocatable `cubin` and the device library `library` (an archive of
    /// relocatable device code) with the driver's JIT linker and loads the result on `gpu`, with
    /// at most `max_registers` registers per thread if given. This is how a kernel that calls
    /// NVSHMEM's device API is loaded (`processes::gpu::nvshmem_link`); a link error carries the log.
    #[cfg(feature = "processes")]
    pub fn link(
        gpu: &Gpu,
        ptx: &str,
        origin: &str,
        max_registers: Option<u32>,
        cubin: &[u8],
        library: &std::path::Path,
    ) -> Result<Module> {
        gpu.make_current()?;
        let image = CString::new(ptx)
            .map_err(|_| Error::Input(format!("{origin} contains a NUL byte: not a PTX file")))?;
        let library_c = CString::new(library.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::Input(format!("{} contains a NUL byte", library.display())))?;
        let mut log = vec![0u8; 16 * 1024];
        let (mut options, mut values) = jit_options(&mut log, max_registers);
        let failed = |what: &str, r: CUresult, log: &[u8]| {
            Error::Cuda(format!(
                "linking {origin} with NVSHMEM's device code on GPU {} ({}) failed at {what}: {} \
                 {}{}",
                gpu.ordinal,
                gpu.name,
                error_name(r),
                explain(r),
                jit_log(log)
            ))
        };
        let mut state = std::ptr::null_mut();
        // sys: the result layer has no linker.
        // SAFETY: the options point to a live log buffer of the given size (the size option's
        // value is passed by value in the pointer slot); both outlive the link state, which is
        // destroyed below on every path.
        let r = unsafe {
            sys::cuLinkCreate_v2(
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
                &mut state,
            )
        };
        if r != CUresult::CUDA_SUCCESS {
            return Err(failed("cuLinkCreate", r, &log));
        }
        let linked = (|| {
            let add = |kind, data: *const u8, len: usize, name: &std::ffi::CStr, what| {
                // SAFETY: `data` is a live buffer of `len` bytes (the PTX NUL-terminated, its
                // length counting the NUL) and the name is NUL-terminated; the driver copies
                // both.
                let r = unsafe {
                    sys::cuLinkAddData_v2(
                        state,
                        kind,
                        data as *mut c_void,
                        len,
                        name.as_ptr(),
                        0,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                if r == CUresult::CUDA_SUCCESS {
                    Ok(())
                } else {
                    Err((what, r))
                }
            };
            let ptx = image.as_bytes_with_nul();
            add(
                sys::CUjitInputType::CU_JIT_INPUT_PTX,
                ptx.as_ptr(),
                ptx.len(),
                c"mgws kernel",
                "the kernel's PTX",
            )?;
            add(
                sys::CUjitInputType::CU_JIT_INPUT_CUBIN,
                cubin.as_ptr(),
                cubin.len(),
                c"mgws NVSHMEM wrappers",
                "the NVSHMEM wrappers",
            )?;
            // SAFETY: a NUL-terminated path; the driver reads the file.
            let r = unsafe {
                sys::cuLinkAddFile_v2(
                    state,
                    sys::CUjitInputType::CU_JIT_INPUT_LIBRARY,
                    library_c.as_ptr(),
                    0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
            if r != CUresult::CUDA_SUCCESS {
                return Err(("NVSHMEM's device library", r));
            }
            let (mut out, mut size) = (std::ptr::null_mut(), 0usize);
            // SAFETY: the state holds every input; the image it returns lives until the state
            // is destroyed, and is loaded (copied) before that.
            let r = unsafe { sys::cuLinkComplete(state, &mut out, &mut size) };
            if r != CUresult::CUDA_SUCCESS {
                return Err(("cuLinkComplete", r));
            }
            let mut raw = std::ptr::null_mut();
            // SAFETY: `out` is the linked cubin the driver just produced.
            let r = unsafe { sys::cuModuleLoadData(&mut raw, out) };
            if r != CUresult::CUDA_SUCCESS {
                return Err(("loading the linked module", r));
            }
            Ok(raw)
        })();
        // SAFETY: created above, destroyed once; the module (if any) holds its own copy.
        unsafe { sys::cuLinkDestroy(state) };
        match linked {
            Ok(raw) => Ok(Module { raw, ctx: gpu.ctx }),
            Err((what, r)) => Err(failed(what, r, &log)),
        }
    }

    /// The driver's handle, for libraries that register a module (`nvshmemx_cumodule_init`).
    #[cfg(feature = "processes")]
    pub fn raw(&self) -> sys::CUmodule {
        self.raw
    }

    /// The address and size of the module's global `name`, or `None` if it has none.
    #[cfg(feature = "processes")]
    pub fn global(&self, name: &str) -> Result<Option<(u64, usize)>> {
        let cname = CString::new(name).expect("global names have no NUL");
        set_current(self.ctx)?;
        let (mut ptr, mut bytes) = (0, 0);
        // sys: the result layer's `module::get_global` does not give the size.
        // SAFETY: the module is loaded; the name is NUL-terminated.
        let r =
            unsafe { sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, self.raw, cname.as_ptr()) };
        match r {
            CUresult::CUDA_SUCCESS => Ok(Some((ptr, bytes))),
            CUresult::CUDA_ERROR_NOT_FOUND => Ok(None),
            r => Err(Error::Cuda(format!(
                "cuModuleGetGlobal({name}): {} {}",
                error_name(r),
                explain(r)
            ))),
        }
    }

    /// The kernel `name`, or `None` if the module has no such entry.
    pub fn function(&self, name: &str) -> Result<Option<Function>> {
        let cname = CString::new(name).expect("kernel names have no NUL");
        set_current(self.ctx)?;
        // SAFETY: the module is loaded and not unloaded before self is dropped.
        match unsafe { result::module::get_function(self.raw, cname) } {
            Ok(raw) => {
                let f = Function { raw };
                f.load_eagerly(name)?;
                Ok(Some(f))
            }
            Err(DriverError(CUresult::CUDA_ERROR_NOT_FOUND)) => Ok(None),
            Err(e) => ok(Err(e), || format!("looking up kernel {name}")),
        }
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: unloads what `load` loaded, once; errors are ignored.
        unsafe {
            let _ = result::ctx::set_current(self.ctx);
            let _ = result::module::unload(self.raw);
        }
    }
}

/// A kernel of a loaded module (valid while the module is).
#[derive(Clone, Copy)]
pub struct Function {
    /// The driver's handle.
    pub raw: sys::CUfunction,
}

impl Function {
    /// Loads the kernel's code onto its GPU now. Under the driver's lazy module loading (the
    /// default since CUDA 12.2) that happens at the first launch instead, inside the launch call:
    /// with several GPUs, one GPU's kernel would then wait for the next GPU's load, and the
    /// run's time would include it. Drivers before 12.4 (no `cuFuncLoad`) load at launch.
    fn load_eagerly(&self, name: &str) -> Result<()> {
        if driver_version()? < (12, 4) {
            return Ok(());
        }
        // sys: the result layer has no cuFuncLoad.
        // SAFETY: the function belongs to a loaded module whose context is current (the caller
        // made it so).
        check(unsafe { sys::cuFuncLoad(self.raw) }, || {
            format!("cuFuncLoad({name})")
        })
    }

    /// The kernel's attribute `a`.
    pub fn attr(&self, a: FuncAttr) -> Result<i32> {
        // SAFETY: the function belongs to a loaded module (see the type's invariant).
        ok(
            unsafe { result::function::get_function_attribute(self.raw, a) },
            || format!("cuFuncGetAttribute({a:?})"),
        )
    }

    /// Sets the kernel's attribute `a` to `value`.
    pub fn set_attr(&self, a: FuncAttr, value: i32) -> Result<()> {
        // SAFETY: the function belongs to a loaded module.
        ok(
            unsafe { result::function::set_function_attribute(self.raw, a, value) },
            || format!("cuFuncSetAttribute({a:?}, {value})"),
        )
    }

    /// Blocks of `threads` threads with `smem` bytes of dynamic shared memory that fit on one SM.
    pub fn max_blocks_per_sm(&self, threads: u32, smem: usize) -> Result<u32> {
        // SAFETY: the function belongs to a loaded module.
        let n = ok(
            unsafe {
                result::occupancy::max_active_block_per_multiprocessor(
                    self.raw,
                    threads as i32,
                    smem,
                )
            },
            || format!("occupancy query for {threads} threads and {smem} B of shared memory"),
        )?;
        Ok(n.max(0) as u32)
    }

    /// Launches the kernel on `stream`: cooperatively (all blocks co-resident, or an error) or
    /// normally. `params` are pointers to the argument values. Returns the raw code, for the
    /// caller to name what failed.
    ///
    /// # Safety
    /// `params` must match the kernel's parameter list in number, order and size, and every
    /// pointer argument must be valid for the kernel's use.
    pub unsafe fn launch(
        &self,
        cooperative: bool,
        grid: u32,
        block: u32,
        smem: u32,
        stream: &Stream,
        params: &mut [*mut c_void],
    ) -> CUresult {
        let (grid, block) = ((grid, 1, 1), (block, 1, 1));
        // SAFETY: forwarded to the caller.
        let r = unsafe {
            if cooperative {
                result::launch_cooperative_kernel(self.raw, grid, block, smem, stream.raw, params)
            } else {
                result::launch_kernel(self.raw, grid, block, smem, stream.raw, params)
            }
        };
        match r {
            Ok(()) => CUresult::CUDA_SUCCESS,
            Err(DriverError(code)) => code,
        }
    }
}

/// A non-blocking stream: it never waits for the legacy default stream, so copies on one stream
/// proceed while a persistent kernel occupies another.
pub struct Stream {
    /// The driver's handle.
    pub raw: sys::CUstream,
    ctx: sys::CUcontext,
}

impl Stream {
    /// A non-blocking stream on `gpu`.
    pub fn new(gpu: &Gpu) -> Result<Stream> {
        gpu.make_current()?;
        // Destroyed in Drop.
        let raw = ok(
            result::stream::create(result::stream::StreamKind::NonBlocking),
            || "cuStreamCreate".into(),
        )?;
        Ok(Stream { raw, ctx: gpu.ctx })
    }

    /// `Ok(true)` when all work on the stream finished, `Ok(false)` while it runs, or the error
    /// the work ended with (as the raw code, for the caller to classify).
    pub fn query(&self) -> std::result::Result<bool, CUresult> {
        // sys: the result layer has no cuStreamQuery.
        // SAFETY: the stream and its context are live.
        let r = unsafe {
            let _ = result::ctx::set_current(self.ctx);
            sys::cuStreamQuery(self.raw)
        };
        match r {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            e => Err(e),
        }
    }

    /// Holds the stream's later work until the 32-bit word at device address `addr` is at least
    /// `value` (`cuStreamWaitValue32`, `CU_STREAM_WAIT_VALUE_GEQ`). Returns the driver's code,
    /// for the caller to decide what a refusal means (stream memory operations can be off).
    ///
    /// # Safety
    /// `addr` must stay a valid device address of a word that someone raises to `value`, for as
    /// long as the stream can still be waiting: else the stream never runs its later work.
    pub unsafe fn wait_value32(&self, addr: u64, value: u32) -> CUresult {
        if let Err(e) = set_current(self.ctx) {
            tracing::debug!(?e, "cuCtxSetCurrent before cuStreamWaitValue32");
        }
        // sys: the result layer has no stream memory operations.
        // SAFETY: the stream is live; the caller vouches for `addr`.
        unsafe {
            sys::cuStreamWaitValue32_v2(
                self.raw,
                addr,
                value,
                sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
            )
        }
    }

    /// Waits for all work on the stream.
    pub fn synchronize(&self) -> Result<()> {
        set_current(self.ctx)?;
        // SAFETY: the stream was created by `new` and is destroyed only in Drop.
        ok(unsafe { result::stream::synchronize(self.raw) }, || {
            "cuStreamSynchronize".into()
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: destroys what `new` created, once; errors are ignored.
        unsafe {
            let _ = result::ctx::set_current(self.ctx);
            let _ = result::stream::destroy(self.raw);
        }
    }
}

/// A timing event.
pub struct Event {
    raw: sys::CUevent,
    ctx: sys::CUcontext,
}

impl Event {
    /// An event on `gpu`.
    pub fn new(gpu: &Gpu) -> Result<Event> {
        gpu.make_current()?;
        // Destroyed in Drop.
        let raw = ok(
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT),
            || "cuEventCreate".into(),
        )?;
        Ok(Event { raw, ctx: gpu.ctx })
    }

    /// Records the event on `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        set_current(self.ctx)?;
        // SAFETY: both handles are live.
        ok(
            unsafe { result::event::record(self.raw, stream.raw) },
            || "cuEventRecord".into(),
        )
    }

    /// Seconds from `self` to `end` (both recorded and complete).
    pub fn seconds_until(&self, end: &Event) -> Result<f64> {
        set_current(self.ctx)?;
        // With the `cuda-12080` bindings this is `cuEventElapsedTime` (the `_v2` of CUDA 13 is
        // only picked by the cuda-13 features, which older drivers and the test mock lack).
        // SAFETY: both events are live and of the same context.
        let ms = ok(unsafe { result::event::elapsed(self.raw, end.raw) }, || {
            "cuEventElapsedTime".into()
        })?;
        Ok(ms as f64 / 1e3)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: destroys what `new` created, once; errors are ignored.
        unsafe {
            let _ = result::ctx::set_current(self.ctx);
            let _ = result::event::destroy(self.raw);
        }
    }
}

/// `n` bytes for humans (`crate::error::human_bytes`).
pub fn human_bytes(n: usize) -> String {
    crate::error::human_bytes(n as u64)
}
