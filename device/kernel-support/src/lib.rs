//! # mgws-kernel-support
//!
//! The pieces every MGWS GPU kernel crate needs, so that a kernel crate is one line:
//!
//! ```ignore
//! #![cfg_attr(target_arch = "nvptx64", no_std)]
//! mgws_kernel_support::worker_kernel!(my_crate::MyRegistry);
//! ```
//!
//! - [`worker_kernel!`]: defines the `mgws_worker` kernel entry point for a task registry;
//! - a `#[panic_handler]` that traps (a failed bounds check or `unwrap` aborts the kernel; the host
//!   sees a launch failure);
//! - with the `mem-builtins` feature, `memcmp` and `bcmp`, which core calls for slice comparisons
//!   and which no library provides on `nvptx64-nvidia-cuda` (`cargo xtask ptx` names them when a
//!   kernel needs them). They live in this ordinary crate, not a `#![no_builtins]` one, because
//!   rustc leaves `no_builtins` crates out of LTO.
//!
//! On every target other than `nvptx64` this crate is empty, so host builds of the workspace
//! (`cargo clippy --workspace`) compile kernel crates as empty libraries.
#![no_std]
// `allow_internal_unstable` lets `worker_kernel!` expand to an `extern "ptx-kernel"` function in a
// crate that does not itself enable `abi_ptx`.
#![cfg_attr(
    target_arch = "nvptx64",
    feature(stdarch_nvptx, allow_internal_unstable),
    allow(internal_features)
)]

#[cfg(target_arch = "nvptx64")]
mod gpu;
#[cfg(target_arch = "nvptx64")]
pub use gpu::{run_level, run_static, run_worker};

/// Defines the kernel entry points for the task registry `$registry`: `mgws_worker` (the MGWS
/// persistent worker), `mgws_static` (the static-assignment baseline) and `mgws_level` (one level
/// of the kernel-per-level baseline), and the global `mgws_registry_fingerprint` (a `u64`, the
/// registry's `Registry::FINGERPRINT`), by which the host checks that a PTX module was built for
/// the registry it runs.
///
/// Usable through the `mgws` crate as `mgws::worker_kernel!` too: its paths name this crate with
/// `$crate`, never the caller's dependencies.
///
/// The kernel's signature, which the host launches with one block per worker:
///
/// ```ignore
/// extern "ptx-kernel" fn mgws_worker(env: *const Env<NvptxWord, TaskStruct>, scratch_len: u32, device: u32)
/// ```
///
/// - `env`: the run's [`mgws_core::Env`] in device memory (read-only for the kernel);
/// - `scratch_len`: bytes of dynamic shared memory the launch gave each block; at least
///   `ScratchLayout::new(local_capacity, 64, blockDim.x, queues).total`, or the kernel traps;
/// - `device`: the index of this GPU in `env.topology`; block `b` is worker
///   `env.topology.first_worker[device] + b`. Blocks past that device's last worker return at once.
///
/// Blocks must be one-dimensional (`blockDim.y == blockDim.z == 1`); every thread is a lane.
/// On targets other than `nvptx64` the macro expands to nothing.
#[macro_export]
#[cfg_attr(target_arch = "nvptx64", allow_internal_unstable(abi_ptx))]
macro_rules! worker_kernel {
    ($registry:path) => {
        /// The fingerprint of the registry this kernel was built for
        /// (`mgws_tasks::Registry::FINGERPRINT`): the PTX declares it as
        /// `.visible .global .align 8 .u64 mgws_registry_fingerprint = <decimal>;`, and the host
        /// refuses to run a registry whose fingerprint differs.
        #[cfg(target_arch = "nvptx64")]
        #[unsafe(no_mangle)]
        #[allow(non_upper_case_globals)]
        pub static mgws_registry_fingerprint: u64 =
            <$registry as $crate::__private::Registry>::FINGERPRINT;

        /// The persistent worker kernel: one block per worker, running until termination.
        ///
        /// # Safety
        /// See `mgws_kernel_support::worker_kernel!`.
        #[cfg(target_arch = "nvptx64")]
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn mgws_worker(
            env: *const $crate::__private::Env<
                $crate::__private::NvptxWord,
                $crate::__private::TaskStruct,
            >,
            scratch_len: u32,
            device: u32,
        ) {
            static REGISTRY: $registry = $registry;
            // SAFETY: the host launches this kernel as documented on `worker_kernel!`.
            unsafe { $crate::run_worker(&REGISTRY, env, scratch_len, device) }
        }

        /// The static-assignment baseline: the same parameters as `mgws_worker`; block `b` runs
        /// the initial tasks `b, b + workers, ...` and what they spawn, with no stealing.
        ///
        /// # Safety
        /// As for `mgws_worker`.
        #[cfg(target_arch = "nvptx64")]
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn mgws_static(
            env: *const $crate::__private::Env<
                $crate::__private::NvptxWord,
                $crate::__private::TaskStruct,
            >,
            scratch_len: u32,
            device: u32,
        ) {
            static REGISTRY: $registry = $registry;
            // SAFETY: the host launches this kernel like `mgws_worker`.
            unsafe { $crate::run_static(&REGISTRY, env, scratch_len, device) }
        }

        /// One level of the kernel-per-level baseline (`args`: a `mgws_core::LevelArgs` in
        /// device memory).
        ///
        /// # Safety
        /// `args` and its buffers are valid device memory; `scratch_len` bytes of dynamic shared
        /// memory per block.
        #[cfg(target_arch = "nvptx64")]
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn mgws_level(
            args: *const $crate::__private::LevelArgs,
            scratch_len: u32,
        ) {
            static REGISTRY: $registry = $registry;
            // SAFETY: the host launches this kernel as documented.
            unsafe { $crate::run_level(&REGISTRY, args, scratch_len) }
        }
    };
}

/// The PTX that `mgws-builder` wrote for this crate's kernel, as a `&'static str`:
/// `include_str!(concat!(env!("OUT_DIR"), "/", NAME, ".ptx"))`, where `NAME` is the argument or, by
/// default, the crate's name with `_` for `-` (the builder's default file name).
///
/// For the `ptx` argument of `#[registry]`, in a crate whose build script runs `mgws-builder`:
///
/// ```ignore
/// #[mgws::registry(ptx = mgws::kernel_ptx!())]
/// pub enum MyTasks { Collatz(CollatzRange) }
/// ```
#[macro_export]
macro_rules! kernel_ptx {
    () => {
        ::core::include_str!(::core::concat!(
            ::core::env!("OUT_DIR"),
            "/",
            ::core::env!("CARGO_CRATE_NAME"),
            ".ptx"
        ))
    };
    ($name:literal) => {
        ::core::include_str!(::core::concat!(::core::env!("OUT_DIR"), "/", $name, ".ptx"))
    };
}

#[doc(hidden)]
pub mod __private {
    #[cfg(target_arch = "nvptx64")]
    pub use mgws_core::nvptx::NvptxWord;
    pub use mgws_core::{Env, LevelArgs};
    pub use mgws_tasks::{Registry, TaskStruct};
}
