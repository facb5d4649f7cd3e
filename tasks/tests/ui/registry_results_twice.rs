#[mgws_tasks::task]
struct Count {
    n: u64,
}

impl mgws_tasks::TaskFunctor for Count {
    fn run(
        &self,
        _: &mgws_tasks::TaskStruct,
        _: &mut impl mgws_tasks::Ctx,
    ) -> Result<(), mgws_tasks::TaskError> {
        Ok(())
    }
}

#[mgws_tasks::registry(results(counts: u64, counts: u32))]
enum Tasks {
    Count(Count),
}

#[mgws_tasks::registry(results(a: u64, b: u64, c: u64, d: u64, e: u64))]
enum TooMany {
    Count(Count),
}

fn main() {}
