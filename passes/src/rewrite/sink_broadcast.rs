//! Rule group `sink_broadcast`: moves memory-expanding `broadcast_in_dim` below elementwise
//! ops, toward the consumers, so that the op runs on the small tensor and only its result
//! is expanded.
//!
//! Why it lowers memory: `add(broadcast(x), broadcast(y))` materializes two expanded
//! tensors (each as large as the result) and keeps them alive until the add; after the
//! rewrite only `add(x, y)` (operand-sized) and one expanded result exist. When an expanded
//! operand is also used elsewhere, it stays, and extraction keeps the original form (the
//! rewrite would only add bytes). Elementwise ops commute exactly with broadcasting, so
//! every rule here is exact in floating point.
//!
//! Rules (one direction only; `K` ranges over the binary elementwise kinds other than
//! `compare`, `U` over the unary ones without a payload):
//! * `sink-broadcast/K`: `K(bcast_a(x), bcast_a(y)) -> bcast_a(K(x, y))` when `x` and `y`
//!   have the same type (the same broadcast payload alone does not imply it: `f32[1]` and
//!   `f32[64]` both broadcast to `f32[B,S,64]` along `[2]`).
//! * `sink-broadcast/K-scalar-rhs`: `K(bcast_a(x), bcast_s(y)) -> bcast_a(K(x, bcast(y)))`
//!   when `y` is a scalar and `x` is not (the scalar is re-broadcast to `x`'s small shape);
//!   `-scalar-lhs` mirrors it. The same two forms exist for `compare` (keeping its
//!   direction).
//! * `sink-broadcast/compare`: as `K`, keeping the comparison payload.
//! * `sink-broadcast/U`: `U(bcast_a(x)) -> bcast_a(U(x))`.
//! * `sink-broadcast/convert`: `convert_t(bcast_a(x)) -> bcast_a(convert_t(x))`, for any
//!   element types: the expanded tensor then exists only in the target type; likewise
//!   `bitcast_convert` and `reduce_precision` (with their payloads).
//! * `sink-broadcast/select`: `select(bcast_a(p), bcast_a(x), bcast_a(y))` with equal
//!   shapes, and `sink-broadcast/select-scalar-pred` with a scalar predicate.
//!
//! Not rewritten: consumers that are not elementwise (`dot_general`, `reduce`, ...), and
//! operands broadcast with different payloads unless one is a scalar.

use super::lang::{add_payload, tensor, union_ids_if_same_type, EbbEGraph, EbbNode, TypeAnalysis};
use super::rules::{always, rule, rule_with, same_type_xy, ty, var, Rule};
use ebb_ir::op::BroadcastSpec;
use ebb_ir::{Op, OpKind};
use egg::{Applier, Id, PatternAst, Subst, Symbol, Var};

/// The rules of this group (see the module docs).
pub fn rules() -> Vec<Rule> {
    let mut out = Vec::new();
    for &k in OpKind::ALL
        .iter()
        .filter(|k| k.is_binary_elementwise() && **k != OpKind::Compare)
    {
        let k = k.name();
        out.push(rule(
            &format!("sink-broadcast/{k}"),
            &format!("({k} (broadcast_in_dim ?a ?x) (broadcast_in_dim ?a ?y))"),
            &format!("(broadcast_in_dim ?a ({k} ?x ?y))"),
            same_type_xy,
        ));
    }
    for &k in OpKind::ALL.iter().filter(|k| k.is_binary_elementwise()) {
        let name = k.name();
        let c = if k == OpKind::Compare { "?c " } else { "" };
        out.push(rule_with(
            &format!("sink-broadcast/{name}-scalar-rhs"),
            &format!("({name} {c}(broadcast_in_dim ?a ?x) (broadcast_in_dim ?s ?y))"),
            ScalarBroadcast {
                kind: k,
                scalar_lhs: false,
            },
        ));
        out.push(rule_with(
            &format!("sink-broadcast/{name}-scalar-lhs"),
            &format!("({name} {c}(broadcast_in_dim ?s ?y) (broadcast_in_dim ?a ?x))"),
            ScalarBroadcast {
                kind: k,
                scalar_lhs: true,
            },
        ));
    }
    out.push(rule(
        "sink-broadcast/compare",
        "(compare ?c (broadcast_in_dim ?a ?x) (broadcast_in_dim ?a ?y))",
        "(broadcast_in_dim ?a (compare ?c ?x ?y))",
        same_type_xy,
    ));
    for &u in OpKind::ALL
        .iter()
        .filter(|k| k.is_unary_elementwise() && k.is_payload_free())
    {
        let u = u.name();
        out.push(rule(
            &format!("sink-broadcast/{u}"),
            &format!("({u} (broadcast_in_dim ?a ?x))"),
            &format!("(broadcast_in_dim ?a ({u} ?x))"),
            always,
        ));
    }
    for c in ["convert", "bitcast_convert", "reduce_precision"] {
        out.push(rule(
            &format!("sink-broadcast/{c}"),
            &format!("({c} ?t (broadcast_in_dim ?a ?x))"),
            &format!("(broadcast_in_dim ?a ({c} ?t ?x))"),
            always,
        ));
    }
    out.push(rule(
        "sink-broadcast/select",
        "(select (broadcast_in_dim ?a ?p) (broadcast_in_dim ?a ?x) (broadcast_in_dim ?a ?y))",
        "(broadcast_in_dim ?a (select ?p ?x ?y))",
        select_guard,
    ));
    out.push(rule(
        "sink-broadcast/select-scalar-pred",
        "(select ?p (broadcast_in_dim ?a ?x) (broadcast_in_dim ?a ?y))",
        "(broadcast_in_dim ?a (select ?p ?x ?y))",
        |eg, s| same_type_xy(eg, s) && ty(eg, s, "?p").is_some_and(|p| p.rank() == 0),
    ));
    out
}

/// `x`, `y` of one type and a predicate `p` of their shape.
fn select_guard(eg: &EbbEGraph, s: &Subst) -> bool {
    let shapes = (ty(eg, s, "?p"), ty(eg, s, "?x"));
    same_type_xy(eg, s) && matches!(shapes, (Some(p), Some(x)) if p.shape == x.shape)
}

/// `K(bcast_a(x), bcast_s(y))` with scalar `y` to `bcast_a(K(x, bcast(y -> shape(x))))`
/// (or the mirror image when the scalar is on the left).
struct ScalarBroadcast {
    kind: OpKind,
    scalar_lhs: bool,
}

impl Applier<EbbNode, TypeAnalysis> for ScalarBroadcast {
    fn apply_one(
        &self,
        eg: &mut EbbEGraph,
        eclass: Id,
        s: &Subst,
        _: Option<&PatternAst<EbbNode>>,
        _: Symbol,
    ) -> Vec<Id> {
        let (a, x, y) = (s[var("?a")], s[var("?x")], s[var("?y")]);
        let (Some(tx), Some(tyy)) = (tensor(eg, x), tensor(eg, y)) else {
            return Vec::new();
        };
        if tyy.rank() != 0 || tx.rank() == 0 || tx.dtype != tyy.dtype {
            return Vec::new();
        }
        let small = add_payload(
            eg,
            Op::BroadcastInDim(BroadcastSpec {
                dims: Vec::new(),
                shape: tx.shape.clone(),
            }),
        );
        let yb = eg.add(EbbNode::Op {
            kind: OpKind::BroadcastInDim,
            copy: 0,
            children: vec![small, y],
        });
        let mut children = Vec::with_capacity(3);
        if self.kind == OpKind::Compare {
            children.push(s[var("?c")]);
        }
        if self.scalar_lhs {
            children.extend([yb, x]);
        } else {
            children.extend([x, yb]);
        }
        let inner = eg.add(EbbNode::Op {
            kind: self.kind,
            copy: 0,
            children,
        });
        let outer = eg.add(EbbNode::Op {
            kind: OpKind::BroadcastInDim,
            copy: 0,
            children: vec![a, inner],
        });
        union_ids_if_same_type(eg, eclass, outer)
    }

    fn vars(&self) -> Vec<Var> {
        let mut v = vec![var("?a"), var("?x"), var("?y"), var("?s")];
        if self.kind == OpKind::Compare {
            v.push(var("?c"));
        }
        v
    }
}
