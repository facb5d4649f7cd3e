//! A job: the initial tasks and the data areas their descriptors point into.

use mgws_core::DATA_AREAS;
use mgws_tasks::TaskStruct;

use crate::area_layout::AreaLayout;
use crate::error::{Error, Result};
use crate::initial::InitialTasks;

/// The bytes of one data area.
pub enum AreaBytes<'a> {
    /// Read by tasks; a GPU backend copies it to the device once.
    Read(&'a [u8]),
    /// Read and written by tasks; a GPU backend copies it back after the run.
    ReadWrite(&'a mut [u8]),
}

impl AreaBytes<'_> {
    /// Bytes in the area.
    pub fn len(&self) -> usize {
        match self {
            AreaBytes::Read(b) => b.len(),
            AreaBytes::ReadWrite(b) => b.len(),
        }
    }
    /// Whether the area has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The host address of the bytes.
    pub fn host_ptr(&mut self) -> *mut u8 {
        match self {
            AreaBytes::Read(b) => b.as_ptr() as *mut u8,
            AreaBytes::ReadWrite(b) => b.as_mut_ptr(),
        }
    }
}

/// A data area's bytes with the layout its owner asks for, what [`Job::area`] takes: plain
/// [`AreaBytes`] ask for none (the default), a [`crate::PerWorker`] table for its rows.
pub struct LaidOut<'a> {
    /// The area's bytes.
    pub bytes: AreaBytes<'a>,
    /// The layout asked for, or `None` for the default.
    pub layout: Option<AreaLayout>,
}

impl<'a> From<AreaBytes<'a>> for LaidOut<'a> {
    fn from(bytes: AreaBytes<'a>) -> Self {
        LaidOut {
            bytes,
            layout: None,
        }
    }
}

/// What a backend runs: initial tasks plus the data areas `0..DATA_AREAS` they refer to.
pub struct Job<'a> {
    /// The initial tasks.
    pub initial: InitialTasks<'a>,
    /// The data areas, by index.
    pub areas: Vec<(u8, AreaBytes<'a>)>,
    /// The layouts chosen for read-write areas ([`Job::layout`]), by area index; an area not
    /// listed has the default, [`AreaLayout::Partitioned`].
    pub layouts: Vec<(u8, AreaLayout)>,
}

impl<'a> Job<'a> {
    /// A job of these initial tasks and no data areas yet.
    pub fn new(tasks: &'a [TaskStruct]) -> Self {
        Job {
            initial: InitialTasks::Listed(tasks),
            areas: Vec::new(),
            layouts: Vec::new(),
        }
    }

    /// A job of `count` initial tasks, task `k` being `template` with `k` added to its first
    /// parameter word ([`TaskStruct::indexed`]; for a `#[task]` struct that starts with a `u64`,
    /// that field counts up), and no data areas yet. The workers make each task from the
    /// template as they claim it, so no memory holds the set (only the kernel per level lists
    /// it, as its first frontier).
    ///
    /// ```
    /// use mgws::{Backend, Ctx, Job, PerWorker, Scheduler, TaskFunctor, TaskResult, TaskStruct};
    ///
    /// /// Adds its index to the worker's sum.
    /// #[mgws::task]
    /// struct Add {
    ///     index: u64,
    /// }
    ///
    /// impl TaskFunctor for Add {
    ///     fn run(&self, _: &TaskStruct, ctx: &mut impl Ctx) -> TaskResult {
    ///         ctx.accumulate(Sums::SUM, |sum| *sum += self.index)?;
    ///         Ok(())
    ///     }
    /// }
    ///
    /// #[mgws::registry(results(sum: u64))]
    /// enum Sums {
    ///     Add(Add),
    /// }
    ///
    /// let backend = Backend::cpu();
    /// let sched = Scheduler::builder().workers(2).build_for::<Sums>(&backend)?;
    /// let mut sums = PerWorker::of(Sums::SUM, &sched);
    /// // Tasks `Add { index: 10 }` to `Add { index: 1009 }`.
    /// let job = Job::indexed(Sums::task(&Add { index: 10 }), 1000).results(&mut sums);
    /// let report = backend.run(&sched, &Sums, job)?;
    /// assert_eq!(sums.sum(), (10..1010).sum::<u64>());
    /// assert_eq!(report.tasks_run, 1000);
    /// # Ok::<(), mgws::Error>(())
    /// ```
    pub fn indexed(template: TaskStruct, count: u64) -> Self {
        Job {
            initial: InitialTasks::Indexed { template, count },
            areas: Vec::new(),
            layouts: Vec::new(),
        }
    }

    /// Lays read-write area `index` out over a run's GPUs as `layout` (see [`AreaLayout`]; the
    /// default is [`AreaLayout::Partitioned`]). Only multi-GPU runs look at it.
    pub fn layout(mut self, index: u8, layout: AreaLayout) -> Self {
        self.layouts.push((index, layout));
        self
    }

    /// The layout of area `index`: the one chosen, else [`AreaLayout::Partitioned`].
    pub fn layout_of(&self, index: u8) -> AreaLayout {
        self.chosen_layout(index).unwrap_or(AreaLayout::Partitioned)
    }

    /// The layout chosen for area `index`, if any.
    pub fn chosen_layout(&self, index: u8) -> Option<AreaLayout> {
        self.layouts
            .iter()
            .rev()
            .find(|(i, _)| *i == index)
            .map(|&(_, l)| l)
    }

    /// Adds data area `index`: its bytes, and for a table that knows its layout (a result table,
    /// which [`Job::results`] attaches) that layout.
    pub fn area(mut self, index: u8, area: impl Into<LaidOut<'a>>) -> Self {
        let area = area.into();
        self.areas.push((index, area.bytes));
        if let Some(layout) = area.layout {
            self.layouts.push((index, layout));
        }
        self
    }

    /// Attaches result table `table`: tasks update it through its handle
    /// (`ctx.accumulate(handle, ..)`), and after the run it holds every worker's slot. It takes
    /// the data area its registry assigned to it (the last ones), which the job's own areas must
    /// leave free.
    pub fn results<T: bytemuck::Pod>(self, table: &'a mut crate::PerWorker<T>) -> Self {
        let index = table.handle().area();
        self.area(index, table.area())
    }

    /// Adds data area `index`, which tasks read as `T`s (`ctx.read::<T>`).
    pub fn input<T: bytemuck::Pod>(self, index: u8, values: &'a [T]) -> Self {
        self.area(index, AreaBytes::Read(bytemuck::cast_slice(values)))
    }

    /// Adds data area `index`, which tasks read and write as `T`s (`ctx.write::<T>`); a GPU
    /// backend copies it back after the run.
    pub fn output<T: bytemuck::Pod>(self, index: u8, values: &'a mut [T]) -> Self {
        self.area(
            index,
            AreaBytes::ReadWrite(bytemuck::cast_slice_mut(values)),
        )
    }

    /// The host address of every data area, indexed by area (0 where there is none): what a
    /// host backend puts in its `Env::areas`.
    pub fn host_area_pointers(&mut self) -> [u64; DATA_AREAS] {
        let mut areas = [0u64; DATA_AREAS];
        for (index, bytes) in self.areas.iter_mut() {
            // Out-of-range indices are `validate`'s to report; none gets a pointer.
            if let Some(slot) = areas.get_mut(*index as usize) {
                *slot = bytes.host_ptr() as u64;
            }
        }
        areas
    }

    /// Each area's length in bytes, with `AREA_WRITABLE` for read-write areas: what every
    /// backend puts in its `Env::area_limits` (the task context's checked views test against it).
    pub fn area_limits(&self) -> [u64; DATA_AREAS] {
        let mut limits = [0u64; DATA_AREAS];
        for (index, bytes) in &self.areas {
            if let Some(l) = limits.get_mut(*index as usize) {
                let writable = matches!(bytes, AreaBytes::ReadWrite(_));
                *l = bytes.len() as u64
                    | if writable {
                        mgws_core::AREA_WRITABLE
                    } else {
                        0
                    };
            }
        }
        limits
    }

    /// Checks that area indices are unique and in range, and that every descriptor of every
    /// initial task stays inside its area.
    pub fn validate(&self) -> Result<()> {
        let mut sizes = [None::<usize>; DATA_AREAS];
        for (index, bytes) in &self.areas {
            let slot = sizes.get_mut(*index as usize).ok_or_else(|| {
                Error::Input(format!(
                    "data area {index} is out of range (0..{DATA_AREAS})"
                ))
            })?;
            if slot.replace(bytes.len()).is_some() {
                return Err(Error::Input(format!("data area {index} is given twice")));
            }
            if matches!(bytes, AreaBytes::ReadWrite(_)) {
                self.layout_of(*index).check(*index, bytes.len())?;
            }
        }
        for (at, &(index, l)) in self.layouts.iter().enumerate() {
            if self.layouts[..at].iter().any(|(i, _)| *i == index) {
                return Err(Error::Input(format!(
                    "data area {index} is given a layout twice"
                )));
            }
            let read_only = self
                .areas
                .iter()
                .find(|(i, _)| *i == index)
                .map(|(_, b)| matches!(b, AreaBytes::Read(_)));
            match read_only {
                None => {
                    return Err(Error::Input(format!(
                        "data area {index} has a layout ({}) but the job does not have the area",
                        l.name()
                    )))
                }
                Some(true) => {
                    return Err(Error::Input(format!(
                        "data area {index} is read-only: its layout ({}) is for read-write \
                         areas (read-only ones are copied to every GPU)",
                        l.name()
                    )))
                }
                Some(false) => {}
            }
        }
        // An indexed set's tasks share their template's descriptors: checking it checks all.
        let checked: &[TaskStruct] = match &self.initial {
            InitialTasks::Listed(tasks) => tasks,
            InitialTasks::Indexed { count: 0, .. } => &[],
            InitialTasks::Indexed { template, .. } => std::slice::from_ref(template),
        };
        for (i, task) in checked.iter().enumerate() {
            for d in task.data.iter().filter(|d| d.access != 0) {
                let size = sizes
                    .get(d.area as usize)
                    .copied()
                    .flatten()
                    .ok_or_else(|| {
                        Error::Input(format!(
                            "initial task {i} refers to data area {}, which the job does not have",
                            d.area
                        ))
                    })?;
                let end = d.offset.checked_add(d.size as u64);
                if end.is_none_or(|end| end > size as u64) {
                    return Err(Error::Input(format!(
                        "initial task {i}'s descriptor {}..{} exceeds data area {} ({size} bytes)",
                        d.offset,
                        d.offset as u128 + d.size as u128,
                        d.area
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Views a `u64` slice as bytes.
pub fn u64_bytes_mut(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: u8 has no alignment or validity requirement; the length covers exactly the words.
    unsafe {
        std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, std::mem::size_of_val(words))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::area_layout::Combine;

    #[test]
    fn an_indexed_job_checks_its_template_against_the_areas() {
        use mgws_tasks::{Access, DataDescriptor};
        let mut words = [0u64; 4];
        let template = TaskStruct::new(1, &0u64)
            .with_data(0, DataDescriptor::new(0, 0, 40, Access::ReadWrite));
        let e = Job::indexed(template, 3)
            .output(0, &mut words)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("initial task 0's descriptor 0..40 exceeds data area 0"),
            "{e}"
        );
        assert!(Job::indexed(template, 0)
            .output(0, &mut words)
            .validate()
            .is_ok());
        let fits = template.with_data(0, DataDescriptor::new(0, 0, 32, Access::ReadWrite));
        let job = Job::indexed(fits, 1 << 40).output(0, &mut words);
        assert!(job.validate().is_ok());
        assert_eq!(job.initial.len(), 1 << 40);
    }

    #[test]
    fn layouts_are_checked_against_the_areas_they_name() {
        let mut words = [0u64; 4];
        let mut odd = [0u8; 12];
        let read = [1u8; 8];
        let error = |job: Job<'_>| job.validate().unwrap_err().to_string();
        let e = error(Job::new(&[]).layout(3, AreaLayout::SingleHome));
        assert!(
            e.contains("data area 3 has a layout (single-home) but the job does not have"),
            "{e}"
        );
        let e = error(
            Job::new(&[])
                .input(0, &read)
                .layout(0, AreaLayout::Partitioned),
        );
        assert!(e.contains("data area 0 is read-only"), "{e}");
        let e = error(
            Job::new(&[])
                .output(1, &mut words)
                .layout(1, AreaLayout::SingleHome)
                .layout(1, AreaLayout::Partitioned),
        );
        assert!(e.contains("data area 1 is given a layout twice"), "{e}");
        let e = error(
            Job::new(&[])
                .area(2, AreaBytes::ReadWrite(&mut odd))
                .layout(2, AreaLayout::Replicated(Combine::AddU64)),
        );
        assert!(
            e.contains("data area 2 (12 bytes) is not a whole number of elements"),
            "{e}"
        );
        // A table brings its layout; the default is partitioned.
        let mut table = crate::PerWorker::with_workers(crate::ResultTable::<u64>::in_area(0), 3);
        let job = Job::new(&[]).results(&mut table).output(1, &mut words);
        assert!(job.validate().is_ok());
        assert_eq!(job.layout_of(0), AreaLayout::PerWorker { row_bytes: 64 });
        assert_eq!(job.layout_of(1), AreaLayout::Partitioned);
        assert_eq!(job.chosen_layout(1), None);
    }
}
