//! UTS baselines, all built on `UtsParams::num_children` and `UtsNode::child`.

use mgws_tasks::workloads::uts::{UtsCounts, UtsNode, UtsParams};
use mgws_tasks::{Builtin, TaskStruct};

/// Depth-first traversal with an explicit stack (the reference for trees without published
/// counts).
pub fn sequential(p: &UtsParams) -> UtsCounts {
    sequential_with_stack(p).0
}

/// [`sequential`], also returning the largest number of pending nodes the stack ever held (what
/// a depth-first worker must keep queued).
pub fn sequential_with_stack(p: &UtsParams) -> (UtsCounts, usize) {
    let mut counts = UtsCounts::default();
    let mut stack = vec![p.root()];
    let mut peak = 1;
    while let Some(node) = stack.pop() {
        let n = p.num_children(&node);
        counts.add_node(&node, n);
        stack.extend((0..n).map(|i| node.child(i)));
        peak = peak.max(stack.len());
    }
    (counts, peak)
}

/// Static assignment, level by level over `threads` threads, on the same 64-byte task structs
/// the mgws run moves (each node's task carries its `UtsNode` in the parameter area).
pub fn static_levels(p: &UtsParams, threads: u32) -> UtsCounts {
    let root = Builtin::task(&p.root());
    super::static_levels(
        vec![root],
        threads,
        |task: &TaskStruct, out, acc: &mut UtsCounts| {
            let node: UtsNode = task.params_as();
            let n = p.num_children(&node);
            acc.add_node(&node, n);
            out.extend((0..n).map(|i| task.with_params(&node.child(i))));
        },
    )
    .into_iter()
    .fold(UtsCounts::default(), UtsCounts::merge)
}

/// rayon: every node's children are visited through a binary tree of `rayon::join`s.
pub fn rayon(p: &UtsParams, pool: &rayon::ThreadPool) -> UtsCounts {
    let root = p.root();
    pool.install(|| visit(p, &root))
}

fn visit(p: &UtsParams, node: &UtsNode) -> UtsCounts {
    let n = p.num_children(node);
    let mut c = UtsCounts::default();
    c.add_node(node, n);
    c.merge(children(p, node, 0, n))
}

fn children(p: &UtsParams, node: &UtsNode, lo: u32, hi: u32) -> UtsCounts {
    match hi - lo {
        0 => UtsCounts::default(),
        1 => visit(p, &node.child(lo)),
        k => {
            let mid = lo + k / 2;
            let (a, b) = rayon::join(|| children(p, node, lo, mid), || children(p, node, mid, hi));
            a.merge(b)
        }
    }
}
