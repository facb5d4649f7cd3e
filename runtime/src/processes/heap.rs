//! The shared heap of a multi-process CPU run: one anonymous memory file (`memfd_create`) that
//! the launching process sizes and maps, and that every PE process maps too, inheriting the
//! descriptor. It stands in for NVSHMEM's symmetric heap on one node: every process reaches every
//! byte of it with plain loads, stores and atomics, at its own address.
//!
//! The file has no name in any file system: it disappears with the last process that maps it or
//! holds its descriptor, so a crashed run leaves nothing behind.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::{Error, Result};
use crate::memory::in_shares;

/// A shared mapping of the heap file.
#[derive(Debug)]
pub struct SharedHeap {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every access to it goes through atomics or follows
// the run's protocols, whichever thread makes it.
unsafe impl Send for SharedHeap {}
// SAFETY: as for Send.
unsafe impl Sync for SharedHeap {}

/// What failed, with the OS error.
fn os_error(what: &str) -> Error {
    Error::BackendUnavailable(format!(
        "{what}: {} (a multi-process CPU run needs Linux shared memory)",
        std::io::Error::last_os_error()
    ))
}

/// The smallest share of the heap's memory work (backing pages, copying the job in) worth a
/// thread of its own.
const MIN_SHARE_BYTES: usize = 64 << 20;

/// Copies `src` to `dst` from several threads where it is large (8 GiB of tasks took 0.8 s on
/// one core of the GPU machine), in shares of at least 64 MiB.
///
/// # Safety
/// `dst` is valid for writes of `src.len()` values and does not overlap `src`.
pub unsafe fn copy_in_parallel<T: Copy + Sync>(src: &[T], dst: *mut T) {
    let min_share = MIN_SHARE_BYTES / std::mem::size_of::<T>().max(1);
    let dst = dst as usize;
    in_shares(src.len(), min_share, 1, |start, len| {
        // SAFETY: `start..start + len` lies in `src` and, by the caller's guarantee, in `dst`;
        // the shares are disjoint, so no two threads write the same value.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr().add(start), (dst as *mut T).add(start), len)
        }
    });
}

impl SharedHeap {
    /// A new heap of `len` bytes, all zero, mapped here. Its descriptor is closed on exec: a PE
    /// process gets it through [`SharedHeap::inherit_fd`] only.
    #[cfg(target_os = "linux")]
    pub fn create(len: usize) -> Result<SharedHeap> {
        // SAFETY: the name is a NUL-terminated literal; the flags are valid.
        let fd = unsafe { libc::memfd_create(c"mgws-pe-heap".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(os_error("cannot create the shared heap (memfd_create)"));
        }
        // SAFETY: fd is a descriptor we just opened and own alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // A host that started with a standard descriptor closed (an embedding C or Python
        // program) may get 0, 1 or 2 here: each PE's stdin and stdout are replaced, and anything
        // written to standard error would land in the heap. Keep it at 3 or above.
        let fd = if fd.as_raw_fd() <= 2 {
            // SAFETY: fcntl duplicates an open descriptor to the lowest free one >= 3.
            let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
            if moved < 0 {
                return Err(os_error("cannot move the shared heap's descriptor above 2"));
            }
            // SAFETY: a descriptor fcntl just returned, owned by nothing else; the original
            // one is closed when `fd` drops here.
            unsafe { OwnedFd::from_raw_fd(moved) }
        } else {
            fd
        };
        // SAFETY: fd is an open memory file; ftruncate only sets its size (new bytes read zero).
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(os_error(&format!(
                "cannot size the shared heap to {len} bytes (ftruncate)"
            )));
        }
        let heap = Self::map(fd, len, 0)?;
        heap.back_pages();
        Ok(heap)
    }

    /// Backs every page of a new heap now, from several threads: the kernel allocates and
    /// zeroes a shared file's pages one 4 KiB page at a time on one core, and the job's copy
    /// would otherwise fault on each. `MADV_POPULATE_WRITE` (Linux 5.14) where the kernel has
    /// it, else a write of zero into each page (the heap's bytes are zero already).
    #[cfg(target_os = "linux")]
    fn back_pages(&self) {
        const PAGE: usize = 4096;
        let base = self.base as usize;
        in_shares(self.len, MIN_SHARE_BYTES, PAGE, |start, len| {
            let at = (base + start) as *mut u8;
            // SAFETY: at..at + len lies within the mapping, page-aligned at its start.
            let advised =
                unsafe { libc::madvise(at as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) };
            if advised != 0 {
                for page in (0..len).step_by(PAGE) {
                    // SAFETY: within the mapping, which no one else uses yet; the byte is zero
                    // and stays zero.
                    unsafe { at.add(page).write_volatile(0) };
                }
            }
        });
    }

    #[cfg(not(target_os = "linux"))]
    pub fn create(_len: usize) -> Result<SharedHeap> {
        Err(Error::BackendUnavailable(
            "multi-process CPU runs need Linux (memfd_create)".into(),
        ))
    }

    /// The heap whose descriptor this process inherited as `fd` (a PE process), mapped here.
    /// The descriptor is closed on exec again, so that programs a PE starts do not inherit it.
    ///
    /// # Safety
    /// `fd` is owned by nothing else in this process: the returned heap closes it.
    pub unsafe fn attach(fd: RawFd) -> Result<SharedHeap> {
        // SAFETY: fstat writes at most a `stat`; a bad descriptor makes it fail, not misbehave.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if fd < 0 || unsafe { libc::fstat(fd, &mut stat) } != 0 {
            return Err(os_error(&format!(
                "descriptor {fd} named by the launcher is not open"
            )));
        }
        // SAFETY: the descriptor is open (fstat succeeded) and nothing else owns it (the
        // caller's guarantee).
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: fcntl on an open descriptor with integer arguments.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        Self::map(fd, stat.st_size as usize, 0)
    }

    /// Maps every page of an attached heap into this process now (the launcher backed them
    /// all), so that no page faults in the run: a fault per 4 KiB page slowed MEMSET's PEs
    /// (docs/results.md). `MADV_POPULATE_READ` (Linux 5.14) maps the file's pages as
    /// `MAP_POPULATE` did on a shared mapping; where the kernel lacks it the pages fault in as
    /// they are touched. A PE calls it after it has recorded that it is mapping the heap, so
    /// that a PE that dies or is slow here is not taken for a program that never read the heap.
    pub fn populate(&self) {
        #[cfg(target_os = "linux")]
        // SAFETY: the range is this heap's whole mapping; the advice only maps its pages.
        unsafe {
            libc::madvise(
                self.base as *mut libc::c_void,
                self.len,
                libc::MADV_POPULATE_READ,
            )
        };
    }

    /// Maps `len` bytes of `fd` with the extra mmap `flags`.
    fn map(fd: OwnedFd, len: usize, flags: libc::c_int) -> Result<SharedHeap> {
        if len == 0 {
            return Err(Error::BackendUnavailable(
                "the shared heap is empty (was it created by an mgws launcher?)".into(),
            ));
        }
        // SAFETY: a fresh shared mapping of an open file of `len` bytes; the kernel picks the
        // address.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | flags,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(os_error(&format!(
                "cannot map the shared heap ({len} bytes)"
            )));
        }
        Ok(SharedHeap {
            fd,
            base: base as *mut u8,
            len,
        })
    }

    /// The first byte of the mapping (page-aligned).
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// The heap's size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The descriptor a child process inherits: `pre_exec` clears its close-on-exec flag.
    pub fn inherit_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Drop for SharedHeap {
    fn drop(&mut self) {
        // SAFETY: base..base + len is the mapping this value made; nothing uses it after drop
        // (every pointer into it lives in values that borrow or are dropped with this heap).
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_second_mapping_sees_the_first_ones_writes() {
        let heap = SharedHeap::create(1 << 16).unwrap();
        assert_eq!(heap.len(), 1 << 16);
        // SAFETY: dup of an open descriptor; the copy is owned by the attached heap alone.
        let copy = unsafe { libc::dup(heap.inherit_fd()) };
        // SAFETY: nothing else owns the copy.
        let other = unsafe { SharedHeap::attach(copy) }.unwrap();
        assert_eq!(other.len(), heap.len());
        assert_ne!(other.base(), heap.base());
        // SAFETY: both mappings are 64 KiB of the same file; the writes and reads are in bounds.
        unsafe {
            assert_eq!(heap.base().add(4096).read_volatile(), 0);
            heap.base().add(4096).write_volatile(42);
            assert_eq!(other.base().add(4096).read_volatile(), 42);
        }
    }

    #[test]
    fn a_parallel_copy_copies_every_value_once_whatever_the_split() {
        // Sizes below one share, at several shares and not a multiple of the share.
        for len in [0usize, 1, 1000, (3 << 24) + 12_345] {
            let src: Vec<u32> = (0..len as u32)
                .map(|i| i.wrapping_mul(2_654_435_761))
                .collect();
            let mut dst = vec![0u32; len + 1];
            dst[len] = 7;
            // SAFETY: `dst` holds `len` values and one more, apart from `src`.
            unsafe { copy_in_parallel(&src, dst.as_mut_ptr()) };
            assert!(dst[..len] == src[..], "len {len}");
            assert_eq!(dst[len], 7, "len {len}: written past the end");
        }
    }

    #[test]
    fn attaching_a_closed_descriptor_is_an_error() {
        // SAFETY: -1 is no descriptor; attach refuses it before taking ownership.
        let e = unsafe { SharedHeap::attach(-1) }.err().unwrap().to_string();
        assert!(e.contains("not open"), "{e}");
    }
}
