//! # A custom MGWS task and its kernel
//!
//! Everything a user writes to run their own task type on the GPU:
//!
//! 1. a [`TaskFunctor`]: [`CollatzRange`] writes the Collatz stopping time of every number of a
//!    range into an output array, splitting ranges longer than [`LEAF`] into two spawned halves;
//! 2. a registry naming the functors, which embeds the kernel the build script built
//!    and its cubin where the build found ptxas (`#[mgws::registry(ptx = mgws::kernel_ptx!(),
//!    cubin = mgws::kernel_cubin!(), kernel = "collatz")] enum CustomTasks`);
//! 3. one line defining the kernel entries for that registry (`mgws::worker_kernel!`);
//! 4. `crate-type = ["cdylib", "rlib"]`, one `mgws` dependency, and a `build.rs` that builds this
//!    library to PTX with `mgws-builder`.
//!
//! The host program (`src/main.rs`) builds the initial task with
//! `CustomTasks::task(&CollatzRange { start: 0, len: n })` and an output descriptor of `n` `u64`s,
//! runs it on the CPU or on a GPU with the embedded kernel, and checks the array against
//! [`collatz_steps`].
#![cfg_attr(target_arch = "nvptx64", no_std)]

use mgws::{Ctx, TaskError, TaskFunctor, TaskStruct};

/// Ranges up to this many numbers are computed by one task; longer ones are split.
pub const LEAF: u64 = 256;

/// Writes `collatz_steps(x + 1)` to slot `x` of the output array (descriptor 0, `u64`s) for every
/// `x` in `start..start + len`.
#[mgws::task]
#[derive(Debug, PartialEq, Eq)]
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
    fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
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
        // A checked view of the output: the descriptor must be read-write and inside its area.
        let out = ctx.write::<u64>(&task.data[0])?;
        // Each lane computes its own numbers of the range (all of them with one lane).
        for i in ctx.lane_range(self.len) {
            let x = self.start + i;
            out.set(x as usize, collatz_steps(x + 1))?;
        }
        Ok(())
    }
}

/// The task types of this example, and the kernel built for them (`CustomTasks::KERNEL_PTX`).
/// A range runs on 8 lanes (`#[width(8)]`): a 32-lane GPU worker runs four ranges side by side,
/// each splitting its numbers over its own 8 lanes (`lane_range`); a worker of 8 lanes or fewer
/// runs one at a time on all of them.
#[mgws::registry(ptx = mgws::kernel_ptx!(), cubin = mgws::kernel_cubin!(), kernel = "collatz")]
pub enum CustomTasks {
    #[width(8)]
    Collatz(CollatzRange),
}

mgws::worker_kernel!(collatz => CustomTasks);

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

    /// The functor is lane-safe: the same output with 1, 2 and 4 lanes per worker.
    #[test]
    fn collatz_is_exact_with_several_lanes() {
        use mgws::{Access, Backend, DataDescriptor, Job, Scheduler};
        let n = 20_000u64;
        for lanes in [1, 2, 4] {
            let sched = Scheduler::builder()
                .workers(2)
                .lanes(lanes)
                .build()
                .unwrap();
            let out = DataDescriptor::new(0, 0, (n * 8) as u32, Access::ReadWrite);
            let tasks = [CustomTasks::task(&CollatzRange { start: 0, len: n }).with_data(0, out)];
            let mut slots = vec![0u64; n as usize];
            let job = Job::new(&tasks).output(0, &mut slots);
            let report = Backend::cpu().run(&sched, &CustomTasks, job).unwrap();
            assert_eq!(report.lanes, lanes);
            for (x, &steps) in slots.iter().enumerate() {
                assert_eq!(
                    steps,
                    collatz_steps(x as u64 + 1),
                    "slot {x} with {lanes} lanes"
                );
            }
        }
    }

    /// A descriptor past the end of its area fails the run with the task's tag, no write.
    #[test]
    fn an_out_of_bounds_output_is_an_error_naming_the_task() {
        use mgws::{Access, Backend, DataDescriptor, Job, Scheduler};
        let sched = Scheduler::builder().workers(1).build().unwrap();
        // The descriptor claims 64 slots of an area of 8: Job::validate refuses it up front.
        let out = DataDescriptor::new(0, 0, 64 * 8, Access::ReadWrite);
        let tasks = [CustomTasks::task(&CollatzRange { start: 0, len: 64 }).with_data(0, out)];
        let mut slots = vec![0u64; 8];
        let job = Job::new(&tasks).output(0, &mut slots);
        let err = Backend::cpu().run(&sched, &CustomTasks, job).unwrap_err();
        assert!(err.to_string().contains("exceeds data area 0"), "{err}");
        // Inside the area but past the task's own descriptor: the checked view refuses it.
        let out = DataDescriptor::new(0, 0, 8 * 8, Access::ReadWrite);
        let tasks = [CustomTasks::task(&CollatzRange { start: 0, len: 64 }).with_data(0, out)];
        let mut slots = vec![0u64; 64];
        let job = Job::new(&tasks).output(0, &mut slots);
        let err = Backend::cpu().run(&sched, &CustomTasks, job).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("tag {}", CustomTasks::COLLATZ)),
            "{err}"
        );
        assert!(
            slots[8..].iter().all(|&s| s == 0),
            "nothing written past the descriptor"
        );
    }

    #[test]
    fn the_registry_embeds_its_kernel() {
        use mgws::Registry;
        let ptx = CustomTasks::KERNEL_PTX.unwrap();
        // Either the kernel or the builder's placeholder naming what is missing.
        if !ptx.starts_with("// mgws-builder: not built: ") {
            let line = format!(
                ".visible .global .align 8 .u64 mgws_{}_fingerprint = {};",
                CustomTasks::KERNEL,
                CustomTasks::FINGERPRINT
            );
            assert!(ptx.contains(&line), "the PTX lacks `{line}`");
            assert!(ptx.contains(".entry mgws_collatz_worker_counter_damping_single_device("));
            assert!(ptx.contains(".entry mgws_collatz_static_device("));
        }
    }
}
