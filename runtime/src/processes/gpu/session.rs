//! Sessions of GPU PEs whose kernel calls NVSHMEM's device API: the entry is linked with the
//! wrappers and NVSHMEM's device library before it loads.

use std::sync::Arc;

use mgws_tasks::Registry;

use crate::cuda::driver::{self, Module};
use crate::cuda::load_notice;
use crate::cuda::session::Session;
use crate::cuda::{cache, CudaBackend};
use crate::error::Result;

impl Session {
    /// [`Session::open`] for a kernel that calls NVSHMEM's device API (built with `cargo xtask
    /// ptx --nvshmem`): the entry is linked with the wrappers and NVSHMEM's device library of
    /// `code` (see [`super::nvshmem_link`]) and loaded outside the process's module cache (each
    /// module is registered with NVSHMEM once, by its PE).
    pub fn open_linked<R: Registry>(
        b: &CudaBackend,
        lanes: u32,
        entry: &str,
        code: &super::nvshmem_link::DeviceCode,
    ) -> Result<Session> {
        Self::open_with::<R>(b, lanes, entry, true, |gpu, ptx, cap| {
            let src = &ptx.src;
            load_notice::watched_load(gpu.ordinal, entry, src, true, || {
                Module::link(
                    gpu,
                    &src.text,
                    &src.origin,
                    cap,
                    &code.wrappers,
                    &code.library,
                )
            })
            .map(Arc::new)
        })
    }

    /// [`Session::open`] for `b`'s PE transport: [`Session::open_linked`] with the kernel of
    /// `cargo xtask ptx --nvshmem` (`b.ptx`, else [`crate::cuda::ptx::resolve_nvshmem`]) and NVSHMEM's
    /// device code for the first GPU's architecture where it is
    /// [`PeTransport::DeviceApi`](crate::cuda::PeTransport), else [`Session::open`].
    pub fn open_for_transport<R: Registry>(
        b: &CudaBackend,
        lanes: u32,
        entry: &str,
    ) -> Result<Session> {
        if b.pe_transport == crate::cuda::PeTransport::Mapped {
            return Self::open::<R>(b, lanes, entry);
        }
        driver::init()?;
        let b = CudaBackend {
            ptx: Some(crate::cuda::ptx::resolve_nvshmem(b.ptx.as_deref())?),
            ..b.clone()
        };
        let gpu = cache::gpu(b.device_list()[0])?;
        let nvshmem = super::nvshmem::Nvshmem::load()?;
        let code = super::nvshmem_link::device_code(nvshmem.path(), gpu.cc)?;
        Self::open_linked::<R>(&b, lanes, entry, &code)
    }
}
