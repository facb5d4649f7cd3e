//! Where a GPU PE's run lives in NVSHMEM's symmetric heap: each PE's part and the data areas'
//! copies.

use mgws_core::{DeviceIdle, HostWord, PeWindow, Topology, AREA_WRITABLE, DATA_AREAS};

use crate::cuda::link_wake;
use crate::cuda::plan::{QueueArea, RunArea};
use crate::cuda::PeTransport;
use crate::error::{Error, Result};

/// The data areas' limits with the writable ones of `copies` (bit `i`: area `i`) left out: what
/// a PE's part of the symmetric heap holds where each PE writes its own copy of those areas
/// instead ([`Replica`]): every writable area over the device-API transport, the areas of
/// `Header::area_copies` over the mapped one.
pub(super) fn without_copies(area_limits: &[u64; DATA_AREAS], copies: u64) -> [u64; DATA_AREAS] {
    let mut limits = *area_limits;
    for (i, l) in limits.iter_mut().enumerate() {
        if *l & AREA_WRITABLE != 0 && copies & (1 << i) != 0 {
            *l = 0;
        }
    }
    limits
}

/// Refuses, over the device-API transport, a writable area laid out replicated with a combine
/// other than 64-bit additions: every PE's copy of it would be added (design 5.8), not combined
/// as asked.
pub(crate) fn check_device_api_layouts(
    job: &crate::Job<'_>,
    overridden: Option<crate::AreaLayout>,
) -> Result<()> {
    use crate::{AreaBytes, AreaLayout, Combine};
    for (index, bytes) in &job.areas {
        let layout = overridden.unwrap_or_else(|| job.layout_of(*index));
        if let (AreaBytes::ReadWrite(_), AreaLayout::Replicated(c)) = (bytes, layout) {
            if c != Combine::AddU64 {
                return Err(Error::Config(format!(
                    "data area {index} is laid out {}, but over --pe-transport device-api every \
                     PE's copy of a writable area is added into the result: use \
                     replicated-add-u64, or the mapped transport",
                    layout.name()
                )));
            }
        }
    }
    Ok(())
}

/// The writable areas whose layout a GPU PE run gives each PE a copy of over the mapped
/// transport, as [`Header::area_copies`]: those laid out per worker (each PE changes only its
/// workers' rows) or replicated with 64-bit additions ([`Replica`] adds every PE's changes).
/// Other layouts keep the one area in PE 0's part, which every PE reaches, so any task may
/// write any word.
pub(crate) fn area_copies(job: &crate::Job<'_>, overridden: Option<crate::AreaLayout>) -> u64 {
    use crate::{AreaBytes, AreaLayout, Combine};
    job.areas
        .iter()
        .filter(|(_, bytes)| matches!(bytes, AreaBytes::ReadWrite(_)))
        .filter(|(index, _)| {
            matches!(
                overridden.unwrap_or_else(|| job.layout_of(*index)),
                AreaLayout::PerWorker { .. } | AreaLayout::Replicated(Combine::AddU64)
            )
        })
        .fold(0, |mask, (index, _)| mask | 1 << index)
}

/// The environment variable that sends every word of the window through NVSHMEM's calls over the
/// device-API transport (`1`), the PE's own included: a check of the call path as a PE of
/// another node takes it.
pub const CALLS_ONLY_VAR: &str = "MGWS_NVSHMEM_CALLS_ONLY";

/// How a run's PEs address each other's parts of the symmetric heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Parts {
    /// One block per PE, mapped into every PE (`nvshmem_ptr`).
    Mapped,
    /// A window of one part per PE on every PE ([`PeWindow`]): part `e` of the caller's window
    /// names PE `e`'s memory in NVSHMEM's device calls.
    Window(PeWindow),
}

/// The symmetric layout of one PE's part, and the bytes each PE allocates, for `transport`.
pub(crate) fn symmetric_of(
    transport: PeTransport,
    topology: &Topology,
    public_capacity: u32,
    area_limits: &[u64; DATA_AREAS],
    area_copies: u64,
) -> (SymmetricLayout, u64) {
    match transport {
        PeTransport::Mapped => {
            let sym = SymmetricLayout::new(
                topology,
                public_capacity,
                &without_copies(area_limits, area_copies),
                true,
            );
            (sym, sym.total as u64)
        }
        PeTransport::DeviceApi => {
            let sym = SymmetricLayout::new(
                topology,
                public_capacity,
                &without_copies(area_limits, u64::MAX),
                false,
            );
            let window = PeWindow::new(0, sym.total as u64, topology.devices);
            (sym, window.bytes())
        }
    }
}

/// The byte layout of one PE's part of the symmetric heap (the same on every PE: NVSHMEM's
/// allocations are collective and equal in size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SymmetricLayout {
    /// The public queues of the PE with the most (a PE uses the first of them).
    pub queues: QueueArea,
    pub queues_at: usize,
    /// The shared state and voting tree (PE 0's are the run's).
    pub run: RunArea,
    pub run_at: usize,
    /// The PE's idle counter and relay (hierarchical termination).
    pub idle_at: usize,
    /// Writable data areas (PE 0's are the run's): offset per area, 0 where absent.
    pub areas_at: [usize; DATA_AREAS],
    /// The region of the copies that wake the links ([`link_wake::region_bytes`]; mapped
    /// transport only, else empty): PE `e` writes slice `e` of every other PE's part, and
    /// nothing else uses them.
    pub wake_at: usize,
    pub total: usize,
}

impl SymmetricLayout {
    /// `wake`: whether the PEs wake their links through the heap (the mapped transport).
    pub fn new(
        topology: &Topology,
        public_capacity: u32,
        area_limits: &[u64; DATA_AREAS],
        wake: bool,
    ) -> Self {
        let most = (0..topology.devices as usize)
            .map(|d| topology.first_queue[d + 1] - topology.first_queue[d])
            .max()
            .unwrap_or(0);
        let queues = QueueArea::new(most, public_capacity);
        let run = RunArea::new(topology);
        let align = |x: usize| x.next_multiple_of(256);
        let queues_at = 0;
        let run_at = align(queues_at + queues.total);
        let idle_at = align(run_at + run.total);
        let mut end = align(idle_at + size_of::<DeviceIdle<HostWord>>());
        let mut areas_at = [0; DATA_AREAS];
        for (at, &limit) in areas_at.iter_mut().zip(area_limits) {
            if limit & AREA_WRITABLE != 0 && limit & !AREA_WRITABLE != 0 {
                *at = end;
                end = align(end + (limit & !AREA_WRITABLE) as usize);
            }
        }
        let wake_at = end;
        if wake {
            end = align(wake_at + link_wake::region_bytes(topology.devices as usize));
        }
        SymmetricLayout {
            queues,
            queues_at,
            run,
            run_at,
            idle_at,
            areas_at,
            wake_at,
            total: end,
        }
    }
}
