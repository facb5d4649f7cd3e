//! How a worker's scratch memory (GPU shared memory) is divided.

/// Words in the scratch exchange area.
pub const EXCHANGE_WORDS: usize = 8;

/// The narrow words' index of the spawn cursor: slots reserved by narrow tasks so far
/// (wrapping; `exec/narrow.rs`).
pub const NARROW_SPAWNS: usize = 0;
/// The narrow words' index of the lock that serialises narrow tasks' updates of the worker's
/// own state (accumulators, heartbeats).
pub const NARROW_LOCK: usize = 1;

/// How a worker's scratch memory (GPU shared memory) is divided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScratchLayout {
    /// Offset of the local-queue ring.
    pub local_slots: usize,
    /// Offset of the per-lane exchange area (`u64` per lane) used for reductions.
    pub lanes_area: usize,
    /// Offset of the [`EXCHANGE_WORDS`] words lane 0 uses to hand decisions to the other lanes.
    pub exchange: usize,
    /// Offset of the steal-damping bitmap: one bit per queue of the worker's own device (the
    /// other devices' bits are in [`Env::remote_damping`](crate::Env::remote_damping)).
    pub damping: usize,
    /// Offset of lane 0's [`LeaderState`](crate::leader::LeaderState) (its statistics are
    /// copied to `Env::stats` at the end).
    pub leader: usize,
    /// Offset of the narrow tasks' words, `u32`s that the lanes update with their atomics:
    /// [`NARROW_SPAWNS`] and [`NARROW_LOCK`].
    pub narrow: usize,
    /// Total bytes.
    pub total: usize,
}

impl ScratchLayout {
    /// The layout for `local_capacity` tasks of `task_size` bytes, `lanes` lanes and at most
    /// `device_queues` queues on the worker's device ([`Topology::device_queues_max`]).
    ///
    /// [`Topology::device_queues_max`]: crate::Topology::device_queues_max
    #[inline(always)]
    pub const fn new(
        local_capacity: u32,
        task_size: usize,
        lanes: u32,
        device_queues: u32,
    ) -> ScratchLayout {
        let local_slots = 0;
        let lanes_area = local_slots + round16(local_capacity as usize * task_size);
        let exchange = lanes_area + round16(8 * lanes as usize);
        let leader = exchange + 8 * EXCHANGE_WORDS;
        let narrow = leader + round16(core::mem::size_of::<crate::leader::LeaderState>());
        let damping = narrow + 16;
        let total = damping + round16((device_queues as usize).div_ceil(64) * 8);
        ScratchLayout {
            local_slots,
            lanes_area,
            exchange,
            damping,
            leader,
            narrow,
            total,
        }
    }
}

#[inline(always)]
const fn round16(x: usize) -> usize {
    (x + 15) & !15
}
