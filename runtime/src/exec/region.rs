//! Scalar region bodies (`reduce`, `reduce_window`, `select_and_scatter`, `scatter`, `sort`):
//! recognition of the common bodies by pattern, and a general fallback that runs the region
//! graph on one-element tensors.
//!
//! Recognized (two block arguments `a`, `b`, one op, its result returned):
//! `add`/`multiply`/`maximum`/`minimum`/`and`/`or` of `(a, b)` or `(b, a)` → [`Body::Monoid`];
//! no op, `b` returned → [`Body::Overwrite`] (scatter without combining); `compare(a, b)` or
//! `compare(b, a)` → [`Body::Compare`]. Everything else is [`Body::General`]. Invariant: a
//! recognized body computes exactly what the region graph computes (operand order matters only
//! for `compare`, whose direction is mirrored when the operands are swapped).

use super::scalar_body::ScalarBody;
use super::{program_schedule, Ctx, Prepared, Program};
use crate::error::OpError;
use crate::tensor::{Scalar, Tensor};
use ebb_ir::{Bindings, Graph, Op, Relation, ValueRef};
use std::sync::Arc;

/// An associative, commutative combiner recognized in a region.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Monoid {
    Add,
    Mul,
    Max,
    Min,
    And,
    Or,
}

/// What a region computes, as far as recognized.
#[derive(Clone, PartialEq, Debug)]
pub(crate) enum Body {
    /// `a ⊕ b` for one of the [`Monoid`]s.
    Monoid(Monoid),
    /// Returns its second argument (`scatter` replacing values).
    Overwrite,
    /// `compare(a, b)` in direction `dir` (already mirrored if the region swaps operands);
    /// `total` for `TOTALORDER`.
    Compare { dir: Relation, total: bool },
    /// Anything else: evaluated by running the region.
    General,
}

/// A region prepared for repeated scalar calls.
pub(crate) struct RegionFn<'g> {
    pub body: Body,
    name: &'static str,
    /// The region graph.
    graph: &'g Graph,
    /// What its program is made from, at the first call that runs it.
    source: Source,
    /// The region's program, made at the first call that runs it (a recognized body, or one
    /// compiled to scalar instructions, never does: the callers of a reduction or a sort made
    /// per op execution do not prepare a program they do not run).
    prog: std::sync::OnceLock<Program<'g>>,
    /// The region compiled to scalar instructions where its body is not recognized and its
    /// ops allow ([`ScalarBody::compile`]); [`RegionFn::call`] then runs it instead of `prog`.
    scalar: Option<ScalarBody>,
}

/// What a [`RegionFn`]'s program is made from.
enum Source {
    /// The region's prepared program, kept by the enclosing op.
    Prepared(Arc<Prepared>),
    /// The bindings, to prepare it at.
    Bindings(Bindings),
}

/// Recognizes the body of `r` (see the module docs).
pub(crate) fn recognize(r: &Graph) -> Body {
    let ins = r.inputs();
    let ops = program_schedule(r);
    if ins.len() != 2 || r.outputs().len() != 1 {
        return Body::General;
    }
    let (a, b) = (ValueRef::new(ins[0], 0), ValueRef::new(ins[1], 0));
    let out = r.outputs()[0];
    if ops.is_empty() {
        return if out == b {
            Body::Overwrite
        } else {
            Body::General
        };
    }
    if ops.len() != 1 || out != ValueRef::new(ops[0], 0) {
        return Body::General;
    }
    let node = r.node(ops[0]);
    let operands = r.operands(ops[0]);
    let straight = operands == [a, b];
    let swapped = operands == [b, a];
    if !straight && !swapped {
        return Body::General;
    }
    let m = match &node.op {
        Op::Add => Monoid::Add,
        Op::Multiply => Monoid::Mul,
        Op::Maximum => Monoid::Max,
        Op::Minimum => Monoid::Min,
        Op::And => Monoid::And,
        Op::Or => Monoid::Or,
        Op::Compare(spec) => {
            let dir = if straight {
                spec.direction
            } else {
                spec.direction.mirror()
            };
            return Body::Compare {
                dir,
                total: spec.total_order(),
            };
        }
        _ => return Body::General,
    };
    Body::Monoid(m)
}

/// The scalar instructions of a region whose body is not recognized (the callers run a
/// recognized body with typed kernels, never through [`RegionFn::call`]'s program).
fn general(body: &Body, r: &Graph) -> Option<ScalarBody> {
    matches!(body, Body::General)
        .then(|| ScalarBody::compile(r))
        .flatten()
}

impl<'g> RegionFn<'g> {
    /// Prepares region `r` (named `name` in errors) at `bindings`.
    ///
    /// # Errors
    /// None at present: a region whose types cannot be evaluated at `bindings` fails at the
    /// first call that runs its program.
    pub fn new(
        r: &'g Graph,
        name: &'static str,
        bindings: &Bindings,
    ) -> Result<RegionFn<'g>, OpError> {
        let body = recognize(r);
        Ok(RegionFn {
            scalar: general(&body, r),
            body,
            name,
            graph: r,
            source: Source::Bindings(bindings.clone()),
            prog: std::sync::OnceLock::new(),
        })
    }

    /// Prepares region `i` of the op of `ctx` (named `name` in errors) at its bindings, its
    /// program prepared once per prepared enclosing program where that keeps the op's regions
    /// ([`Ctx::regions`]; empty: prepared at every call, as [`RegionFn::new`]).
    ///
    /// # Errors
    /// [`OpError::Invalid`] when the op has no region `i`; [`OpError::Region`] when the
    /// region's types cannot be evaluated at the bindings.
    pub fn of(ctx: &Ctx<'g>, i: usize, name: &'static str) -> Result<RegionFn<'g>, OpError> {
        let r: &'g Graph = ctx
            .node
            .regions
            .get(i)
            .ok_or_else(|| OpError::Invalid(format!("no region `{name}`")))?;
        let Some(cell) = ctx.regions.get(i) else {
            return RegionFn::new(r, name, ctx.bindings);
        };
        let prep = match cell.get() {
            Some(p) => p.clone(),
            None => {
                let p = Program::new(r, &program_schedule(r), ctx.bindings)
                    .map_err(|e| OpError::Region {
                        region: name.into(),
                        source: Box::new(e),
                    })?
                    .prepared();
                cell.get_or_init(|| p).clone()
            }
        };
        let body = prep.body.get_or_init(|| recognize(r)).clone();
        Ok(RegionFn {
            scalar: prep.scalar.get_or_init(|| general(&body, r)).clone(),
            body,
            name,
            graph: r,
            source: Source::Prepared(prep),
            prog: std::sync::OnceLock::new(),
        })
    }

    /// The region's program, made at the first call.
    fn prog(&self) -> Result<&Program<'g>, OpError> {
        if let Some(p) = self.prog.get() {
            return Ok(p);
        }
        let p = match &self.source {
            Source::Prepared(prep) => Program::from_prepared(self.graph, prep.clone()),
            Source::Bindings(b) => Program::new(self.graph, &program_schedule(self.graph), b)
                .map_err(|e| OpError::Region {
                    region: self.name.into(),
                    source: Box::new(e),
                })?,
        };
        Ok(self.prog.get_or_init(|| p))
    }

    /// Evaluates the region on scalar arguments.
    pub fn call(&self, args: &[Scalar]) -> Result<Vec<Scalar>, OpError> {
        if let Some(v) = self
            .scalar
            .as_ref()
            .and_then(|b| b.eval(args, |r| r.to_vec()))
        {
            return Ok(v);
        }
        let inputs = args.iter().map(|&s| Tensor::scalar(s)).collect();
        let (outs, _) = self.prog()?.run(inputs).map_err(|e| OpError::Region {
            region: self.name.into(),
            source: Box::new(e),
        })?;
        outs.iter()
            .map(|t| {
                t.scalar_value().ok_or_else(|| {
                    OpError::Invalid(format!("region `{}` returned a non-scalar", self.name))
                })
            })
            .collect()
    }

    /// [`RegionFn::call`], its results written over `out` (no allocation where the region is
    /// compiled to scalar instructions).
    ///
    /// # Errors
    /// As [`RegionFn::call`].
    pub fn call_into(&self, args: &[Scalar], out: &mut Vec<Scalar>) -> Result<(), OpError> {
        let write = |r: &[Scalar]| {
            out.clear();
            out.extend_from_slice(r);
        };
        if let Some(()) = self.scalar.as_ref().and_then(|b| b.eval(args, write)) {
            return Ok(());
        }
        *out = self.call(args)?;
        Ok(())
    }

    /// The region compiled to scalar instructions, where its ops allow.
    pub(crate) fn scalar(&self) -> Option<&ScalarBody> {
        self.scalar.as_ref()
    }

    /// Evaluates a predicate region (a `sort` comparator, a `select_and_scatter` select): whether
    /// its first result is `true`.
    ///
    /// # Errors
    /// As [`RegionFn::call`].
    pub fn test(&self, args: &[Scalar]) -> Result<bool, OpError> {
        let first = |r: &[Scalar]| matches!(r.first(), Some(Scalar::I1(true)));
        if let Some(v) = self.scalar.as_ref().and_then(|b| b.eval(args, first)) {
            return Ok(v);
        }
        Ok(first(&self.call(args)?))
    }
}
