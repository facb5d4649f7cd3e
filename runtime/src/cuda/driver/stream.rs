//! Non-blocking streams and the events that time and order them.

use cudarc::driver::result::{self};
use cudarc::driver::sys::{self, CUresult};

use super::{ok, set_current, Gpu};
use crate::error::Result;

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
