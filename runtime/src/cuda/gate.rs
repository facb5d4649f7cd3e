//! The launch gate. Every GPU's launch stream first waits on one word of pinned host memory, then
//! records the run's start event and gets its kernel; the host opens the gate once every kernel
//! is queued. The launch calls themselves (a cooperative launch of a large entry took the host
//! 125-200 µs on an H100, the first one in a process more) then happen before the start events:
//! they are set-up, not part of the timed run, for mgws and the static baseline alike. The GPUs
//! of a run also start together, however long the launches on the GPUs before took.

use super::driver::{Gpu, HostBuffer, Stream};
use crate::error::Result;
use cudarc::driver::sys::CUresult;
use std::sync::atomic::{fence, Ordering};

/// The gate's word is 0 while closed and [`OPEN`] once opened.
const OPEN: u32 = 1;

/// One closed gate, for one launch of a run's kernels.
pub(super) struct LaunchGate {
    word: HostBuffer,
    opened: bool,
}

impl LaunchGate {
    /// A closed gate in pinned host memory, mapped for every GPU (`gpu` is made current for the
    /// allocation).
    pub(super) fn new(gpu: &Gpu) -> Result<LaunchGate> {
        gpu.make_current()?;
        Ok(LaunchGate {
            word: HostBuffer::alloc(std::mem::size_of::<u32>(), "the launch gate")?,
            opened: false,
        })
    }

    /// Makes `stream` (of `gpu`) wait for the gate. `false` if the driver refused (stream memory
    /// operations can be switched off): that GPU then starts at its launch, and its timed run
    /// includes the launch call, as it did before the gate.
    pub(super) fn hold(&self, gpu: &Gpu, stream: &Stream) -> bool {
        if self.opened {
            return false;
        }
        let addr = match self.word.device_ptr(gpu) {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(%e, gpu = gpu.ordinal, "launch gate not mapped; launching ungated");
                return false;
            }
        };
        // SAFETY: the word lives in `self.word`, freed only when the gate is dropped, which
        // opens it first (`Drop`); the owner keeps the gate until its kernels have finished.
        let r = unsafe { stream.wait_value32(addr, OPEN) };
        if r != CUresult::CUDA_SUCCESS {
            tracing::debug!(
                ?r,
                gpu = gpu.ordinal,
                "cuStreamWaitValue32 refused; launching ungated"
            );
            return false;
        }
        true
    }

    /// Opens the gate: every stream held by it goes on to its start event and kernel.
    pub(super) fn open(&mut self) {
        if self.opened {
            return;
        }
        // SeqCst fence: the launch calls before it are complete on the host side; the store is
        // volatile so that it reaches the pinned word, which the GPUs poll over the bus.
        fence(Ordering::SeqCst);
        // SAFETY: offset 0 holds the gate's u32, inside its allocation.
        unsafe { self.word.write_volatile(0, OPEN) };
        fence(Ordering::SeqCst);
        self.opened = true;
    }
}

impl Drop for LaunchGate {
    /// A gate is never freed closed: a stream still held by it would never run its kernel.
    fn drop(&mut self) {
        self.open();
    }
}
