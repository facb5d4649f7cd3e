#[mgws_tasks::task]
#[repr(packed)]
struct Packed {
    value: u64,
}

fn main() {}
