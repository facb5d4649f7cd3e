use mgws_tasks::{Ctx, TaskError, TaskFunctor, TaskStruct};

#[mgws_tasks::task]
struct Count {
    n: u64,
}

impl TaskFunctor for Count {
    fn run(&self, _: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        // The table holds u64s: a u32 closure does not compile.
        ctx.accumulate(Tasks::COUNTS, |c: &mut u32| *c += 1)?;
        Ok(())
    }
}

#[mgws_tasks::registry(results(counts: u64))]
enum Tasks {
    Count(Count),
}

fn main() {}
