//! Tests of `dtype` (`ir/src/dtype.rs`).

use ebb_ir::dtype::*;

#[test]
fn names_round_trip() {
    for d in DType::ALL {
        assert_eq!(d.name().parse::<DType>(), Ok(d));
    }
    assert!("c64".parse::<DType>().is_err());
}
