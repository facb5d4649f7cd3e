//! Backend selection: where a job's workers run, as three independent choices — the device
//! ([`Device`]), the process layout ([`ProcessLayout`]) and the method ([`Method`]).

use mgws_tasks::Registry;

pub use crate::device::{Defaults, KernelOptions};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::report::RunReport;
use crate::scheduler::Scheduler;

/// Where and how to run: a device, a process layout and a method. Build one with
/// [`Backend::cpu`] or [`Backend::cuda`] and change an axis with [`Backend::method`],
/// [`Backend::processes`] or [`Backend::layout`]; [`Backend::default`] is the mgws method on CPU
/// threads in this process. Not every combination exists (the baselines run in one process, runs
/// across nodes run GPU PEs): [`Backend::run`] refuses those with [`Error::Config`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Backend {
    /// What the workers run on.
    pub device: Device,
    /// How many processes (and nodes) the workers are split over.
    pub layout: ProcessLayout,
    /// The scheduling algorithm: mgws or a baseline.
    pub method: Method,
}

/// What the workers run on.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Device {
    /// Host threads.
    #[default]
    Cpu,
    /// NVIDIA GPUs: one persistent kernel per GPU (or a GPU baseline kernel), with these
    /// settings (GPUs, placement, PTX, register cap, CPU workers beside them).
    #[cfg(feature = "cuda")]
    Cuda(crate::cuda::CudaBackend),
}

/// How many processes the workers run in.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum ProcessLayout {
    /// All workers in this process.
    #[default]
    OneProcess,
    /// `processes` processes on this machine, one PE each (see [`crate::processes`]): copies of
    /// the running program, which must serve their PE first thing in `main`
    /// ([`crate::processes::Pe`]). On the CPU they share one memory file; on CUDA each PE runs
    /// on one GPU (`cuda.devices[p % len]`, or GPU `p % visible` when `devices` is empty) and
    /// the PEs join through NVSHMEM. The mgws method only.
    #[cfg(feature = "processes")]
    Pes {
        /// PE processes, 1 to `mgws_core::MAX_DEVICES`; the workers are split over them.
        processes: u32,
    },
    /// GPU PEs over several nodes ([`crate::processes::nodes`]): `processes` counts every
    /// node's PEs, and this launcher starts its node's share. CUDA and the mgws method only.
    #[cfg(all(feature = "cuda", feature = "processes"))]
    Nodes {
        /// PE processes over all nodes, 1 to `mgws_core::MAX_DEVICES`.
        processes: u32,
        /// This launcher's node, the node count and node 0's address.
        nodes: crate::processes::Nodes,
    },
}

impl ProcessLayout {
    /// The PE processes of the run (`None`: this process alone).
    pub fn processes(&self) -> Option<u32> {
        match self {
            ProcessLayout::OneProcess => None,
            #[cfg(feature = "processes")]
            ProcessLayout::Pes { processes } => Some(*processes),
            #[cfg(all(feature = "cuda", feature = "processes"))]
            ProcessLayout::Nodes { processes, .. } => Some(*processes),
        }
    }
}

/// The scheduling algorithm the workers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Method {
    /// MGWS: the work-stealing loop (CPU) or persistent kernel `mgws_<kernel>_worker_<spec>`.
    #[default]
    Mgws,
    /// Baseline **static**: each worker runs its contiguous share of the initial tasks and
    /// everything they spawn, depth-first, without stealing (CPU: `mgws_core::LeanStatic`; CUDA:
    /// the kernel `mgws_<kernel>_static_<scope>`).
    Static,
    /// Baseline **levels**: level by level, each frontier split evenly over the workers, a
    /// barrier between levels (the level loop of [`crate::levels`]; CUDA: one launch of
    /// `mgws_<kernel>_level` per level, on one GPU).
    Levels {
        /// Tasks one frontier buffer holds; `None`: on the CPU four fifths of the available
        /// host memory for both buffers, on CUDA sized from free GPU memory.
        level_capacity: Option<u64>,
    },
}

impl Method {
    /// The levels method with frontier buffers sized from free memory.
    pub const LEVELS: Method = Method::Levels {
        level_capacity: None,
    };

    /// The method's name (`mgws`, `static`, `levels`).
    pub fn name(self) -> &'static str {
        match self {
            Method::Mgws => "mgws",
            Method::Static => "static",
            Method::Levels { .. } => "levels",
        }
    }
}

impl Backend {
    /// The mgws method on host threads in this process (the default).
    pub const fn cpu() -> Self {
        Backend {
            device: Device::Cpu,
            layout: ProcessLayout::OneProcess,
            method: Method::Mgws,
        }
    }

    /// The mgws method on the GPUs `cuda` names, in this process.
    #[cfg(feature = "cuda")]
    pub fn cuda(cuda: crate::cuda::CudaBackend) -> Self {
        Backend {
            device: Device::Cuda(cuda),
            layout: ProcessLayout::OneProcess,
            method: Method::Mgws,
        }
    }

    /// The same backend with method `method`.
    pub const fn method(mut self, method: Method) -> Self {
        self.method = method;
        self
    }

    /// The same backend over `processes` PE processes on this machine
    /// ([`ProcessLayout::Pes`]).
    #[cfg(feature = "processes")]
    pub fn processes(self, processes: u32) -> Self {
        self.layout(ProcessLayout::Pes { processes })
    }

    /// The same backend with process layout `layout`.
    pub fn layout(mut self, layout: ProcessLayout) -> Self {
        self.layout = layout;
        self
    }

    /// Refuses the combinations that do not exist, naming both choices and what to use instead.
    pub fn check(&self) -> Result<()> {
        if let (Some(processes), Method::Static | Method::Levels { .. }) =
            (self.layout.processes(), self.method)
        {
            return Err(Error::Config(format!(
                "method {} runs in one process, not over {processes} PE processes: PEs run the \
                 mgws method (ProcessLayout::OneProcess for the baseline, Method::Mgws for PEs)",
                self.method.name()
            )));
        }
        #[cfg(all(feature = "cuda", feature = "processes"))]
        if let (Device::Cpu, ProcessLayout::Nodes { .. }) = (&self.device, &self.layout) {
            return Err(Error::Config(
                "runs across nodes (ProcessLayout::Nodes, --nodes) run GPU PEs, not CPU PEs: CPU \
                 PEs share one memory file, which stops at the machine (Device::Cuda, --device \
                 cuda; or ProcessLayout::Pes for CPU PEs on one machine)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Whether a run on this backend lists a job's indexed initial tasks in host memory, 64
    /// bytes each ([`crate::InitialTasks::write_into`]): the CPU kernel per level does, as its
    /// first frontier. Every other backend's workers make them from the template, and the
    /// kernel per level on a GPU builds its frontier there. Size host memory by it.
    pub fn lists_indexed_tasks_on_host(&self) -> bool {
        matches!(
            (&self.device, self.method),
            (Device::Cpu, Method::Levels { .. })
        )
    }

    /// Runs `job` with the task registry `registry`: the tags of the job's tasks name functors of
    /// `R`. A GPU backend runs the kernel built for `R` and refuses one built for another
    /// registry (see [`crate::cuda::ptx::check_fingerprint`]).
    pub fn run<R: Registry>(
        &self,
        sched: &Scheduler,
        registry: &R,
        job: Job<'_>,
    ) -> Result<RunReport> {
        self.check()?;
        let result = match (&self.device, &self.layout) {
            (Device::Cpu, ProcessLayout::OneProcess) => match self.method {
                Method::Mgws => crate::cpu::run(sched, registry, job),
                Method::Static => crate::cpu::run_static(sched, registry, job),
                Method::Levels { level_capacity } => {
                    crate::cpu::run_levels(sched, registry, job, level_capacity)
                }
            },
            #[cfg(feature = "processes")]
            (Device::Cpu, ProcessLayout::Pes { processes }) => {
                crate::processes::run::<R>(sched, job, *processes, None, None)
            }
            #[cfg(feature = "cuda")]
            (Device::Cuda(cuda), ProcessLayout::OneProcess) => {
                cuda.run(self.method, sched, registry, job)
            }
            #[cfg(all(feature = "cuda", feature = "processes"))]
            (Device::Cuda(cuda), ProcessLayout::Pes { processes }) => {
                crate::processes::run::<R>(sched, job, *processes, Some(cuda), None)
            }
            #[cfg(all(feature = "cuda", feature = "processes"))]
            (Device::Cuda(cuda), ProcessLayout::Nodes { processes, nodes }) => {
                crate::processes::run::<R>(sched, job, *processes, Some(cuda), Some(nodes))
            }
            #[cfg(all(feature = "cuda", feature = "processes"))]
            (Device::Cpu, ProcessLayout::Nodes { .. }) => unreachable!("refused by check"),
        };
        result.map_err(Error::naming::<R>)
    }

    /// The settings this backend uses for those the caller leaves open (`None`), given the ones
    /// it sets. A GPU backend loads the entry of `R`'s kernel that `options` pick to ask the
    /// occupancy API how many workers fit (the module stays cached for the run that follows).
    #[cfg_attr(not(feature = "cuda"), allow(clippy::extra_unused_type_parameters))]
    pub(crate) fn defaults<R: Registry>(
        &self,
        lanes: Option<u32>,
        local_capacity: Option<u32>,
        workers: Option<u32>,
        options: KernelOptions,
    ) -> Result<Defaults> {
        self.check()?;
        match (&self.device, &self.layout) {
            (Device::Cpu, _) => Ok(crate::cpu::defaults(
                lanes,
                local_capacity,
                workers,
                options.workers_per_queue,
            )),
            #[cfg(feature = "cuda")]
            (Device::Cuda(cuda), ProcessLayout::OneProcess) => {
                cuda.defaults::<R>(self.method, lanes, local_capacity, workers, options)
            }
            #[cfg(all(feature = "cuda", feature = "processes"))]
            (
                Device::Cuda(cuda),
                ProcessLayout::Pes { processes } | ProcessLayout::Nodes { processes, .. },
            ) => crate::processes::gpu::defaults::<R>(
                cuda,
                *processes,
                (lanes, local_capacity, workers),
                options,
            ),
        }
    }

    /// Whether the workers run on GPUs (in this process or in PE processes).
    pub fn on_gpu(&self) -> bool {
        match self.device {
            #[cfg(feature = "cuda")]
            Device::Cuda(_) => true,
            Device::Cpu => false,
        }
    }

    /// The name runs on this backend report (`cpu`, `cpu-static`, `cpu-levels`,
    /// `cpu-processes`, `cuda`, `cuda-static`, `cuda-levels`, `cuda-processes`).
    pub fn name(&self) -> &'static str {
        match (&self.device, self.layout.processes(), self.method) {
            (Device::Cpu, None, Method::Mgws) => "cpu",
            (Device::Cpu, None, Method::Static) => "cpu-static",
            (Device::Cpu, None, Method::Levels { .. }) => "cpu-levels",
            (Device::Cpu, Some(_), _) => "cpu-processes",
            #[cfg(feature = "cuda")]
            (Device::Cuda(_), None, method) => method.cuda_name(),
            #[cfg(feature = "cuda")]
            (Device::Cuda(_), Some(_), _) => "cuda-processes",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mgws_tasks::MemsetTasks;

    fn memset_job_run(backend: &Backend) -> Result<RunReport> {
        let sched = Scheduler::builder().workers(2).build().unwrap();
        use mgws_tasks::workloads::memset::{output_descriptor, MemsetTask};
        let tasks =
            [MemsetTasks::task(&MemsetTask { index: 0 }).with_data(0, output_descriptor(0, 1))];
        let mut slot = [0u64; 1];
        let bytes = mgws_tasks::bytemuck::cast_slice_mut(&mut slot);
        let job = Job::new(&tasks).area(0, crate::AreaBytes::ReadWrite(bytes));
        backend.run(&sched, &MemsetTasks, job)
    }

    #[test]
    fn only_the_cpu_kernel_per_level_lists_indexed_tasks_on_the_host() {
        assert!(Backend::cpu()
            .method(Method::LEVELS)
            .lists_indexed_tasks_on_host());
        assert!(!Backend::cpu().lists_indexed_tasks_on_host());
        assert!(!Backend::cpu()
            .method(Method::Static)
            .lists_indexed_tasks_on_host());
        #[cfg(feature = "processes")]
        assert!(!Backend::cpu().processes(2).lists_indexed_tasks_on_host());
        #[cfg(feature = "cuda")]
        {
            use crate::cuda::{CudaBackend, TasksIn};
            let host = Backend::cuda(CudaBackend {
                tasks_in: TasksIn::Host,
                ..CudaBackend::new()
            });
            assert!(!host.lists_indexed_tasks_on_host());
            assert!(!host.method(Method::LEVELS).lists_indexed_tasks_on_host());
        }
    }

    #[test]
    fn the_axes_keep_the_reported_names() {
        assert_eq!(Backend::default(), Backend::cpu());
        assert_eq!(Backend::cpu().name(), "cpu");
        assert_eq!(Backend::cpu().method(Method::Static).name(), "cpu-static");
        assert_eq!(Backend::cpu().method(Method::LEVELS).name(), "cpu-levels");
        #[cfg(feature = "processes")]
        assert_eq!(Backend::cpu().processes(2).name(), "cpu-processes");
        #[cfg(feature = "cuda")]
        {
            let cuda = Backend::cuda(crate::cuda::CudaBackend::new());
            assert!(cuda.on_gpu() && !Backend::cpu().on_gpu());
            assert_eq!(cuda.name(), "cuda");
            assert_eq!(cuda.clone().method(Method::Static).name(), "cuda-static");
            assert_eq!(cuda.clone().method(Method::LEVELS).name(), "cuda-levels");
            #[cfg(feature = "processes")]
            assert_eq!(cuda.processes(2).name(), "cuda-processes");
        }
    }

    #[test]
    fn the_cpu_methods_run_in_one_process() {
        for method in [Method::Mgws, Method::Static, Method::LEVELS] {
            let report = memset_job_run(&Backend::cpu().method(method)).unwrap();
            assert_eq!(report.tasks_run, 1, "{method:?}");
        }
    }

    #[cfg(feature = "processes")]
    #[test]
    fn baselines_over_pe_processes_are_refused_naming_both_choices() {
        let backends = [
            Backend::cpu(),
            #[cfg(feature = "cuda")]
            Backend::cuda(crate::cuda::CudaBackend::new()),
        ];
        for backend in backends {
            for method in [Method::Static, Method::LEVELS] {
                let b = backend.clone().processes(2).method(method);
                let e = memset_job_run(&b).unwrap_err();
                let msg = e.to_string();
                assert!(matches!(e, Error::Config(_)), "{e:?}");
                assert!(
                    msg.contains(method.name()) && msg.contains("2 PE processes"),
                    "{msg}"
                );
                assert!(msg.contains("Method::Mgws"), "{msg}");
                assert!(b.check().is_err());
            }
            assert!(backend.processes(2).check().is_ok());
        }
    }

    #[cfg(all(feature = "cuda", feature = "processes"))]
    #[test]
    fn cpu_pes_across_nodes_are_refused() {
        let nodes = crate::processes::Nodes::new(2, 0, "127.0.0.1:1").unwrap();
        let layout = ProcessLayout::Nodes {
            processes: 2,
            nodes,
        };
        let e = memset_job_run(&Backend::cpu().layout(layout.clone())).unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e:?}");
        assert!(e.to_string().contains("--device cuda"), "{e}");
        let gpu = Backend::cuda(crate::cuda::CudaBackend::new()).layout(layout);
        assert!(gpu.check().is_ok());
        assert_eq!(gpu.layout.processes(), Some(2));
    }
}
