//! A job's initial tasks: listed one by one, or indexed from one template, from which the
//! workers make each task as they claim it, so that no memory holds the set.

use std::mem::MaybeUninit;

use mgws_tasks::TaskStruct;

use crate::error::Result;

/// The tasks a job starts with.
#[derive(Clone, Copy, Debug)]
pub enum InitialTasks<'a> {
    /// These tasks.
    Listed(&'a [TaskStruct]),
    /// `count` tasks, task `k` being `template.indexed(k)` ([`TaskStruct::indexed`]).
    Indexed {
        /// Task 0.
        template: TaskStruct,
        /// How many tasks there are.
        count: u64,
    },
}

impl<'a> InitialTasks<'a> {
    /// How many tasks there are.
    pub fn len(&self) -> u64 {
        match self {
            InitialTasks::Listed(t) => t.len() as u64,
            InitialTasks::Indexed { count, .. } => *count,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Task `i`, if there is one.
    pub fn get(&self, i: u64) -> Option<TaskStruct> {
        (i < self.len()).then(|| self.task(i as usize))
    }

    /// Task `k` (`k < len`; a listed set's slice checks it, an indexed set's count does not).
    fn task(&self, k: usize) -> TaskStruct {
        match self {
            InitialTasks::Listed(t) => t[k],
            InitialTasks::Indexed { template, .. } => template.indexed(k as u64),
        }
    }

    /// Tasks `lo..hi` of the set (`lo <= hi <= len`): an indexed set's part is indexed too,
    /// from the template of its first task.
    pub fn range(&self, lo: u64, hi: u64) -> InitialTasks<'a> {
        assert!(
            lo <= hi && hi <= self.len(),
            "tasks {lo}..{hi} of {}",
            self.len()
        );
        match *self {
            InitialTasks::Listed(t) => InitialTasks::Listed(&t[lo as usize..hi as usize]),
            InitialTasks::Indexed { template, .. } => InitialTasks::Indexed {
                template: template.indexed(lo),
                count: hi - lo,
            },
        }
    }

    /// The tasks a run's memory holds: every listed one, or an indexed set's template alone
    /// (the workers make the rest, see [`InitialTasks::counted_word`]).
    pub fn held(&self) -> &[TaskStruct] {
        match self {
            InitialTasks::Listed(t) => t,
            InitialTasks::Indexed { template, .. } => std::slice::from_ref(template),
        }
    }

    /// What a worker's env says of these tasks (`Env::initial_counted_word`): listed, or made
    /// from the template by counting up [`TaskStruct::INDEXED_WORD`].
    pub fn counted_word(&self) -> u64 {
        match self {
            InitialTasks::Listed(_) => mgws_core::INITIAL_LISTED,
            InitialTasks::Indexed { .. } => TaskStruct::INDEXED_WORD,
        }
    }

    /// The tasks as a list: listed ones as they are; indexed ones built into `store`
    /// ([`InitialTasks::write_into`]), failing cleanly where the host has no room for them.
    pub fn listed_in<'s>(&self, store: &'s mut Vec<TaskStruct>) -> Result<&'s [TaskStruct]>
    where
        'a: 's,
    {
        if let InitialTasks::Listed(t) = *self {
            return Ok(t);
        }
        let count = self.len();
        let what = format_args!("{count} indexed initial tasks");
        let mut built = crate::memory::try_with_capacity::<TaskStruct>(what, count)?;
        self.append_to(&mut built);
        *store = built;
        Ok(store)
    }

    /// Appends the tasks to `list`, which has room for them ([`InitialTasks::write_into`]).
    ///
    /// # Panics
    /// If `list` has no room for them.
    pub fn append_to(&self, list: &mut Vec<TaskStruct>) {
        let (len, count) = (list.len(), self.len() as usize);
        assert!(list.capacity() - len >= count, "room for the initial tasks");
        self.write_into(&mut list.spare_capacity_mut()[..count]);
        // SAFETY: write_into wrote the `count` slots after the first `len`.
        unsafe { list.set_len(len + count) };
    }

    /// Writes task `k` to `dst[k]` for every task, on every core (one thread is slow to fill
    /// that many fresh pages), so a destination on the host holds them without a list first.
    ///
    /// # Panics
    /// If `dst` does not hold exactly [`InitialTasks::len`] tasks.
    pub fn write_into(&self, dst: &mut [MaybeUninit<TaskStruct>]) {
        assert_eq!(dst.len() as u64, self.len(), "one slot per initial task");
        let at = dst.as_mut_ptr() as usize;
        crate::memory::in_shares(dst.len(), MIN_SHARE_TASKS, 1, |start, len| {
            for k in start..start + len {
                // SAFETY: `k` is below `dst.len()`, and the shares are disjoint, so each slot is
                // written by one thread while `dst` stays borrowed here.
                unsafe {
                    (at as *mut MaybeUninit<TaskStruct>)
                        .add(k)
                        .write(MaybeUninit::new(self.task(k)))
                };
            }
        });
    }
}

/// The fewest tasks worth a thread of their own in [`InitialTasks::write_into`] (4 MiB).
const MIN_SHARE_TASKS: usize = 1 << 16;

/// The bytes of `tasks`, as a GPU or the shared heap holds them.
pub fn task_bytes(tasks: &[TaskStruct]) -> &[u8] {
    // SAFETY: TaskStruct is repr(C) data of 64 bytes of integers without padding (its size is
    // asserted where it is defined), so every byte is initialised.
    unsafe { std::slice::from_raw_parts(tasks.as_ptr() as *const u8, std::mem::size_of_val(tasks)) }
}

impl<'a> From<&'a [TaskStruct]> for InitialTasks<'a> {
    fn from(tasks: &'a [TaskStruct]) -> Self {
        InitialTasks::Listed(tasks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(x: u64) -> TaskStruct {
        TaskStruct::new(3, &[x, 7u64])
    }

    #[test]
    fn indexed_tasks_list_as_their_template_counted_up() {
        let indexed = InitialTasks::Indexed {
            template: task(10),
            count: 300_000,
        };
        let mut store = Vec::new();
        let list = indexed.listed_in(&mut store).unwrap();
        assert_eq!(list.len(), 300_000);
        for (k, t) in list.iter().enumerate() {
            assert_eq!(*t, task(10 + k as u64), "task {k}");
        }
        assert_eq!(indexed.get(299_999), Some(task(300_009)));
        assert_eq!(indexed.get(300_000), None);
    }

    #[test]
    fn listed_tasks_stay_as_they_are() {
        let tasks = [task(1), task(9)];
        let listed = InitialTasks::from(&tasks[..]);
        let mut store = Vec::new();
        assert_eq!(listed.listed_in(&mut store).unwrap(), &tasks);
        assert!(store.is_empty());
        assert_eq!(listed.get(1), Some(task(9)));
        assert_eq!(listed.get(2), None);
    }

    #[test]
    fn a_range_of_an_indexed_set_is_indexed_from_its_first_task() {
        let indexed = InitialTasks::Indexed {
            template: task(10),
            count: 100,
        };
        let part = indexed.range(40, 70);
        assert_eq!(part.len(), 30);
        for k in 0..30 {
            assert_eq!(part.get(k), indexed.get(40 + k));
        }
        assert_eq!(part.held(), &[task(50)]);
        assert_eq!(part.counted_word(), TaskStruct::INDEXED_WORD);
        let tasks = [task(1), task(2), task(3)];
        let listed = InitialTasks::from(&tasks[..]);
        assert_eq!(listed.range(1, 3).held(), &tasks[1..]);
        assert_eq!(listed.counted_word(), mgws_core::INITIAL_LISTED);
    }

    #[test]
    fn write_into_fills_every_slot_from_several_threads() {
        let tasks: Vec<TaskStruct> = (0..3 * MIN_SHARE_TASKS as u64 + 5).map(task).collect();
        for initial in [
            InitialTasks::from(&tasks[..]),
            InitialTasks::Indexed {
                template: task(0),
                count: tasks.len() as u64,
            },
        ] {
            let mut slots = vec![MaybeUninit::new(task(u64::MAX)); tasks.len()];
            initial.write_into(&mut slots);
            for (k, slot) in slots.iter().enumerate() {
                // SAFETY: every slot was initialised above, and write_into wrote tasks.
                assert_eq!(unsafe { slot.assume_init() }, tasks[k], "slot {k}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "one slot per initial task")]
    fn write_into_refuses_a_destination_of_another_length() {
        let tasks = [task(1), task(2)];
        InitialTasks::from(&tasks[..]).write_into(&mut [MaybeUninit::uninit()]);
    }

    #[test]
    fn an_indexed_set_too_large_for_the_host_is_refused() {
        let huge = InitialTasks::Indexed {
            template: task(0),
            count: u64::MAX / 64,
        };
        let e = huge.listed_in(&mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("indexed initial tasks"), "{e}");
    }
}
