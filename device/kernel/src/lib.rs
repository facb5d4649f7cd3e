//! # mgws-kernel
//!
//! The MGWS GPU kernel for the built-in task registry, [`mgws_tasks::Builtin`]: one PTX module with
//! the `mgws_worker` entry point (see [`mgws_kernel_support::worker_kernel!`] for its parameters).
//! Build it with `cargo xtask ptx [--arch sm_90]`; on the host this crate is empty.
#![cfg_attr(target_arch = "nvptx64", no_std)]

mgws_kernel_support::worker_kernel!(mgws_tasks::Builtin);
