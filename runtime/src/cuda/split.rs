//! Memory split over several GPUs under one address range (CUDA's virtual memory management):
//! one range is reserved, each slice is created in one GPU's memory and mapped at its place, and
//! every GPU of the run gets read-write access to all of it. Kernels address it as one buffer,
//! so a partitioned data area or the initial tasks need no change in a task's address
//! arithmetic; a slice's bytes are local to its GPU and reached over NVLink by the others.
//!
//! Every call here is in cudarc's `sys` layer: its `result` layer wraps none of them.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::sys;

use super::driver::{check, human_bytes, Attr, DeviceBuffer, Gpu};
use crate::area_layout;
use crate::error::{Error, Result};

/// Device memory split into slices on several GPUs, mapped at one address in every GPU's
/// context.
pub struct SplitBuffer {
    pub ptr: u64,
    pub bytes: usize,
    /// The reserved (and mapped) length: `bytes` rounded up to the granularity.
    reserved: usize,
    /// Per slice: its GPU (an index into the `gpus` it was made with), its mapped byte range and
    /// the physical allocation behind it.
    slices: Vec<(usize, Range<usize>, sys::CUmemGenericAllocationHandle)>,
    gpus: Vec<Arc<Gpu>>,
}

// SAFETY: the buffer is an address range and allocation handles, valid in every context of the
// process; each call makes a context current on the calling thread first.
unsafe impl Send for SplitBuffer {}
// SAFETY: as above; `&SplitBuffer` methods only copy through the range.
unsafe impl Sync for SplitBuffer {}

fn props(gpu: &Gpu) -> sys::CUmemAllocationProp {
    // SAFETY: an all-zero CUmemAllocationProp is valid (null pointer, zero enums and flags).
    let mut p: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    p.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = gpu.dev;
    p
}

/// Whether every GPU of `gpus` has virtual memory management (and so can hold a [`SplitBuffer`]).
pub fn supported(gpus: &[Arc<Gpu>]) -> Result<bool> {
    for g in gpus {
        if g.attr(Attr::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)? == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The mapping unit of a [`SplitBuffer`] over `gpus`: the largest of their granularities.
pub fn unit(gpus: &[Arc<Gpu>]) -> Result<usize> {
    gpus.iter()
        .map(|g| granularity(g))
        .try_fold(1, |unit, g| Ok(unit.max(g?)))
}

/// The mapping granularity of `gpu`, which has virtual memory management.
fn granularity(gpu: &Gpu) -> Result<usize> {
    let mut g = 0usize;
    let p = props(gpu);
    check(
        // SAFETY: writes one size_t; `p` is a valid property struct.
        unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut g,
                &p,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        },
        || format!("cuMemGetAllocationGranularity(GPU {})", gpu.ordinal),
    )?;
    Ok(g.max(1))
}

impl SplitBuffer {
    /// `bytes` bytes split over `gpus` (which have virtual memory management, [`supported`]) in
    /// proportion to `weights`, one per GPU, with every boundary on the largest mapping
    /// granularity of the GPUs ([`area_layout::split_bounds`]; a GPU whose slice rounds to
    /// nothing gets no memory), not initialised. `what` names the buffer in errors.
    pub fn alloc(gpus: &[Arc<Gpu>], weights: &[u64], bytes: usize, what: &str) -> Result<Self> {
        assert_eq!(gpus.len(), weights.len());
        let unit = unit(gpus)?;
        let bounds = area_layout::split_bounds(bytes as u64, weights, unit as u64);
        let reserved = bytes.max(1).next_multiple_of(unit);
        gpus[0].make_current()?;
        let mut ptr = 0;
        check(
            // SAFETY: reserves address space only; freed in Drop.
            unsafe { sys::cuMemAddressReserve(&mut ptr, reserved, 0, 0, 0) },
            || {
                format!(
                    "reserving {} of address space for {what}",
                    human_bytes(reserved)
                )
            },
        )?;
        let mut buf = SplitBuffer {
            ptr,
            bytes,
            reserved,
            slices: Vec::new(),
            gpus: gpus.to_vec(),
        };
        let last = bounds.iter().rposition(|r| r.end > r.start).unwrap_or(0);
        for (d, r) in bounds.iter().enumerate() {
            let start = r.start as usize;
            // The last slice with bytes also takes the rounding of the whole range.
            let end = if d == last { reserved } else { r.end as usize };
            if end <= start {
                continue;
            }
            assert!(
                start.is_multiple_of(unit) && end.is_multiple_of(unit),
                "slices start on the granularity"
            );
            buf.map_slice(d, start..end, what)?;
        }
        // Every GPU reads and writes every slice (its own and its peers' over NVLink).
        let access: Vec<sys::CUmemAccessDesc> = gpus
            .iter()
            .map(|g| {
                // SAFETY: an all-zero CUmemAccessDesc is valid.
                let mut a: sys::CUmemAccessDesc = unsafe { std::mem::zeroed() };
                a.location = props(g).location;
                a.flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
                a
            })
            .collect();
        check(
            // SAFETY: the whole reserved range is mapped (above); `access` lists valid devices.
            unsafe { sys::cuMemSetAccess(ptr, reserved, access.as_ptr(), access.len()) },
            || format!("giving {} GPUs access to {what}", gpus.len()),
        )?;
        Ok(buf)
    }

    fn map_slice(&mut self, d: usize, range: Range<usize>, what: &str) -> Result<()> {
        let gpu = &self.gpus[d];
        let mut free = gpu.mem_info()?.0;
        if range.len() > free {
            gpu.release_kept_memory()?;
            free = gpu.mem_info()?.0;
        }
        if range.len() > free {
            return Err(Error::OutOfMemory {
                what: format!("{what} (its slice on GPU {})", gpu.ordinal),
                where_: format!("GPU {} memory", gpu.ordinal),
                needed: range.len() as u64,
                available: free as u64,
            });
        }
        let mut handle = 0;
        let p = props(gpu);
        check(
            // SAFETY: creates a physical allocation on the GPU of `p`; released in Drop.
            unsafe { sys::cuMemCreate(&mut handle, range.len(), &p, 0) },
            || {
                format!(
                    "allocating {} of {what} on GPU {}",
                    human_bytes(range.len()),
                    gpu.ordinal
                )
            },
        )?;
        // SAFETY: the target lies inside the reserved range, which nothing else maps.
        let mapped = check(
            unsafe { sys::cuMemMap(self.ptr + range.start as u64, range.len(), 0, handle, 0) },
            || format!("mapping {what}'s slice on GPU {}", gpu.ordinal),
        );
        if let Err(e) = mapped {
            // SAFETY: the handle was created above and is not mapped.
            let _ = unsafe { sys::cuMemRelease(handle) };
            return Err(e);
        }
        self.slices.push((d, range, handle));
        Ok(())
    }

    /// The byte range of each slice with the index of its GPU.
    pub fn slices(&self) -> impl Iterator<Item = (usize, Range<usize>)> + '_ {
        self.slices
            .iter()
            .map(|(d, r, _)| (*d, r.start..r.end.min(self.bytes)))
    }

    /// A view of `range` through GPU `d`'s context, for copies.
    fn view(&self, d: usize, range: Range<usize>) -> DeviceBuffer {
        // SAFETY: the range lies in the mapped buffer, which outlives the view (a view is used
        // only inside the methods below).
        unsafe { DeviceBuffer::borrowed(&self.gpus[d], self.ptr + range.start as u64, range.len()) }
    }

    /// Copies `src` (the whole buffer) in, each slice by its own GPU, the GPUs at the same time.
    pub fn write_all(&self, src: &[u8]) -> Result<()> {
        assert_eq!(src.len(), self.bytes);
        let slices: Vec<_> = self.slices().filter(|(_, r)| !r.is_empty()).collect();
        super::on_each_thread(&slices, |(d, r)| {
            self.view(*d, r.clone()).write(0, &src[r.clone()])
        })
        .into_iter()
        .collect::<Result<Vec<()>>>()?;
        Ok(())
    }

    /// Copies the whole buffer out into `dst`, each slice by its own GPU.
    pub fn read_all(&self, dst: &mut [u8]) -> Result<()> {
        assert_eq!(dst.len(), self.bytes);
        let mut rest = &mut dst[..];
        let mut at = 0;
        let mut parts = Vec::new();
        for (d, r) in self.slices() {
            let (_, tail) = rest.split_at_mut(r.start - at);
            let (part, tail) = tail.split_at_mut(r.len());
            parts.push((d, r.start, part));
            rest = tail;
            at = r.end;
        }
        let parts: Vec<std::sync::Mutex<_>> =
            parts.into_iter().map(std::sync::Mutex::new).collect();
        super::on_each_thread(&parts, |p| {
            let mut p = p.lock().expect("one thread per part");
            let (d, start) = (p.0, p.1);
            let len = p.2.len();
            self.view(d, start..start + len).read(0, p.2)
        })
        .into_iter()
        .collect::<Result<Vec<()>>>()?;
        Ok(())
    }
}

impl Drop for SplitBuffer {
    fn drop(&mut self) {
        let _ = self.gpus[0].make_current();
        // SAFETY: unmaps and frees what `alloc` mapped and reserved, once, slice by slice (a
        // failed `alloc` may have mapped only some); errors are ignored (a context may be dead
        // after a kernel fault).
        unsafe {
            for (_, r, handle) in &self.slices {
                let _ = sys::cuMemUnmap(self.ptr + r.start as u64, r.len());
                let _ = sys::cuMemRelease(*handle);
            }
            let _ = sys::cuMemAddressFree(self.ptr, self.reserved);
        }
    }
}
