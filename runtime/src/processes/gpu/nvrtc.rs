//! NVRTC, loaded at run time: compiles CUDA C source to a relocatable cubin. Only runs of GPU PEs
//! over NVSHMEM's device API use it (for the wrappers of `nvshmem_shim.cu`); nothing else needs
//! it, and a machine without it runs everything else.
//!
//! Where it is found, in order: the file `$MGWS_NVRTC_LIBRARY` names, `$CUDA_HOME/lib64` and
//! `$CUDA_PATH/lib64` (else `/usr/local/cuda/lib64`), the loader's search path, and the CUDA 13 pip
//! packages of `python3` (`nvidia/cu13/lib`, `nvidia/cuda_nvrtc/lib`). cudarc's own NVRTC loader
//! is not used: it panics when the library is missing and knows only the names of its build's
//! CUDA version, while a missing NVRTC must be an error that says what to install.

use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The environment variable naming NVRTC's library file.
pub const LIBRARY_VAR: &str = "MGWS_NVRTC_LIBRARY";

type Program = *mut c_void;
type Version = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
type CreateProgram = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> c_int;
type CompileProgram = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int;
type GetSize = unsafe extern "C" fn(Program, *mut usize) -> c_int;
type GetBytes = unsafe extern "C" fn(Program, *mut c_char) -> c_int;
type DestroyProgram = unsafe extern "C" fn(*mut Program) -> c_int;

/// NVRTC, loaded, with the entry points mgws calls.
pub struct Nvrtc {
    path: PathBuf,
    version: (i32, i32),
    create: CreateProgram,
    compile: CompileProgram,
    log_size: GetSize,
    log: GetBytes,
    cubin_size: GetSize,
    cubin: GetBytes,
    destroy: DestroyProgram,
    /// Keeps the entry points valid.
    _library: libloading::Library,
}

/// Where to look for NVRTC (see the module's documentation), given the environment's values
/// and the pip packages' `nvidia` directory.
pub fn candidates(
    library: Option<&Path>,
    cuda_homes: &[PathBuf],
    pip_nvidia: Option<&Path>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    out.extend(library.map(Path::to_path_buf));
    let names = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];
    for home in cuda_homes {
        out.extend(names.iter().map(|n| home.join("lib64").join(n)));
    }
    // Bare names: the dynamic loader's own search.
    out.extend(names.iter().map(PathBuf::from));
    if let Some(nvidia) = pip_nvidia {
        out.push(nvidia.join("cu13/lib/libnvrtc.so.13"));
        out.push(nvidia.join("cuda_nvrtc/lib/libnvrtc.so.13"));
        out.push(nvidia.join("cuda_nvrtc/lib/libnvrtc.so.12"));
    }
    out
}

/// The CUDA installations the environment names (`CUDA_HOME`, `CUDA_PATH`), else the usual
/// place (`/usr/local/cuda`).
pub fn cuda_homes() -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|v| std::env::var_os(v).map(PathBuf::from))
        .collect();
    if homes.is_empty() {
        homes.push(PathBuf::from("/usr/local/cuda"));
    }
    homes
}

impl Nvrtc {
    /// Finds and loads NVRTC; an error lists what was tried and what to install.
    pub fn load() -> Result<Nvrtc> {
        let library = std::env::var_os(LIBRARY_VAR).map(PathBuf::from);
        let homes = cuda_homes();
        let first = candidates(library.as_deref(), &homes, None);
        // The pip packages are looked up only when the cheaper places fail.
        let pip = || {
            super::nvshmem::pip_nvidia()
                .map(|n| candidates(None, &[], Some(&n)))
                .unwrap_or_default()
        };
        let places = first.into_iter().chain(std::iter::once_with(pip).flatten());
        let tried = match super::dylib::load_first(places, Self::load_from) {
            Ok(n) => return Ok(n),
            Err(tried) => tried,
        };
        Err(Error::BackendUnavailable(format!(
            "NVRTC (libnvrtc.so), which GPU PEs over NVSHMEM's device API need to compile mgws's \
             NVSHMEM wrappers, was not found: install the CUDA toolkit or `pip install \
             nvidia-cuda-nvrtc-cu13`, or set {LIBRARY_VAR} to the library (or run the PEs with \
             --pe-transport mapped on one node). Tried: {}",
            tried.join("; ")
        )))
    }

    /// Loads NVRTC from `path`.
    pub fn load_from(path: &Path) -> std::result::Result<Nvrtc, String> {
        // SAFETY: loading NVRTC runs its initialisers, which have no preconditions; the entry
        // points are looked up with the signatures of NVRTC's header (nvrtc.h, CUDA 12 and 13)
        // and stay valid while `_library` is held.
        unsafe {
            let library = libloading::Library::new(path).map_err(|e| e.to_string())?;
            macro_rules! entry {
                ($name:literal) => {
                    super::dylib::entry(&library, path, $name)?
                };
            }
            let version: Version = entry!("nvrtcVersion");
            let (mut major, mut minor) = (0, 0);
            version(&mut major, &mut minor);
            Ok(Nvrtc {
                path: path.to_path_buf(),
                version: (major, minor),
                create: entry!("nvrtcCreateProgram"),
                compile: entry!("nvrtcCompileProgram"),
                log_size: entry!("nvrtcGetProgramLogSize"),
                log: entry!("nvrtcGetProgramLog"),
                cubin_size: entry!("nvrtcGetCUBINSize"),
                cubin: entry!("nvrtcGetCUBIN"),
                destroy: entry!("nvrtcDestroyProgram"),
                _library: library,
            })
        }
    }

    /// The library's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// NVRTC's version, `(major, minor)`.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// Compiles `source` (named `name` in messages) with `options` into a cubin; an error carries
    /// NVRTC's log.
    pub fn compile_cubin(&self, source: &str, name: &str, options: &[String]) -> Result<Vec<u8>> {
        let src = CString::new(source).expect("the source has no NUL");
        let cname = CString::new(name).expect("the name has no NUL");
        let opts: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()).expect("options have no NUL"))
            .collect();
        let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
        let mut program: Program = std::ptr::null_mut();
        // SAFETY: NUL-terminated strings that outlive the call; no headers are passed.
        let rc = unsafe {
            (self.create)(
                &mut program,
                src.as_ptr(),
                cname.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(Error::Cuda(format!(
                "nvrtcCreateProgram({name}) failed ({rc})"
            )));
        }
        // SAFETY: `program` was created above; the options outlive the call.
        let rc = unsafe { (self.compile)(program, opt_ptrs.len() as c_int, opt_ptrs.as_ptr()) };
        let result = if rc != 0 {
            Err(Error::Cuda(format!(
                "NVRTC ({}, {}.{}) could not compile {name} with {}: error {rc}\n{}",
                self.path.display(),
                self.version.0,
                self.version.1,
                options.join(" "),
                self.program_log(program)
            )))
        } else {
            let mut size = 0usize;
            // SAFETY: a compiled program; the buffer has the size NVRTC reported.
            let (rc_size, rc_cubin, cubin) = unsafe {
                let rc_size = (self.cubin_size)(program, &mut size);
                let mut cubin = vec![0u8; size];
                let rc_cubin = if rc_size == 0 && size > 0 {
                    (self.cubin)(program, cubin.as_mut_ptr() as *mut c_char)
                } else {
                    0
                };
                (rc_size, rc_cubin, cubin)
            };
            if rc_size != 0 || rc_cubin != 0 || cubin.is_empty() {
                Err(Error::Cuda(format!(
                    "NVRTC ({}) compiled {name} but gave no cubin (nvrtcGetCUBINSize {rc_size}, \
                     {size} bytes; nvrtcGetCUBIN {rc_cubin}): is -rdc=true with an sm_ \
                     architecture supported by this NVRTC?",
                    self.path.display()
                )))
            } else {
                Ok(cubin)
            }
        };
        // SAFETY: destroys the program created above, once.
        unsafe { (self.destroy)(&mut program) };
        result
    }

    /// The compile log of `program`.
    fn program_log(&self, program: Program) -> String {
        let mut size = 0usize;
        // SAFETY: a live program; the buffer has the size NVRTC reported.
        unsafe {
            (self.log_size)(program, &mut size);
            let mut log = vec![0u8; size.max(1)];
            (self.log)(program, log.as_mut_ptr() as *mut c_char);
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            String::from_utf8_lossy(&log[..end]).trim().to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_goes_to_the_named_file_the_cuda_homes_the_loader_then_pip() {
        let c = candidates(
            Some(Path::new("/x/libnvrtc.so")),
            &[PathBuf::from("/opt/cuda")],
            Some(Path::new("/py/nvidia")),
        );
        assert_eq!(c[0], PathBuf::from("/x/libnvrtc.so"));
        assert_eq!(c[1], PathBuf::from("/opt/cuda/lib64/libnvrtc.so.13"));
        assert!(c.contains(&PathBuf::from("libnvrtc.so.13")));
        assert_eq!(
            c.last(),
            Some(&PathBuf::from("/py/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"))
        );
        assert_eq!(candidates(None, &[], None).len(), 3);
    }

    #[test]
    fn a_missing_library_is_a_string_error_not_a_panic() {
        let tried = super::super::dylib::load_first(
            [PathBuf::from("/nonexistent/libnvrtc.so")],
            Nvrtc::load_from,
        )
        .err()
        .expect("no such library");
        assert!(
            tried[0].starts_with("/nonexistent/libnvrtc.so: "),
            "{tried:?}"
        );
    }
}
