//! GPU PEs in a build without the `cuda` feature: there are none. [`GpuPes`] has no values, so
//! the launcher's GPU branches are never taken, and the PE code compiles without CUDA.

use std::convert::Infallible;
use std::ffi::OsString;
use std::path::PathBuf;

use mgws_core::{Topology, MAX_DEVICES};
use mgws_tasks::Registry;

use crate::error::Result;
use crate::job::Job;
use crate::scheduler::Scheduler;

/// GPU PEs, of which a build without CUDA has none.
pub(crate) enum GpuPes {}

#[allow(clippy::extra_unused_type_parameters)]
impl GpuPes {
    pub(crate) fn new(backend: Infallible) -> Self {
        match backend {}
    }
    pub(crate) fn device_api(&self) -> bool {
        match *self {}
    }
    pub(crate) fn transport_word(&self) -> u32 {
        match *self {}
    }
    pub(crate) fn pe_gpus(&self) -> [u32; MAX_DEVICES] {
        match *self {}
    }
    pub(crate) fn max_registers(&self) -> u32 {
        match *self {}
    }
    pub(crate) fn ptx(&self) -> Result<Option<PathBuf>> {
        match *self {}
    }
    pub(crate) fn check_job(&self, _: &Job<'_>) -> Result<()> {
        match *self {}
    }
    pub(crate) fn area_copies(&self, _: &Job<'_>) -> u64 {
        match *self {}
    }
    pub(crate) fn pe_env(
        &self,
        _: &mgws_core::SchedConfig,
        _: &Topology,
        _: &[u64; mgws_core::DATA_AREAS],
        _: u64,
        _: bool,
    ) -> Vec<(OsString, OsString)> {
        match *self {}
    }
    pub(crate) fn prepare<R: Registry>(&mut self, _: &Scheduler, _: u32, _: usize) -> Result<()> {
        match *self {}
    }
}
