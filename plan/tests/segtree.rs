//! The peak segment tree (`ebb_plan::finalize::segtree::PeakTree`) against a plain array.

use ebb_plan::finalize::segtree::PeakTree;
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
            let (ql, qr) = (l.min(r), l.max(r));
            prop_assert_eq!(t.max_in(ql, qr), *a[ql..=qr].iter().max().unwrap());
        }
        prop_assert_eq!(t.values(), a);
    }
}

proptest! {
    /// `PeakTree::fits_with` (a probe without applying) against applying the adds to a copy
    /// and reading the maximum; adds may run past the last point, be empty or be zero.
    #[test]
    fn fits_with_matches_applying(init in prop::collection::vec(-1000i64..1000, 1..40),
                                  adds in prop::collection::vec((0usize..45, 0usize..45, -800i64..800), 0..10),
                                  slack in -300i64..300) {
        let t = PeakTree::new(&init);
        let budget = t.max() + slack;
        let mut applied = t.clone();
        for &(l, r, d) in &adds {
            applied.add(l, r, d);
        }
        prop_assert_eq!(t.fits_with(&adds, budget), applied.max() <= budget);
    }
}

/// Adds over whole subtrees (aligned power-of-two ranges, whose canonical node is the first
/// common ancestor of their ends), single points and every point, interleaved, on trees of 1
/// to 70 points: after each, the tree's maximum, its first point, and every range maximum
/// are a plain array's (the walk up after an add stops where a node comes out unchanged).
#[test]
fn subtree_and_point_adds_match_a_plain_array() {
    let mut next = ebb_testkit::lcg(0x5e97_7ee5_u64);
    for n in [1usize, 2, 3, 7, 8, 9, 33, 64, 70] {
        let init: Vec<i64> = (0..n).map(|_| next(2001) as i64 - 1000).collect();
        let mut t = PeakTree::new(&init);
        let mut a = init.clone();
        for step in 0..200u64 {
            let d = next(1001) as i64 - 500;
            let (l, r) = match step % 3 {
                0 => {
                    let span = 1usize << next(7);
                    let l = (next(n as u64) as usize / span) * span;
                    (l, (l + span - 1).min(n - 1))
                }
                1 => {
                    let p = next(n as u64) as usize;
                    (p, p)
                }
                _ => (0, n - 1),
            };
            t.add(l, r, d);
            for x in &mut a[l..=r] {
                *x += d;
            }
            let m = *a.iter().max().unwrap();
            let p = a.iter().position(|x| *x == m).unwrap();
            assert_eq!(t.argmax(), (m, p), "n = {n}, step {step}");
            for ql in 0..n {
                let qr = (ql + step as usize % n).min(n - 1);
                assert_eq!(t.max_in(ql, qr), *a[ql..=qr].iter().max().unwrap());
            }
        }
        assert_eq!(t.values(), a);
    }
}
