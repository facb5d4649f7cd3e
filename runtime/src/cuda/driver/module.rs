//! PTX and cubin modules loaded into one context, and their kernel functions.

use std::ffi::{c_void, CString};

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys::{self, CUresult};

use super::{check, driver_version, error_name, explain, ok, set_current, FuncAttr, Gpu, Stream};
use crate::error::{Error, Result};

/// A PTX module loaded (JIT-compiled) into one context.
pub struct Module {
    raw: sys::CUmodule,
    ctx: sys::CUcontext,
}

// SAFETY: module and context handles may be used from any thread; `function` makes the context
// current on the calling thread before it looks a kernel up, and the driver's module calls are
// thread-safe.
unsafe impl Send for Module {}
// SAFETY: as for Send (`&Module` only looks kernels up).
unsafe impl Sync for Module {}

/// The JIT options of a module load or link: the error log into `log`, and the register cap.
/// The values point into `log`, which must outlive the driver call they are passed to.
fn jit_options(
    log: &mut [u8],
    max_registers: Option<u32>,
) -> (Vec<sys::CUjit_option>, Vec<*mut c_void>) {
    let mut options = vec![
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    // The size option's value is passed by value in the pointer slot.
    let mut values = vec![log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
    if let Some(n) = max_registers {
        options.push(sys::CUjit_option::CU_JIT_MAX_REGISTERS);
        values.push(n as usize as *mut c_void);
    }
    (options, values)
}

/// The driver's JIT log in `log` (NUL-terminated) as the tail of an error message: empty when
/// the driver wrote none.
fn jit_log(log: &[u8]) -> String {
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let text = String::from_utf8_lossy(&log[..end]);
    if text.trim().is_empty() {
        String::new()
    } else {
        format!("\nJIT log:\n{}", text.trim())
    }
}

/// The error of a module load of `origin` on `gpu` that the driver answered with `r`, with the
/// JIT's `log` where there is one.
fn load_failed(gpu: &Gpu, origin: &str, r: CUresult, log: &[u8]) -> Error {
    Error::Cuda(format!(
        "loading {origin} on GPU {} ({}) failed: {} {}{}",
        gpu.ordinal,
        gpu.name,
        error_name(r),
        explain(r),
        jit_log(log)
    ))
}

impl Module {
    /// JIT-compiles `ptx` for `gpu`, with at most `max_registers` registers per thread if given;
    /// a compile error carries the driver's log.
    pub fn load(gpu: &Gpu, ptx: &str, origin: &str, max_registers: Option<u32>) -> Result<Module> {
        gpu.make_current()?;
        let image = CString::new(ptx)
            .map_err(|_| Error::Input(format!("{origin} contains a NUL byte: not a PTX file")))?;
        let mut log = vec![0u8; 16 * 1024];
        let (mut options, mut values) = jit_options(&mut log, max_registers);
        let mut raw = std::ptr::null_mut();
        // sys: cuModuleLoadDataEx with JIT options (CU_JIT_MAX_REGISTERS, the error log), which
        // the result layer's `module::load_data` does not pass.
        // SAFETY: the image is NUL-terminated; the options point to a live log buffer of the
        // given size (the size option's value is passed by value in the pointer slot).
        let r = unsafe {
            sys::cuModuleLoadDataEx(
                &mut raw,
                image.as_ptr() as *const c_void,
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if r != CUresult::CUDA_SUCCESS {
            return Err(load_failed(gpu, origin, r, &log));
        }
        Ok(Module { raw, ctx: gpu.ctx })
    }

    /// Loads `cubin`, a module ptxas assembled ahead of time for this GPU's architecture: no JIT
    /// compile. `origin` names it in errors (a cubin built for another architecture is refused
    /// by the driver with `CUDA_ERROR_NO_BINARY_FOR_GPU`).
    pub fn load_cubin(gpu: &Gpu, cubin: &[u8], origin: &str) -> Result<Module> {
        gpu.make_current()?;
        // The driver reads the image as an ELF file: give it 8-byte alignment.
        let mut image = vec![0u64; cubin.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut image)[..cubin.len()].copy_from_slice(cubin);
        let mut raw = std::ptr::null_mut();
        // sys: the result layer's load_data takes a CString, not a binary image.
        // SAFETY: `image` holds the whole cubin and outlives the call.
        let r = unsafe { sys::cuModuleLoadData(&mut raw, image.as_ptr() as *const c_void) };
        if r != CUresult::CUDA_SUCCESS {
            return Err(load_failed(gpu, origin, r, &[]));
        }
        Ok(Module { raw, ctx: gpu.ctx })
    }

    /// Links `ptx` with the relocatable `cubin` and the device library `library` (an archive of
    /// relocatable device code) with the driver's JIT linker and loads the result on `gpu`, with
    /// at most `max_registers` registers per thread if given. This is how a kernel that calls
    /// NVSHMEM's device API is loaded (`processes::gpu::nvshmem_link`); a link error carries the log.
    #[cfg(feature = "processes")]
    pub fn link(
        gpu: &Gpu,
        ptx: &str,
        origin: &str,
        max_registers: Option<u32>,
        cubin: &[u8],
        library: &std::path::Path,
    ) -> Result<Module> {
        gpu.make_current()?;
        let image = CString::new(ptx)
            .map_err(|_| Error::Input(format!("{origin} contains a NUL byte: not a PTX file")))?;
        let library_c = CString::new(library.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::Input(format!("{} contains a NUL byte", library.display())))?;
        let mut log = vec![0u8; 16 * 1024];
        let (mut options, mut values) = jit_options(&mut log, max_registers);
        let failed = |what: &str, r: CUresult, log: &[u8]| {
            Error::Cuda(format!(
                "linking {origin} with NVSHMEM's device code on GPU {} ({}) failed at {what}: {} \
                 {}{}",
                gpu.ordinal,
                gpu.name,
                error_name(r),
                explain(r),
                jit_log(log)
            ))
        };
        let mut state = std::ptr::null_mut();
        // sys: the result layer has no linker.
        // SAFETY: the options point to a live log buffer of the given size (the size option's
        // value is passed by value in the pointer slot); both outlive the link state, which is
        // destroyed below on every path.
        let r = unsafe {
            sys::cuLinkCreate_v2(
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
                &mut state,
            )
        };
        if r != CUresult::CUDA_SUCCESS {
            return Err(failed("cuLinkCreate", r, &log));
        }
        let linked = (|| {
            let add = |kind, data: *const u8, len: usize, name: &std::ffi::CStr, what| {
                // SAFETY: `data` is a live buffer of `len` bytes (the PTX NUL-terminated, its
                // length counting the NUL) and the name is NUL-terminated; the driver copies
                // both.
                let r = unsafe {
                    sys::cuLinkAddData_v2(
                        state,
                        kind,
                        data as *mut c_void,
                        len,
                        name.as_ptr(),
                        0,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                if r == CUresult::CUDA_SUCCESS {
                    Ok(())
                } else {
                    Err((what, r))
                }
            };
            let ptx = image.as_bytes_with_nul();
            add(
                sys::CUjitInputType::CU_JIT_INPUT_PTX,
                ptx.as_ptr(),
                ptx.len(),
                c"mgws kernel",
                "the kernel's PTX",
            )?;
            add(
                sys::CUjitInputType::CU_JIT_INPUT_CUBIN,
                cubin.as_ptr(),
                cubin.len(),
                c"mgws NVSHMEM wrappers",
                "the NVSHMEM wrappers",
            )?;
            // SAFETY: a NUL-terminated path; the driver reads the file.
            let r = unsafe {
                sys::cuLinkAddFile_v2(
                    state,
                    sys::CUjitInputType::CU_JIT_INPUT_LIBRARY,
                    library_c.as_ptr(),
                    0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
            if r != CUresult::CUDA_SUCCESS {
                return Err(("NVSHMEM's device library", r));
            }
            let (mut out, mut size) = (std::ptr::null_mut(), 0usize);
            // SAFETY: the state holds every input; the image it returns lives until the state
            // is destroyed, and is loaded (copied) before that.
            let r = unsafe { sys::cuLinkComplete(state, &mut out, &mut size) };
            if r != CUresult::CUDA_SUCCESS {
                return Err(("cuLinkComplete", r));
            }
            let mut raw = std::ptr::null_mut();
            // SAFETY: `out` is the linked cubin the driver just produced.
            let r = unsafe { sys::cuModuleLoadData(&mut raw, out) };
            if r != CUresult::CUDA_SUCCESS {
                return Err(("loading the linked module", r));
            }
            Ok(raw)
        })();
        // SAFETY: created above, destroyed once; the module (if any) holds its own copy.
        unsafe { sys::cuLinkDestroy(state) };
        match linked {
            Ok(raw) => Ok(Module { raw, ctx: gpu.ctx }),
            Err((what, r)) => Err(failed(what, r, &log)),
        }
    }

    /// The driver's handle, for libraries that register a module (`nvshmemx_cumodule_init`).
    #[cfg(feature = "processes")]
    pub fn raw(&self) -> sys::CUmodule {
        self.raw
    }

    /// The address and size of the module's global `name`, or `None` if it has none.
    #[cfg(feature = "processes")]
    pub fn global(&self, name: &str) -> Result<Option<(u64, usize)>> {
        let cname = CString::new(name).expect("global names have no NUL");
        set_current(self.ctx)?;
        let (mut ptr, mut bytes) = (0, 0);
        // sys: the result layer's `module::get_global` does not give the size.
        // SAFETY: the module is loaded; the name is NUL-terminated.
        let r =
            unsafe { sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, self.raw, cname.as_ptr()) };
        match r {
            CUresult::CUDA_SUCCESS => Ok(Some((ptr, bytes))),
            CUresult::CUDA_ERROR_NOT_FOUND => Ok(None),
            r => Err(Error::Cuda(format!(
                "cuModuleGetGlobal({name}): {} {}",
                error_name(r),
                explain(r)
            ))),
        }
    }

    /// The kernel `name`, or `None` if the module has no such entry.
    pub fn function(&self, name: &str) -> Result<Option<Function>> {
        let cname = CString::new(name).expect("kernel names have no NUL");
        set_current(self.ctx)?;
        // SAFETY: the module is loaded and not unloaded before self is dropped.
        match unsafe { result::module::get_function(self.raw, cname) } {
            Ok(raw) => {
                let f = Function { raw };
                f.load_eagerly(name)?;
                Ok(Some(f))
            }
            Err(DriverError(CUresult::CUDA_ERROR_NOT_FOUND)) => Ok(None),
            Err(e) => ok(Err(e), || format!("looking up kernel {name}")),
        }
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: unloads what `load` loaded, once; errors are ignored.
        unsafe {
            let _ = result::ctx::set_current(self.ctx);
            let _ = result::module::unload(self.raw);
        }
    }
}

/// A kernel of a loaded module (valid while the module is).
#[derive(Clone, Copy)]
pub struct Function {
    /// The driver's handle.
    pub raw: sys::CUfunction,
}

impl Function {
    /// Loads the kernel's code onto its GPU now. Under the driver's lazy module loading (the
    /// default since CUDA 12.2) that happens at the first launch instead, inside the launch call:
    /// with several GPUs, one GPU's kernel would then wait for the next GPU's load, and the
    /// run's time would include it. Drivers before 12.4 (no `cuFuncLoad`) load at launch.
    fn load_eagerly(&self, name: &str) -> Result<()> {
        if driver_version()? < (12, 4) {
            return Ok(());
        }
        // sys: the result layer has no cuFuncLoad.
        // SAFETY: the function belongs to a loaded module whose context is current (the caller
        // made it so).
        check(unsafe { sys::cuFuncLoad(self.raw) }, || {
            format!("cuFuncLoad({name})")
        })
    }

    /// The kernel's attribute `a`.
    pub fn attr(&self, a: FuncAttr) -> Result<i32> {
        // SAFETY: the function belongs to a loaded module (see the type's invariant).
        ok(
            unsafe { result::function::get_function_attribute(self.raw, a) },
            || format!("cuFuncGetAttribute({a:?})"),
        )
    }

    /// Sets the kernel's attribute `a` to `value`.
    pub fn set_attr(&self, a: FuncAttr, value: i32) -> Result<()> {
        // SAFETY: the function belongs to a loaded module.
        ok(
            unsafe { result::function::set_function_attribute(self.raw, a, value) },
            || format!("cuFuncSetAttribute({a:?}, {value})"),
        )
    }

    /// Blocks of `threads` threads with `smem` bytes of dynamic shared memory that fit on one SM.
    pub fn max_blocks_per_sm(&self, threads: u32, smem: usize) -> Result<u32> {
        // SAFETY: the function belongs to a loaded module.
        let n = ok(
            unsafe {
                result::occupancy::max_active_block_per_multiprocessor(
                    self.raw,
                    threads as i32,
                    smem,
                )
            },
            || format!("occupancy query for {threads} threads and {smem} B of shared memory"),
        )?;
        Ok(n.max(0) as u32)
    }

    /// Launches the kernel on `stream`: cooperatively (all blocks co-resident, or an error) or
    /// normally. `params` are pointers to the argument values. Returns the raw code, for the
    /// caller to name what failed.
    ///
    /// # Safety
    /// `params` must match the kernel's parameter list in number, order and size, and every
    /// pointer argument must be valid for the kernel's use.
    pub unsafe fn launch(
        &self,
        cooperative: bool,
        grid: u32,
        block: u32,
        smem: u32,
        stream: &Stream,
        params: &mut [*mut c_void],
    ) -> CUresult {
        let (grid, block) = ((grid, 1, 1), (block, 1, 1));
        // SAFETY: forwarded to the caller.
        let r = unsafe {
            if cooperative {
                result::launch_cooperative_kernel(self.raw, grid, block, smem, stream.raw, params)
            } else {
                result::launch_kernel(self.raw, grid, block, smem, stream.raw, params)
            }
        };
        match r {
            Ok(()) => CUresult::CUDA_SUCCESS,
            Err(DriverError(code)) => code,
        }
    }
}
