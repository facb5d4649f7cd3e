//! A GPU PE's copies of what the launcher watches (progress, statistics, task tags) into the
//! control heap while its kernel runs.

use std::mem::{offset_of, size_of};

use mgws_core::{
    AtomicWord, Env, HostWord, Ordering, QueueHeader, Scope, SharedState, AREA_WRITABLE,
};
use mgws_tasks::TaskStruct;

use super::pe::Local;
use super::symmetric::SymmetricLayout;
use crate::cuda::driver::DeviceBuffer;
use crate::cuda::plan::shared_field;
use crate::cuda::session::Session;
use crate::error::Result;
use crate::processes::layout::Header;

/// Copies what the launcher watches from a PE's GPU into the control heap.
pub(super) struct Mirror<'a> {
    pub(super) s: &'a Session,
    pub(super) header: &'a Header,
    pub(super) heap_env: &'a Env<HostWord, TaskStruct>,
    pub(super) local: &'a Local,
    pub(super) own: &'a DeviceBuffer,
    pub(super) shared: &'a DeviceBuffer,
    pub(super) sym: &'a SymmetricLayout,
    pub(super) pe: u32,
    /// Whether this PE writes the launcher's abort request into PE 0's shared state (`shared`
    /// is PE 0's on every PE over mappings, on PE 0 alone over the window).
    pub(super) forwards_abort: bool,
}

impl Mirror<'_> {
    pub(super) fn first_worker(&self) -> usize {
        self.header.topology.first_worker[self.pe as usize] as usize
    }

    pub(super) fn workers(&self) -> usize {
        self.header.topology.workers_on(self.pe as usize) as usize
    }

    /// Reads `buf` (while the kernel may run) into the records of `T` in the heap at `dst`, this
    /// PE's workers' slots; a failed read leaves the heap as it was.
    pub(super) fn records<T: bytemuck::Pod>(&self, buf: &DeviceBuffer, dst: *mut T) -> Result<()> {
        let n = self.workers();
        let mut bytes = vec![0u8; n * size_of::<T>()];
        buf.read_async(0, &mut bytes, &self.s.controls[0])?;
        let at = dst.wrapping_add(self.first_worker());
        for (i, chunk) in bytes.chunks_exact(size_of::<T>()).enumerate() {
            // SAFETY: the heap holds one record per worker of the run; this PE writes only its
            // own workers' slots, with volatile stores (the launcher reads them volatile).
            unsafe {
                at.add(i)
                    .write_volatile(bytemuck::pod_read_unaligned(chunk))
            };
        }
        Ok(())
    }

    /// One word of the PE's symmetric part at `offset`, or `None` when it cannot be read.
    pub(super) fn own_word(&self, offset: usize) -> Option<u64> {
        let mut b = [0u8; 8];
        self.own
            .read_async(offset, &mut b, &self.s.controls[0])
            .ok()?;
        Some(u64::from_ne_bytes(b))
    }

    /// Progress records, task tags, the idle counter and queue words (and on PE 0 the shared
    /// counters the hang report prints).
    pub(super) fn copy(&self) {
        // A failed read leaves the records as they were: the watchdog then sees no progress from
        // this PE, and a kernel fault is reported by its stream.
        let _ = self.records(&self.local.progress, self.heap_env.progress);
        let _ = self.records(&self.local.task_tags, self.heap_env.task_tags);
        let topology = &self.header.topology;
        let p = self.pe as usize;
        // Relaxed stores below: diagnostics the launcher prints; nothing is read through them.
        if let Some(idle) = self.own_word(self.sym.idle_at) {
            // SAFETY: the heap holds one counter per PE.
            unsafe { &*self.heap_env.device_idle[p] }.count.store(
                idle,
                Ordering::Relaxed,
                Scope::System,
            );
        }
        // Every header of the PE's queues in one copy, then their words.
        let first = topology.first_queue[p];
        let count = topology.first_queue[p + 1] - first;
        let size = size_of::<QueueHeader<HostWord>>();
        let word = offset_of!(QueueHeader<HostWord>, word);
        let mut headers = vec![0u8; count as usize * size];
        let at = self.sym.queues_at + self.sym.queues.header_offset(0);
        if self
            .own
            .read_async(at, &mut headers, &self.s.controls[0])
            .is_ok()
        {
            for (local, header) in headers.chunks_exact(size).enumerate() {
                let w = u64::from_ne_bytes(header[word..word + 8].try_into().expect("8 bytes"));
                // SAFETY: `first + local` is a queue of this PE, whose header the heap holds.
                let heap_header = unsafe { self.heap_env.header(first + local as u32) };
                heap_header.word.store(w, Ordering::Relaxed, Scope::System);
            }
        }
        if self.pe == 0 {
            // SAFETY: the heap's shared state lives as long as the heap.
            let heap = unsafe { self.heap_env.shared() };
            let mut bytes = [0u8; size_of::<SharedState<HostWord>>()];
            if self
                .shared
                .read_async(0, &mut bytes, &self.s.controls[0])
                .is_ok()
            {
                let word =
                    |off: usize| u64::from_ne_bytes(bytes[off..off + 8].try_into().expect("8"));
                heap.idle_workers.store(
                    word(shared_field::IDLE_WORKERS),
                    Ordering::Relaxed,
                    Scope::System,
                );
                heap.initial_ranges_done.store(
                    word(shared_field::INITIAL_RANGES_DONE),
                    Ordering::Relaxed,
                    Scope::System,
                );
                // A worker's abort (a task error) shows in the launcher's `aborted` too.
                if word(shared_field::ABORT) != 0 {
                    heap.abort.store(1, Ordering::Relaxed, Scope::System);
                }
            }
        }
    }

    /// After the kernel: the statistics, if collected.
    pub(super) fn final_records(&self) -> Result<()> {
        self.records(&self.local.progress, self.heap_env.progress)?;
        match &self.local.stats {
            Some(stats) => self.records(stats, self.heap_env.stats),
            None => Ok(()),
        }
    }

    /// PE 0, after every kernel: the run's error word, how many workers left the loop, and the
    /// writable data areas.
    pub(super) fn results(&self) -> Result<()> {
        // SAFETY: the heap's shared state lives as long as the heap.
        let heap = unsafe { self.heap_env.shared() };
        for (field, word) in [
            (shared_field::ERROR, &heap.error),
            (shared_field::EXITED_WORKERS, &heap.exited_workers),
        ] {
            let mut b = [0u8; 8];
            self.shared.read(field, &mut b)?;
            // Relaxed: published by the PE's finished state (a release store).
            word.store(u64::from_ne_bytes(b), Ordering::Relaxed, Scope::System);
        }
        for (i, &at) in self.sym.areas_at.iter().enumerate() {
            if at == 0 {
                continue;
            }
            let dst = self.heap_env.areas[i] as *mut u8;
            let len = (self.header.area_limits[i] & !AREA_WRITABLE) as usize;
            let mut bytes = vec![0u8; len];
            self.own.read(at, &mut bytes)?;
            // SAFETY: the heap holds the area (its layout); every kernel is done with it.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, len) };
        }
        Ok(())
    }
}
