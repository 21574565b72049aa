//! The compressed-row grouping (`ebb_plan::csr::Csr`): rows hold their entries in order.

use ebb_plan::csr::Csr;
use ebb_plan::index::{PointIx, ValueIx};

#[test]
fn rows_hold_their_entries_in_order() {
    let keys = [2usize, 0, 2, 1, 0];
    let g = Csr::<PointIx, ValueIx>::group(&keys, |&k| PointIx::new(k));
    let row = |p| {
        g.row(PointIx::new(p))
            .iter()
            .map(|v| v.index())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        (row(0), row(1), row(2), row(3)),
        (vec![1, 4], vec![3], vec![0, 2], vec![])
    );
    assert_eq!(g.rows(), 3);
    let mut b = Csr::<PointIx, u8>::with_capacity(2, 3);
    b.push(7);
    b.end_row();
    b.end_row();
    b.push(8);
    b.push(9);
    b.end_row();
    assert_eq!(
        (
            b.row(PointIx::new(0)),
            b.row(PointIx::new(1)),
            b.row(PointIx::new(2))
        ),
        (&[7u8][..], &[][..], &[8u8, 9][..])
    );
    assert_eq!(b.row_range(PointIx::new(2)), 1..3);
}
