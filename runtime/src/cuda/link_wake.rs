//! Waking the NVLink links between a run's GPUs before its kernels start.
//!
//! A link that carried nothing for a while drops to a low-power state (after 50 ms on the H200s
//! measured, `nvidia-smi nvlink -gLowPwrInfo`), and the first access over it then waits about
//! 100 us for it to wake (docs/results.md). In a run on several GPUs the first remote atomic
//! paid that inside the timed kernel: a fixed cost of every such run, which a short one could
//! not hide. So memory is copied over every link before the kernels start:
//! - one process ([`LinkWake::start`]): the host copies a slice from every GPU to every peer it
//!   reaches before the launch calls, and waits for the copies before it opens the launch gate,
//!   so the wake overlaps the launches;
//! - GPU PEs ([`LinkWake::start_to_peers`]): after the gate, each PE copies its slice of the wake
//!   region of its symmetric block into every other PE's block, and waits before its launch.
//!
//! `MGWS_LINK_WAKE=off` leaves the copies out ([`wake_wanted`], read before anything is
//! allocated, or by a PE before the gate).

use std::sync::Arc;

use super::driver::{DeviceBuffer, Gpu, Stream};
use crate::error::Result;

/// Bytes each GPU copies to each peer: enough to cross every link between two GPUs (NVLink
/// stripes a copy over them).
const SLICE_BYTES: usize = 512 << 10;

/// The bytes of a GPU PE's wake region for `pes` PEs: one slice per PE.
#[cfg(feature = "processes")]
pub(crate) fn region_bytes(pes: usize) -> usize {
    pes * SLICE_BYTES
}

/// The copies that wake a run's links, in flight until [`LinkWake::finish`] (or the drop).
pub(crate) struct LinkWake {
    /// One stream per GPU (a PE's: one); `Drop` synchronises them before any buffer goes back
    /// to the pool.
    streams: Vec<Stream>,
    /// One process, per GPU: slice `a` is GPU `a`'s source in its own buffer and the
    /// destination of its copy in every peer's, so no two copies write the same bytes. A PE's
    /// copies use the symmetric heap and have none.
    buffers: Vec<DeviceBuffer>,
}

/// The environment variable that turns the wake off.
const SETTING: &str = "MGWS_LINK_WAKE";

/// Whether to wake the links, as `MGWS_LINK_WAKE` says (unset: yes).
pub(crate) fn wake_wanted() -> Result<bool> {
    wake_wanted_by(std::env::var(SETTING).ok().as_deref())
}

/// Whether to wake the links, given the value of `MGWS_LINK_WAKE`.
fn wake_wanted_by(setting: Option<&str>) -> Result<bool> {
    super::switch_setting(SETTING, setting)
}

impl LinkWake {
    /// Starts a copy over every pair `(from, to)` of `pairs` (indices into `gpus`, the pairs
    /// that peer access joins); `None` where there are none.
    pub(super) fn start(gpus: &[Arc<Gpu>], pairs: &[(usize, usize)]) -> Result<Option<LinkWake>> {
        if pairs.is_empty() {
            return Ok(None);
        }
        let _span = tracing::debug_span!("cuda.link_wake", pairs = pairs.len()).entered();
        let bytes = gpus.len() * SLICE_BYTES;
        let buffers = gpus
            .iter()
            .map(|g| DeviceBuffer::alloc(g, bytes, "the link wake-up copies"))
            .collect::<Result<Vec<_>>>()?;
        let streams = gpus
            .iter()
            .map(|g| Stream::new(g))
            .collect::<Result<Vec<_>>>()?;
        let wake = LinkWake { streams, buffers };
        // What the bytes are does not matter: only that they cross the links.
        let slice = |g: usize| g * SLICE_BYTES;
        for &(from, to) in pairs {
            let (src, dst) = (&wake.buffers[from], &wake.buffers[to]);
            let stream = &wake.streams[from];
            // SAFETY: both buffers belong to `wake`, whose `Drop` synchronises every stream
            // before they go; slice `from` of `dst` is written by this copy alone.
            unsafe { src.copy_to_async(slice(from), dst, slice(from), SLICE_BYTES, stream) }?;
        }
        Ok(Some(wake))
    }

    /// A GPU PE's copies: slice `me` of the wake region at byte `at` of its own block `own` to
    /// the same place in every other PE's block (`parts`, their addresses as this process maps
    /// them); `None` where there is no other PE. The caller reads `MGWS_LINK_WAKE`.
    ///
    /// # Safety
    /// Every `parts[e]` is the address of PE `e`'s block, mapped in this process, of the size of
    /// `own`; `me < parts.len()`; and the wake region, `at..at + region_bytes(parts.len())`,
    /// lies in a block and is written by these copies alone until the run's final barrier.
    #[cfg(feature = "processes")]
    pub(crate) unsafe fn start_to_peers(
        gpu: &Gpu,
        own: &DeviceBuffer,
        at: usize,
        me: usize,
        parts: &[u64],
    ) -> Result<Option<LinkWake>> {
        debug_assert!(me < parts.len() && at + region_bytes(parts.len()) <= own.bytes);
        if parts.len() < 2 {
            return Ok(None);
        }
        let _span =
            tracing::debug_span!("cuda.link_wake", pe = me, peers = parts.len() - 1).entered();
        let wake = LinkWake {
            streams: vec![Stream::new(gpu)?],
            buffers: Vec::new(),
        };
        let slice = at + me * SLICE_BYTES;
        for (e, &part) in parts.iter().enumerate().filter(|&(e, _)| e != me) {
            // SAFETY: slice `me` of PE `e`'s wake region, inside its block and written by this
            // copy alone (the caller's contract).
            let dst = unsafe { DeviceBuffer::borrowed(gpu, part + slice as u64, SLICE_BYTES) };
            tracing::trace!(to = e, "link wake copy");
            // SAFETY: `own` and `dst` borrow this PE's block and PE `e`'s, which stay mapped
            // until the final barrier (dropping a borrow frees nothing); `finish` or the drop
            // waits for the copy.
            unsafe { own.copy_to_async(slice, &dst, 0, SLICE_BYTES, &wake.streams[0]) }?;
        }
        Ok(Some(wake))
    }

    /// Waits for every copy: the links they crossed are awake.
    pub(crate) fn finish(self) -> Result<()> {
        self.streams.iter().try_for_each(Stream::synchronize)
    }
}

impl Drop for LinkWake {
    /// The buffers go back only once no copy uses them: also without `finish` (an ungated run,
    /// a failed launch).
    fn drop(&mut self) {
        for s in &self.streams {
            let _ = s.synchronize();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::wake_wanted_by;

    #[test]
    fn the_setting_turns_the_wake_off_and_refuses_other_values() {
        assert!(wake_wanted_by(None).unwrap());
        assert!(wake_wanted_by(Some("on")).unwrap());
        assert!(!wake_wanted_by(Some("off")).unwrap());
        let e = wake_wanted_by(Some("later")).unwrap_err();
        assert_eq!(e.kind(), "config");
        assert!(e.to_string().contains("MGWS_LINK_WAKE=\"later\""), "{e}");
    }
}
