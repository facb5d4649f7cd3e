//! The fixed-size task struct and the functor trait.

use bytemuck::Pod;
use mgws_core::TaskError;

use crate::data::DataDescriptor;
use crate::Ctx;

/// Bytes of the functor parameter area.
pub const PARAM_BYTES: usize = 24;
/// The strictest alignment a functor may have.
pub const PARAM_ALIGN: usize = 8;
/// Data descriptors stored in the task struct itself.
pub const DESCRIPTORS: usize = 2;

/// One task: 64 bytes, 16-byte aligned, so lanes can copy it in coalesced 8- or 16-byte words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct TaskStruct {
    /// The registry tag of the functor type; 0 is never valid.
    pub tag: u32,
    /// Reserved, 0.
    pub flags: u32,
    /// The functor's bytes.
    pub params: [u64; PARAM_BYTES / 8],
    /// Data the task reads or writes outside the struct.
    pub data: [DataDescriptor; DESCRIPTORS],
}

const _: () = assert!(core::mem::size_of::<TaskStruct>() == 64);

/// Implemented by a registry for each functor type it contains, giving that type's tag.
pub trait Tagged<F> {
    const TAG: u32;
}

/// What a task does. The functor value is stored in the task's parameter area, so it is plain
/// data: `bytemuck::Pod` (derive it with `#[derive(Clone, Copy, Pod, Zeroable)]` and
/// `#[repr(C)]`), valid for any bytes, which makes reading it back ([`TaskStruct::params_as`]) safe
/// and sound whatever the bytes of a task struct are.
pub trait TaskFunctor: Pod + 'static {
    /// Runs the task on every lane of the worker. `task` is the whole struct (for its data
    /// descriptors and tag); spawned subtasks go through `ctx`.
    fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError>;
}

impl TaskStruct {
    /// A task with tag `tag` whose parameter area holds `functor`.
    #[inline(always)]
    pub fn new<F: Pod>(tag: u32, functor: &F) -> TaskStruct {
        const {
            assert!(
                core::mem::size_of::<F>() <= PARAM_BYTES
                    && core::mem::align_of::<F>() <= PARAM_ALIGN
            )
        };
        let mut task = TaskStruct {
            tag,
            flags: 0,
            params: [0; PARAM_BYTES / 8],
            data: [DataDescriptor::default(); DESCRIPTORS],
        };
        let bytes = bytemuck::bytes_of(functor);
        bytemuck::cast_slice_mut::<u64, u8>(&mut task.params)[..bytes.len()].copy_from_slice(bytes);
        task
    }

    /// The same task with descriptor `index` set.
    pub fn with_data(mut self, index: usize, descriptor: DataDescriptor) -> TaskStruct {
        self.data[index] = descriptor;
        self
    }

    /// A task of the same tag and descriptors, with a new functor value (for a functor that
    /// spawns tasks of its own type).
    #[inline(always)]
    pub fn with_params<F: Pod>(&self, functor: &F) -> TaskStruct {
        let mut t = TaskStruct::new(self.tag, functor);
        t.data = self.data;
        t
    }

    /// The functor stored in the parameter area, read as `F`: a safe, sound read for any bytes
    /// (`F: Pod`). Only meaningful when `F` is the type the task was built with, which the
    /// registry's dispatch guarantees by tag.
    #[inline(always)]
    pub fn params_as<F: Pod>(&self) -> F {
        const {
            assert!(
                core::mem::size_of::<F>() <= PARAM_BYTES
                    && core::mem::align_of::<F>() <= PARAM_ALIGN
            )
        };
        bytemuck::pod_read_unaligned(
            &bytemuck::cast_slice::<u64, u8>(&self.params)[..core::mem::size_of::<F>()],
        )
    }
}

impl mgws_core::Tagged for TaskStruct {
    #[inline(always)]
    fn tag(&self) -> u32 {
        self.tag
    }
}
