//! # mgws-kernel-support
//!
//! The pieces every MGWS GPU kernel crate needs, so that a kernel crate is one line:
//!
//! ```ignore
//! #![cfg_attr(target_arch = "nvptx64", no_std)]
//! mgws_kernel_support::worker_kernel!(my_kernel => my_crate::MyRegistry);
//! ```
//!
//! - [`worker_kernel!`]: defines the kernel entry points of task registries;
//! - a `#[panic_handler]` that traps (a failed bounds check or `unwrap` aborts the kernel; the host
//!   sees a launch failure);
//! - with the `mem-builtins` feature, `memcmp` and `bcmp`, which core calls for slice comparisons
//!   and which no library provides on `nvptx64-nvidia-cuda` (`cargo xtask ptx` names them when a
//!   kernel needs them). They live in this ordinary crate, not a `#![no_builtins]` one, because
//!   rustc leaves `no_builtins` crates out of LTO.
//!
//! On every target other than `nvptx64` this crate is empty, so host builds of the workspace
//! (`cargo clippy --workspace`) compile kernel crates as empty libraries. On amdgcn
//! (`target_arch = "amdgpu"`) it holds only a panic handler: what is NVIDIA-only (the entries'
//! `extern "ptx-kernel"` ABI, the `nvptx` intrinsics of the platform and of `gpu.rs`) is gated on
//! `nvptx64`, so that CI's amdgcn build compiles kernel crates with the portable parts alone
//! (docs/design.md, section 1.8).
#![no_std]
// `allow_internal_unstable` lets `worker_kernel!` expand to an `extern "ptx-kernel"` function in a
// crate that does not itself enable `abi_ptx`.
#![cfg_attr(
    target_arch = "nvptx64",
    feature(stdarch_nvptx, allow_internal_unstable),
    allow(internal_features)
)]
// The amdgcn panic handler's trap (`core::process::abort_immediate`, LLVM's `llvm.trap`, as
// `nvptx::trap` is).
#![cfg_attr(target_arch = "amdgpu", feature(abort_immediate))]

#[cfg(target_arch = "amdgpu")]
mod amdgpu;
#[cfg(target_arch = "nvptx64")]
mod gpu;
#[cfg(target_arch = "nvptx64")]
pub use gpu::{fill_indexed, run_level, run_static, run_worker, KernelPlatform, KernelWord};
#[cfg(all(target_arch = "nvptx64", feature = "nvshmem"))]
pub mod nvshmem;

/// Defines the kernel entry points of one or more task registries, each under its kernel name
/// (the registry's `Registry::KERNEL`, checked at compile time):
///
/// ```ignore
/// mgws::worker_kernel!(collatz => my_crate::CollatzTasks);
/// mgws::worker_kernel!(memset => mgws_tasks::MemsetTasks, uts => mgws_tasks::UtsTasks);
/// ```
///
/// For a registry named `k` the PTX gets:
/// - `mgws_k_fingerprint`: a global `u64`, the registry's `Registry::FINGERPRINT`, by which the
///   host checks that the module was built for the registry it runs;
/// - `mgws_k_worker_<spec>`: the MGWS persistent worker, one entry per combination of the options
///   that change its hot loop (`mgws_core::entry_suffix`), each holding only the code its run
///   executes: 24 entries with `<spec>` =
///   `<counter|tree|hierarchical>_<twoatomics|damping>_<single|shared>_<device|system>`
///   (`mgws_core::WORKER_ENTRY_SUFFIXES`: termination, overflow prevention, queue sharing, atomic
///   scope), and 8 for bridged runs (CPU workers beside the GPUs) with `<spec>` =
///   `<counter|hierarchical>_damping_<single|shared>_<device|system>_bridged`
///   (`mgws_core::BRIDGED_ENTRY_SUFFIXES`); the list is `mgws_core::for_each_worker_entry!`,
///   which the host's tables are built from too;
/// - `mgws_k_static_<device|system>`: the static-assignment baseline;
/// - `mgws_k_level`: one level of the kernel-per-level baseline;
/// - `mgws_k_fill_indexed`: builds indexed initial tasks in device memory (the kernel per
///   level's first frontier; the other entries make them from the template).
///
/// The host JIT-compiles only the entry a run needs. The worker and static entries take
///
/// ```ignore
/// extern "ptx-kernel" fn(env: *const Env<NvptxWord, TaskStruct>, scratch_len: u32, device: u32)
/// ```
///
/// - `env`: the run's [`mgws_core::Env`] in device memory (read-only for the kernel);
/// - `scratch_len`: bytes of dynamic shared memory the launch gave each block; at least
///   `ScratchLayout::new(local_capacity, 64, blockDim.x, queues).total`, or the kernel traps (it
///   traps too if `env.config.local_capacity` is not a power of two: `SchedConfig::validate`);
/// - `device`: the index of this GPU in `env.topology`; block `b` is worker
///   `env.topology.first_worker[device] + b`. Blocks past that device's last worker return at once.
///
/// the level entry `(args: *const LevelArgs, scratch_len: u32)`, and the fill entry `(dst: *mut
/// TaskStruct, template: TaskStruct, first: u64, count: u64)`, which writes `dst[k] =
/// template.indexed(first + k)` for `k < count` over any one-dimensional grid. Blocks must be
/// one-dimensional (`blockDim.y == blockDim.z == 1`); every thread is a lane. Usable through the
/// `mgws` crate as `mgws::worker_kernel!` too: its paths name this crate with `$crate`. On targets
/// other than `nvptx64` the macro expands to nothing: on amdgcn too, whose entries would need the
/// `amdgpu-kernel` ABI and an AMD `Platform` (docs/design.md, section 1.8); every entry below is
/// gated on `nvptx64` for that reason.
#[macro_export]
#[cfg_attr(target_arch = "nvptx64", allow_internal_unstable(abi_ptx))]
macro_rules! worker_kernel {
    ($($name:ident => $registry:path),+ $(,)?) => {
        $($crate::__registry_kernel!($name, $registry);)+
    };
}

/// The entries of one registry (see [`worker_kernel!`]).
#[doc(hidden)]
#[macro_export]
#[cfg_attr(target_arch = "nvptx64", allow_internal_unstable(abi_ptx))]
macro_rules! __registry_kernel {
    ($name:ident, $registry:path) => {
        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            assert!(
                $crate::__private::same_str(
                    <$registry as $crate::__private::Registry>::KERNEL,
                    stringify!($name)
                ),
                concat!(
                    "worker_kernel!: the kernel name `",
                    stringify!($name),
                    "` differs from the registry's Registry::KERNEL"
                )
            );

            /// The fingerprint of the registry this kernel was built for.
            #[unsafe(export_name = concat!("mgws_", stringify!($name), "_fingerprint"))]
            pub static FINGERPRINT: u64 = <$registry as $crate::__private::Registry>::FINGERPRINT;
        };
        // One entry per worker spec, named where the host's tables are (`mgws_core::spec`).
        $crate::__private::for_each_worker_entry!($crate::__worker_entries, $name, $registry);
        $crate::__static_entry!($name, $registry, "device", 1);
        $crate::__static_entry!($name, $registry, "system", 2);

        /// One level of the kernel-per-level baseline.
        ///
        /// # Safety
        /// `args` and its buffers are valid device memory; `scratch_len` bytes of dynamic shared
        /// memory per block.
        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            #[unsafe(export_name = concat!("mgws_", stringify!($name), "_level"))]
            pub unsafe extern "ptx-kernel" fn level(
                args: *const $crate::__private::LevelArgs,
                scratch_len: u32,
            ) {
                static REGISTRY: $registry = $registry;
                // SAFETY: the host launches this kernel as documented on `worker_kernel!`.
                unsafe {
                    $crate::run_level::<_, $crate::__private::ScopeOnly<1>>(
                        &REGISTRY,
                        args,
                        scratch_len,
                    )
                }
            }
        };

        /// Builds tasks `first..first + count` of an indexed set of initial tasks (task 0:
        /// `template`) at `dst`: the kernel per level's first frontier of an indexed job.
        ///
        /// # Safety
        /// `dst` is valid device memory for `count` tasks.
        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            #[unsafe(export_name = concat!("mgws_", stringify!($name), "_fill_indexed"))]
            pub unsafe extern "ptx-kernel" fn fill_indexed(
                dst: *mut $crate::__private::TaskStruct,
                template: $crate::__private::TaskStruct,
                first: u64,
                count: u64,
            ) {
                // SAFETY: the host launches this kernel as documented on `worker_kernel!`.
                unsafe { $crate::fill_indexed(dst, &template, first, count) }
            }
        };
    };
}

/// Every MGWS worker entry of `mgws_core::for_each_worker_entry!`'s list, in its order: the
/// persistent entry of `run_worker` compiled for `Fixed<$t, $o, $s, $sc, $b>` (`$b`: bridged).
#[doc(hidden)]
#[macro_export]
macro_rules! __worker_entries {
    ($name:ident, $registry:path, $([$suffix:literal, $t:literal, $o:literal, $s:literal, $sc:literal, $b:literal]),* $(,)?) => {
        $($crate::__persistent_entry!(
            $name,
            $registry,
            concat!("_worker_", $suffix),
            run_worker,
            $crate::__private::Fixed<$t, $o, $s, $sc, $b>
        );)*
    };
}

/// One static-assignment entry (see [`worker_kernel!`]): `run_static` with scope `$sc` fixed.
#[doc(hidden)]
#[macro_export]
macro_rules! __static_entry {
    ($name:ident, $registry:path, $suffix:literal, $sc:literal) => {
        $crate::__persistent_entry!(
            $name,
            $registry,
            concat!("_static_", $suffix),
            run_static,
            $crate::__private::ScopeOnly<$sc>
        );
    };
}

/// A persistent-kernel entry `mgws_<name><tail>(env, scratch_len, device)` that runs
/// `$crate::$runner::<_, $spec>` with the registry `$registry`.
#[doc(hidden)]
#[macro_export]
#[cfg_attr(target_arch = "nvptx64", allow_internal_unstable(abi_ptx))]
macro_rules! __persistent_entry {
    ($name:ident, $registry:path, $tail:expr, $runner:ident, $spec:ty) => {
        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            #[unsafe(export_name = concat!("mgws_", stringify!($name), $tail))]
            pub unsafe extern "ptx-kernel" fn entry(
                env: *const $crate::__private::Env<
                    $crate::__private::KernelWord,
                    $crate::__private::TaskStruct,
                >,
                scratch_len: u32,
                device: u32,
            ) {
                static REGISTRY: $registry = $registry;
                // SAFETY: the host launches this kernel as documented on `worker_kernel!`.
                unsafe { $crate::$runner::<_, $spec>(&REGISTRY, env, scratch_len, device) }
            }
        };
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

/// The cubin `mgws-builder` assembled from the kernel of [`kernel_ptx!`] in the crate's build
/// script, for `#[registry(cubin = mgws::kernel_cubin!())]`: `$OUT_DIR/<crate>.cubin`, empty
/// when the build found no ptxas (`MGWS_PTXAS`, `ptxas` on the PATH, `$CUDA_HOME/bin`).
#[macro_export]
macro_rules! kernel_cubin {
    () => {
        ::core::include_bytes!(::core::concat!(
            ::core::env!("OUT_DIR"),
            "/",
            ::core::env!("CARGO_CRATE_NAME"),
            ".cubin"
        ))
    };
    ($name:literal) => {
        ::core::include_bytes!(::core::concat!(
            ::core::env!("OUT_DIR"),
            "/",
            $name,
            ".cubin"
        ))
    };
}

#[doc(hidden)]
pub mod __private {
    #[cfg(target_arch = "nvptx64")]
    pub use crate::KernelWord;
    pub use mgws_core::{for_each_worker_entry, Env, Fixed, LevelArgs, ScopeOnly};
    pub use mgws_tasks::{Registry, TaskStruct};

    /// `a == b`, in a const context.
    pub const fn same_str(a: &str, b: &str) -> bool {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }
}
