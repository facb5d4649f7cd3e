//! Data descriptors: where a task's out-of-struct data lives, how large it is and how it is used.
//! Tasks read and write the described data through the typed, checked views of
//! [`crate::TaskContext`] (`read`, `write`, `accumulate`).

/// How a task uses the data a descriptor names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Access {
    /// No data: an unused descriptor slot.
    None = 0,
    /// The task only reads the data.
    Read = 1,
    /// The task reads and writes the data.
    ReadWrite = 2,
    /// The data is an array of further descriptors (for tasks that need more than fit the struct).
    Indirection = 3,
}

/// An offset pointer into one of the run's data areas, plus its size and access rights.
///
/// The same descriptor is valid on every device: each device resolves `area` to its own base
/// address (thesis 5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C)]
pub struct DataDescriptor {
    /// Byte offset from the start of the area.
    pub offset: u64,
    /// Size in bytes.
    pub size: u32,
    /// Index of the data area (`0..mgws_core::DATA_AREAS`).
    pub area: u8,
    /// An [`Access`] as `u8`.
    pub access: u8,
    _pad: u16,
}

impl DataDescriptor {
    /// A descriptor of `size` bytes at `offset` in `area`.
    pub const fn new(area: u8, offset: u64, size: u32, access: Access) -> DataDescriptor {
        DataDescriptor {
            offset,
            size,
            area,
            access: access as u8,
            _pad: 0,
        }
    }

    /// The access rights, or `None` for a corrupt value.
    pub fn access(&self) -> Option<Access> {
        Some(match self.access {
            0 => Access::None,
            1 => Access::Read,
            2 => Access::ReadWrite,
            3 => Access::Indirection,
            _ => return None,
        })
    }

    /// The address of the described data, given the base address of its area (unchecked: the
    /// built-in workloads' hot paths only; user code uses the context's checked views).
    #[doc(hidden)]
    pub fn resolve(&self, area_base: u64) -> *mut u8 {
        (area_base + self.offset) as *mut u8
    }
}

/// A typed handle to a result table: one slot of `T` per worker in data area `area`, which tasks
/// update with [`crate::Context::accumulate`] and the host reads as an `mgws::PerWorker<T>`.
/// A registry declares its tables (`#[registry(results(name: T, ...))]`) and gets one handle
/// constant per table, so tasks and the job name the same table through one value, and a task
/// can only accumulate the table's own type.
#[derive(Debug, PartialEq, Eq)]
pub struct ResultTable<T> {
    area: u8,
    _slot: core::marker::PhantomData<fn() -> T>,
}

// Derived impls would ask `T: Clone`; the handle is an index whatever `T` is.
impl<T> Clone for ResultTable<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for ResultTable<T> {}

impl<T> ResultTable<T> {
    /// The table in data area `area` (the registry macro assigns the areas from the top,
    /// `DATA_AREAS - 1` down, leaving the low ones to the job's own data).
    pub const fn in_area(area: u8) -> Self {
        assert!(
            (area as usize) < crate::DATA_AREAS,
            "a result table needs a data area below DATA_AREAS"
        );
        ResultTable {
            area,
            _slot: core::marker::PhantomData,
        }
    }

    /// The data area that holds the table.
    pub const fn area(self) -> u8 {
        self.area
    }
}
