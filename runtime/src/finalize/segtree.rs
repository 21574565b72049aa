//! A segment tree over program points with range add and global argmax, so that each eviction
//! decision during [`super::finalize`] costs O(log n) (n = points of the schedule).

/// Range-add / max segment tree over `n` points (lazy propagation).
#[derive(Clone, Debug)]
pub struct PeakTree {
    n: usize,
    max: Vec<i64>,
    lazy: Vec<i64>,
}

impl PeakTree {
    /// Builds the tree from the resident bytes at each point.
    pub fn new(values: &[i64]) -> Self {
        let n = values.len().max(1);
        let mut t = PeakTree {
            n,
            max: vec![i64::MIN; 4 * n],
            lazy: vec![0; 4 * n],
        };
        t.build(1, 0, n - 1, values);
        t
    }

    fn build(&mut self, node: usize, lo: usize, hi: usize, v: &[i64]) {
        if lo == hi {
            self.max[node] = v.get(lo).copied().unwrap_or(i64::MIN);
            return;
        }
        let mid = (lo + hi) / 2;
        self.build(2 * node, lo, mid, v);
        self.build(2 * node + 1, mid + 1, hi, v);
        self.max[node] = self.max[2 * node].max(self.max[2 * node + 1]);
    }

    /// Adds `delta` bytes at every point of `[l, r]` (inclusive; empty when `l > r`).
    pub fn add(&mut self, l: usize, r: usize, delta: i64) {
        if l > r || l >= self.n {
            return;
        }
        let r = r.min(self.n - 1);
        self.add_rec(1, 0, self.n - 1, l, r, delta);
    }

    fn add_rec(&mut self, node: usize, lo: usize, hi: usize, l: usize, r: usize, d: i64) {
        if r < lo || hi < l {
            return;
        }
        if l <= lo && hi <= r {
            self.max[node] = self.max[node].saturating_add(d);
            self.lazy[node] += d;
            return;
        }
        let mid = (lo + hi) / 2;
        self.add_rec(2 * node, lo, mid, l, r, d);
        self.add_rec(2 * node + 1, mid + 1, hi, l, r, d);
        self.max[node] = self.max[2 * node]
            .max(self.max[2 * node + 1])
            .saturating_add(self.lazy[node]);
    }

    /// The maximum over all points.
    pub fn max(&self) -> i64 {
        self.max[1]
    }

    /// The maximum over all points and the first point where it is reached.
    pub fn argmax(&self) -> (i64, usize) {
        let (mut node, mut lo, mut hi) = (1, 0, self.n - 1);
        let best = self.max[1];
        let mut acc = 0i64;
        while lo < hi {
            acc += self.lazy[node];
            let mid = (lo + hi) / 2;
            if self.max[2 * node].saturating_add(acc) == best {
                node *= 2;
                hi = mid;
            } else {
                node = 2 * node + 1;
                lo = mid + 1;
            }
        }
        (best, lo)
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
        let mut out = vec![0; self.n];
        self.collect(1, 0, self.n - 1, 0, &mut out);
        out
    }

    fn collect(&self, node: usize, lo: usize, hi: usize, acc: i64, out: &mut [i64]) {
        if lo == hi {
            out[lo] = self.max[node].saturating_add(acc);
            return;
        }
        let acc = acc + self.lazy[node];
        let mid = (lo + hi) / 2;
        self.collect(2 * node, lo, mid, acc, out);
        self.collect(2 * node + 1, mid + 1, hi, acc, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn matches_a_plain_array(init in prop::collection::vec(-1000i64..1000, 1..40),
                                 ops in prop::collection::vec((0usize..40, 0usize..40, -500i64..500), 0..30)) {
            let mut t = PeakTree::new(&init);
            let mut a = init.clone();
            for (l, r, d) in ops {
                let (l, r) = (l % a.len(), r % a.len());
                t.add(l, r, d);
                for x in a.iter_mut().take(r + 1).skip(l) { *x += d; }
                let m = *a.iter().max().unwrap();
                let p = a.iter().position(|x| *x == m).unwrap();
                prop_assert_eq!(t.argmax(), (m, p));
            }
            prop_assert_eq!(t.values(), a);
        }
    }
}
