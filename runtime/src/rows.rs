//! Per-worker result rows: a table with one cache-line-aligned row per worker, for tasks that
//! accumulate results without contending with other workers.

/// A per-worker result table (see `mgws_tasks::workloads::rows`) whose rows start on 64-byte
/// boundaries, so that no two workers' rows share a cache line (a `Vec<u64>` is only 8-byte
/// aligned, and false sharing of the counters that every task updates costs more than the tasks).
pub struct ResultRows {
    rows: Vec<AlignedRow>,
}

#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct AlignedRow([u64; mgws_tasks::workloads::rows::ROW_WORDS]);

const _: () = assert!(std::mem::size_of::<AlignedRow>() == mgws_tasks::workloads::rows::ROW_BYTES);

impl ResultRows {
    /// A zeroed table of `workers` rows.
    pub fn new(workers: u32) -> Self {
        ResultRows {
            rows: vec![AlignedRow::default(); workers as usize],
        }
    }
    /// The table as a read-write data area for `Job::area`, laid out per worker (on several
    /// GPUs each worker's row lives in its own GPU's memory).
    pub fn area(&mut self) -> crate::job::LaidOut<'_> {
        crate::job::LaidOut {
            bytes: crate::AreaBytes::ReadWrite(self.bytes_mut()),
            layout: Some(crate::AreaLayout::PerWorker {
                row_bytes: mgws_tasks::workloads::rows::ROW_BYTES as u64,
            }),
        }
    }

    /// The table's bytes, for a read-write data area.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: AlignedRow is plain u64s without padding (size checked above).
        unsafe {
            std::slice::from_raw_parts_mut(
                self.rows.as_mut_ptr() as *mut u8,
                std::mem::size_of_val(self.rows.as_slice()),
            )
        }
    }
    /// The table's words, row after row.
    pub fn words(&self) -> &[u64] {
        // SAFETY: as above.
        unsafe {
            std::slice::from_raw_parts(
                self.rows.as_ptr() as *const u64,
                self.rows.len() * mgws_tasks::workloads::rows::ROW_WORDS,
            )
        }
    }
}

/// One 64-byte cache line of a [`PerWorker`] table (and of the CPU domains' copies of a data
/// area, whose per-worker rows start on lines as in the table).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Line(pub(crate) [u8; 64]);

/// A result table on the host: one slot of `T` per worker, each on its own cache lines
/// (`mgws_core::accumulator_stride`), for the table a registry declares
/// (`#[mgws::registry(results(name: T))]`, whose handle constant it is made from). Attach it to a
/// job with [`crate::Job::results`]; tasks update their worker's slot with `ctx.accumulate(handle,
/// ..)` (lane 0, no atomics); after the run [`PerWorker::sum`], [`PerWorker::min`],
/// [`PerWorker::max`] or [`PerWorker::merge`] combine the slots.
///
/// ```ignore
/// let mut counts = PerWorker::of(MyTasks::COUNTS, &sched);
/// Backend::cpu().run(&sched, &MyTasks, Job::new(&[root]).results(&mut counts))?;
/// let total = counts.sum();
/// ```
pub struct PerWorker<T: bytemuck::Pod> {
    lines: Vec<Line>,
    workers: u32,
    handle: mgws_core::ResultTable<T>,
}

impl<T: bytemuck::Pod> PerWorker<T> {
    const STRIDE: usize = mgws_core::accumulator_stride(std::mem::size_of::<T>());

    /// The table of `handle` with a zeroed slot for each of `sched`'s workers.
    pub fn of(handle: mgws_core::ResultTable<T>, sched: &crate::Scheduler) -> Self {
        Self::with_workers(handle, sched.workers())
    }

    /// The table of `handle` with `workers` zeroed slots.
    pub(crate) fn with_workers(handle: mgws_core::ResultTable<T>, workers: u32) -> Self {
        PerWorker {
            lines: vec![Line([0; 64]); workers as usize * Self::STRIDE / 64],
            workers,
            handle,
        }
    }

    /// The same table with every slot holding `init` instead: the identity of the combine the
    /// host will do (`T::MAX` for [`PerWorker::min`]: a worker that ran no task keeps it).
    pub fn starting_at(mut self, init: T) -> Self {
        for w in 0..self.workers {
            self.set(w, init);
        }
        self
    }

    /// The handle tasks name this table by.
    pub fn handle(&self) -> mgws_core::ResultTable<T> {
        self.handle
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `Line` is 64 plain bytes without padding; the slice covers exactly the lines.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr() as *const u8, self.byte_len()) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.byte_len();
        // SAFETY: as in `bytes`, through the unique borrow.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr() as *mut u8, len) }
    }

    fn byte_len(&self) -> usize {
        self.lines.len() * 64
    }

    /// The table as a read-write data area, laid out per worker (on several GPUs each worker's
    /// slot lives in its own GPU's memory).
    pub(crate) fn area(&mut self) -> crate::job::LaidOut<'_> {
        let row_bytes = Self::STRIDE as u64;
        crate::job::LaidOut {
            bytes: crate::AreaBytes::ReadWrite(self.bytes_mut()),
            layout: Some(crate::AreaLayout::PerWorker { row_bytes }),
        }
    }

    /// Worker `w`'s slot.
    pub fn get(&self, w: u32) -> T {
        let at = w as usize * Self::STRIDE;
        bytemuck::pod_read_unaligned(&self.bytes()[at..at + std::mem::size_of::<T>()])
    }

    /// Sets worker `w`'s slot.
    pub fn set(&mut self, w: u32, value: T) {
        let at = w as usize * Self::STRIDE;
        self.bytes_mut()[at..at + std::mem::size_of::<T>()]
            .copy_from_slice(bytemuck::bytes_of(&value));
    }

    /// Bytes from one worker's slot to the next (whole cache lines).
    pub fn stride(&self) -> usize {
        Self::STRIDE
    }

    /// The number of slots.
    pub fn workers(&self) -> u32 {
        self.workers
    }

    /// Every worker's slot, in worker order.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        (0..self.workers).map(|w| self.get(w))
    }

    /// Folds the slots into one value with a combine of the caller's, starting from `init`.
    pub fn merge<A>(&self, init: A, f: impl FnMut(A, T) -> A) -> A {
        self.iter().fold(init, f)
    }

    /// The sum of every worker's slot.
    pub fn sum(&self) -> T
    where
        T: std::iter::Sum<T>,
    {
        self.iter().sum()
    }

    /// The least slot (start the table at the type's largest value with
    /// [`PerWorker::starting_at`], so that a worker that ran no task does not count).
    pub fn min(&self) -> T
    where
        T: Ord,
    {
        self.iter()
            .min()
            .expect("a scheduler has at least one worker")
    }

    /// The greatest slot (a table of zeroes starts at the identity for unsigned values).
    pub fn max(&self) -> T
    where
        T: Ord,
    {
        self.iter()
            .max()
            .expect("a scheduler has at least one worker")
    }
}
