//! The kernel side of GPU PEs over NVSHMEM's device API (the `nvshmem` feature): the window the
//! host writes before a launch, and [`NvshmemRemote`], the core's [`Remote`] over NVSHMEM.
//!
//! NVSHMEM's device API is inline CUDA C in its headers, so a kernel built by rustc calls it
//! through a few non-inline C functions, `mgws_nvshmem_*`: the host compiles them with NVRTC
//! (`-rdc=true`) and links them with this PTX and NVSHMEM's device library at load time
//! (the GPU PEs' NVSHMEM module, `runtime/src/processes/gpu/nvshmem_shim.cu`). The PTX of a kernel
//! built with this feature therefore cannot be loaded on its own.

use mgws_core::{Ordering, PeWindow, Remote, Scope};

unsafe extern "C" {
    fn mgws_nvshmem_fetch_add(word: *mut u64, value: u64, pe: i32) -> u64;
    fn mgws_nvshmem_add(word: *mut u64, value: u64, pe: i32);
    fn mgws_nvshmem_fetch(word: *const u64, pe: i32) -> u64;
    fn mgws_nvshmem_set(word: *mut u64, value: u64, pe: i32);
    fn mgws_nvshmem_fetch_or(word: *mut u64, value: u64, pe: i32) -> u64;
    fn mgws_nvshmem_fetch_and(word: *mut u64, value: u64, pe: i32) -> u64;
    fn mgws_nvshmem_compare_swap(word: *mut u64, current: u64, new: u64, pe: i32) -> u64;
    fn mgws_nvshmem_get(word: *const u64, pe: i32) -> u64;
    fn mgws_nvshmem_release();
}

/// The run's window (`mgws_pe_window` in the PTX): written by the host with
/// `cuModuleGetGlobal` before the launch, read-only while the kernel runs.
#[unsafe(export_name = "mgws_pe_window")]
static mut PE_WINDOW: PeWindow = PeWindow::new(0, 0, 0);

/// NVSHMEM's device API as the core's [`Remote`].
pub struct NvshmemRemote;

// SAFETY: every operation is one NVSHMEM atomic (atomic with respect to the others on the same
// word); `release` is `nvshmem_quiet` and a system-scope fence, `acquire` a system-scope fence.
unsafe impl Remote for NvshmemRemote {
    #[inline(always)]
    fn window() -> &'static PeWindow {
        // SAFETY: the host writes the window before the launch and never during it, so no
        // write races with the reads through this reference.
        unsafe { &*core::ptr::addr_of!(PE_WINDOW) }
    }
    #[inline(always)]
    unsafe fn fetch_add(word: *mut u64, value: u64, pe: u32) -> u64 {
        // SAFETY: the caller's guarantee (a word of the window, of PE `pe`).
        unsafe { mgws_nvshmem_fetch_add(word, value, pe as i32) }
    }
    #[inline(always)]
    unsafe fn add(word: *mut u64, value: u64, pe: u32) {
        // SAFETY: the caller's guarantee (a word of the window, of PE `pe`).
        unsafe { mgws_nvshmem_add(word, value, pe as i32) }
    }
    #[inline(always)]
    unsafe fn fetch(word: *const u64, pe: u32) -> u64 {
        // SAFETY: the caller's guarantee (a word of the window, of PE `pe`).
        unsafe { mgws_nvshmem_fetch(word, pe as i32) }
    }
    #[inline(always)]
    unsafe fn set(word: *mut u64, value: u64, pe: u32) {
        // SAFETY: the caller's guarantee (a word of the window, of PE `pe`).
        unsafe { mgws_nvshmem_set(word, value, pe as i32) }
    }
    #[inline(always)]
    unsafe fn fetch_or(word: *mut u64, value: u64, pe: u32) -> u64 {
        // SAFETY: the caller's guarantee (a word of the window, of PE `pe`).
        unsafe { mgws_nvshmem_fetch_or(word, value, pe as i32) }
    }
    #[inline(always)]
    unsafe fn fetch_and(word: *mut u64, value: u64, pe: u32) -> u64 {
        // SAFETY: the caller's guarantee (a word of the window, of PE `pe`).
        unsafe { mgws_nvshmem_fetch_and(word, value, pe as i32) }
    }
    #[inline(always)]
    unsafe fn compare_swap(word: *mut u64, current: u64, new: u64, pe: u32) -> u64 {
        // SAFETY: the caller's guarantee (a word of the window, of PE `pe`).
        unsafe { mgws_nvshmem_compare_swap(word, current, new, pe as i32) }
    }
    #[inline(always)]
    unsafe fn get(word: *const u64, pe: u32) -> u64 {
        // SAFETY: the caller's guarantee (a word of the window, of PE `pe`).
        unsafe { mgws_nvshmem_get(word, pe as i32) }
    }
    #[inline(always)]
    fn release() {
        // SAFETY: `nvshmem_quiet` and a fence; no memory is touched.
        unsafe { mgws_nvshmem_release() }
    }
    #[inline(always)]
    fn acquire() {
        // The remote operations before it returned their values (they are blocking), so a
        // system-scope fence orders the caller's later loads after them.
        mgws_core::nvptx::fence(Ordering::AcqRel, Scope::System)
    }
}
