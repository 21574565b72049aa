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
pub struct RankedTrees<'a> {
    windows: &'a [Window],
    leaves: usize,
    cover: Csr<usize, IntervalIx>,
    starts: Csr<usize, IntervalIx>,
}

impl<'a> RankedTrees<'a> {
    /// The trees of `windows` (by rank; none empty).
    pub fn new(windows: &'a [Window]) -> Self {
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
    pub fn for_each_placed(&self, r: usize, mut f: impl FnMut(usize)) {
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
