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

/// The compile-time check that `#[task]` and `#[registry]` make of a functor type: a type of
/// `SIZE` bytes aligned to `ALIGN` must fit the parameter area. A failed check names the type's
/// size and alignment in the type's own parameters, `FitsParams::<SIZE, ALIGN>`.
#[doc(hidden)]
pub struct FitsParams<const SIZE: usize, const ALIGN: usize>;

impl<const SIZE: usize, const ALIGN: usize> FitsParams<SIZE, ALIGN> {
    /// Evaluated by each check; fails to compile where the type does not fit.
    pub const OK: () = assert!(
        SIZE <= PARAM_BYTES && ALIGN <= PARAM_ALIGN,
        "a task type may have at most 24 bytes (mgws::PARAM_BYTES), aligned to at most 8 \
         (mgws::PARAM_ALIGN); this one's size and alignment in bytes are the numbers in \
         `FitsParams::<size, alignment>` in the note below. Move larger data into a data area \
         and give the task its descriptor"
    );
}

/// Implemented by a registry for each functor type it contains, giving that type's tag.
pub trait Tagged<F> {
    const TAG: u32;
}

/// What a task does. The functor value is stored in the task's parameter area, so it is plain
/// data: `bytemuck::Pod` (`#[task]` on the struct derives it, lays it out `#[repr(C)]` and checks
/// that it fits), valid for any bytes, which makes reading it back ([`TaskStruct::params_as`])
/// safe and sound whatever the bytes of a task struct are.
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

    /// The 8-byte word of a task that [`TaskStruct::indexed`] counts up: `params[0]`'s (a
    /// worker makes task `k` of an indexed set from the template by adding `k` to it).
    pub const INDEXED_WORD: u64 = (core::mem::offset_of!(TaskStruct, params) / 8) as u64;

    /// Task `k` of an indexed set of initial tasks whose template is `self`: the same task with
    /// `k` added (wrapping) to its first parameter word, `params[0]`, which is the first field of
    /// a `#[task]` struct that starts with a `u64` (MEMSET's slot index, a range's start). The
    /// host and the level baseline's fill kernel build indexed tasks with this one function;
    /// workers make them word by word ([`TaskStruct::INDEXED_WORD`]).
    #[inline(always)]
    pub fn indexed(&self, k: u64) -> TaskStruct {
        let mut t = *self;
        t.params[0] = t.params[0].wrapping_add(k);
        t
    }

    /// The parameter area of a task whose functor is `functor`.
    #[inline(always)]
    pub fn params_of<F: Pod>(functor: &F) -> [u64; PARAM_BYTES / 8] {
        TaskStruct::new(0, functor).params
    }

    /// Writes the fields [`TaskStruct::with_params`] keeps (the tag and the descriptors; the
    /// reserved flags as 0) to `slot`: the first of the two parts [`Ctx::spawn_each_like`]
    /// writes. The descriptors go as whole 8-byte words: copied field by field, their one- and
    /// two-byte fields went through local memory on the GPU.
    ///
    /// # Safety
    /// `slot` is valid for writes and aligned.
    #[inline(always)]
    pub unsafe fn write_head(&self, slot: *mut TaskStruct) {
        let to = slot as *mut u64;
        let data = &self.data as *const [DataDescriptor; DESCRIPTORS] as *const u64;
        // SAFETY: the caller's guarantee for `slot`; the struct is 16-byte aligned and
        // `repr(C)`, words 4..8 hold the descriptors, and they have no padding bytes
        // (`DataDescriptor` names its pad), so reading them as words is sound.
        unsafe {
            (&raw mut (*slot).tag).write(self.tag);
            (&raw mut (*slot).flags).write(0);
            for word in 0..DESCRIPTORS * 2 {
                to.add(4 + word).write(data.add(word).read());
            }
        }
    }

    /// Writes the parameter area of the task at `slot`: the second part.
    ///
    /// # Safety
    /// `slot` is valid for writes and aligned.
    #[inline(always)]
    pub unsafe fn write_params(slot: *mut TaskStruct, params: [u64; PARAM_BYTES / 8]) {
        // SAFETY: the caller's guarantee.
        unsafe { (&raw mut (*slot).params).write(params) };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Access;

    /// A worker's word-by-word indexed task (the template with `k` added to word
    /// `INDEXED_WORD`) is the task `indexed` builds.
    #[test]
    fn the_indexed_word_is_the_one_indexed_counts_up() {
        let template = TaskStruct::new(7, &[u64::MAX - 1, 2, 3])
            .with_data(0, DataDescriptor::new(3, 40, 96, Access::Read));
        // SAFETY: a task is 64 bytes of integers without padding.
        let as_words = |t: TaskStruct| unsafe { core::mem::transmute::<TaskStruct, [u64; 8]>(t) };
        let words = as_words(template);
        for k in [0u64, 1, 5, u64::MAX] {
            let mut made = words;
            let w = TaskStruct::INDEXED_WORD as usize;
            made[w] = made[w].wrapping_add(k);
            assert_eq!(as_words(template.indexed(k)), made, "k = {k}");
        }
    }

    /// The two parts `Ctx::spawn_each_like` writes make the task `with_params` builds, whatever
    /// the slot held before.
    #[test]
    fn head_and_params_written_apart_make_the_task_with_params_builds() {
        let like = TaskStruct::new(7, &[1u64, 2, 3])
            .with_data(0, DataDescriptor::new(3, 40, 96, Access::Read))
            .with_data(1, DataDescriptor::new(5, 8, 16, Access::ReadWrite));
        let functor = [0xdead_beef_u32, 9, 8, 7, 6, 5];
        let mut slot = TaskStruct::new(99, &[u64::MAX; 3]);
        slot.flags = 0x5a5a_5a5a;
        slot.data = [DataDescriptor::new(1, 1, 1, Access::ReadWrite); DESCRIPTORS];
        // SAFETY: `slot` is a live, aligned task.
        unsafe {
            like.write_head(&mut slot);
            TaskStruct::write_params(&mut slot, TaskStruct::params_of(&functor));
        }
        assert_eq!(slot, like.with_params(&functor));
    }
}
