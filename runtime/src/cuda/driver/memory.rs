//! Device memory of one GPU and pinned host memory mapped into every context.

use std::ffi::c_void;

use cudarc::driver::result::{self};
use cudarc::driver::sys::{self};

use super::{check, human_bytes, ok, set_current, Gpu, Stream};
use crate::cuda::pool;
use crate::error::Result;

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

    /// Queues a copy of `bytes` bytes from byte `offset` to byte `dst_offset` of `dst`, which
    /// may be another GPU's buffer (over peer access, with unified addressing), on `stream`,
    /// and returns without waiting for it.
    ///
    /// # Safety
    /// Neither buffer may be dropped (freed, or handed back to the pool for another run) before
    /// `stream` has finished the copy.
    pub unsafe fn copy_to_async(
        &self,
        offset: usize,
        dst: &DeviceBuffer,
        dst_offset: usize,
        bytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        assert!(offset + bytes <= self.bytes && dst_offset + bytes <= dst.bytes);
        set_current(self.ctx)?;
        ok(
            // SAFETY: both ranges lie inside their buffers (asserted); the caller keeps both
            // buffers until the stream has finished the copy (this function's contract).
            unsafe {
                result::memcpy_dtod_async(
                    dst.ptr + dst_offset as u64,
                    self.ptr + offset as u64,
                    bytes,
                    stream.raw,
                )
            },
            || format!("copying {} between GPUs", human_bytes(bytes)),
        )
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
