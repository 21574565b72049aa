//! Which option to take at a peak point: the untaken option covering the point with the
//! lowest current score, found through lazy heaps over a segment tree of the points.
//!
//! Every option is stored at the canonical nodes of its window (a segment tree over the
//! points), so the options covering point `p` are exactly those stored on the path from `p`'s
//! leaf to the root (a stabbing query); which options a node holds does not depend on the
//! shapes ([`CoverNodes`], built once per plan variant). During a greedy run each node keeps its
//! live options in a binary min-heap keyed by `(score bound, rank)`, built the first time a
//! query passes the node (most nodes never are).
//!
//! Scores only grow while options are taken (a swap's marginal cost rises as the link fills:
//! `crate::cost::exposed_transfer_us`), so a key evaluated earlier is a lower bound of the
//! option's score now, and the static score is a lower bound from the start (lazy evaluation,
//! as in lazy greedy submodular maximization, Minoux 1978). A query looks at the tops of the
//! path's heaps: the smallest top whose key is current is the answer; a stale top is evaluated
//! and sifted down; a taken one is dropped. When scores can fall (a widening removes a swap),
//! the heaps are rebuilt with the static scores ([`CoverHeaps::reset`]).
//!
//! Invariant: every heap entry's key is at most its option's current score, and entries of
//! options whose candidate is taken are only ever removed.

use super::segtree::IntervalIndex;
use crate::format::DecisionKind;
use crate::index::{CandidateIx, IndexVec, OptionIx, PointIx, StoredNode};

/// The options a finalize may price, by the canonical nodes of their windows: built once per
/// plan variant ([`super::Prepared`]), as windows do not depend on the shapes.
pub type CoverNodes = IntervalIndex<OptionIx>;

/// A score (µs added per byte freed, weighted by points: lower is better; never negative) as
/// the bits of its `f64`, `(score + 0.0).to_bits()`.
///
/// Why bits: the heaps and ranks compare scores millions of times per finalize, and the
/// IEEE-754 bits of a non-negative float order, as unsigned integers, exactly as the float
/// does; so a key compares as one integer, is totally ordered (`Ord`, usable in derived and
/// tuple orders) and needs no NaN handling. Adding `0.0` turns `-0.0` (a zero cost divided by
/// a positive benefit can give it) into `+0.0`, whose bits are 0; the bits of `-0.0` have the
/// sign bit set and would order above every positive score.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Debug)]
#[repr(transparent)]
pub struct ScoreKey(u64);

impl ScoreKey {
    /// The key of `score` (not negative; see the type's docs).
    #[inline(always)]
    pub fn of(score: f64) -> ScoreKey {
        ScoreKey((score + 0.0).to_bits())
    }
}

/// An option's tag, `candidate << 1 | kind` (kind bit 1 = swap): one `u32` that orders options
/// by candidate, then recompute before swap, and names the candidate and whether the option is
/// a swap without reading the option (the heaps keep it in their entries).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
#[repr(transparent)]
pub struct OptionTag(u32);

impl OptionTag {
    /// The tag of candidate `c` taken as `kind`.
    #[inline(always)]
    pub fn new(c: CandidateIx, kind: DecisionKind) -> OptionTag {
        OptionTag(c.raw() << 1 | u32::from(kind == DecisionKind::Swap))
    }

    /// The candidate.
    #[inline(always)]
    pub fn candidate(self) -> CandidateIx {
        CandidateIx::from_raw(self.0 >> 1)
    }

    /// Whether the option is a swap (its score can change as the link fills).
    #[inline(always)]
    pub fn is_swap(self) -> bool {
        self.0 & 1 == 1
    }
}

/// The rank order of an option among options of equal score (fields compared in order):
/// unique per option.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub struct Rank {
    /// Its static score.
    pub score: ScoreKey,
    /// `u64::MAX − bytes`: larger values first.
    pub larger_first: u64,
    /// Then by candidate and kind.
    pub tag: OptionTag,
}

/// One heap entry: a score bound, the option's rank (ties; its fields flat, so that an entry
/// takes 32 bytes) and the option; entries order by `(key, rank)`.
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: ScoreKey,
    static_score: ScoreKey,
    larger_first: u64,
    tag: OptionTag,
    option: OptionIx,
}

impl Entry {
    /// `(key, rank)` order of two entries.
    #[inline(always)]
    fn before(&self, b: &Entry) -> bool {
        (self.key, self.static_score, self.larger_first, self.tag)
            < (b.key, b.static_score, b.larger_first, b.tag)
    }
}

/// What [`CoverHeaps::best`] asks of the options: which are dead, their ranks, and their
/// scores now.
pub trait Scores {
    /// Whether option `i` cannot be taken (read when a node's heap is built).
    fn dead(&mut self, i: OptionIx) -> bool;
    /// Option `i`'s [`Rank`]; its static score is its first key.
    fn rank(&mut self, i: OptionIx) -> Rank;
    /// Whether `candidate` is taken: the heaps drop its options from their entries' tags
    /// alone, without reading the options.
    fn taken(&self, candidate: CandidateIx) -> bool;
    /// Called for the swaps only (a recompute's score never changes): `None` when `key` is
    /// option `i`'s current score, else `Some(its score now)`, never below `key`.
    fn refresh(&mut self, i: OptionIx, key: ScoreKey) -> Option<ScoreKey>;
}

/// Where a built heap lies in [`CoverHeaps`]'s entries: `entries[base..base + len]` (32-bit:
/// one heap range per node that stores options).
#[derive(Clone, Copy, Debug)]
struct HeapRange {
    base: u32,
    len: u32,
}

impl HeapRange {
    /// The heap of `len` entries from `base`.
    #[inline(always)]
    fn new(base: usize, len: usize) -> HeapRange {
        HeapRange {
            base: base as u32,
            len: len as u32,
        }
    }

    /// `(base, len)` as positions.
    #[inline(always)]
    fn get(self) -> (usize, usize) {
        (self.base as usize, self.len as usize)
    }
}

/// The range of a heap not built yet.
const NOT_BUILT: HeapRange = HeapRange {
    base: u32::MAX,
    len: 0,
};

/// The lazy heaps of one greedy run (see the module docs): a node's heap is built the first
/// time a query passes it.
pub struct CoverHeaps<'a> {
    nodes: &'a CoverNodes,
    /// The heap of each node that stores options ([`CoverNodes::id`]), [`NOT_BUILT`] until
    /// built.
    heaps: IndexVec<StoredNode, HeapRange>,
    entries: Vec<Entry>,
    /// Nodes of the current query's path with live options, leaf to root, and their heaps'
    /// tops.
    path: Vec<(StoredNode, Entry)>,
}

impl<'a> CoverHeaps<'a> {
    /// Heaps over `nodes`, none built.
    pub fn new(nodes: &'a CoverNodes) -> Self {
        CoverHeaps {
            nodes,
            heaps: IndexVec::from_elem(NOT_BUILT, nodes.stored()),
            entries: Vec::new(),
            path: Vec::with_capacity(64),
        }
    }

    /// Forgets every heap (after scores fell): they are rebuilt with the static scores.
    pub fn reset(&mut self) {
        self.heaps.fill(NOT_BUILT);
        self.entries.clear();
    }

    /// Builds the heap of node `k` (id `d`) from its options that are not dead.
    fn build(&mut self, k: usize, d: StoredNode, scores: &mut impl Scores) {
        let base = self.entries.len();
        for &option in self.nodes.members(k) {
            if !scores.dead(option) {
                let rank = scores.rank(option);
                self.entries.push(Entry {
                    key: rank.score,
                    static_score: rank.score,
                    larger_first: rank.larger_first,
                    tag: rank.tag,
                    option,
                });
            }
        }
        let len = self.entries.len() - base;
        self.heaps[d] = HeapRange::new(base, len);
        for i in (0..len / 2).rev() {
            self.sift_down(base, len, i);
        }
    }

    /// The option covering point `p` that is not dead with the lowest `(score, rank)`, or
    /// `None` when there is none (see [`Scores`] for what is asked of the options).
    pub fn best(&mut self, p: PointIx, scores: &mut impl Scores) -> Option<(ScoreKey, OptionIx)> {
        self.path.clear();
        let mut k = p.index() + self.nodes.leaves();
        while k >= 1 {
            if let Some(d) = self.nodes.id(k) {
                if self.heaps[d].base == NOT_BUILT.base {
                    self.build(k, d, scores);
                }
                if let Some(top) = self.top(d) {
                    self.path.push((d, top));
                }
            }
            k >>= 1;
        }
        loop {
            // The smallest top among the path's heaps.
            let (j, &(d, e)) =
                self.path
                    .iter()
                    .enumerate()
                    .reduce(|a, b| if b.1 .1.before(&a.1 .1) { b } else { a })?;
            if scores.taken(e.tag.candidate()) {
                self.pop(d);
            } else {
                let now = if e.tag.is_swap() {
                    scores.refresh(e.option, e.key)
                } else {
                    None
                };
                match now {
                    None => return Some((e.key, e.option)),
                    Some(key) => {
                        let (base, len) = self.heaps[d].get();
                        self.entries[base].key = key;
                        self.sift_down(base, len, 0);
                    }
                }
            }
            match self.top(d) {
                Some(top) => self.path[j].1 = top,
                None => {
                    self.path.swap_remove(j);
                }
            }
        }
    }

    /// The top of the (built) heap of node `d`, if it is not empty.
    #[inline]
    fn top(&self, d: StoredNode) -> Option<Entry> {
        let (base, len) = self.heaps[d].get();
        (len > 0).then(|| self.entries[base])
    }

    /// Removes the top of the heap of node `d`.
    fn pop(&mut self, d: StoredNode) {
        self.heaps[d].len -= 1;
        let (base, len) = self.heaps[d].get();
        self.entries[base] = self.entries[base + len];
        self.sift_down(base, len, 0);
    }

    /// Moves entry `i` of the heap `entries[base..base + n]` down to its place.
    fn sift_down(&mut self, base: usize, n: usize, mut i: usize) {
        if i >= n {
            return;
        }
        let e = self.entries[base + i];
        loop {
            let mut c = 2 * i + 1;
            if c >= n {
                break;
            }
            if c + 1 < n && self.entries[base + c + 1].before(&self.entries[base + c]) {
                c += 1;
            }
            if !self.entries[base + c].before(&e) {
                break;
            }
            self.entries[base + i] = self.entries[base + c];
            i = c;
        }
        self.entries[base + i] = e;
    }
}
