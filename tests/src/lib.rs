//! Test tasks: a user-defined registry run through the public CPU-backend API, as a user would.
//!
//! - [`SplitRange`] turns one root task into `hi - lo` MEMSET tasks by recursive halving, so every
//!   MEMSET task is spawned at run time and most of them move between workers: the stress tests
//!   verify exactly-once execution under constant stealing.
//! - [`Stall`] sleeps, to starve the watchdog.
//! - [`Queens`] counts the solutions of N-Queens and [`TreeSum`] sums the values of a tree held in
//!   a data area: user code written with the context's safe helpers only (checked data views,
//!   `lane_range`, `leader`, `accumulate`), run with several lanes by `tests/tests/task_api.rs`.
//! - [`Probe`] misuses its data on purpose, to check the errors the checked views return.

use std::time::Duration;

use mgws::job::u64_bytes_mut;
use mgws::{AreaBytes, Job, RunReport, Scheduler};
use mgws_core::TaskError;
use mgws_tasks::workloads::memset::{output_descriptor, verify, MemsetCheck, MemsetTask};
use mgws_tasks::{Ctx, DataDescriptor, Pod, TaskFunctor, TaskStruct, Zeroable};

/// Spawns MEMSET tasks for slots `lo..hi`: halves the range until it has at most `leaf` slots.
#[mgws_tasks::task]
#[derive(Debug)]
pub struct SplitRange {
    pub lo: u64,
    pub hi: u64,
    pub leaf: u64,
}

impl TaskFunctor for SplitRange {
    fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        if self.hi - self.lo <= self.leaf {
            for index in self.lo..self.hi {
                ctx.spawn(&TestTasks::task(&MemsetTask { index }).with_data(0, task.data[0]));
            }
        } else {
            let mid = self.lo + (self.hi - self.lo) / 2;
            ctx.spawn(&task.with_params(&SplitRange {
                lo: self.lo,
                hi: mid,
                leaf: self.leaf,
            }));
            ctx.spawn(&task.with_params(&SplitRange {
                lo: mid,
                hi: self.hi,
                leaf: self.leaf,
            }));
        }
        Ok(())
    }
}

/// Sleeps for `micros` on every lane; with `heartbeat_micros` > 0, in steps of that length with a
/// `ctx.heartbeat()` after each (a long task that tells the watchdog it is alive).
#[mgws_tasks::task]
#[derive(Debug)]
pub struct Stall {
    pub micros: u64,
    pub heartbeat_micros: u64,
}

impl TaskFunctor for Stall {
    fn run(&self, _: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        if self.heartbeat_micros == 0 {
            std::thread::sleep(Duration::from_micros(self.micros));
            return Ok(());
        }
        let mut slept = 0;
        while slept < self.micros {
            let step = self.heartbeat_micros.min(self.micros - slept);
            std::thread::sleep(Duration::from_micros(step));
            slept += step;
            ctx.heartbeat();
        }
        Ok(())
    }
}

/// One partial N-Queens board: queens are placed on rows `0..row`; `cols`, `diag` and `anti` are
/// the attacked columns. Counts its solutions in result table [`TestTasks::SOLUTIONS`].
#[mgws_tasks::task]
#[derive(Debug)]
pub struct Queens {
    pub n: u32,
    pub row: u32,
    pub cols: u32,
    pub diag: u32,
    pub anti: u32,
}

impl TaskFunctor for Queens {
    fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        if self.row == self.n {
            ctx.accumulate(TestTasks::SOLUTIONS, |count| *count += 1)?;
            return Ok(());
        }
        let full = (1u32 << self.n) - 1;
        let free = full & !(self.cols | self.diag | self.anti);
        // Every lane makes the same spawns (the context takes lane 0's task).
        for col in 0..self.n {
            let bit = 1 << col;
            if free & bit != 0 {
                ctx.spawn(&task.with_params(&Queens {
                    row: self.row + 1,
                    cols: self.cols | bit,
                    diag: ((self.diag | bit) << 1) & full,
                    anti: (self.anti | bit) >> 1,
                    ..*self
                }));
            }
        }
        Ok(())
    }
}

impl Queens {
    /// The root task of N-Queens on an `n` x `n` board.
    pub fn root(n: u32) -> TaskStruct {
        TestTasks::task(&Queens {
            n,
            row: 0,
            cols: 0,
            diag: 0,
            anti: 0,
        })
    }
}

/// A node of the tree [`TreeSum`] walks: its value and its children `first..first + count`
/// (data the tasks read, not a task).
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub struct TreeNode {
    pub value: u64,
    pub first: u32,
    pub count: u32,
}

/// Adds the values of node `node`'s children (lanes split them with `lane_range`) to this worker's
/// sum, marks the node visited and spawns a task per child. Descriptor 0: the tree (`Read`, an
/// array of [`TreeNode`]); the sums go to result table [`TestTasks::SUMS`]. The root's own value
/// is added by the task with `root` set.
#[mgws_tasks::task]
#[derive(Debug)]
pub struct TreeSum {
    pub node: u32,
    pub root: u32,
}

impl TaskFunctor for TreeSum {
    fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        let nodes = ctx.read::<TreeNode>(&task.data[0])?;
        let me = *nodes
            .get(self.node as usize)
            .ok_or(TaskError::Failed(TREE_BAD_NODE))?;
        let mut partial = 0u64;
        for i in ctx.lane_range(me.count as u64) {
            let child = nodes
                .get(me.first as usize + i as usize)
                .ok_or(TaskError::Failed(TREE_BAD_NODE))?;
            partial += child.value;
        }
        let mut sum = ctx.sum(partial);
        if self.root != 0 {
            sum += me.value;
        }
        ctx.accumulate(TestTasks::SUMS, |acc| *acc += sum)?;
        for c in 0..me.count {
            ctx.spawn(&task.with_params(&TreeSum {
                node: me.first + c,
                root: 0,
            }));
        }
        Ok(())
    }
}

/// [`TreeSum`]'s code for a node index outside the tree.
pub const TREE_BAD_NODE: u32 = 0x7472_0001;

/// Misuses descriptor 0 on purpose: `mode` 0 reads past it, 1 writes through it (a `Read`
/// descriptor), 2 reads it as misaligned `u64`s, 4 takes a shared slice of its writable area, and
/// any other mode writes `value` at `index` (in bounds).
#[mgws_tasks::task]
#[derive(Debug)]
pub struct Probe {
    pub mode: u64,
    pub index: u64,
    pub value: u64,
}

impl TaskFunctor for Probe {
    fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        let d = task.data[0];
        match self.mode {
            0 => {
                let past =
                    DataDescriptor::new(d.area, d.offset, d.size + 8, mgws_tasks::Access::Read);
                ctx.read::<u64>(&past)?;
            }
            1 => {
                ctx.write::<u64>(&d)?;
            }
            2 => {
                let odd = DataDescriptor::new(d.area, d.offset + 1, 8, mgws_tasks::Access::Read);
                ctx.read::<u64>(&odd)?;
            }
            4 => {
                // A shared slice of a writable area: refused.
                let whole = DataDescriptor::new(d.area, d.offset, 8, mgws_tasks::Access::Read);
                ctx.read::<u64>(&whole)?;
            }
            _ => {
                let out = ctx.write::<u64>(&d)?;
                if let Some(r) = ctx.leader(|| out.set(self.index as usize, self.value)) {
                    r?;
                }
            }
        }
        Ok(())
    }
}

/// Panics: on lane 0 only (inside `ctx.leader`) when `on_leader` is 1, else on every lane.
#[mgws_tasks::task]
#[derive(Debug)]
pub struct Panic {
    pub on_leader: u64,
}

impl TaskFunctor for Panic {
    fn run(&self, _: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        if self.on_leader == 1 {
            ctx.leader(|| panic!("the test task panics on lane 0"));
        } else {
            panic!("the test task panics");
        }
        Ok(())
    }
}

/// A node of a complete tree: it counts itself and, above the leaves, spawns `fan` children,
/// all of the worker's lanes together, by both worker-wide spawns: at odd depths with one
/// `spawn_many` (more tasks than half the local queue are pushed one at a time), at even depths
/// a round of lanes at a time with `spawn_each_like` (a round of more than half the local queue
/// goes in parts, `Context::spawn_each_in_place`).
#[mgws_tasks::task]
#[derive(Debug)]
pub struct Fan {
    pub fan: u32,
    /// Levels below this node.
    pub depth: u32,
}

impl Fan {
    /// The nodes of the tree below and including a node of `depth` levels.
    pub fn nodes(fan: u64, depth: u32) -> u64 {
        (0..=depth).map(|d| fan.pow(d)).sum()
    }
}

impl TaskFunctor for Fan {
    fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        ctx.accumulate(TestTasks::NODES, |count| *count += 1)?;
        if self.depth > 0 {
            let child = Fan {
                depth: self.depth - 1,
                ..*self
            };
            if self.depth % 2 == 1 {
                ctx.spawn_many(self.fan, |_| task.with_params(&child));
            } else {
                let lanes = ctx.lane_count();
                let mut first = 0;
                while first < self.fan {
                    ctx.spawn_each_like(lanes.min(self.fan - first), task, || child);
                    first += lanes;
                }
            }
        }
        Ok(())
    }
}

/// The registry of the test tasks, and its result tables.
#[mgws_tasks::registry(results(solutions: u64, sums: u64, nodes: u64))]
pub enum TestTasks {
    Memset(MemsetTask),
    Split(SplitRange),
    Stall(Stall),
    Queens(Queens),
    TreeSum(TreeSum),
    Probe(Probe),
    Panic(Panic),
    Fan(Fan),
}

/// Spawns the MEMSET tasks of slots `index * per .. (index + 1) * per`: as the indexed initial
/// tasks of a job (`Job::indexed`), task `k` covers the `k`-th `per` slots.
#[mgws_tasks::task]
#[derive(Debug)]
pub struct SpawnSlots {
    pub index: u64,
    pub per: u64,
}

impl TaskFunctor for SpawnSlots {
    fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        for j in 0..self.per {
            let index = self.index * self.per + j;
            ctx.spawn(&IndexedSpawnTasks::task(&MemsetTask { index }).with_data(0, task.data[0]));
        }
        Ok(())
    }
}

/// One lane per task for every tag, so that a worker's narrow batches run a claim of indexed
/// initial tasks straight from the template, and their spawns go through the local queue.
#[mgws_tasks::registry(indexed_in_place)]
pub enum IndexedSpawnTasks {
    #[width(1)]
    Memset(MemsetTask),
    #[width(1)]
    Spawn(SpawnSlots),
}

/// Runs `count` [`SpawnSlots`] tasks of `per` slots each, indexed or `listed`; returns the report
/// with the exactly-once check of the `count * per` slots. Workers that run indexed claims in
/// place copy listed ones through their local queues.
pub fn spawn_slots(
    sched: &Scheduler,
    count: u64,
    per: u64,
    listed: bool,
) -> mgws::Result<(RunReport, MemsetCheck)> {
    let slots = count * per;
    let template = IndexedSpawnTasks::task(&SpawnSlots { index: 0, per })
        .with_data(0, output_descriptor(0, slots));
    let tasks: Vec<TaskStruct> = if listed {
        (0..count).map(|k| template.indexed(k)).collect()
    } else {
        Vec::new()
    };
    let mut memory = vec![0u64; slots as usize];
    let job = if listed {
        Job::new(&tasks)
    } else {
        Job::indexed(template, count)
    };
    let job = job.area(0, AreaBytes::ReadWrite(u64_bytes_mut(&mut memory)));
    let report = mgws::cpu::run(sched, &IndexedSpawnTasks, job)?;
    Ok((report, verify(&memory)))
}

/// [`TestTasks`]' MEMSET and splitter at other widths: MEMSET on one lane, the splitter on two,
/// so that a worker runs narrow tasks of two widths and its batches stop where the width changes.
/// The tags are [`TestTasks`]' (the splitter spawns its MEMSET tasks with those).
#[mgws_tasks::registry]
pub enum MixedWidthTasks {
    #[width(1)]
    Memset(MemsetTask),
    #[width(2)]
    Split(SplitRange),
}

const _: () = assert!(
    MixedWidthTasks::MEMSET == TestTasks::MEMSET && MixedWidthTasks::SPLIT == TestTasks::SPLIT
);

/// Runs `slots` MEMSET tasks, all spawned at run time from `roots` root tasks, and returns the
/// report with the exactly-once check.
pub fn spawned_memset(
    sched: &Scheduler,
    slots: u64,
    roots: u64,
    leaf: u64,
) -> mgws::Result<(RunReport, MemsetCheck)> {
    spawned_memset_laid_out(sched, slots, roots, leaf, None)
}

/// [`spawned_memset`] with the slots' area laid out as `layout` (`None`: the default), which
/// matters on several CPU domains (docs/design.md 7.1).
pub fn spawned_memset_laid_out(
    sched: &Scheduler,
    slots: u64,
    roots: u64,
    leaf: u64,
    layout: Option<mgws::AreaLayout>,
) -> mgws::Result<(RunReport, MemsetCheck)> {
    spawned_memset_with(&TestTasks, sched, slots, roots, leaf, layout)
}

/// [`spawned_memset_laid_out`] run by `registry` ([`TestTasks`] or [`MixedWidthTasks`]).
pub fn spawned_memset_with<R: mgws_tasks::Registry>(
    registry: &R,
    sched: &Scheduler,
    slots: u64,
    roots: u64,
    leaf: u64,
    layout: Option<mgws::AreaLayout>,
) -> mgws::Result<(RunReport, MemsetCheck)> {
    let out = output_descriptor(0, slots);
    let per_root = slots.div_ceil(roots);
    let tasks: Vec<TaskStruct> = (0..roots)
        .map(|r| (r * per_root, ((r + 1) * per_root).min(slots)))
        .filter(|(lo, hi)| lo < hi)
        .map(|(lo, hi)| TestTasks::task(&SplitRange { lo, hi, leaf }).with_data(0, out))
        .collect();
    let mut memory = vec![0u64; slots as usize];
    let mut job = Job::new(&tasks).area(0, AreaBytes::ReadWrite(u64_bytes_mut(&mut memory)));
    if let Some(layout) = layout {
        job = job.layout(0, layout);
    }
    let report = mgws::cpu::run(sched, registry, job)?;
    Ok((report, verify(&memory)))
}

/// `builder`'s scheduler under chaos seeded by `seed`: random yields at 200 of 1,024 protocol
/// steps, sleeps of up to 200 us at 8, and a watchdog of 20 s.
pub fn chaotic(builder: mgws::SchedulerBuilder, seed: u64) -> Scheduler {
    builder
        .seed(seed)
        .watchdog(std::time::Duration::from_secs(20))
        .chaos(mgws::Chaos {
            seed,
            yield_per_1024: 200,
            sleep_per_1024: 8,
            max_sleep_us: 200,
        })
        .build()
        .unwrap()
}

/// Runs 3,000 spawned MEMSET tasks from `roots` roots with `builder`'s settings under chaos
/// (random yields at 200 of 1,024 protocol steps, sleeps of up to 200 us at 8) seeded by `seed`,
/// and asserts that every task ran exactly once.
pub fn chaotic_memset(builder: mgws::SchedulerBuilder, seed: u64, roots: u64) {
    chaotic_memset_with(&TestTasks, builder, seed, roots);
}

/// [`chaotic_memset`] run by `registry` ([`TestTasks`] or [`MixedWidthTasks`]).
pub fn chaotic_memset_with<R: mgws_tasks::Registry>(
    registry: &R,
    builder: mgws::SchedulerBuilder,
    seed: u64,
    roots: u64,
) -> RunReport {
    let sched = chaotic(builder, seed);
    let (report, check) = spawned_memset_with(registry, &sched, 3_000, roots, 2, None).unwrap();
    assert!(check.ok(), "seed {seed}: {check:?}");
    assert!(report.tasks_run > 3_000, "seed {seed}");
    report
}
