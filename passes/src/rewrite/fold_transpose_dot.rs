//! Rule group `fold_transpose_dot`: folds a `transpose` of a `dot_general` operand into the
//! dot's dimension numbers, so that the transposed copy is never materialized.
//!
//! Why it lowers memory: `dot_general(transpose(x), y)` materializes `transpose(x)` (as
//! large as `x`) only to feed the dot; `dot_general` can read `x` directly with its batching
//! and contracting dimensions renumbered. JAX emits such transposes around every matmul of
//! the backward pass (`bqhd,bkhd->bhqk` and their transposes) and for tied embeddings.
//!
//! With `T = transpose(x, perm)`, dimension `i` of `T` is dimension `perm[i]` of `x`
//! (StableHLO spec, `transpose`). The result of `dot_general` lists the batching dimensions
//! (in the order of the batching lists), then the lhs free dimensions in increasing order,
//! then the rhs free dimensions in increasing order (StableHLO spec, `dot_general`, C12).
//! So the fold maps the operand's batching and contracting lists through `perm`; it keeps
//! the result layout iff `perm` keeps the free dimensions in increasing order.
//!
//! A transpose of the dot's *result* that swaps the lhs and rhs free blocks (keeping the
//! batching dimensions first), as JAX emits for every weight gradient (`dW = x^T dy`
//! computed as `[out, in]`, then transposed to the parameter's `[in, out]`), is the dot
//! with its operands swapped: `(A B)^T = B^T A^T`, the batching and contracting lists
//! exchanged (XLA's algebraic simplifier does the same).
//!
//! Rules (one direction only):
//! * `fold-transpose-dot/lhs`: `dot_general_d(transpose_p(x), y) -> dot_general_d'(x, y)`.
//! * `fold-transpose-dot/rhs`: `dot_general_d(x, transpose_p(y)) -> dot_general_d'(x, y)`.
//! * `fold-transpose-dot/result`: `transpose_p(dot_general_d(x, y)) -> dot_general_d'(y, x)`
//!   when `p = [batch..., rhs free..., lhs free...]` and `x`, `y` have one element type.
//!
//! Not rewritten: a transpose that reorders an operand's free dimensions (the result
//! layout would change), and other transposes of the result.

use super::lang::{add_payload, payload_op, union_if_same_type, EbbEGraph, EbbNode, TypeAnalysis};
use super::rules::{rule_with, ty, var, Rule};
use ebb_ir::op::DotDims;
use ebb_ir::{Op, OpKind};
use egg::{Applier, Id, PatternAst, Subst, Symbol, Var};

/// The rules of this group (see the module docs).
pub fn rules() -> Vec<Rule> {
    vec![
        rule_with(
            "fold-transpose-dot/lhs",
            "(dot_general ?d (transpose ?p ?x) ?y)",
            FoldTranspose { lhs: true },
        ),
        rule_with(
            "fold-transpose-dot/rhs",
            "(dot_general ?d ?x (transpose ?p ?y))",
            FoldTranspose { lhs: false },
        ),
        rule_with(
            "fold-transpose-dot/result",
            "(transpose ?p (dot_general ?d ?x ?y))",
            SwapOperands,
        ),
    ]
}

/// The dimension numbers of `dot_general(y, x)` when `transpose(dot_general_d(x, y), perm)`
/// is that dot: `perm` keeps the `nb` batching dimensions in place and puts the rhs free
/// block (`fy` dimensions) before the lhs free block (`fx`). `None` otherwise.
pub fn swap_dims(d: &DotDims, perm: &[i64], rank_x: usize, rank_y: usize) -> Option<DotDims> {
    let nb = d.lhs_batch.len();
    let fx = rank_x.checked_sub(nb + d.lhs_contract.len())?;
    let fy = rank_y.checked_sub(nb + d.rhs_contract.len())?;
    let want: Vec<i64> = (0..nb)
        .chain(nb + fx..nb + fx + fy)
        .chain(nb..nb + fx)
        .map(|i| i as i64)
        .collect();
    (perm == want.as_slice() && fx > 0 && fy > 0).then(|| DotDims {
        lhs_batch: d.rhs_batch.clone(),
        rhs_batch: d.lhs_batch.clone(),
        lhs_contract: d.rhs_contract.clone(),
        rhs_contract: d.lhs_contract.clone(),
        result_dtype: d.result_dtype,
    })
}

/// The match's transpose permutation, dot dimension numbers, `?x` and `?y`.
fn matched(eg: &EbbEGraph, s: &Subst) -> Option<(Vec<i64>, DotDims, Id, Id)> {
    let (d, p) = (s[var("?d")], s[var("?p")]);
    match (payload_op(eg, p), payload_op(eg, d)) {
        (Some(Op::Transpose(perm)), Some(Op::DotGeneral(dims))) => {
            Some((perm.clone(), dims.clone(), s[var("?x")], s[var("?y")]))
        }
        _ => None,
    }
}

/// `dot_general_dims(lhs, rhs)` added to the e-class (if its type is the class's).
fn union_dot(eg: &mut EbbEGraph, eclass: Id, dims: DotDims, lhs: Id, rhs: Id) -> Vec<Id> {
    let a = add_payload(eg, Op::DotGeneral(dims));
    union_if_same_type(
        eg,
        eclass,
        EbbNode::Op {
            kind: OpKind::DotGeneral,
            copy: 0,
            children: vec![a, lhs, rhs],
        },
    )
}

struct SwapOperands;

impl Applier<EbbNode, TypeAnalysis> for SwapOperands {
    fn apply_one(
        &self,
        eg: &mut EbbEGraph,
        eclass: Id,
        s: &Subst,
        _: Option<&PatternAst<EbbNode>>,
        _: Symbol,
    ) -> Vec<Id> {
        let Some((perm, dims, x, y)) = matched(eg, s) else {
            return Vec::new();
        };
        let (Some(tx), Some(tyy)) = (ty(eg, s, "?x"), ty(eg, s, "?y")) else {
            return Vec::new();
        };
        if tx.dtype != tyy.dtype {
            return Vec::new();
        }
        match swap_dims(&dims, &perm, tx.rank(), tyy.rank()) {
            Some(swapped) => union_dot(eg, eclass, swapped, y, x),
            None => Vec::new(),
        }
    }

    fn vars(&self) -> Vec<Var> {
        ["?d", "?p", "?x", "?y"].into_iter().map(var).collect()
    }
}

/// The new (batching, contracting) lists of an operand seen through `perm`, or `None` when
/// the fold would change the result layout or the dimension numbers are out of range.
///
/// `batching` and `contracting` are dimensions of the transposed operand (rank
/// `perm.len()`); the result refers to dimensions of the transpose's input.
pub fn fold_dims(
    perm: &[i64],
    batching: &[i64],
    contracting: &[i64],
) -> Option<(Vec<i64>, Vec<i64>)> {
    let rank = perm.len();
    let at = |i: i64| {
        usize::try_from(i)
            .ok()
            .filter(|i| *i < rank)
            .map(|i| perm[i])
    };
    let b = batching
        .iter()
        .map(|&i| at(i))
        .collect::<Option<Vec<_>>>()?;
    let c = contracting
        .iter()
        .map(|&i| at(i))
        .collect::<Option<Vec<_>>>()?;
    let free: Vec<i64> = (0..rank as i64)
        .filter(|i| !batching.contains(i) && !contracting.contains(i))
        .map(|i| perm[i as usize])
        .collect();
    free.windows(2).all(|w| w[0] < w[1]).then_some((b, c))
}

struct FoldTranspose {
    lhs: bool,
}

impl Applier<EbbNode, TypeAnalysis> for FoldTranspose {
    fn apply_one(
        &self,
        eg: &mut EbbEGraph,
        eclass: Id,
        s: &Subst,
        _: Option<&PatternAst<EbbNode>>,
        _: Symbol,
    ) -> Vec<Id> {
        let Some((perm, mut dims, x, y)) = matched(eg, s) else {
            return Vec::new();
        };
        let (b, c) = if self.lhs {
            (&mut dims.lhs_batch, &mut dims.lhs_contract)
        } else {
            (&mut dims.rhs_batch, &mut dims.rhs_contract)
        };
        let Some((nb, nc)) = fold_dims(&perm, b, c) else {
            return Vec::new();
        };
        (*b, *c) = (nb, nc);
        union_dot(eg, eclass, dims, x, y)
    }

    fn vars(&self) -> Vec<Var> {
        ["?d", "?p", "?x", "?y"].into_iter().map(var).collect()
    }
}
