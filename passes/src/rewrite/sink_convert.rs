//! Rule group `sink_convert`: moves a *widening* `convert` (e.g. `bf16 -> f32`) below pure
//! data-movement ops (`transpose`, `reshape`, `slice`, `reverse`), toward its consumers.
//!
//! Why it lowers memory: the data-movement op then copies the narrow tensor instead of the
//! wide one, and the wide tensor exists only at the end of the chain, where it is consumed;
//! for `slice` the wide tensor shrinks to the slice. A convert maps each element on its
//! own, so it commutes exactly with any op that only moves elements.
//!
//! Rules (one direction only; `P` is `transpose`, `reshape`, `slice` or `reverse`):
//! * `sink-convert/P`: `P_p(convert_t(x)) -> convert_t(P_p(x))` when the target element type
//!   is wider than `x`'s.
//!
//! Not rewritten: narrowing or same-width converts (sinking those would move the *wide*
//! tensor through the copy), and `broadcast_in_dim` (which `sink_broadcast` moves the other
//! way: the expanded tensor should be materialized after the convert, not before).

use super::rules::{rule, ty, var, Rule};
use ebb_ir::{Op, OpKind};
use egg::Subst;

/// The data-movement ops a widening convert sinks below.
pub const DATA_MOVEMENT: [OpKind; 4] = [
    OpKind::Transpose,
    OpKind::Reshape,
    OpKind::Slice,
    OpKind::Reverse,
];

fn widening(eg: &super::lang::EbbEGraph, s: &Subst) -> bool {
    let Some(x) = ty(eg, s, "?x") else {
        return false;
    };
    match super::lang::payload_op(eg, s[var("?t")]) {
        Some(Op::Convert(t)) => t.size_bytes() > x.dtype.size_bytes(),
        _ => false,
    }
}

/// The rules of this group (see the module docs).
pub fn rules() -> Vec<Rule> {
    DATA_MOVEMENT
        .iter()
        .map(|p| {
            let p = p.name();
            rule(
                &format!("sink-convert/{p}"),
                &format!("({p} ?p (convert ?t ?x))"),
                &format!("(convert ?t ({p} ?p ?x))"),
                widening,
            )
        })
        .collect()
}
