//! UTS baselines, all built on `UtsParams::num_children` and `UtsNode::child`.

use mgws_tasks::workloads::uts::{UtsCounts, UtsNode, UtsParams};

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
