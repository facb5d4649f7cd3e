#[mgws_tasks::task]
struct Wrapper<T: Copy> {
    value: T,
}

fn main() {}
