//! # A custom MGWS task and its kernel
//!
//! Everything a user writes to run their own task type on the GPU:
//!
//! 1. a [`TaskFunctor`]: [`CollatzRange`] writes the Collatz stopping time of every number of a
//!    range into an output array, splitting ranges longer than [`LEAF`] into two spawned halves;
//! 2. a registry naming the functors, which embeds the kernel the build script built
//!    (`#[mgws::registry(ptx = mgws::kernel_ptx!())] enum CustomTasks`);
//! 3. one line defining the kernel entries for that registry (`mgws::worker_kernel!`);
//! 4. `crate-type = ["cdylib", "rlib"]`, one `mgws` dependency, and a `build.rs` that builds this
//!    library to PTX with `mgws-builder`.
//!
//! The host program (`src/main.rs`) builds the initial task with
//! `CustomTasks::task(&CollatzRange { start: 0, len: n })` and an output descriptor of `n` `u64`s,
//! runs it on the CPU or on a GPU with the embedded kernel, and checks the array against
//! [`collatz_steps`].
#![cfg_attr(target_arch = "nvptx64", no_std)]

use mgws::{Ctx, Platform, TaskError, TaskFunctor, TaskStruct};

/// Ranges up to this many numbers are computed by one task; longer ones are split.
pub const LEAF: u64 = 256;
/// Error code of a task whose range lies outside its output descriptor.
pub const COLLATZ_OUT_OF_BOUNDS: u32 = 0x434f_0001;

/// Writes `collatz_steps(x + 1)` to slot `x` of the output array (descriptor 0, `u64`s) for every
/// `x` in `start..start + len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, mgws_tasks::Pod, mgws_tasks::Zeroable)]
#[bytemuck(crate = "mgws_tasks::bytemuck")]
#[repr(C)]
pub struct CollatzRange {
    pub start: u64,
    pub len: u64,
}

/// The number of Collatz steps (`n -> n/2` or `3n+1`) that take `n` to 1; `u64::MAX` if a value
/// would overflow on the way.
pub fn collatz_steps(mut n: u64) -> u64 {
    let mut steps = 0;
    while n > 1 {
        n = if n & 1 == 0 {
            n / 2
        } else {
            match n.checked_mul(3).and_then(|m| m.checked_add(1)) {
                Some(m) => m,
                None => return u64::MAX,
            }
        };
        steps += 1;
    }
    steps
}

impl TaskFunctor for CollatzRange {
    fn run<P: Platform>(
        &self,
        task: &TaskStruct,
        ctx: &mut Ctx<'_, '_, P>,
    ) -> Result<(), TaskError> {
        if self.len > LEAF {
            let half = self.len / 2;
            let upper = CollatzRange {
                start: self.start + half,
                len: self.len - half,
            };
            let lower = CollatzRange {
                start: self.start,
                len: half,
            };
            ctx.spawn(&task.with_params(&upper));
            ctx.spawn(&task.with_params(&lower));
            return Ok(());
        }
        let out = task.data[0];
        if (self.start + self.len).saturating_mul(8) > out.size as u64 {
            return Err(TaskError::Failed(COLLATZ_OUT_OF_BOUNDS));
        }
        let slots = out.resolve(ctx.area(out.area as usize)) as *mut u64;
        let mut i = ctx.lane_id() as u64;
        while i < self.len {
            let x = self.start + i;
            // SAFETY: x < start + len, inside the output descriptor (checked above); each slot
            // belongs to exactly one lane of one task.
            unsafe { slots.add(x as usize).write(collatz_steps(x + 1)) };
            i += ctx.lane_count() as u64;
        }
        Ok(())
    }
}

/// The task types of this example, and the kernel built for them (`CustomTasks::KERNEL_PTX`).
#[mgws::registry(ptx = mgws::kernel_ptx!())]
pub enum CustomTasks {
    Collatz(CollatzRange),
}

mgws::worker_kernel!(CustomTasks);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collatz_steps_match_known_values() {
        assert_eq!(collatz_steps(1), 0);
        assert_eq!(collatz_steps(6), 8);
        assert_eq!(collatz_steps(27), 111);
        assert_eq!(collatz_steps(97), 118);
    }

    #[test]
    fn registry_tags_the_functor() {
        let t = CustomTasks::task(&CollatzRange { start: 3, len: 9 });
        assert_eq!(t.tag, CustomTasks::COLLATZ);
        assert_eq!(
            t.params_as::<CollatzRange>(),
            CollatzRange { start: 3, len: 9 }
        );
        assert_eq!(CustomTasks::name_of(CustomTasks::COLLATZ), Some("Collatz"));
    }

    #[test]
    fn the_registry_embeds_its_kernel() {
        use mgws::Registry;
        let ptx = CustomTasks::KERNEL_PTX.unwrap();
        // Either the kernel or the builder's placeholder naming what is missing.
        if !ptx.starts_with("// mgws-builder: not built: ") {
            let line = format!(
                ".visible .global .align 8 .u64 mgws_registry_fingerprint = {};",
                CustomTasks::FINGERPRINT
            );
            assert!(ptx.contains(&line), "the PTX lacks `{line}`");
            assert!(ptx.contains(".entry mgws_worker"));
        }
    }
}
