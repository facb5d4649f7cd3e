//! A job's initial tasks: listed one by one, or indexed from one template, which a GPU run builds
//! in device memory instead of building and copying 64 bytes per task from the host.

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
        match self {
            InitialTasks::Listed(t) => usize::try_from(i).ok().and_then(|i| t.get(i)).copied(),
            InitialTasks::Indexed { template, count } => (i < *count).then(|| template.indexed(i)),
        }
    }

    /// The tasks as a list: listed ones as they are; indexed ones built into `store` on every
    /// core (one thread is slow to fill that many fresh pages), failing cleanly where the host
    /// has no room for them.
    pub fn listed_in<'s>(&self, store: &'s mut Vec<TaskStruct>) -> Result<&'s [TaskStruct]>
    where
        'a: 's,
    {
        let (template, count) = match *self {
            InitialTasks::Listed(t) => return Ok(t),
            InitialTasks::Indexed { template, count } => (template, count),
        };
        let what = format_args!("{count} indexed initial tasks");
        let mut built = crate::memory::try_with_capacity::<TaskStruct>(what, count)?;
        let slots = &mut built.spare_capacity_mut()[..count as usize];
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let per = slots.len().div_ceil(threads).max(1 << 16);
        std::thread::scope(|scope| {
            for (c, chunk) in slots.chunks_mut(per).enumerate() {
                scope.spawn(move || {
                    let first = (c * per) as u64;
                    for (k, slot) in chunk.iter_mut().enumerate() {
                        slot.write(template.indexed(first + k as u64));
                    }
                });
            }
        });
        // SAFETY: the threads above wrote each of the first `count` slots, and the scope joined
        // them.
        unsafe { built.set_len(count as usize) };
        *store = built;
        Ok(store)
    }
}

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
    fn an_indexed_set_too_large_for_the_host_is_refused() {
        let huge = InitialTasks::Indexed {
            template: task(0),
            count: u64::MAX / 64,
        };
        let e = huge.listed_in(&mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("indexed initial tasks"), "{e}");
    }
}
