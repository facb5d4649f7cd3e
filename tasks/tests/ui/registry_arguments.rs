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

#[mgws_tasks::registry(levels_local_capacity = 96)]
enum NotAPowerOfTwo {
    Count(Count),
}

#[mgws_tasks::registry(local_capacity = 256, levels_local_capacity = 128, levels_local_capacity = 64)]
enum Twice {
    Count(Count),
}

#[mgws_tasks::registry(static_local_capacity = 48)]
enum StaticNotAPowerOfTwo {
    Count(Count),
}

#[mgws_tasks::registry(public_capacity = 1000)]
enum PublicNotAPowerOfTwo {
    Count(Count),
}

#[mgws_tasks::registry(public_capacity = 524288)]
enum PublicTooLarge {
    Count(Count),
}

#[mgws_tasks::registry(public_capacity = 512, public_capacity = 256)]
enum PublicTwice {
    Count(Count),
}

#[mgws_tasks::registry(publish_copy_batch = 3)]
enum BatchNotAPowerOfTwo {
    Count(Count),
}

#[mgws_tasks::registry(publish_copy_batch = 16)]
enum BatchTooLarge {
    Count(Count),
}

#[mgws_tasks::registry(results(counts: u64, counts: u32))]
enum ResultsTwice {
    Count(Count),
}

#[mgws_tasks::registry(results(a: u64, b: u64, c: u64, d: u64, e: u64))]
enum TooManyResults {
    Count(Count),
}

fn main() {}
