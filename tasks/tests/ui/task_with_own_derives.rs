// `#[task]` supplies Clone, Copy, Pod, Zeroable and repr(C); the user's own derives stay, and the
// ones it supplies may be written too.
#[mgws_tasks::task]
#[derive(Debug, Clone, PartialEq)]
#[repr(C)]
struct Range {
    start: u64,
    len: u64,
    depth: u32,
    width: u32,
}

fn main() {
    let r = Range { start: 1, len: 2, depth: 3, width: 4 };
    let copy = r;
    assert_eq!(r, copy);
    assert_eq!(mgws_tasks::bytemuck::bytes_of(&r).len(), 24);
    let t = mgws_tasks::TaskStruct::new(1, &r);
    assert_eq!(t.params_as::<Range>(), r);
}
