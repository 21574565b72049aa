//! Tests of `sym` (`import/src/sym.rs`).

use ebb_import::sym::*;
use ebb_ir::{DimExpr, Relation, SymbolScope};

/// JAX's `floor_divide` and `remainder` test `sign(a) != sign(b) and r != 0`: a decided
/// side decides the conjunction even when the other stays open.
#[test]
fn decided_sides_decide_and_or_not() {
    let mut scope = SymbolScope::new();
    let h = DimExpr::symbol(&scope.declare("h"));
    scope.set_range(&ebb_ir::Symbol::new("h"), Some(1), None);
    let open = Pred::Cmp(h.clone(), Relation::Gt, DimExpr::constant(5));
    let (t, f) = (Pred::Const(true), Pred::Const(false));
    assert_eq!(Pred::and(&f, &open, &scope), Some(f.clone()));
    assert_eq!(Pred::and(&t, &open, &scope), Some(open.clone()));
    assert_eq!(Pred::and(&open, &open, &scope), None);
    assert_eq!(Pred::or(&open, &t, &scope), Some(t.clone()));
    assert_eq!(Pred::or(&f, &open, &scope), Some(open.clone()));
    assert_eq!(
        open.not(),
        Pred::Cmp(h.clone(), Relation::Le, DimExpr::constant(5))
    );
    assert_eq!(open.not().not(), open);
    assert_eq!(sign(&h.checked_scale(8).unwrap(), &scope), Some(1));
    assert_eq!(
        sign(&h.checked_sub(&DimExpr::constant(1)).unwrap(), &scope),
        None
    );
    assert_eq!(open.to_string(), "h GT 5");
}
