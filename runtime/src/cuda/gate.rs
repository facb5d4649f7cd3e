//! The launch gate. Every GPU's launch stream first waits on one word of pinned host memory, then
//! records the run's start event and gets its kernel; the host opens the gate once every kernel
//! is queued. The launch calls themselves (a cooperative launch of a large entry holds the host
//! for a noticeable part of a short run, the first one in a process longer) then happen before
//! the start events: they are set-up, not part of the timed run, for mgws and the static
//! baseline alike (docs/results.md). The GPUs of a run also start together, however long the
//! launches on the GPUs before took.
//!
//! `MGWS_LAUNCH_GATE=off` launches the kernels ungated; their timed window then includes the
//! launch call, as before the gate. Nsight Compute needs it: it profiles a kernel inside its
//! launch call, and with the kernel's stream held by the gate it reported "Failed to prepare
//! kernel for profiling" (H100, CUDA 13). compute-sanitizer runs gated runs correctly.

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
    /// False with `MGWS_LAUNCH_GATE=off` ([`gate_wanted`]).
    wanted: bool,
}

/// Whether kernels should wait behind a gate, given the value of `MGWS_LAUNCH_GATE` (unset or
/// empty: yes); a value that is neither on nor off is a configuration error.
fn gate_wanted(setting: Option<&str>) -> Result<bool> {
    super::switch_setting("MGWS_LAUNCH_GATE", setting)
}

impl LaunchGate {
    /// A closed gate in pinned host memory, mapped for every GPU (`gpu` is made current for the
    /// allocation).
    pub(super) fn new(gpu: &Gpu) -> Result<LaunchGate> {
        gpu.make_current()?;
        let setting = std::env::var("MGWS_LAUNCH_GATE").ok();
        let wanted = gate_wanted(setting.as_deref())?;
        if !wanted {
            tracing::debug!(?setting, "MGWS_LAUNCH_GATE: launching ungated");
        }
        Ok(LaunchGate {
            word: HostBuffer::alloc(std::mem::size_of::<u32>(), "the launch gate")?,
            opened: false,
            wanted,
        })
    }

    /// Makes `stream` (of `gpu`) wait for the gate. `false` if the gate is not wanted (see
    /// [`gate_wanted`]) or the driver refused (stream memory operations can be switched off):
    /// that GPU then starts at its launch, and its timed run includes the launch call, as it did
    /// before the gate.
    pub(super) fn hold(&self, gpu: &Gpu, stream: &Stream) -> bool {
        if self.opened || !self.wanted {
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

#[cfg(test)]
mod tests {
    use super::gate_wanted;

    #[test]
    fn the_setting_turns_the_gate_off_and_names_itself_when_refused() {
        assert!(gate_wanted(None).unwrap());
        assert!(!gate_wanted(Some("off")).unwrap());
        let e = gate_wanted(Some("maybe")).unwrap_err();
        assert!(e.to_string().contains("MGWS_LAUNCH_GATE=\"maybe\""), "{e}");
    }
}
