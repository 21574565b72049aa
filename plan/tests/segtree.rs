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
