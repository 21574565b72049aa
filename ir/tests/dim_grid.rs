//! Tests of `dim::grid` (`ir/src/dim/grid.rs`).

use ebb_ir::dim::SymbolScope;
use ebb_ir::dim::ValueGrid;

#[test]
fn values_round_to_the_divisor_inside_the_range() {
    let v = ValueGrid::new(1, 1024, 8).unwrap();
    assert_eq!(
        v,
        ValueGrid {
            lo: 8,
            hi: 1024,
            div: 8
        }
    );
    assert_eq!(v.up(1), Some(8));
    assert_eq!(v.up(9), Some(16));
    assert_eq!(v.up(16), Some(16));
    assert_eq!(v.up(1021), Some(1024));
    assert_eq!(v.up(1025), None);
    assert_eq!(v.down(15), Some(8));
    assert_eq!(v.down(7), None);
    assert_eq!(v.down(5000), Some(1024));
    assert_eq!(v.clip(20, 40), ValueGrid::new(24, 40, 8));
    assert_eq!(v.clip(2000, 3000), None);
    let mut sc = SymbolScope::new();
    let s = sc.declare("S");
    let any = sc.grid(&s).unwrap();
    assert_eq!((any.up(37), any.down(37)), (Some(37), Some(37)));
    assert_eq!(any.up(i64::MAX), Some(i64::MAX));
    assert_eq!(ValueGrid::new(i64::MAX - 1, i64::MAX, 4), None);
}
