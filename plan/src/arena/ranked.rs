//! Which already placed intervals overlap an interval in time, for a layout that places
//! intervals in a fixed order (their ranks `0..n`): two segment trees over the points whose
//! node lists hold ranks in increasing order, so that a query for rank `r` reads only the
//! prefixes below `r` of O(log points) lists.
//!
//! - `cover` holds each interval at the canonical nodes of its window: the intervals
//!   containing point `p` are those on the path from `p`'s leaf to the root (a stabbing query).
//! - `starts` holds each interval at its start's leaf and that leaf's ancestors: the intervals
//!   starting in `[l, r]` are those at the canonical nodes of `[l, r]`.
//!
//! An interval `[s, e]` overlaps `[s', e']` exactly when it contains `s'` or starts in
//! `(s', e']`, and the two cases are disjoint, so each overlapping placed interval is reported
//! once. Building costs O(n log points); a query O(log points + the intervals it reports).
//!
//! Invariant: every node list is sorted by rank.

use crate::csr::Csr;
use crate::finalize::segtree::canonical_nodes;
use crate::index::{IntervalIx, Window};

/// The two trees over the windows of intervals `0..n`, by rank.
pub(super) struct RankedTrees<'a> {
    windows: &'a [Window],
    leaves: usize,
    cover: Csr<usize, IntervalIx>,
    starts: Csr<usize, IntervalIx>,
}

impl<'a> RankedTrees<'a> {
    /// The trees of `windows` (by rank; none empty).
    pub(super) fn new(windows: &'a [Window]) -> Self {
        let points = windows.iter().map(|w| w.after()).max().unwrap_or(1);
        let leaves = points.next_power_of_two();
        let cover = Csr::from_pairs(2 * leaves, || {
            let mut pairs = Vec::new();
            for (r, w) in windows.iter().enumerate() {
                canonical_nodes(leaves, w.start.index(), w.end.index(), |k| {
                    pairs.push((k, IntervalIx::new(r)))
                });
            }
            pairs.into_iter()
        });
        let starts = Csr::from_pairs(2 * leaves, || {
            windows.iter().enumerate().flat_map(move |(r, w)| {
                let leaf = w.start.index() + leaves;
                (0..=leaf.ilog2()).map(move |up| (leaf >> up, IntervalIx::new(r)))
            })
        });
        RankedTrees {
            windows,
            leaves,
            cover,
            starts,
        }
    }

    /// Calls `f` with the rank of every interval of rank below `r` that overlaps interval
    /// `r`'s window, once each.
    #[inline]
    pub(super) fn for_each_placed(&self, r: usize, mut f: impl FnMut(usize)) {
        let w = self.windows[r];
        let mut prefix = |list: &[IntervalIx]| {
            for &j in list {
                if j.index() >= r {
                    break;
                }
                f(j.index());
            }
        };
        let mut k = w.start.index() + self.leaves;
        while k >= 1 {
            prefix(self.cover.row(k));
            k >>= 1;
        }
        if w.end > w.start {
            canonical_nodes(self.leaves, w.start.index() + 1, w.end.index(), |k| {
                prefix(self.starts.row(k))
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::PointIx;

    /// The trees report exactly the lower-ranked intervals a quadratic scan finds overlapping.
    #[test]
    fn placed_overlaps_match_a_quadratic_scan() {
        let mut next = ebb_testkit::lcg(0x9e37_79b9_7f4a_7c15);
        for _ in 0..40 {
            let n = 1 + next(90) as usize;
            let windows: Vec<Window> = (0..n)
                .map(|_| {
                    let s = next(60) as usize;
                    Window::new(PointIx::new(s), PointIx::new(s + next(25) as usize))
                })
                .collect();
            let trees = RankedTrees::new(&windows);
            for r in 0..n {
                let mut got = Vec::new();
                trees.for_each_placed(r, |j| got.push(j));
                got.sort_unstable();
                let want: Vec<usize> = (0..r)
                    .filter(|&j| windows[j].overlaps(windows[r]))
                    .collect();
                assert_eq!(got, want, "rank {r}");
            }
        }
    }
}
