//! Integer arithmetic (`ebb_runtime::exec::arith::IntOps`) follows XLA's semantics.

use ebb_runtime::exec::arith::IntOps;

#[test]
fn integer_semantics_follow_xla() {
    assert_eq!(7i32.xdiv(0), -1);
    assert_eq!(i32::MIN.xdiv(-1), i32::MIN);
    assert_eq!(7i32.xrem(0), 7);
    assert_eq!(1i32.shl(40), 0);
    assert_eq!((-8i32).shr_a(40), -1);
    assert_eq!((-8i32).shr_l(1), ((-8i32 as u32) >> 1) as i32);
    assert_eq!(3i32.ipow(4), 81);
    assert_eq!(2i32.ipow(-1), 0);
    assert_eq!(7u32.xdiv(0), u32::MAX);
}
