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

/// The options a finalize may price, by the canonical nodes of their windows: built once per
/// plan variant ([`super::Prepared`]), as windows do not depend on the shapes.
pub(super) type CoverNodes = IntervalIndex;

/// The rank order of an option among options of equal score: its static score's bits, then
/// `u64::MAX - bytes` (larger values first), then its tag `candidate << 1 | kind` (kind 1 =
/// swap).
pub(super) type Rank = (u64, u64, u32);

/// One heap entry: a score bound (the bits of a non-negative float, which order like it), the
/// option's rank (ties; its fields flat, so that an entry takes 32 bytes) and the option;
/// entries order by `(key, rank)`.
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    static_bits: u64,
    larger_first: u64,
    tag: u32,
    option: u32,
}

impl Entry {
    /// `(key, rank)` order of two entries.
    fn before(&self, b: &Entry) -> bool {
        (self.key, self.static_bits, self.larger_first, self.tag)
            < (b.key, b.static_bits, b.larger_first, b.tag)
    }
}

/// What [`CoverHeaps::best`] asks of the options: which are dead, their ranks, and their
/// scores now.
pub(super) trait Scores {
    /// Whether option `i` cannot be taken (read when a node's heap is built).
    fn dead(&mut self, i: usize) -> bool;
    /// Option `i`'s [`Rank`]; its static score (`.0`) is its first key.
    fn rank(&mut self, i: usize) -> Rank;
    /// Whether the candidate of tag `tag >> 1` ([`Rank`]'s `.2`) is taken: the heaps drop its
    /// options from their entries alone, without reading the options.
    fn taken(&self, candidate: u32) -> bool;
    /// Called for the swaps only (tag bit 0 set; a recompute's score never changes): `None`
    /// when `key` (score bits) is option `i`'s current score, else `Some(bits of its score
    /// now)`, never below `key`.
    fn refresh(&mut self, i: usize, key: u64) -> Option<u64>;
}

/// The lazy heaps of one greedy run (see the module docs): a node's heap is built the first
/// time a query passes it.
pub(super) struct CoverHeaps<'a> {
    nodes: &'a CoverNodes,
    /// The heap of the node with id `d` ([`CoverNodes::id`], only nodes that store options have
    /// one) is `entries[at[d].0..at[d].0 + at[d].1]`; `at[d].0 == u32::MAX` until built.
    at: Vec<(u32, u32)>,
    entries: Vec<Entry>,
    /// Nodes (ids) of the current query's path with live options, leaf to root, and their
    /// heaps' tops.
    path: Vec<(usize, Entry)>,
}

impl<'a> CoverHeaps<'a> {
    /// Heaps over `nodes`, none built.
    pub(super) fn new(nodes: &'a CoverNodes) -> Self {
        CoverHeaps {
            nodes,
            at: vec![(u32::MAX, 0); nodes.stored()],
            entries: Vec::new(),
            path: Vec::with_capacity(64),
        }
    }

    /// Forgets every heap (after scores fell): they are rebuilt with the static scores.
    pub(super) fn reset(&mut self) {
        self.at.fill((u32::MAX, 0));
        self.entries.clear();
    }

    /// Builds the heap of node `k` (id `d`) from its options that are not dead.
    fn build(&mut self, k: usize, d: usize, scores: &mut impl Scores) {
        let base = self.entries.len();
        for &i in self.nodes.at(k) {
            if !scores.dead(i as usize) {
                let (static_bits, larger_first, tag) = scores.rank(i as usize);
                self.entries.push(Entry {
                    key: static_bits,
                    static_bits,
                    larger_first,
                    tag,
                    option: i,
                });
            }
        }
        let n = self.entries.len() - base;
        self.at[d] = (base as u32, n as u32);
        for i in (0..n / 2).rev() {
            self.sift_down(base, n, i);
        }
    }

    /// The option covering point `p` that is not dead with the lowest `(score, rank)`, or
    /// `None` when there is none (see [`Scores`] for what is asked of the options).
    pub(super) fn best(&mut self, p: usize, scores: &mut impl Scores) -> Option<(u64, usize)> {
        self.path.clear();
        let mut k = p + self.nodes.leaves();
        while k >= 1 {
            if let Some(d) = self.nodes.id(k) {
                if self.at[d].0 == u32::MAX {
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
            let option = e.option as usize;
            let tag = e.tag;
            if scores.taken(tag >> 1) {
                self.pop(d);
            } else {
                let now = if tag & 1 == 1 {
                    scores.refresh(option, e.key)
                } else {
                    None
                };
                match now {
                    None => return Some((e.key, option)),
                    Some(key) => {
                        let base = self.at[d].0 as usize;
                        self.entries[base].key = key;
                        self.sift_down(base, self.at[d].1 as usize, 0);
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

    /// The top of the (built) heap of the node with id `d`, if it is not empty.
    fn top(&self, d: usize) -> Option<Entry> {
        let (base, n) = self.at[d];
        (n > 0).then(|| self.entries[base as usize])
    }

    /// Removes the top of the heap of the node with id `d`.
    fn pop(&mut self, d: usize) {
        let (base, n) = self.at[d];
        let (base, n) = (base as usize, n as usize - 1);
        self.at[d].1 -= 1;
        self.entries[base] = self.entries[base + n];
        self.sift_down(base, n, 0);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Static scores: ranks from a table, nothing refreshed.
    struct Static<'a> {
        rank: &'a [Rank],
        taken: &'a [bool],
    }

    impl Scores for Static<'_> {
        fn dead(&mut self, i: usize) -> bool {
            self.taken[i]
        }
        fn rank(&mut self, i: usize) -> Rank {
            self.rank[i]
        }
        fn taken(&self, candidate: u32) -> bool {
            self.taken[candidate as usize]
        }
        fn refresh(&mut self, _: usize, _: u64) -> Option<u64> {
            None
        }
    }

    /// Static scores only: the heaps answer exactly what a scan in rank order answers.
    #[test]
    fn best_matches_a_scan() {
        let mut next = crate::test_lcg::lcg(0x9e37_79b9_7f4a_7c15);
        for _ in 0..40 {
            let points = 1 + next(70) as usize;
            let n = next(60) as usize;
            let windows: Vec<(u32, u32)> = (0..n)
                .map(|_| {
                    let l = next(points as u64 + 3) as u32;
                    (l, l + next(20) as u32)
                })
                .collect();
            let rank: Vec<Rank> = (0..n)
                .map(|i| ((next(8) as f64).to_bits(), next(3), (i as u32) << 1))
                .collect();
            let nodes = CoverNodes::new(points, windows.iter().copied());
            let mut heaps = CoverHeaps::new(&nodes);
            let mut taken = vec![false; n];
            for _ in 0..30 {
                let p = next(points as u64) as usize;
                let want = (0..n)
                    .filter(|&i| {
                        !taken[i] && windows[i].0 as usize <= p && p <= windows[i].1 as usize
                    })
                    .min_by_key(|&i| rank[i]);
                let got = heaps.best(
                    p,
                    &mut Static {
                        rank: &rank,
                        taken: &taken,
                    },
                );
                assert_eq!(got.map(|g| g.1), want);
                if let Some(i) = want {
                    taken[i] = true;
                }
            }
        }
    }
}
