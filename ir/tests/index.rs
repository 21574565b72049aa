//! Tests of `index` (`ir/src/index.rs`).

use ebb_ir::index::*;

#[test]
fn prog_points_order_as_regalloc2() {
    let p = |i| Point::new(i);
    let mut v = vec![
        ProgPoint::after(p(1)),
        ProgPoint::before(p(2)),
        ProgPoint::before(p(1)),
        ProgPoint::after(p(0)),
        ProgPoint::before(p(0)),
    ];
    v.sort();
    assert_eq!(
        v,
        vec![
            ProgPoint::before(p(0)),
            ProgPoint::after(p(0)),
            ProgPoint::before(p(1)),
            ProgPoint::after(p(1)),
            ProgPoint::before(p(2)),
        ]
    );
    assert!(ProgPoint::after(p(3)) < ProgPoint::before(p(4)));
    let a = ProgPoint::after(p(3));
    assert_eq!((a.point(), a.side()), (p(3), Side::After));
    assert_eq!(a.next(), ProgPoint::before(p(4)));
    assert_eq!(a.prev(), Some(ProgPoint::before(p(3))));
    assert_eq!(ProgPoint::before(p(0)).prev(), None);
    assert_eq!(a.to_string(), "after 3");
    assert_eq!((ProgPoint::before(p(3)).index(), a.index()), (6, 7));
    assert_eq!(p(3).next(), p(4));
    assert_eq!((p(3).prev(), p(0).prev()), (Some(p(2)), None));
}

#[test]
fn ids_are_transparent_numbers() {
    assert_eq!(serde_json::to_string(&Point::new(3)).unwrap(), "3");
    assert_eq!(
        serde_json::from_str::<ValueId>("7").unwrap(),
        ValueId::new(7)
    );
    assert_eq!(
        serde_json::to_string(&vec![OpPos::new(1), OpPos::new(2)]).unwrap(),
        "[1,2]"
    );
    assert_eq!(CandidateId::new(5).to_string(), "5");
    assert_eq!(format!("{:?}", Some(OpPos::new(2))), "Some(2)");
    assert_eq!(
        ValueId::new(2).upto(ValueId::new(4)).collect::<Vec<_>>(),
        vec![ValueId::new(2), ValueId::new(3)]
    );
    assert_eq!(
        Point::all(2).map(Point::index).collect::<Vec<_>>(),
        vec![0, 1]
    );
}
