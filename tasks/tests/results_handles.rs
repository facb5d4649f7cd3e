//! The result tables a registry declares: one typed handle each, in distinct data areas from the
//! top, and part of the registry's fingerprint.

use mgws_tasks::__core::DATA_AREAS;
use mgws_tasks::{Ctx, Registry, TaskError, TaskFunctor, TaskStruct};

#[mgws_tasks::task]
struct Count {
    n: u64,
}

impl TaskFunctor for Count {
    fn run(&self, _: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        ctx.accumulate(WithTables::COUNTS, |c| *c += self.n)?;
        ctx.accumulate(WithTables::LONGEST_NAME, |c| *c = (*c).max(3))?;
        Ok(())
    }
}

#[mgws_tasks::registry(results(counts: u64, longest_name: u32))]
enum WithTables {
    Count(Count),
}

/// The same registry (name, tags, functors) without the tables.
mod plain {
    #[mgws_tasks::registry]
    pub enum WithTables {
        Count(super::Count),
    }
}

#[test]
fn handles_take_distinct_areas_from_the_top() {
    assert_eq!(WithTables::COUNTS.area() as usize, DATA_AREAS - 1);
    assert_eq!(WithTables::LONGEST_NAME.area() as usize, DATA_AREAS - 2);
}

#[test]
fn the_tables_are_part_of_the_fingerprint() {
    // A kernel built without the tables would write other areas: it must not match.
    assert_ne!(WithTables::FINGERPRINT, plain::WithTables::FINGERPRINT);
}
