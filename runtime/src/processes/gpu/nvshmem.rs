//! NVSHMEM's host library, loaded at run time: what a GPU PE of a multi-process run needs to join
//! the others (the unique-ID bootstrap), to allocate its part of the symmetric heap and to map
//! the other PEs' parts into its own address space.
//!
//! Only the host library (`libnvshmem_host.so.3`) is loaded. With the mapped transport the
//! kernel reaches the PEs of one node through the addresses [`Nvshmem::peer_ptr`] returns (NVSHMEM
//! maps the peers' heaps over NVLink or PCIe peer access, the same path its own device atomics
//! take to a PE of the node), and its PTX has no NVSHMEM call. With the device-API transport the
//! kernel calls NVSHMEM's device API through wrappers linked in at load time
//! (`cuda::nvshmem_link`), and [`Nvshmem::cumodule_init`] registers its module. CPU runs and
//! single-process GPU runs never load it.
//!
//! Where it is found, in order: the file `$MGWS_NVSHMEM_LIBRARY` names (the launcher passes the
//! one it found to its PEs), `$NVSHMEM_HOME/lib`, the loader's search path (`LD_LIBRARY_PATH`),
//! and the `nvidia-nvshmem-cu13` pip package of `python3`.

use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The environment variable naming an NVSHMEM installation (its `lib/` holds the host library).
pub const HOME_VAR: &str = "NVSHMEM_HOME";

/// The environment variable naming the host library's file itself: the launcher sets it for its
/// PEs to the library it found, so that they do not search again.
pub const LIBRARY_VAR: &str = "MGWS_NVSHMEM_LIBRARY";

/// The host library's file name (NVSHMEM 3).
pub const LIBRARY: &str = "libnvshmem_host.so.3";

/// `NVSHMEMX_INIT_WITH_UNIQUEID`.
const INIT_WITH_UNIQUEID: u32 = 1 << 3;

/// Bytes of `nvshmemx_uniqueid_t` (`nvshmemx_uniqueid_v1`: a version and 124 bytes).
pub const UNIQUE_ID_BYTES: usize = 128;

/// An `nvshmemx_uniqueid_t`: PE 0 makes it, every PE initialises with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(8))]
pub struct UniqueId(pub [u8; UNIQUE_ID_BYTES]);

/// `nvshmemx_uniqueid_args_t`.
#[repr(C)]
struct UniqueIdArgs {
    version: c_int,
    id: *mut UniqueId,
    myrank: c_int,
    nranks: c_int,
}

/// `nvshmemx_init_args_t` (`nvshmemx_init_args_v1`, 128 bytes).
#[repr(C)]
struct InitArgs {
    version: c_int,
    uid_args: UniqueIdArgs,
    content: [u8; 96],
}

/// `nvshmemx_init_attr_t` (`nvshmemx_init_attr_v1`, 144 bytes).
#[repr(C)]
struct InitAttr {
    version: c_int,
    mpi_comm: *mut c_void,
    args: InitArgs,
}

/// NVSHMEM's struct versions: `(1 << 16) + sizeof(T)`, as its initializer macros set them.
fn version_of<T>() -> c_int {
    (1 << 16) + std::mem::size_of::<T>() as c_int
}

type GetUniqueId = unsafe extern "C" fn(*mut UniqueId) -> c_int;
type SetUniqueIdArgs = unsafe extern "C" fn(c_int, c_int, *const UniqueId, *mut InitAttr) -> c_int;
type HostlibInitAttr = unsafe extern "C" fn(u32, *mut InitAttr) -> c_int;
type Malloc = unsafe extern "C" fn(usize) -> *mut c_void;
type Free = unsafe extern "C" fn(*mut c_void);
type Ptr = unsafe extern "C" fn(*const c_void, c_int) -> *mut c_void;
type PeQuery = unsafe extern "C" fn() -> c_int;
type BarrierAll = unsafe extern "C" fn();
type Finalize = unsafe extern "C" fn();
type CumoduleInit = unsafe extern "C" fn(*mut c_void) -> c_int;

/// The host library, loaded, with the entry points mgws calls.
pub struct Nvshmem {
    path: PathBuf,
    get_unique_id: GetUniqueId,
    set_unique_id_args: SetUniqueIdArgs,
    hostlib_init_attr: HostlibInitAttr,
    malloc: Malloc,
    free: Free,
    ptr: Ptr,
    my_pe: PeQuery,
    n_pes: PeQuery,
    barrier_all: BarrierAll,
    finalize: Finalize,
    /// `nvshmemx_cumodule_init`: registers a module that calls NVSHMEM's device API (only
    /// kernels over the device API need it; a library without it serves every other run).
    cumodule_init: Option<CumoduleInit>,
    initialised: bool,
    /// Whether a call may have started state of the library's own: the unique ID (whose
    /// bootstrap may listen for the other PEs) or an init, even a failed one.
    touched: std::cell::Cell<bool>,
    /// Keeps the entry points above valid. Unloaded on drop only if no call touched NVSHMEM's
    /// state ([`Self::touched`]): a library with threads and state of its own stays loaded.
    library: std::mem::ManuallyDrop<libloading::Library>,
}

impl std::fmt::Debug for Nvshmem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvshmem").field("path", &self.path).finish()
    }
}

/// Where to look for the host library, in order (see the module's documentation): `library`
/// (the file [`LIBRARY_VAR`] names), `home` ([`HOME_VAR`]), the loader's search, and `python`,
/// the pip package's directory, if any.
pub fn candidates(
    library: Option<&Path>,
    home: Option<&Path>,
    python: Option<PathBuf>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(library) = library {
        out.push(library.to_path_buf());
    }
    if let Some(home) = home {
        out.push(home.join("lib").join(LIBRARY));
    }
    // A bare name: the dynamic loader's own search (LD_LIBRARY_PATH, the cache).
    out.push(PathBuf::from(LIBRARY));
    if let Some(dir) = python {
        out.push(dir.join("lib").join(LIBRARY));
    }
    out
}

/// The `nvidia` directory of the pip packages `python3` sees (NVSHMEM's and CUDA's wheels
/// install under it), if any.
pub fn pip_nvidia() -> Option<PathBuf> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import importlib.util as u\n\
             s = u.find_spec('nvidia')\n\
             print(list(s.submodule_search_locations)[0] if s else '')",
        ])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let dir = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!dir.is_empty() && Path::new(&dir).is_dir()).then(|| PathBuf::from(dir))
}

/// The NVSHMEM directory of the pip package `python3` sees, if any.
fn pip_package() -> Option<PathBuf> {
    let dir = pip_nvidia()?.join("nvshmem");
    dir.join("lib").join(LIBRARY).exists().then_some(dir)
}

impl Nvshmem {
    /// Loads the host library from the first place [`candidates`] names that has it; a clear
    /// [`Error::BackendUnavailable`] saying what to install when none has.
    pub fn load() -> Result<Nvshmem> {
        let library = std::env::var_os(LIBRARY_VAR).map(PathBuf::from);
        let home = std::env::var_os(HOME_VAR).map(PathBuf::from);
        // The pip package is looked up only when the cheaper places fail.
        let places = candidates(library.as_deref(), home.as_deref(), None)
            .into_iter()
            .chain(
                std::iter::once_with(pip_package)
                    .flatten()
                    .map(|d| d.join("lib").join(LIBRARY)),
            );
        let tried = match super::dylib::load_first(places, Self::load_from) {
            Ok(n) => return Ok(n),
            Err(tried) => tried,
        };
        Err(Error::BackendUnavailable(format!(
            "NVSHMEM's host library ({LIBRARY}) was not found, which runs over GPU PE processes \
             need: install it with `pip install nvidia-nvshmem-cu13` (found through python3) or \
             set {HOME_VAR} to an NVSHMEM 3 installation. Tried: {}",
            tried.join("; ")
        )))
    }

    /// Loads the host library at `path`.
    pub fn load_from(path: &Path) -> std::result::Result<Nvshmem, String> {
        // SAFETY: loading NVSHMEM's host library runs its initialisers, which only set up its
        // own state; the entry points are looked up by their C names with the signatures of
        // NVSHMEM 3's headers (host/nvshmem_api.h, host/nvshmemx_api.h).
        unsafe {
            let library = libloading::Library::new(path).map_err(|e| e.to_string())?;
            macro_rules! entry {
                ($name:literal) => {
                    super::dylib::entry(&library, path, $name)?
                };
            }
            Ok(Nvshmem {
                path: path.to_path_buf(),
                get_unique_id: entry!("nvshmemx_get_uniqueid"),
                set_unique_id_args: entry!("nvshmemx_set_attr_uniqueid_args"),
                hostlib_init_attr: entry!("nvshmemx_hostlib_init_attr"),
                malloc: entry!("nvshmem_malloc"),
                free: entry!("nvshmem_free"),
                ptr: entry!("nvshmem_ptr"),
                my_pe: entry!("nvshmem_my_pe"),
                n_pes: entry!("nvshmem_n_pes"),
                barrier_all: entry!("nvshmem_barrier_all"),
                finalize: entry!("nvshmemx_hostlib_finalize"),
                cumodule_init: super::dylib::entry(&library, path, "nvshmemx_cumodule_init").ok(),
                initialised: false,
                touched: std::cell::Cell::new(false),
                library: std::mem::ManuallyDrop::new(library),
            })
        }
    }

    /// Where the library was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A fresh unique ID (PE 0 makes it and hands it to the others).
    pub fn unique_id(&self) -> Result<UniqueId> {
        let mut id = UniqueId([0; UNIQUE_ID_BYTES]);
        id.0[..4].copy_from_slice(&version_of::<UniqueId>().to_ne_bytes());
        self.touched.set(true);
        // SAFETY: `id` is a valid, versioned nvshmemx_uniqueid_t the call fills in.
        let rc = unsafe { (self.get_unique_id)(&mut id) };
        if rc != 0 {
            return Err(Error::Process(format!(
                "nvshmemx_get_uniqueid failed ({rc})"
            )));
        }
        Ok(id)
    }

    /// Joins the `pes` PEs that initialise with `id`, as PE `pe` (collective: returns once every
    /// PE has called it). The calling thread's current CUDA context is the GPU this PE uses.
    pub fn init(&mut self, pe: u32, pes: u32, id: &UniqueId) -> Result<()> {
        assert!(!self.initialised, "NVSHMEM is initialised once");
        let mut attr = InitAttr {
            version: version_of::<InitAttr>(),
            mpi_comm: std::ptr::null_mut(),
            args: InitArgs {
                version: version_of::<InitArgs>(),
                uid_args: UniqueIdArgs {
                    version: version_of::<UniqueIdArgs>(),
                    id: std::ptr::null_mut(),
                    myrank: -1,
                    nranks: -1,
                },
                content: [0; 96],
            },
        };
        // SAFETY: `attr` is a versioned nvshmemx_init_attr_t and `id` a unique ID; `attr` keeps
        // a pointer to `id`, and both outlive the init call below, which is the last to use
        // them.
        let rc = unsafe { (self.set_unique_id_args)(pe as c_int, pes as c_int, id, &mut attr) };
        if rc != 0 {
            return Err(Error::Process(format!(
                "nvshmemx_set_attr_uniqueid_args(PE {pe} of {pes}) failed ({rc})"
            )));
        }
        self.touched.set(true);
        // SAFETY: as above; the flag says the attributes carry a unique ID.
        let rc = unsafe { (self.hostlib_init_attr)(INIT_WITH_UNIQUEID, &mut attr) };
        if rc != 0 {
            return Err(Error::Process(format!(
                "NVSHMEM did not initialise PE {pe} of {pes} ({rc}); NVSHMEM_DEBUG=INFO tells why"
            )));
        }
        self.initialised = true;
        // SAFETY: NVSHMEM is initialised.
        let (me, n) = unsafe { ((self.my_pe)(), (self.n_pes)()) };
        if (me, n) != (pe as c_int, pes as c_int) {
            return Err(Error::Process(format!(
                "NVSHMEM made this process PE {me} of {n}, not PE {pe} of {pes}"
            )));
        }
        Ok(())
    }

    /// `bytes` of this PE's symmetric heap (collective: every PE asks for the same size, in the
    /// same order), as a device address of this PE's GPU; not initialised.
    pub fn malloc(&self, bytes: usize, what: &str) -> Result<u64> {
        assert!(
            self.initialised,
            "NVSHMEM is initialised before it allocates"
        );
        // SAFETY: NVSHMEM is initialised; the call is collective, made in the same order by
        // every PE (the layout is computed from the same header).
        let p = unsafe { (self.malloc)(bytes.max(1)) };
        if p.is_null() {
            return Err(Error::OutOfMemory {
                what: what.to_string(),
                where_: "NVSHMEM's symmetric heap (NVSHMEM_SYMMETRIC_SIZE)".into(),
                needed: bytes as u64,
                available: 0,
            });
        }
        Ok(p as u64)
    }

    /// Frees a symmetric allocation (collective).
    ///
    /// # Safety
    /// `addr` came from [`Nvshmem::malloc`] and no kernel of any PE uses it any more.
    pub unsafe fn free(&self, addr: u64) {
        // SAFETY: the caller's guarantee.
        unsafe { (self.free)(addr as *mut c_void) }
    }

    /// The address at which this process reaches PE `pe`'s copy of the symmetric allocation
    /// `addr`, or `None` where that PE is not reachable by loads and stores (another node).
    pub fn peer_ptr(&self, addr: u64, pe: u32) -> Option<u64> {
        assert!(self.initialised, "NVSHMEM is initialised before it maps");
        // SAFETY: NVSHMEM is initialised and `addr` is a symmetric address; the call only looks
        // the mapping up.
        let p = unsafe { (self.ptr)(addr as *const c_void, pe as c_int) };
        (!p.is_null()).then_some(p as u64)
    }

    /// Waits until every PE got here.
    /// Registers `module`, which calls NVSHMEM's device API, with the initialised library: it
    /// sets the module's copy of NVSHMEM's device state, without which the device calls fail.
    pub fn cumodule_init(&self, module: *mut c_void) -> Result<()> {
        assert!(
            self.initialised,
            "NVSHMEM is initialised before a module is registered"
        );
        let init = self.cumodule_init.ok_or_else(|| {
            Error::BackendUnavailable(format!(
                "{} has no nvshmemx_cumodule_init, which kernels over NVSHMEM's device API need: \
                 use NVSHMEM 3 (`pip install nvidia-nvshmem-cu13`)",
                self.path.display()
            ))
        })?;
        // SAFETY: a loaded module of the current context; NVSHMEM is initialised (asserted).
        let rc = unsafe { init(module) };
        if rc != 0 {
            return Err(Error::Process(format!(
                "nvshmemx_cumodule_init failed ({rc}): the kernel's module could not be \
                 registered with NVSHMEM"
            )));
        }
        Ok(())
    }

    pub fn barrier_all(&self) {
        assert!(self.initialised, "NVSHMEM is initialised before a barrier");
        // SAFETY: NVSHMEM is initialised (a collective every PE calls).
        unsafe { (self.barrier_all)() }
    }

    /// Leaves NVSHMEM (collective: every PE calls it, after freeing its symmetric
    /// allocations). A PE that fails does not call it, since the others may never come; it
    /// drops its `Nvshmem` instead, which leaves the library loaded and exits with the process.
    pub fn finalize(self) {
        if self.initialised {
            // SAFETY: initialised once and finalised once (this consumes self); the caller freed
            // its allocations after every PE's last use.
            unsafe { (self.finalize)() };
        }
        // `initialised` stays set: the library stays loaded (drop).
    }
}

impl Drop for Nvshmem {
    fn drop(&mut self) {
        if !self.touched.get() {
            // SAFETY: no call made a unique ID or an init: nothing of NVSHMEM runs, and the
            // entry points die with `self`.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.library) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_structs_have_nvshmem_3s_sizes() {
        // The static asserts of NVSHMEM 3's headers.
        assert_eq!(std::mem::size_of::<UniqueId>(), 128);
        assert_eq!(std::mem::size_of::<UniqueIdArgs>(), 24);
        assert_eq!(std::mem::size_of::<InitArgs>(), 128);
        assert_eq!(std::mem::size_of::<InitAttr>(), 144);
        assert_eq!(version_of::<InitAttr>(), 65536 + 144);
    }

    #[test]
    fn the_search_goes_to_the_named_file_home_the_loader_then_pip() {
        let c = candidates(
            Some(Path::new("/x/libnvshmem_host.so.3")),
            Some(Path::new("/opt/nv")),
            Some(PathBuf::from("/py/nvshmem")),
        );
        assert_eq!(
            c,
            [
                PathBuf::from("/x/libnvshmem_host.so.3"),
                PathBuf::from("/opt/nv/lib/libnvshmem_host.so.3"),
                PathBuf::from("libnvshmem_host.so.3"),
                PathBuf::from("/py/nvshmem/lib/libnvshmem_host.so.3"),
            ]
        );
        assert_eq!(candidates(None, None, None), [PathBuf::from(LIBRARY)]);
    }

    #[test]
    fn a_library_that_is_not_nvshmem_is_refused_with_the_missing_entry() {
        // libc loads, but has no NVSHMEM entry point.
        let e = Nvshmem::load_from(Path::new("libc.so.6")).unwrap_err();
        assert!(e.contains("lacks nvshmemx_get_uniqueid"), "{e}");
        let e = Nvshmem::load_from(Path::new("/nonexistent/libnvshmem_host.so.3")).unwrap_err();
        assert!(!e.is_empty());
    }
}
