//! UTS, the Unbalanced Tree Search benchmark (Olivier et al., 2006), reimplemented from its
//! definition: an implicit tree whose shape is only known by expanding it.
//!
//! Each node is a task ([`UtsTask`]: its parent's 20 bytes of SHA-1 state, its depth and its
//! index among the parent's children, exactly the 24-byte parameter area) that derives its own
//! state ([`UtsNode`]), counts itself and spawns its children. The tree parameters
//! ([`UtsParams`]) live in a read-only data area (descriptor 0); the counts go to a per-worker
//! result table (descriptor 1, see [`super::rows`]): nodes, leaves and the maximum depth.
//!
//! The per-node logic ([`UtsParams::num_children`], [`UtsNode::child`], [`UtsParams::root`]) is
//! public so that the host's sequential, static and rayon baselines run exactly the same code.
//! Floating point uses the `libm` crate, so the CPU and the GPU compute the same branching.

use mgws_core::TaskError;
use sha1::{Digest, Sha1};

use crate::data::{Access, DataDescriptor};
use crate::task::{TaskFunctor, TaskStruct};
use crate::workloads::rows;
use crate::Ctx;

/// Tree types (UTS `-t`).
pub const BINOMIAL: u32 = 0;
pub const GEOMETRIC: u32 = 1;
pub const HYBRID: u32 = 2;

/// Geometric shapes (UTS `-a`).
pub const LINEAR: u32 = 0;
pub const EXPDEC: u32 = 1;
pub const CYCLIC: u32 = 2;
pub const FIXED: u32 = 3;

/// At most this many children per node, except the binomial root (UTS `MAXNUMCHILDREN`).
pub const MAX_CHILDREN: u32 = 100;

/// Result-row columns.
pub const COL_NODES: usize = 0;
pub const COL_LEAVES: usize = 1;
pub const COL_DEPTH: usize = 2;

/// Error code of a UTS task whose parameter descriptor is too small.
pub const UTS_BAD_PARAMS: u32 = 0x5554_0001;
/// A UTS task's error code: its worker has expanded more than [`UtsParams::max_nodes`] nodes
/// (a tree that may be infinite, `-q * -m > 1`, met its bound).
pub const UTS_NODE_LIMIT: u32 = 0x5554_0002;

/// The parameters of a UTS tree, as stored in the read-only parameter area.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct UtsParams {
    /// [`BINOMIAL`], [`GEOMETRIC`] or [`HYBRID`] (`-t`).
    pub tree: u32,
    /// [`LINEAR`], [`EXPDEC`], [`CYCLIC`] or [`FIXED`] (`-a`).
    pub shape: u32,
    /// Depth limit of geometric trees (`-d`).
    pub gen_mx: u32,
    /// Children of a binomial non-root node that has any (`-m`).
    pub non_leaf_bf: u32,
    /// Root branching factor (`-b`).
    pub b0: f64,
    /// Probability that a binomial non-root node has children (`-q`).
    pub non_leaf_prob: f64,
    /// Hybrid trees are geometric above `shift_depth * gen_mx`, binomial below (`-f`).
    pub shift_depth: f64,
    /// Root seed (`-r`).
    pub root_seed: u32,
    pub _pad: u32,
    /// `-ln(b0) / ln(gen_mx)`, the exponent of the EXPDEC shape.
    pub expdec_exponent: f64,
    /// The most nodes one worker may expand before its task fails with [`UTS_NODE_LIMIT`]: the
    /// bound that ends a tree that may be infinite (`-q * -m > 1`). `u64::MAX`: none.
    pub max_nodes: u64,
    /// `geometric_first_rand[depth][k - 1]`: the smallest random number ([`UtsNode::rand`]) for
    /// which a geometric node at `depth` has at least `k` children, or [`NEVER`] if none does,
    /// for depths `0..GEOMETRIC_TABLE_DEPTHS`. [`UtsParams::new`] finds each by bisection over
    /// the per-node formula, so a node counts the entries at or below its number instead of
    /// computing two logarithms, and gets the same count (the formula never falls as the number
    /// rises; the argument is at `UtsParams::first_rands`). Deeper nodes compute theirs.
    pub geometric_first_rand: [[u32; MAX_CHILDREN as usize]; GEOMETRIC_TABLE_DEPTHS],
}

/// An entry of [`UtsParams::geometric_first_rand`] that no random number reaches (they are
/// below 2^31).
pub const NEVER: u32 = u32::MAX;

/// Depths [`UtsParams::geometric_first_rand`] covers; deeper nodes compute their number of
/// children. 32 covers every preset's geometric depths (T5 goes deepest, to 20).
pub const GEOMETRIC_TABLE_DEPTHS: usize = 32;

/// The probability UTS derives from a node's random number ([`UtsNode::rand`]): `rand / 2^31`.
#[inline(always)]
fn probability(rand: u32) -> f64 {
    rand as f64 / 2147483648.0
}

/// A node of the tree: the SHA-1 state and the depth (root: 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UtsNode {
    pub state: [u8; 20],
    pub depth: u32,
}

impl UtsParams {
    /// Parameters with the derived fields filled in (no range checks: the host validates).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        tree: u32,
        shape: u32,
        b0: f64,
        gen_mx: u32,
        non_leaf_prob: f64,
        non_leaf_bf: u32,
        root_seed: u32,
        shift_depth: f64,
    ) -> UtsParams {
        let mut params = UtsParams {
            tree,
            shape,
            gen_mx,
            non_leaf_bf,
            b0,
            non_leaf_prob,
            shift_depth,
            root_seed,
            _pad: 0,
            expdec_exponent: -libm::log(b0) / libm::log(gen_mx as f64),
            max_nodes: u64::MAX,
            geometric_first_rand: [[NEVER; MAX_CHILDREN as usize]; GEOMETRIC_TABLE_DEPTHS],
        };
        if tree != BINOMIAL {
            for depth in 0..GEOMETRIC_TABLE_DEPTHS {
                params.geometric_first_rand[depth] = params.first_rands(depth as u32);
            }
        }
        params
    }

    /// The same parameters with at most `max_nodes` nodes expanded by one worker.
    pub fn with_max_nodes(self, max_nodes: u64) -> UtsParams {
        UtsParams { max_nodes, ..self }
    }

    /// The root: SHA-1 of 16 zero bytes and the big-endian seed.
    pub fn root(&self) -> UtsNode {
        let mut bytes = [0u8; 20];
        bytes[16..].copy_from_slice(&self.root_seed.to_be_bytes());
        let state: [u8; 20] = Sha1::digest(bytes).into();
        UtsNode { state, depth: 0 }
    }

    /// The expected branching factor of a geometric node at `depth`.
    fn geometric_b(&self, depth: u32) -> f64 {
        if depth == 0 {
            return self.b0;
        }
        let (h, d) = (depth as f64, self.gen_mx as f64);
        match self.shape {
            EXPDEC => self.b0 * libm::pow(h, self.expdec_exponent),
            CYCLIC => {
                if depth > 5 * self.gen_mx {
                    0.0
                } else {
                    libm::pow(self.b0, libm::sin(2.0 * core::f64::consts::PI * h / d))
                }
            }
            FIXED => {
                if depth < self.gen_mx {
                    self.b0
                } else {
                    0.0
                }
            }
            _ => self.b0 * (1.0 - h / d),
        }
    }

    /// `ln(1 - p)` of a geometric node at `depth`, `p = 1 / (1 + b)`: the divisor that turns a
    /// node's probability into its number of children.
    fn geometric_ln_q_at(&self, depth: u32) -> f64 {
        let b = self.geometric_b(depth);
        let p = 1.0 / (1.0 + b);
        libm::log(1.0 - p)
    }

    /// The number of children of a geometric node whose divisor is `ln_q` and whose random
    /// number is `rand`: UTS's `floor(ln(1 - u) / ln(1 - p))`, `u = rand / 2^31`.
    fn geometric_children_from(ln_q: f64, rand: u32) -> u32 {
        let n = libm::floor(libm::log(1.0 - probability(rand)) / ln_q);
        // `as` saturates (NaN gives 0), where C's conversion would be undefined.
        (n as i64).clamp(0, u32::MAX as i64) as u32
    }

    /// Row `depth` of [`Self::geometric_first_rand`]: for each `k`, the smallest `rand` with
    /// `geometric_children_from(ln_q, rand) >= k`, by bisection.
    ///
    /// Bisection is exact because that count never falls as `rand` rises. `1 - u` is exact, and
    /// two neighbouring values differ by 2^-31, so their true logarithms differ by more than
    /// 2^-31 while lying within 22 of 0, where an ulp is at most 2^-48; `libm::log` is within one
    /// ulp, so it keeps their order. Division by the same `ln_q` and `floor` keep it too. (With
    /// `ln_q` not negative, or NaN, every count is 0.)
    fn first_rands(&self, depth: u32) -> [u32; MAX_CHILDREN as usize] {
        const RANDS: u32 = 1 << 31;
        let ln_q = self.geometric_ln_q_at(depth);
        let mut row = [NEVER; MAX_CHILDREN as usize];
        let mut low = 0;
        for (k, first) in (1..=MAX_CHILDREN).zip(row.iter_mut()) {
            // The answer lies in low..=high; RANDS stands for none.
            let mut high = RANDS;
            while low < high {
                let mid = low + (high - low) / 2;
                if Self::geometric_children_from(ln_q, mid) >= k {
                    high = mid;
                } else {
                    low = mid + 1;
                }
            }
            if low == RANDS {
                break;
            }
            *first = low;
        }
        row
    }

    /// The number of children of a geometric node at `depth` with random number `rand`, at most
    /// [`MAX_CHILDREN`].
    fn geometric_children(&self, depth: u32, rand: u32) -> u32 {
        match self.geometric_first_rand.get(depth as usize) {
            Some(first) => Self::count_first_rands(first, rand),
            None => {
                Self::geometric_children_from(self.geometric_ln_q_at(depth), rand).min(MAX_CHILDREN)
            }
        }
    }

    fn binomial_children(&self, u: f64) -> u32 {
        if u < self.non_leaf_prob {
            self.non_leaf_bf
        } else {
            0
        }
    }

    /// How many children `node` has.
    ///
    /// The common cases come first: a geometric node within the table, a binomial node below
    /// the root. The rest (deeper geometric nodes, the binomial root) go to `children_at`,
    /// inlined too: a call anywhere in a GPU worker entry, even off the node's path, makes
    /// ptxas keep the worker state live across it in the registers a call preserves or in
    /// local memory. Called, the UTS workers spilled at their cap then (80 registers); inlined,
    /// with `descriptor_error`, the default ones spill nothing (docs/results.md).
    #[inline(always)]
    pub fn num_children(&self, node: &UtsNode) -> u32 {
        let (depth, rand) = (node.depth, node.rand());
        if self.geometric_at(depth) {
            if let Some(first) = self.geometric_first_rand.get(depth as usize) {
                return Self::count_first_rands(first, rand);
            }
        } else if depth > 0 || self.tree != BINOMIAL {
            // Not the binomial root, which has its own rule.
            return self.binomial_children(probability(rand)).min(MAX_CHILDREN);
        }
        self.children_at(depth, rand)
    }

    /// Whether a node at `depth` draws its children as a geometric node: every node of a
    /// geometric tree, and those of a hybrid tree above its shift.
    #[inline(always)]
    fn geometric_at(&self, depth: u32) -> bool {
        match self.tree {
            GEOMETRIC => true,
            BINOMIAL => false,
            _ => (depth as f64) < self.shift_depth * self.gen_mx as f64,
        }
    }

    /// The entries of a row of [`Self::geometric_first_rand`] at or below `rand` (they rise with
    /// k): the node's number of children.
    ///
    /// One entry at a time: reading four at once (independent loads) made T1L slower on a GPU
    /// and made the UTS entries spill at their register cap (docs/results.md).
    #[inline(always)]
    fn count_first_rands(first: &[u32; MAX_CHILDREN as usize], rand: u32) -> u32 {
        first.iter().take_while(|&&t| t <= rand).count() as u32
    }

    /// How many children a node at `depth` with random number `rand` ([`UtsNode::rand`]) has,
    /// every case (see `num_children` for why it is inlined).
    #[inline(always)]
    fn children_at(&self, depth: u32, rand: u32) -> u32 {
        if self.tree == BINOMIAL && depth == 0 {
            // The binomial root has floor(b0) children, capped at ceil(b0) only.
            let b = libm::floor(self.b0) as i64;
            return b.clamp(0, libm::ceil(self.b0) as i64) as u32;
        }
        // One call site of `geometric_children` (which LLVM may keep out of line): with two,
        // one per tree type, the bridged UTS workers spilled at their cap then (80 registers).
        let n = if self.geometric_at(depth) {
            self.geometric_children(depth, rand)
        } else {
            self.binomial_children(probability(rand))
        };
        n.min(MAX_CHILDREN)
    }
}

impl UtsNode {
    /// The node's random number: big-endian bytes 16..20, masked to 31 bits.
    #[inline]
    pub fn rand(&self) -> u32 {
        u32::from_be_bytes(state_word(&self.state, 4)) & 0x7fff_ffff
    }

    /// [`Self::rand`] as a probability in [0, 1).
    #[inline]
    pub fn prob(&self) -> f64 {
        probability(self.rand())
    }

    /// Child `i`: SHA-1 of the parent's state and `i` as 4 big-endian bytes.
    ///
    /// On the host through the `sha1` crate's streaming hasher (padding one block by hand and
    /// calling `sha1::compress` is faster on x86 with SHA-NI, but added to the GPU's
    /// local-memory traffic). On the GPU through [`super::uts_hash::child_digest`], one block with
    /// its 80 rounds written out, which keeps the hash in registers; its tests check it against
    /// the crate.
    #[inline]
    pub fn child(&self, i: u32) -> UtsNode {
        #[cfg(target_arch = "nvptx64")]
        let state = super::uts_hash::child_digest(&self.state, i);
        #[cfg(not(target_arch = "nvptx64"))]
        let state = {
            let mut h = Sha1::new();
            h.update(self.state);
            h.update(i.to_be_bytes());
            h.finalize().into()
        };
        UtsNode {
            state,
            depth: self.depth + 1,
        }
    }
}

/// Bytes `4k..4k + 4` of a node's state, read as one 4-byte access. Every read of the state goes
/// through whole words: where a read took its bytes one by one, LLVM split the state into bytes,
/// and the GPU reassembled each word from its four bytes at every node.
#[inline(always)]
pub(crate) fn state_word(state: &[u8; 20], k: usize) -> [u8; 4] {
    let mut word = [0u8; 4];
    word.copy_from_slice(&state[4 * k..4 * k + 4]);
    word
}

/// The tree parameters a task's descriptor 0 points at, read in place: each field is loaded where
/// it is used (a copy of the whole struct went through local memory on the GPU, once per node).
///
/// The address is computed without a branch, so that its load issues with the result row's
/// (see `rows::try_row`); the flag says whether the descriptor holds the parameters (large
/// enough, aligned), and the caller tests it with the row's.
#[inline(always)]
fn params(ctx: &impl Ctx, d: DataDescriptor) -> (*const UtsParams, bool) {
    let params = d.resolve(ctx.area(d.area as usize)) as *const UtsParams;
    let fits = (d.size as usize) >= core::mem::size_of::<UtsParams>() && d.offset & 7 == 0;
    (params, fits)
}

/// The error of a node whose descriptors failed their checks: the parameters' first. Cold, so
/// that the hot path tests both descriptors with one branch and builds no error value; inlined
/// (in a cold block), since a call in the worker entry costs registers (see
/// `UtsParams::num_children`).
#[cold]
#[inline]
fn descriptor_error(params_ok: bool) -> TaskError {
    TaskError::Failed(if params_ok {
        rows::NO_RESULT_ROW
    } else {
        UTS_BAD_PARAMS
    })
}

/// A UTS task: one node, given by its parent's state and its index among the parent's children
/// (the root by its own state). Running it derives the node's state (one SHA-1 block), counts
/// the node and spawns its children without hashing them: every task hashes once, so the
/// nodes that run side by side, one per lane, cost the same whatever their children.
#[mgws_tasks::task]
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct UtsTask {
    /// The parent's state, or the node's own where the index is [`UtsTask::OWN_STATE`].
    pub state: [u8; 20],
    /// The node's depth (low 16 bits) and its index among its parent's children (high 16).
    pub depth_index: u32,
}

/// A UTS task's error code: a node has more children than a task can number (65,535; only a
/// binomial root with `-b` that large can).
pub const UTS_TOO_MANY_CHILDREN: u32 = 0x5554_0003;
/// A UTS task's error code: a node is deeper than a task can record (65,535).
pub const UTS_TOO_DEEP: u32 = 0x5554_0004;

impl UtsTask {
    /// The index that marks a task holding its node's own state (the root).
    pub const OWN_STATE: u32 = 0xffff;

    /// The task of `node` itself (the root of a run).
    pub fn of(node: &UtsNode) -> UtsTask {
        UtsTask {
            state: node.state,
            depth_index: node.depth & 0xffff | Self::OWN_STATE << 16,
        }
    }

    /// The task of child `index` of `parent`.
    #[inline(always)]
    pub fn child_of(parent: &UtsNode, index: u32) -> UtsTask {
        UtsTask {
            state: parent.state,
            depth_index: (parent.depth + 1) & 0xffff | index << 16,
        }
    }

    /// The node this task stands for: its parent's child, hashed here, or its own state.
    #[inline(always)]
    pub fn node(&self) -> UtsNode {
        let (depth, index) = (self.depth_index & 0xffff, self.depth_index >> 16);
        if index == Self::OWN_STATE {
            UtsNode {
                state: self.state,
                depth,
            }
        } else {
            UtsNode {
                state: self.state,
                depth: depth.wrapping_sub(1),
            }
            .child(index)
        }
    }
}

impl TaskFunctor for UtsTask {
    #[inline(always)]
    fn run(&self, task: &TaskStruct, ctx: &mut impl Ctx) -> Result<(), TaskError> {
        // Both addresses before either check, so that their loads issue together; one branch
        // for both checks.
        let ((params, params_fit), row) =
            (params(ctx, task.data[0]), rows::try_row(ctx, task.data[1]));
        let (params, row) = match (params_fit, row) {
            // SAFETY: the descriptor holds the parameters, in bounds and aligned; UtsParams is
            // plain data valid for any bits; the area is read-only and outlives every task of
            // the run.
            (true, Some(row)) => (unsafe { &*params }, row),
            _ => return Err(descriptor_error(params_fit)),
        };
        // The same count on every lane, so every lane returns the same result.
        if ctx.tasks_run() > params.max_nodes {
            return Err(TaskError::Failed(UTS_NODE_LIMIT));
        }
        let node = self.node();
        let n = params.num_children(&node);
        row.add(ctx, COL_NODES, 1);
        if n == 0 {
            // The deepest node of a tree is a leaf, so leaves alone raise the depth.
            row.add(ctx, COL_LEAVES, 1);
            row.max(ctx, COL_DEPTH, node.depth as u64);
            return Ok(());
        }
        if n >= Self::OWN_STATE || node.depth >= 0xffff {
            return Err(TaskError::Failed(if n >= Self::OWN_STATE {
                UTS_TOO_MANY_CHILDREN
            } else {
                UTS_TOO_DEEP
            }));
        }
        ctx.spawn_many(n, |k| task.with_params(&UtsTask::child_of(&node, k)));
        Ok(())
    }
}

/// The descriptors of a UTS run: parameters at `params_area` offset 0, result rows for
/// `workers` workers at `rows_area` offset 0.
pub fn descriptors(params_area: u8, rows_area: u8, workers: u32) -> [DataDescriptor; 2] {
    [
        DataDescriptor::new(
            params_area,
            0,
            core::mem::size_of::<UtsParams>() as u32,
            Access::Read,
        ),
        DataDescriptor::new(
            rows_area,
            0,
            workers * rows::ROW_BYTES as u32,
            Access::ReadWrite,
        ),
    ]
}

/// Tree statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UtsCounts {
    pub nodes: u64,
    pub leaves: u64,
    pub depth: u64,
}

impl UtsCounts {
    /// Counts one node with `children` children.
    #[inline]
    pub fn add_node(&mut self, node: &UtsNode, children: u32) {
        self.nodes += 1;
        self.leaves += (children == 0) as u64;
        self.depth = self.depth.max(node.depth as u64);
    }

    /// Combines two disjoint parts of a tree.
    #[inline]
    pub fn merge(self, other: UtsCounts) -> UtsCounts {
        UtsCounts {
            nodes: self.nodes + other.nodes,
            leaves: self.leaves + other.leaves,
            depth: self.depth.max(other.depth),
        }
    }

    /// The totals of a result table.
    pub fn from_rows(table: &[u64]) -> UtsCounts {
        UtsCounts {
            nodes: rows::column_sum(table, COL_NODES),
            leaves: rows::column_sum(table, COL_LEAVES),
            depth: rows::column_max(table, COL_DEPTH),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_fits_and_root_is_deterministic() {
        assert_eq!(core::mem::size_of::<UtsNode>(), 24);
        let p = UtsParams::new(GEOMETRIC, LINEAR, 4.0, 6, 15.0 / 64.0, 4, 0, 0.5);
        assert_eq!(p.root(), p.root());
        assert_ne!(p.root().child(0), p.root().child(1));
        assert_eq!(p.root().child(3).depth, 1);
    }

    #[test]
    fn default_tree_counts_match_the_published_ones() {
        let p = UtsParams::new(GEOMETRIC, LINEAR, 4.0, 6, 15.0 / 64.0, 4, 0, 0.5);
        let mut stack = [p.root(); 256];
        let mut len = 1;
        let mut c = UtsCounts::default();
        while len > 0 {
            len -= 1;
            let node = stack[len];
            let n = p.num_children(&node);
            c.add_node(&node, n);
            for i in 0..n {
                stack[len] = node.child(i);
                len += 1;
            }
        }
        assert_eq!(
            c,
            UtsCounts {
                nodes: 1732,
                leaves: 1050,
                depth: 6
            }
        );
    }

    /// A xorshift64 generator from `seed` (nonzero): the tests' spread of random numbers.
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// A node's number of children read from the host's table is the number the UTS formula
    /// gives, for every shape, at each entry, next to it, and at numbers spread over the range;
    /// deeper nodes than the table covers compute it.
    #[test]
    fn the_first_rand_table_gives_the_formula_s_counts() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let mut next_rand = move || (next() >> 33) as u32;
        for shape in [LINEAR, EXPDEC, CYCLIC, FIXED] {
            for (tree, b0) in [
                (GEOMETRIC, 4.0),
                (HYBRID, 4.0),
                (GEOMETRIC, 2000.0),
                (GEOMETRIC, 1.5),
            ] {
                let p = UtsParams::new(tree, shape, b0, 13, 0.2, 5, 7, 0.5);
                for depth in 0..GEOMETRIC_TABLE_DEPTHS as u32 + 4 {
                    let ln_q = p.geometric_ln_q_at(depth);
                    let formula =
                        |rand| UtsParams::geometric_children_from(ln_q, rand).min(MAX_CHILDREN);
                    let entries = p
                        .geometric_first_rand
                        .get(depth as usize)
                        .into_iter()
                        .flatten();
                    let near = entries
                        .filter(|&&t| t != NEVER)
                        .flat_map(|&t| [t.saturating_sub(1), t, (t + 1).min(0x7fff_ffff)]);
                    let spread = (0..2000).map(|_| next_rand());
                    for rand in near.chain(spread).chain([0, 0x7fff_ffff]) {
                        assert_eq!(
                            p.geometric_children(depth, rand),
                            formula(rand),
                            "shape {shape} b0 {b0} depth {depth} rand {rand}"
                        );
                    }
                }
            }
        }
    }

    /// The inline paths of `num_children` give what `children_at` gives for every kind of
    /// node: geometric within and beyond the table, hybrid on both sides of its shift, the
    /// binomial root, and binomial nodes with more children than a node may have.
    #[test]
    fn num_children_agrees_with_children_at() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let trees = [
            UtsParams::new(GEOMETRIC, FIXED, 4.0, 40, 0.2, 5, 1, 0.5),
            UtsParams::new(GEOMETRIC, CYCLIC, 3.0, 10, 0.2, 5, 2, 0.5),
            UtsParams::new(HYBRID, LINEAR, 4.0, 16, 0.3, 4, 3, 0.5),
            UtsParams::new(BINOMIAL, LINEAR, 2000.0, 6, 0.12, 8, 4, 0.5),
            UtsParams::new(BINOMIAL, LINEAR, 7.5, 6, 0.5, 150, 5, 0.5),
        ];
        for p in &trees {
            for _ in 0..20_000 {
                let r = next();
                let mut node = UtsNode {
                    state: [0; 20],
                    depth: (r % 48) as u32,
                };
                node.state[16..].copy_from_slice(&((r >> 32) as u32).to_be_bytes());
                if r.is_multiple_of(7) {
                    node.depth = 0;
                }
                assert_eq!(
                    p.num_children(&node),
                    p.children_at(node.depth, node.rand()),
                    "tree {} shape {} depth {} rand {}",
                    p.tree,
                    p.shape,
                    node.depth,
                    node.rand()
                );
            }
        }
    }
}
