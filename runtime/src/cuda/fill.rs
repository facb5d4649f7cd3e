//! A job's indexed initial tasks, built in device memory by the kernel's
//! `mgws_<kernel>_fill_indexed` entry, for the kernel-per-level baseline's first frontier (its
//! level kernel reads a frontier; the persistent kernels make indexed tasks from the template
//! instead): the host neither builds nor copies 64 bytes per task.

use std::ffi::c_void;

use mgws_tasks::{Registry, TaskStruct};

use super::driver::{self, Function};
use super::plan::Param;
use super::session::Session;
use super::CudaBackend;
use crate::error::Result;

/// The parameters of the fill entry: `(dst, template, first, count)`.
pub const FILL_PARAMS: [Param; 4] = [Param::U64, Param::Bytes(64), Param::U64, Param::U64];

/// Threads per block of a fill launch.
const FILL_THREADS: u32 = 256;

/// Opens the fill entry of a run's kernel: [`Filler::open`] for its registry, kept by the level
/// device, which only learns at placement whether the job is indexed.
pub type OpenFiller = fn(&CudaBackend) -> Result<Filler>;

/// The fill entry on the run's GPU (the kernel per level runs on one).
pub struct Filler {
    s: Session,
    func: Function,
}

impl Filler {
    /// Loads `mgws_<R::KERNEL>_fill_indexed` on the GPUs of `b` (from the process's module
    /// cache after the first time).
    pub fn open<R: Registry>(b: &CudaBackend) -> Result<Filler> {
        let entry = format!("mgws_{}_fill_indexed", R::KERNEL);
        let s = Session::open::<R>(b, FILL_THREADS, &entry)?;
        let func = s.functions(&entry, &FILL_PARAMS)?[0];
        Ok(Filler { s, func })
    }

    /// Writes tasks `first..first + count` of the indexed set whose task 0 is `template` to
    /// `dst` on the run's GPU (`dst` then holds task `first + k` at index `k`), and waits until
    /// they are written.
    pub fn fill(&self, dst: u64, template: TaskStruct, first: u64, count: u64) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let gpu = &self.s.gpus[0];
        gpu.make_current()?;
        // Enough blocks to fill the GPU; each thread strides over the rest.
        let blocks = count
            .div_ceil(u64::from(FILL_THREADS))
            .min(u64::from(gpu.sms) * 16) as u32;
        let (mut dst, mut template, mut first, mut count) = (dst, template, first, count);
        let mut params = [
            &mut dst as *mut u64 as *mut c_void,
            &mut template as *mut TaskStruct as *mut c_void,
            &mut first as *mut u64 as *mut c_void,
            &mut count as *mut u64 as *mut c_void,
        ];
        let stream = &self.s.controls[0];
        // SAFETY: the parameters match FILL_PARAMS (checked against the PTX when the entry was
        // found) in order and size; `dst` is the caller's device memory for `count` tasks.
        let r = unsafe {
            self.func
                .launch(false, blocks, FILL_THREADS, 0, stream, &mut params)
        };
        driver::check(r, || {
            format!(
                "launching the fill of {count} initial tasks on GPU {}",
                gpu.ordinal
            )
        })?;
        stream.synchronize()
    }
}
