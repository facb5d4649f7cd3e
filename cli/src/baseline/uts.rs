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

/// The reference traversal on every thread of `pool`, for trees without published counts too
/// large for [`sequential`] (a 1.6e9-node tree is too long a walk for one thread): each rayon
/// task walks its part of the tree depth-first with its own stack and, every [`SPLIT_EVERY`]
/// nodes, hands the older half of its stack (the shallowest nodes, the largest subtrees) to a
/// new task. Counts do not depend on the order of the visit.
pub fn parallel(p: &UtsParams, pool: &rayon::ThreadPool) -> UtsCounts {
    let total = std::sync::Mutex::new(UtsCounts::default());
    pool.install(|| rayon::scope(|s| walk(s, p, vec![p.root()], &total)));
    total.into_inner().expect("no task panicked")
}

/// The reference counts of a tree without published ones: [`parallel`] on every core, once per
/// tree and process (a bench runs the same tree many times); `true` with counts computed by an
/// earlier call.
pub fn reference(p: &UtsParams) -> (UtsCounts, bool) {
    static KNOWN: std::sync::Mutex<Vec<(UtsParams, UtsCounts)>> = std::sync::Mutex::new(Vec::new());
    let known = |p: &UtsParams| {
        let list = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
        list.iter().find(|(q, _)| q == p).map(|(_, c)| *c)
    };
    if let Some(c) = known(p) {
        return (c, true);
    }
    let counts = match rayon::ThreadPoolBuilder::new().build() {
        Ok(pool) => parallel(p, &pool),
        // No threads to be had: the same counts, on this one.
        Err(_) => sequential(p),
    };
    KNOWN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((*p, counts));
    (counts, false)
}

/// Nodes a [`parallel`] task visits between two offers of half its stack.
pub const SPLIT_EVERY: u32 = 4096;

fn walk<'s>(
    s: &rayon::Scope<'s>,
    p: &'s UtsParams,
    mut stack: Vec<UtsNode>,
    total: &'s std::sync::Mutex<UtsCounts>,
) {
    let mut counts = UtsCounts::default();
    let mut since_split = 0;
    while let Some(node) = stack.pop() {
        let n = p.num_children(&node);
        counts.add_node(&node, n);
        stack.extend((0..n).map(|i| node.child(i)));
        since_split += 1;
        if since_split >= SPLIT_EVERY && stack.len() >= 2 {
            since_split = 0;
            let older: Vec<UtsNode> = stack.drain(..stack.len() / 2).collect();
            s.spawn(move |s| walk(s, p, older, total));
        }
    }
    let mut t = total.lock().expect("no task panicked");
    *t = t.merge(counts);
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
