//! amdgcn (`amdgcn-amd-amdhsa`): only what a `no_std` kernel crate needs to compile, the panic
//! handler. There are no entries yet: `worker_kernel!` emits them for `nvptx64` only, because they
//! use the `extern "ptx-kernel"` ABI and the NVIDIA platform (`mgws_core::nvptx`); an AMD device
//! needs its own `Platform` and entries first (docs/design.md, section 1.8). CI builds this so
//! that nothing NVIDIA-only enters the portable crates unnoticed; it has never run on an AMD GPU.

/// Traps, as the nvptx64 handler does (`llvm.trap`; under HSA a trap ends the dispatch with an
/// error the host sees on its queue).
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::process::abort_immediate()
}
