//! The [`Registry`] trait: what `#[registry]` generates for an enum of task functor types.
//!
//! A registry may declare the kernel built for it (`Registry::KERNEL_PTX`):
//!
//! ```
//! #[mgws_tasks::registry(ptx = "// the PTX text, e.g. mgws::kernel_ptx!()")]
//! enum WithKernel {
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//! }
//! use mgws_tasks::Registry;
//! assert!(WithKernel::KERNEL_PTX.unwrap().starts_with("// the PTX"));
//! ```
//!
//! and the name of its kernel entries (`Registry::KERNEL`, by default the enum's name in
//! snake case):
//!
//! ```
//! #[mgws_tasks::registry(kernel = "fib")]
//! enum FibOnly {
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//! }
//! #[mgws_tasks::registry]
//! enum MyTasks {
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//! }
//! use mgws_tasks::Registry;
//! assert_eq!(FibOnly::KERNEL, "fib");
//! assert_eq!(MyTasks::KERNEL, "my_tasks");
//! ```
//!
//! and the register cap the CUDA backend compiles its kernels with when the run names none
//! (`Registry::MAX_REGISTERS`; without it the backend's default, 128 for 32-thread blocks):
//!
//! ```
//! #[mgws_tasks::registry(max_registers = 64)]
//! enum Light {
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//! }
//! use mgws_tasks::Registry;
//! assert_eq!(Light::MAX_REGISTERS, Some(64));
//! ```
//!
//! A variant may declare how many lanes each of its tasks runs on, `#[width(N)]` with `N` a power
//! of two from 1 to 32; without it a task has the whole worker. A worker runs up to
//! `lanes / N` such narrow tasks side by side, each seeing its own lanes through its context
//! (`lane_id`, `lane_count`, `barrier`, the collectives and `lane_range` are its group's):
//!
//! ```
//! use mgws_core::TaskExecutor;
//! #[mgws_tasks::registry]
//! enum Narrow {
//!     #[width(1)]
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//!     #[width(4)]
//!     Memset(mgws_tasks::workloads::memset::MemsetTask),
//!     Contains(mgws_tasks::workloads::contains::ContainsTask),
//! }
//! let fib = Narrow::task(&mgws_tasks::workloads::fib::FibTask { n: 3 });
//! assert_eq!(Narrow.width(&fib), 1);
//! assert!(<Narrow as TaskExecutor<mgws_tasks::TaskStruct>>::NARROW);
//! assert_eq!(<Narrow as TaskExecutor<mgws_tasks::TaskStruct>>::UNIFORM_WIDTH, None);
//! ```
//!
//! A width that is not a power of two up to 32 is a compile error:
//!
//! ```compile_fail
//! #[mgws_tasks::registry]
//! enum Odd {
//!     #[width(3)]
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//! }
//! ```
//!
//! and the local-queue capacity its GPU workers get when the run names none
//! (`Registry::LOCAL_CAPACITY`, a power of two from 2 to 65536):
//!
//! ```
//! #[mgws_tasks::registry(local_capacity = 128)]
//! enum Roomy {
//!     #[width(1)]
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//! }
//! use mgws_tasks::Registry;
//! assert_eq!(Roomy::LOCAL_CAPACITY, Some(128));
//! assert_eq!(Roomy::LEVELS_LOCAL_CAPACITY, None);
//! ```
//!
//! The baselines get the same, unless `levels_local_capacity = N` names the kernel per level's
//! own (`Registry::LEVELS_LOCAL_CAPACITY`) and `static_local_capacity = N` static assignment's
//! (`Registry::STATIC_LOCAL_CAPACITY`):
//!
//! ```
//! #[mgws_tasks::registry(local_capacity = 256, levels_local_capacity = 128,
//!     static_local_capacity = 64)]
//! enum Split {
//!     #[width(1)]
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//! }
//! use mgws_tasks::Registry;
//! assert_eq!(
//!     (Split::LOCAL_CAPACITY, Split::LEVELS_LOCAL_CAPACITY, Split::STATIC_LOCAL_CAPACITY),
//!     (Some(256), Some(128), Some(64))
//! );
//! ```
//!
//! `public_capacity = N` names the public queue's capacity its GPU workers get when the run
//! names none (`Registry::PUBLIC_CAPACITY`, a power of two from 2 to 262144):
//!
//! ```
//! #[mgws_tasks::registry(public_capacity = 512)]
//! enum Stealable {
//!     #[width(1)]
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//! }
//! use mgws_tasks::Registry;
//! assert_eq!((Stealable::PUBLIC_CAPACITY, Stealable::LOCAL_CAPACITY), (Some(512), None));
//! ```
//!
//! `publish_copy_batch = N` (1, 2, 4 or 8; 1 when not named) is how many words each lane of a
//! worker loads before it stores any when it copies tasks to publish them: into its public
//! queue from its overflow stack or its local queue, or a steal's tasks beyond its local
//! queue's half onto the overflow stack (`TaskExecutor::PUBLISH_COPY_BATCH`). More
//! words in flight shorten those copies and cost registers; FIB and N-Queens ran faster at 4,
//! UTS T1L slower (docs/results.md):
//!
//! ```
//! use mgws_core::TaskExecutor;
//! #[mgws_tasks::registry(publish_copy_batch = 4)]
//! enum Eager {
//!     #[width(1)]
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//! }
//! #[mgws_tasks::registry]
//! enum Plain {
//!     #[width(1)]
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//! }
//! assert_eq!(<Eager as TaskExecutor<mgws_tasks::TaskStruct>>::PUBLISH_COPY_BATCH, 4);
//! assert_eq!(<Plain as TaskExecutor<mgws_tasks::TaskStruct>>::PUBLISH_COPY_BATCH, 1);
//! ```
//!
//! `indexed_in_place` (a flag) is for registries whose jobs start from many indexed tasks
//! (`Job::indexed`) of one narrow width: a worker runs a claim of them straight from the
//! template, a batch at a time, instead of copying it through its local queue
//! (`TaskExecutor::INDEXED_IN_PLACE`; MEMSET's registry sets it). It costs registers in every
//! worker of the registry:
//!
//! ```
//! use mgws_core::TaskExecutor;
//! #[mgws_tasks::registry(indexed_in_place)]
//! enum Slots {
//!     #[width(1)]
//!     Memset(mgws_tasks::workloads::memset::MemsetTask),
//! }
//! assert!(<Slots as TaskExecutor<mgws_tasks::TaskStruct>>::INDEXED_IN_PLACE);
//! ```
//!
//! `plain_slots` (a flag) makes a GPU's narrow tasks read and write their slots of the local
//! queue in plain order (`TaskExecutor::ROTATED_SLOTS` false). The rotated order keeps lanes
//! whose slots lie 128 bytes apart off each other's banks of shared memory, as FIB's two
//! children per lane do, and costs about 50 register moves per slot in every warp; tasks that
//! spawn irregular counts per lane run faster without it (UTS's registry and N-Queens' set it;
//! docs/results.md):
//!
//! ```
//! use mgws_core::TaskExecutor;
//! #[mgws_tasks::registry(plain_slots)]
//! enum Irregular {
//!     #[width(1)]
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//! }
//! #[mgws_tasks::registry]
//! enum Rotated {
//!     #[width(1)]
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//! }
//! assert!(!<Irregular as TaskExecutor<mgws_tasks::TaskStruct>>::ROTATED_SLOTS);
//! assert!(<Rotated as TaskExecutor<mgws_tasks::TaskStruct>>::ROTATED_SLOTS);
//! ```
//!
//! Arguments other than `ptx = EXPR`, `cubin = EXPR`, `kernel = "name"`, `max_registers = N`,
//! `local_capacity = N`, `levels_local_capacity = N`, `static_local_capacity = N`,
//! `public_capacity = N`, `publish_copy_batch = N`, `indexed_in_place`, `plain_slots`,
//! `results(...)` and `crate = PATH` are compile errors, and so is a cap outside 16..=255:
//!
//! ```compile_fail
//! #[mgws_tasks::registry(entries = "x")]
//! enum Unknown {
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//! }
//! ```
//!
//! ```compile_fail
//! #[mgws_tasks::registry(max_registers = 8)]
//! enum TooFew {
//!     Fib(mgws_tasks::workloads::fib::FibTask),
//! }
//! ```

use mgws_core::TaskExecutor;

use crate::task::TaskStruct;

/// A task registry: the functor types that a run can execute, each under its tag.
///
/// Implemented by `#[registry]`; the hosts take a registry explicitly for every run. A GPU kernel
/// module holds entries for one or more registries, each set under the registry's
/// [`Registry::KERNEL`] name (`worker_kernel!(name => Registry)`). [`Registry::FINGERPRINT`] ties
/// the two together: the module carries the fingerprint of each registry it was built for
/// (`mgws_<KERNEL>_fingerprint`), and the CUDA backend refuses a PTX whose fingerprint differs
/// from the registry it is asked to run, so the tags of a job never silently name other functors.
pub trait Registry: TaskExecutor<TaskStruct> + Copy + Default + Send + Sync + 'static {
    /// The registry's type name, for messages.
    const NAME: &'static str;
    /// The name of its kernel entries (`mgws_<KERNEL>_worker_...`): `#[registry(kernel = "...")]`,
    /// by default the type name in snake case.
    const KERNEL: &'static str;
    /// A 64-bit digest of the registry: its name, every tag with its variant name and functor
    /// type (as written), and each functor's size and alignment.
    const FINGERPRINT: u64;
    /// Every tag with its variant name, in tag order (tags start at 1).
    const TAGS: &'static [(u32, &'static str)];
    /// The PTX of the kernel built for this registry, where the registry declares one (the host
    /// build of a crate whose build script compiles its kernel embeds it); `None` otherwise, and
    /// the CUDA backend then loads the PTX file it is given.
    const KERNEL_PTX: Option<&'static str> = None;
    /// [`Registry::KERNEL_PTX`] assembled ahead of time by ptxas for one GPU architecture
    /// (`#[registry(cubin = ...)]`); the CUDA backend loads it instead of JIT-compiling the PTX
    /// where the GPU and the run's register cap allow. `None`, or empty when the build found no
    /// ptxas: the PTX is compiled.
    const KERNEL_CUBIN: Option<&'static [u8]> = None;
    /// The register cap per thread the CUDA backend JIT-compiles this registry's kernels with
    /// when the run names none (`#[registry(max_registers = N)]`; `None`: the backend's
    /// default). Fewer registers let more workers share an SM; a registry whose tasks are light
    /// gains more from those than it loses to spills (MEMSET: 64, docs/results.md). Blocks of
    /// more threads still get the lower cap that lets one of them fit.
    const MAX_REGISTERS: Option<u32> = None;
    /// The local queue's capacity in tasks the CUDA backend gives this registry's workers when
    /// the run names none (`#[registry(local_capacity = N)]`; `None`: the backend's default). A
    /// worker that runs narrow tasks side by side takes a batch of them at once and holds all
    /// their spawns: its queue needs more room than one that runs a task at a time.
    const LOCAL_CAPACITY: Option<u32> = None;
    /// The local queue's capacity for this registry's kernel per level (a baseline) when the run
    /// names none (`#[registry(levels_local_capacity = N)]`; `None`: [`Registry::LOCAL_CAPACITY`]).
    /// That kernel holds one batch and its spawns and releases nothing: it may need less room
    /// than the mgws worker, and then fits more workers per SM.
    const LEVELS_LOCAL_CAPACITY: Option<u32> = None;
    /// The local queue's capacity for this registry's static-assignment kernel (a baseline)
    /// when the run names none (`#[registry(static_local_capacity = N)]`; `None`:
    /// [`Registry::LOCAL_CAPACITY`]). Where mgws's workers gain from a larger queue, the
    /// baseline keeps its own, and with it the workers per SM it was measured at.
    const STATIC_LOCAL_CAPACITY: Option<u32> = None;
    /// The public queue's capacity in tasks the CUDA backend gives this registry's workers when
    /// the run names none (`#[registry(public_capacity = N)]`; `None`: the scheduler's default,
    /// 256). Only the mgws kernel has public queues. A tree whose workers steal often from
    /// small surpluses may run faster with more room (UTS T2L: docs/results.md).
    const PUBLIC_CAPACITY: Option<u32> = None;

    /// The variant name of `tag`, if this registry knows it.
    fn name_of(tag: u32) -> Option<&'static str> {
        Self::TAGS
            .iter()
            .find(|(t, _)| *t == tag)
            .map(|(_, name)| *name)
    }
}

/// FNV-1a, 64 bits: the digest `#[registry]` computes [`Registry::FINGERPRINT`] with (the size and
/// alignment of each functor is mixed in with [`fingerprint_mix`] at compile time).
pub const fn fingerprint_bytes(mut hash: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash
}

/// What every kernel shares with the host besides its registry's types: bumped whenever that
/// changes without changing the env's size (the env's fields, `TaskStruct`, a kernel entry's
/// parameters), so that a kernel built by another mgws is refused by its fingerprint
/// ([`Registry::FINGERPRINT`]) rather than misreading its env. 2: `Env::initial_counted_word`.
pub const KERNEL_ABI: u64 = 2;

/// Where every registry's digest starts: the FNV-1a offset basis with [`KERNEL_ABI`] and the
/// size of the env mixed in.
pub const FINGERPRINT_BASIS: u64 = fingerprint_mix(
    fingerprint_mix(0xcbf2_9ce4_8422_2325, KERNEL_ABI),
    core::mem::size_of::<mgws_core::Env<u64, TaskStruct>>() as u64,
);

/// Mixes `value` (a functor's size or alignment) into `hash`, byte by byte.
pub const fn fingerprint_mix(hash: u64, value: u64) -> u64 {
    fingerprint_bytes(hash, &value.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::workloads::fib::FibTask;
    use crate::workloads::memset::MemsetTask;

    #[crate::registry]
    enum MemsetThenFib {
        Memset(MemsetTask),
        Fib(FibTask),
    }

    #[crate::registry]
    enum FibThenMemset {
        Fib(FibTask),
        Memset(MemsetTask),
    }

    /// The enum's own derives and `repr` (below the attribute, so the macro sees them) are not
    /// copied onto the generated struct.
    #[crate::registry]
    #[derive(Debug, Clone)]
    #[repr(u8)]
    enum OnlyMemset {
        Memset(MemsetTask),
    }

    #[crate::registry(ptx = "// a stand-in kernel\n")]
    enum WithKernel {
        Memset(MemsetTask),
    }

    #[crate::registry(crate = crate, ptx = concat!("// ", "joined"))]
    enum WithKernelAndPath {
        Fib(FibTask),
    }

    #[crate::registry(ptx = "// a stand-in kernel\n", cubin = b"\x7fELF stand-in")]
    enum WithCubin {
        Memset(MemsetTask),
    }

    #[test]
    fn a_registry_declares_its_kernel_with_the_ptx_argument() {
        assert_eq!(
            <WithKernel as Registry>::KERNEL_PTX,
            Some("// a stand-in kernel\n")
        );
        assert_eq!(
            <WithKernelAndPath as Registry>::KERNEL_PTX,
            Some("// joined")
        );
        assert_eq!(<OnlyMemset as Registry>::KERNEL_PTX, None);
        assert_eq!(
            <WithCubin as Registry>::KERNEL_CUBIN,
            Some(&b"\x7fELF stand-in"[..])
        );
        assert_eq!(<WithKernel as Registry>::KERNEL_CUBIN, None);
        // The kernel text is not part of the fingerprint: it is built from the registry.
        assert_ne!(WithKernel::FINGERPRINT, OnlyMemset::FINGERPRINT); // other names
    }

    #[crate::registry]
    enum NarrowFibThenMemset {
        #[width(1)]
        Fib(FibTask),
        Memset(MemsetTask),
    }

    #[crate::registry]
    enum NarrowFib {
        #[width(2)]
        Fib(FibTask),
    }

    #[test]
    fn a_registry_reports_the_widths_its_variants_declare() {
        use mgws_core::TaskExecutor;
        let fib = NarrowFibThenMemset::task(&FibTask { n: 5 });
        let memset = NarrowFibThenMemset::task(&MemsetTask { index: 0 });
        assert_eq!(NarrowFibThenMemset.width(&fib), 1);
        assert_eq!(NarrowFibThenMemset.width(&memset), 0);
        const { assert!(<NarrowFibThenMemset as TaskExecutor<TaskStruct>>::NARROW) };
        assert_eq!(
            <NarrowFibThenMemset as TaskExecutor<TaskStruct>>::UNIFORM_WIDTH,
            None
        );
        assert_eq!(NarrowFib.width(&NarrowFib::task(&FibTask { n: 5 })), 2);
        assert_eq!(
            <NarrowFib as TaskExecutor<TaskStruct>>::UNIFORM_WIDTH,
            Some(2)
        );
        const { assert!(!<FibThenMemset as TaskExecutor<TaskStruct>>::NARROW) };
        assert_eq!(
            <FibThenMemset as TaskExecutor<TaskStruct>>::UNIFORM_WIDTH,
            Some(0)
        );
    }

    #[test]
    fn registries_with_other_tags_or_names_have_other_fingerprints() {
        let prints = [
            MemsetThenFib::FINGERPRINT,
            FibThenMemset::FINGERPRINT,
            OnlyMemset::FINGERPRINT,
            crate::MemsetTasks::FINGERPRINT,
        ];
        for (i, a) in prints.iter().enumerate() {
            for b in &prints[i + 1..] {
                assert_ne!(a, b, "{prints:x?}");
            }
        }
        assert_eq!(<MemsetThenFib as Registry>::name_of(2), Some("Fib"));
        assert_eq!(<FibThenMemset as Registry>::name_of(2), Some("Memset"));
        assert_eq!(<OnlyMemset as Registry>::name_of(2), None);
        assert_eq!(OnlyMemset::NAME, "OnlyMemset");
    }

    #[test]
    fn fnv1a_matches_its_reference_values() {
        const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        assert_eq!(fingerprint_bytes(OFFSET, b""), OFFSET);
        assert_eq!(fingerprint_bytes(OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fingerprint_bytes(OFFSET, b"foobar"), 0x8594_4171_f739_67e8);
        // Every digest starts from the kernel ABI and the env's size.
        let env = core::mem::size_of::<mgws_core::Env<u64, TaskStruct>>() as u64;
        assert_eq!(
            FINGERPRINT_BASIS,
            fingerprint_mix(fingerprint_mix(OFFSET, KERNEL_ABI), env)
        );
        assert_ne!(
            FINGERPRINT_BASIS,
            fingerprint_mix(fingerprint_mix(OFFSET, KERNEL_ABI - 1), env)
        );
    }
}
