#[mgws_tasks::task]
struct Big {
    values: [u64; 4],
}

fn main() {}
