//! Segment trees over program points: [`PeakTree`] (range add, global argmax, range max), so
//! that each eviction decision during [`super::finalize`] costs O(log n) (n = points of the
//! schedule), and `IntervalIndex` (intervals stored at the canonical nodes of their points,
//! for stabbing queries: which intervals contain a point).
//!
//! Both are bottom-up trees over a power of two of leaves (node 1 the root, node `k`'s
//! children `2k` and `2k + 1`, point `p` at leaf `p + leaves`); a range of points is the union
//! of its O(log n) canonical nodes (`canonical_nodes`).

use crate::csr::Csr;
use crate::index::{Idx, PointIx, StoredNode, Window};

/// Calls `f` with the canonical nodes of points `[l, r]` (inclusive, `l <= r`) in a tree of
/// `leaves` leaves: the O(log n) nodes whose ranges are inside `[l, r]` and whose parents'
/// are not, which together cover it exactly.
pub fn canonical_nodes(leaves: usize, l: usize, r: usize, mut f: impl FnMut(usize)) {
    let (mut l, mut r) = (l + leaves, r + 1 + leaves);
    while l < r {
        if l & 1 == 1 {
            f(l);
            l += 1;
        }
        if r & 1 == 1 {
            r -= 1;
            f(r);
        }
        l >>= 1;
        r >>= 1;
    }
}

/// Intervals of points stored at the canonical nodes of their ranges ([`canonical_nodes`]), by
/// node ([`Csr`]): the intervals containing point `p` are exactly those stored on the path from
/// `p`'s leaf to the root. Intervals are named by `T`, their positions in the list the index was
/// built from.
#[derive(Clone, Debug)]
pub struct IntervalIndex<T> {
    /// Leaves of the tree: a power of two at least the number of points.
    leaves: usize,
    /// Per node `k` (`0..2 · leaves`), the intervals stored there, in list order.
    members: Csr<usize, T>,
    /// Per node, its rank among the nodes that store intervals ([`IntervalIndex::id`]), or
    /// [`NOT_STORED`] for one that stores none.
    ids: Vec<StoredNode>,
    /// How many nodes store intervals.
    stored: usize,
}

/// The id of a node that stores no interval.
const NOT_STORED: StoredNode = StoredNode::from_raw(u32::MAX);

impl<T: Idx + Default> IntervalIndex<T> {
    /// The index of intervals `windows[i]` over `points` points, interval `i` named
    /// `T::new(i)`; the part of an interval past the last point is left out, an empty one is
    /// not stored.
    pub fn new(points: usize, windows: impl Iterator<Item = Window>) -> Self {
        let leaves = points.max(1).next_power_of_two();
        let last = PointIx::new(points.max(1) - 1);
        // (node, interval) for every canonical node of every interval, in interval order.
        let mut stored_at: Vec<(usize, T)> = Vec::new();
        for (i, w) in windows.enumerate() {
            let w = Window::new(w.start, w.end.min(last));
            if !w.is_empty() {
                canonical_nodes(leaves, w.start.index(), w.end.index(), |k| {
                    stored_at.push((k, T::new(i)))
                });
            }
        }
        let members = Csr::from_pairs(2 * leaves, || stored_at.iter().copied());
        let mut stored = 0;
        let ids = (0..2 * leaves)
            .map(|k| {
                if members.row_range(k).is_empty() {
                    NOT_STORED
                } else {
                    stored += 1;
                    StoredNode::new(stored - 1)
                }
            })
            .collect();
        IntervalIndex {
            leaves,
            members,
            ids,
            stored,
        }
    }

    /// Node `k`'s rank among the nodes that store intervals (`0..stored()`), `None` when it
    /// stores none: for per-node state kept only where there are intervals.
    #[inline]
    pub fn id(&self, k: usize) -> Option<StoredNode> {
        self.ids.get(k).copied().filter(|&i| i != NOT_STORED)
    }

    /// How many nodes store intervals.
    pub fn stored(&self) -> usize {
        self.stored
    }

    /// Leaves of the tree (point `p` is node `p + leaves`).
    #[inline]
    pub fn leaves(&self) -> usize {
        self.leaves
    }

    /// The intervals stored at node `k`.
    #[inline]
    pub fn members(&self, k: usize) -> &[T] {
        self.members.row(k)
    }
}

/// Range-add / max segment tree over `n` points, bottom-up (no recursion): a node holds the
/// maximum of its children plus the bytes added to its whole range.
#[derive(Clone, Debug)]
pub struct PeakTree {
    n: usize,
    /// Leaves: a power of two at least `n` (the extra ones hold [`PAD`]).
    size: usize,
    /// `max[k]` = max(`max[2k]`, `max[2k + 1]`) + `add[k]`; leaves hold their points' bytes.
    max: Vec<i64>,
    /// Bytes added to every point under internal node `k`.
    add: Vec<i64>,
}

/// The bytes of a padding leaf: below any point's (and safe to add to).
const PAD: i64 = i64::MIN / 4;

impl PeakTree {
    /// Builds the tree from the resident bytes at each point.
    pub fn new(values: &[i64]) -> Self {
        let n = values.len().max(1);
        let size = n.next_power_of_two();
        let mut max = vec![PAD; 2 * size];
        max[size..size + values.len()].copy_from_slice(values);
        for k in (1..size).rev() {
            max[k] = max[2 * k].max(max[2 * k + 1]);
        }
        PeakTree {
            n,
            size,
            max,
            add: vec![0; size],
        }
    }

    /// Adds `delta` bytes at every point of `[l, r]` (inclusive; empty when `l > r`).
    pub fn add(&mut self, l: usize, r: usize, delta: i64) {
        if l > r || l >= self.n || delta == 0 {
            return;
        }
        let r = r.min(self.n - 1);
        canonical_nodes(self.size, l, r, |k| self.apply(k, delta));
        self.pull(l + self.size, r + self.size);
    }

    fn apply(&mut self, k: usize, delta: i64) {
        self.max[k] += delta;
        if k < self.size {
            self.add[k] += delta;
        }
    }

    /// Recomputes the ancestors of leaves `a` and `b` after a range add whose canonical nodes
    /// lie under them, level by level (each common ancestor once). Above the first common
    /// ancestor (the only common one that can be a canonical node, whose value the add
    /// changed directly) a node is a function of its children alone, so where one comes out
    /// unchanged its ancestors do too and the walk stops.
    fn pull(&mut self, mut a: usize, mut b: usize) {
        a >>= 1;
        b >>= 1;
        while a != b {
            self.max[a] = self.max[2 * a].max(self.max[2 * a + 1]) + self.add[a];
            self.max[b] = self.max[2 * b].max(self.max[2 * b + 1]) + self.add[b];
            a >>= 1;
            b >>= 1;
        }
        if a >= 1 {
            self.max[a] = self.max[2 * a].max(self.max[2 * a + 1]) + self.add[a];
            a >>= 1;
        }
        while a >= 1 {
            let m = self.max[2 * a].max(self.max[2 * a + 1]) + self.add[a];
            if m == self.max[a] {
                break;
            }
            self.max[a] = m;
            a >>= 1;
        }
    }

    /// The maximum over all points.
    pub fn max(&self) -> i64 {
        self.max[1]
    }

    /// The maximum over the points `[l, r]` (inclusive; `i64::MIN` when empty), O(log n),
    /// bottom-up: the canonical nodes of `[l, r]`, each plus the bytes added at its ancestors.
    /// After each level, every left node taken so far lies under node `lo − 1` and every right
    /// one under node `hi` (the nodes next to the boundaries), so one running sum per side
    /// collects their ancestors' adds.
    pub fn max_in(&self, l: usize, r: usize) -> i64 {
        let r = r.min(self.n - 1);
        if l > r {
            return i64::MIN;
        }
        let (mut lo, mut hi) = (l + self.size, r + 1 + self.size);
        let (mut left, mut right): (Option<i64>, Option<i64>) = (None, None);
        let take = |side: &mut Option<i64>, v: i64| *side = Some(side.map_or(v, |s| s.max(v)));
        while lo < hi {
            if lo & 1 == 1 {
                take(&mut left, self.max[lo]);
                lo += 1;
            }
            if hi & 1 == 1 {
                hi -= 1;
                take(&mut right, self.max[hi]);
            }
            lo >>= 1;
            hi >>= 1;
            if let Some(x) = &mut left {
                *x += self.add[lo - 1];
            }
            if let Some(x) = &mut right {
                *x += self.add[hi];
            }
        }
        // The ancestors above the level where the boundaries met.
        let above = |side: Option<i64>, mut k: usize| {
            side.map(|mut x| {
                while k > 1 {
                    k >>= 1;
                    x += self.add[k];
                }
                x
            })
        };
        let (left, right) = (above(left, lo - 1), above(right, hi));
        left.max(right).unwrap_or(i64::MIN)
    }

    /// Whether the maximum over all points stays at most `budget` with the range adds `adds`
    /// (`(l, r, delta)`: `delta` bytes at every point of `[l, r]`, inclusive, as
    /// [`PeakTree::add`] takes them) applied, without applying them: exactly
    /// `{ add all; max() <= budget }`, in O(k log k + k log n) for k adds. The adds cut the
    /// points into at most 2k runs of one summed delta; only the runs where it is positive
    /// can rise, each checked by [`PeakTree::max_in`] (the rest stay at most the current
    /// maximum). Where the current maximum already exceeds `budget`, or for more than 8
    /// adds, the adds are applied to a copy (O(n); never in the greedy's second look).
    pub fn fits_with(&self, adds: &[(usize, usize, i64)], budget: i64) -> bool {
        let applied = || {
            let mut t = self.clone();
            for &(l, r, d) in adds {
                t.add(l, r, d);
            }
            t.max() <= budget
        };
        if self.max() > budget {
            return applied();
        }
        // Clamped as `add` clamps: adds past the last point, empty or zero ones, drop out.
        let mut live = [(0usize, 0usize, 0i64); 8];
        let mut k = 0;
        for &(l, r, d) in adds {
            if l > r || l >= self.n || d == 0 {
                continue;
            }
            if k == live.len() {
                return applied();
            }
            live[k] = (l, r.min(self.n - 1), d);
            k += 1;
        }
        let live = &live[..k];
        let mut cuts = [0usize; 16];
        for (j, &(l, r, _)) in live.iter().enumerate() {
            cuts[2 * j] = l;
            cuts[2 * j + 1] = r + 1;
        }
        let cuts = &mut cuts[..2 * k];
        cuts.sort_unstable();
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1]);
            if a == b {
                continue;
            }
            let delta: i64 = live
                .iter()
                .filter(|&&(l, r, _)| l <= a && a <= r)
                .map(|&(_, _, d)| d)
                .sum();
            if delta > 0 && self.max_in(a, b - 1) + delta > budget {
                return false;
            }
        }
        true
    }

    /// The maximum over all points and the first point where it is reached.
    pub fn argmax(&self) -> (i64, usize) {
        let best = self.max[1];
        let (mut k, mut target) = (1, best);
        while k < self.size {
            target -= self.add[k];
            k = if self.max[2 * k] == target {
                2 * k
            } else {
                2 * k + 1
            };
        }
        (best, k - self.size)
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True when the tree has no points (never: a tree has at least one).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Resident bytes at every point (O(n)).
    pub fn values(&self) -> Vec<i64> {
        // Bytes added above each node, top down.
        let mut above = vec![0i64; self.size];
        for k in 2..self.size {
            above[k] = above[k / 2] + self.add[k / 2];
        }
        (0..self.n)
            .map(|p| {
                let leaf = p + self.size;
                let up = if self.size > 1 {
                    above[leaf / 2] + self.add[leaf / 2]
                } else {
                    0
                };
                self.max[leaf] + up
            })
            .collect()
    }
}
