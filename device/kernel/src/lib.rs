//! # mgws-kernel
//!
//! The MGWS GPU kernel of the built-in task registries ([`mgws_tasks::MemsetTasks`], ...): one PTX
//! module with each registry's entry set (see [`mgws_kernel_support::worker_kernel!`]).
//! Build it with `cargo xtask ptx [--arch sm_90]`; on the host this crate is empty.
//!
//! `no_std` on every GPU target: nvptx64, and amdgcn (`target_arch = "amdgpu"`), for which CI
//! builds it without entry points, so that nothing NVIDIA-only enters the portable crates unnoticed
//! (docs/design.md, section 1.8).
#![cfg_attr(any(target_arch = "nvptx64", target_arch = "amdgpu"), no_std)]

mgws_kernel_support::worker_kernel!(
    memset => mgws_tasks::MemsetTasks,
    contains => mgws_tasks::ContainsTasks,
    uts => mgws_tasks::UtsTasks,
    fib => mgws_tasks::FibTasks,
    skew => mgws_tasks::SkewTasks,
    stall => mgws_tasks::StallTasks,
);
