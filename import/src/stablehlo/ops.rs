//! Per-op conversion of StableHLO operations into graph nodes: the typed [`Op`] payload built
//! from the MLIR attributes, symbolic shape operands, result-type inference and the check
//! against MLIR's declared result types.
//!
//! Supported (StableHLO spec names): elementwise unary/binary ops, `compare`, `select`,
//! `clamp`, `convert`, `constant`, `iota`/`dynamic_iota`, `broadcast_in_dim`/
//! `dynamic_broadcast_in_dim`, `reshape`/`dynamic_reshape`, `transpose`, `concatenate`,
//! `slice`/`real_dynamic_slice`, `dynamic_slice`, `dynamic_update_slice`, `pad`, `reverse`,
//! `reduce`, `reduce_window`, `select_and_scatter`, `dot_general`, `convolution`,
//! `gather`/`dynamic_gather`, `scatter`, `sort`, `while`, `case`/`if` ([`control`]),
//! `bitcast_convert` (equal widths), `reduce_precision`, `optimization_barrier`,
//! `get_dimension_size`, `custom_call` (`shape_assertion` becomes a shape assertion,
//! `stablehlo.dynamic_reduce_window` a `reduce_window`, `annotate_device_placement` an
//! `annotate_device_placement` op ([`placement`]); any other target is refused, as no
//! executor has a kernel for it), `func.call` (inlined), and
//! Shardy's `sdy.sharding_constraint` (an identity; the module-level `sdy.mesh` is skipped).
//!
//! [`Importer::tensor_op`] dispatches by op family: data movement ([`layout`]: broadcasts,
//! reshapes, iota, transpose, concatenate, slices, pad, reverse), contractions and windows
//! ([`contract`]: `dot_general`, `convolution`, `reduce`, `reduce_window`,
//! `select_and_scatter`), indexing ([`index`]: `gather`, `scatter`, `sort`); elementwise and
//! control ops are here.

mod batch_norm;
mod bitcast;
mod contract;
mod control;
mod dynamic_window;
mod index;
mod layout;
pub(super) mod placement;
mod random;

use super::func::{op_name, Entry, Frame, Importer, R};
use super::mlir_text::{self as mt, MlirTensorType};
use super::sym::{self, Elems, Pred, SymVal, MAX_SYM_ELEMS};
use ebb_ir::op::{CompareSpec, CompareType};
use ebb_ir::shape::infer;
use ebb_ir::{
    DType, DimExpr, Graph, Node, Op, OpKind, Relation, ShapeAssertion, TensorType, ValueRef,
};
use melior::ir::operation::OperationLike;
use melior::ir::{OperationRef, RegionRef, Value, ValueLike};

impl<'c, 'a> Importer<'c, 'a> {
    /// Imports one op into `g`, recording its results in `frame`.
    pub fn import_op(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
    ) -> R<()> {
        let full = op_name(&op);
        match full.as_str() {
            "func.call" => return self.inline_call(g, frame, op, "callee"),
            "stablehlo.composite" => return self.inline_call(g, frame, op, "decomposition"),
            SHARDING_CONSTRAINT => return self.sharding_constraint(frame, op),
            _ => {}
        }
        let Some(name) = full.strip_prefix("stablehlo.") else {
            return Err(self.unsupported(&op));
        };
        match name {
            "constant" => return self.constant(g, frame, op),
            "custom_call" => return self.custom_call(g, frame, op),
            "get_dimension_size" => {
                let e = self.entry(frame, &op, 0)?;
                let d = self.int_attr(&op, "dimension")? as usize;
                let dim = match (&e.t, &e.s) {
                    (Some(t), _) => g.value_type(*t).shape.get(d).cloned(),
                    (None, Some(s)) => s.shape.get(d).map(|k| DimExpr::constant(*k)),
                    _ => None,
                }
                .ok_or_else(|| self.op_error(&op, "dimension out of range"))?;
                let dtype = self.result_type(&op, 0)?.dtype;
                return self.set_sym(frame, &op, SymVal::scalar(dtype, dim));
            }
            _ => {}
        }
        if let Some(s) = self.try_symbolic(frame, &op, name)? {
            if !mentions_data(&s) {
                return self.set_sym(frame, &op, s);
            }
            // Depends on tensor data (a loop counter): keep the op, and its symbolic value.
            self.tensor_op(g, frame, op, name)?;
            return self.set_sym_keep_tensor(frame, &op, s);
        }
        self.tensor_op(g, frame, op, name)
    }

    /// Shardy's `sdy.sharding_constraint` (JAX emits it around typed PRNG keys): an identity
    /// on its operand, whose tensor and symbolic value the result takes over.
    fn sharding_constraint(&mut self, frame: &mut Frame, op: OperationRef<'c, 'a>) -> R<()> {
        if op.operand_count() != 1 || op.result_count() != 1 {
            return Err(self.op_error(&op, "expects one operand and one result"));
        }
        let (have, want) = (
            op.operand(0)
                .map(|v| v.r#type().to_string())
                .unwrap_or_default(),
            op.result(0)
                .map(|r| r.r#type().to_string())
                .unwrap_or_default(),
        );
        if have != want {
            return Err(self.op_error(
                &op,
                format!("result type {want} differs from the operand's {have}"),
            ));
        }
        let e = self.entry(frame, &op, 0)?;
        let r = op
            .result(0)
            .map_err(|e| self.op_error(&op, e.to_string()))?;
        frame.insert(Value::from(r), e);
        Ok(())
    }

    fn set_sym_keep_tensor(
        &mut self,
        frame: &mut Frame,
        op: &OperationRef<'c, 'a>,
        s: SymVal,
    ) -> R<()> {
        let r = op.result(0).map_err(|e| self.op_error(op, e.to_string()))?;
        let mut e = frame.get(Value::from(r)).unwrap_or_default();
        e.s = Some(s);
        frame.insert(Value::from(r), e);
        Ok(())
    }

    /// A symbolic value of fresh data symbols for a small integer tensor computed from data
    /// (e.g. a clamped loop index), so that differences such as `(i + 1) - i` still simplify.
    pub fn data_symbols(&mut self, ty: &TensorType) -> Option<SymVal> {
        let dims = ty.static_dims()?;
        let n: i64 = dims.iter().product();
        if !ty.dtype.is_int() || n > MAX_SYM_ELEMS {
            return None;
        }
        let elems = (0..n)
            .map(|_| {
                self.data_syms += 1;
                DimExpr::symbol(&ebb_ir::Symbol::new(&format!(
                    "{DATA_PREFIX}{}",
                    self.data_syms
                )))
            })
            .collect();
        Some(SymVal {
            dtype: ty.dtype,
            shape: dims,
            elems: Elems::Int(elems),
        })
    }

    fn unsupported(&self, op: &OperationRef) -> super::ImportError {
        super::ImportError::UnsupportedOp {
            file: self.file.clone(),
            op: op_name(op),
            loc: super::func::op_loc(op, &self.file),
        }
    }

    fn entry(&self, frame: &Frame, op: &OperationRef<'c, 'a>, i: usize) -> R<Entry> {
        let v = op
            .operand(i)
            .map_err(|_| self.op_error(op, format!("missing operand {i}")))?;
        frame.get(v).ok_or_else(|| self.op_error(op, format!("operand {i} is not defined (implicit capture of a tensor into a region is not supported)")))
    }

    fn operand_tensor(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: &OperationRef<'c, 'a>,
        i: usize,
    ) -> R<ValueRef> {
        let v = op
            .operand(i)
            .map_err(|_| self.op_error(op, format!("missing operand {i}")))?;
        let e = self.entry(frame, op, i)?;
        // A symbolic value that cannot become data (an undecided shape predicate) is reported
        // at the op that uses it.
        self.tensor(g, frame, v, e).map_err(|err| match err {
            super::ImportError::Structure { msg, .. } => {
                self.op_error(op, format!("operand {i}: {msg}"))
            }
            other => other,
        })
    }

    fn set_sym(&mut self, frame: &mut Frame, op: &OperationRef<'c, 'a>, s: SymVal) -> R<()> {
        let r = op.result(0).map_err(|e| self.op_error(op, e.to_string()))?;
        frame.insert(
            Value::from(r),
            Entry {
                t: None,
                s: Some(s),
            },
        );
        Ok(())
    }

    fn result_type(&self, op: &OperationRef<'c, 'a>, i: usize) -> R<MlirTensorType> {
        let r = op.result(i).map_err(|e| self.op_error(op, e.to_string()))?;
        mt::parse_tensor_type(&r.r#type().to_string()).map_err(|m| self.op_error(op, m))
    }

    fn attr_text(&self, op: &OperationRef<'c, 'a>, name: &str) -> Option<String> {
        op.attribute(name).ok().map(|a| a.to_string())
    }

    fn int_attr(&self, op: &OperationRef<'c, 'a>, name: &str) -> R<i64> {
        self.attr_text(op, name)
            .and_then(|t| mt::parse_int(&t))
            .ok_or_else(|| {
                self.op_error(
                    op,
                    format!("missing or malformed integer attribute `{name}`"),
                )
            })
    }

    /// Integer-list attribute in any of its spellings (`array<i64: ..>`, `dense<..>`), or empty.
    fn ints_attr(&self, op: &OperationRef<'c, 'a>, name: &str) -> R<Vec<i64>> {
        let Some(t) = self.attr_text(op, name) else {
            return Ok(Vec::new());
        };
        let parsed = if t.starts_with("array<") {
            mt::parse_dense_array(&t)
        } else if t.starts_with("dense<") {
            mt::parse_dense(&t).and_then(|(lit, ty)| {
                let n: i64 = ty.dims.iter().map(|d| d.unwrap_or(0)).product();
                (0..n as usize)
                    .map(|i| lit.get_i64(if lit.splat { 0 } else { i }))
                    .collect()
            })
        } else {
            None
        };
        parsed.ok_or_else(|| {
            self.op_error(op, format!("unsupported form of attribute `{name}`: {t}"))
        })
    }

    fn constant(&mut self, g: &mut Graph, frame: &mut Frame, op: OperationRef<'c, 'a>) -> R<()> {
        let text = self
            .attr_text(&op, "value")
            .ok_or_else(|| self.op_error(&op, "missing `value`"))?;
        let (lit, ty) = mt::parse_dense(&text)
            .ok_or_else(|| self.op_error(&op, format!("unsupported literal {}", abbrev(&text))))?;
        // Without the StableHLO dialect registered MLIR does not verify the op: its value
        // must have the result's type (StableHLO spec, `constant`, constraint C1).
        let result = self.result_type(&op, 0)?;
        if result.dtype != ty.dtype || result.dims != ty.dims {
            return Err(self.op_error(
                &op,
                format!(
                    "the value {} does not have the result type {}",
                    abbrev(&text),
                    op.result(0)
                        .map(|r| r.r#type().to_string())
                        .unwrap_or_default()
                ),
            ));
        }
        let dims: Vec<i64> = ty.dims.iter().map(|d| d.unwrap_or(0)).collect();
        let n: i64 = dims.iter().product();
        if (lit.dtype.is_int() || lit.dtype == DType::I1) && n <= MAX_SYM_ELEMS {
            let vals: Vec<i64> = (0..n as usize)
                .map(|i| lit.get_i64(if lit.splat { 0 } else { i }).unwrap_or(0))
                .collect();
            let elems = if lit.dtype == DType::I1 {
                Elems::Bool(vals.iter().map(|v| Pred::Const(*v != 0)).collect())
            } else {
                Elems::Int(vals.into_iter().map(DimExpr::constant).collect())
            };
            return self.set_sym(
                frame,
                &op,
                SymVal {
                    dtype: lit.dtype,
                    shape: dims,
                    elems,
                },
            );
        }
        self.add_node(
            g,
            frame,
            &op,
            Op::Constant(lit),
            &[],
            Vec::new(),
            Some(vec![TensorType::fixed(ty.dtype, &dims)]),
        )
    }

    fn custom_call(&mut self, g: &mut Graph, frame: &mut Frame, op: OperationRef<'c, 'a>) -> R<()> {
        let target = self
            .attr_text(&op, "call_target_name")
            .and_then(|t| mt::parse_string(&t))
            .unwrap_or_default();
        if target == "shape_assertion" {
            let e = self.entry(frame, &op, 0)?;
            let msg = self
                .attr_text(&op, "error_message")
                .and_then(|t| mt::parse_string(&t))
                .unwrap_or_default();
            let pred = match e.s.map(|s| s.elems) {
                Some(Elems::Bool(p)) if p.len() == 1 => p[0].clone(),
                _ => {
                    return Err(self.op_error(
                        &op,
                        "shape_assertion on a predicate that is not a symbolic comparison",
                    ))
                }
            };
            match pred {
                Pred::Const(true) => {}
                Pred::Const(false) => {
                    return Err(self.op_error(&op, format!("shape assertion always fails: {msg}")))
                }
                Pred::Cmp(lhs, rel, rhs) => {
                    if Pred::Cmp(lhs.clone(), rel, rhs.clone()).decide(&self.scope) != Some(true) {
                        self.range_fact(&lhs, rel, &rhs);
                        self.assertions.push(ShapeAssertion {
                            lhs,
                            rel,
                            rhs,
                            message: msg,
                        });
                    }
                }
            }
            return Ok(());
        }
        if target == dynamic_window::DYNAMIC_REDUCE_WINDOW {
            return self.dynamic_reduce_window(g, frame, op);
        }
        if target == placement::ANNOTATE_DEVICE_PLACEMENT {
            return self.annotate_device_placement(g, frame, op);
        }
        // Any other target is a kernel Ebb does not have: refused here rather than compiled
        // into a plan whose run then fails.
        Err(self.op_error(
            &op,
            format!(
                "custom_call @{target} is not supported: Ebb has no kernel for this target (it \
                 imports custom_call @shape_assertion, @{} and @{}; `ebb import \
                 --allow-unsupported` lists every such op)",
                dynamic_window::DYNAMIC_REDUCE_WINDOW,
                placement::ANNOTATE_DEVICE_PLACEMENT
            ),
        ))
    }

    /// Records an assertion that bounds one symbol linearly (`-S + 512 >= 0` from JAX's
    /// `constraints=["S <= 512"]`) as a range fact of the scope. The assertion is kept as a
    /// run-time check as well.
    fn range_fact(&mut self, lhs: &DimExpr, rel: Relation, rhs: &DimExpr) {
        let (e, strict) = match rel {
            Relation::Ge => (lhs.clone() - rhs.clone(), false),
            Relation::Gt => (lhs.clone() - rhs.clone(), true),
            Relation::Le => (rhs.clone() - lhs.clone(), false),
            Relation::Lt => (rhs.clone() - lhs.clone(), true),
            _ => return,
        };
        // e >= 0 (or > 0), with e = a*s + c for one symbol s.
        let syms = e.symbols();
        let Some(s) = syms.iter().next().filter(|_| syms.len() == 1) else {
            return;
        };
        let Some(c) = e.poly_coeffs_in(s) else { return };
        let (Some(c0), Some(a)) = (
            c.first().and_then(|x| x.as_const()),
            c.get(1).and_then(|x| x.as_const()),
        ) else {
            return;
        };
        if c.len() != 2 || a == 0 {
            return;
        }
        let c0 = if strict { c0 - 1 } else { c0 };
        if a < 0 {
            // s <= floor(c0 / -a)
            self.scope.set_range(s, None, Some(c0.div_euclid(-a)));
        } else {
            // s >= ceil(-c0 / a)
            self.scope
                .set_range(s, Some((-c0 + a - 1).div_euclid(a)), None);
        }
    }

    /// Checks the attributes of a layout op followed symbolically ([`Importer::try_symbolic`])
    /// as the op's node would be checked by the verifier: no node is made for it, so an
    /// attribute out of range would otherwise pass unseen.
    fn check_symbolic_attrs(&self, op: &OperationRef<'c, 'a>, name: &str) -> R<()> {
        if !matches!(name, "concatenate" | "slice" | "broadcast_in_dim") {
            return Ok(());
        }
        let operand = op
            .operand(0)
            .map_err(|e| self.op_error(op, e.to_string()))?;
        let x = mt::parse_tensor_type(&operand.r#type().to_string())
            .map_err(|m| self.op_error(op, m))?;
        let rank = x.dims.len();
        match name {
            "concatenate" => {
                let d = self.int_attr(op, "dimension")?;
                if d < 0 || d as usize >= rank {
                    return Err(self.op_error(
                        op,
                        format!("`dimension` {d} is out of range for operands of rank {rank} (0..{rank})"),
                    ));
                }
            }
            "broadcast_in_dim" => {
                let dims = self.required_ints_attr(op, "broadcast_dimensions")?;
                let out = self.result_type(op, 0)?.dims.len();
                if dims.len() != rank {
                    return Err(self.op_error(
                        op,
                        format!(
                            "`broadcast_dimensions` has {} entries, the operand's rank is {rank}",
                            dims.len()
                        ),
                    ));
                }
                if let Some(d) = dims.iter().find(|&&d| d < 0 || d as usize >= out) {
                    return Err(self.op_error(
                        op,
                        format!("`broadcast_dimensions` entry {d} is out of range for the result's rank {out} (0..{out})"),
                    ));
                }
            }
            _ => {
                let st = self.required_ints_attr(op, "start_indices")?;
                let li = self.required_ints_attr(op, "limit_indices")?;
                let sr = self.required_ints_attr(op, "strides")?;
                if st.len() != rank || li.len() != rank || sr.len() != rank {
                    return Err(self.op_error(
                        op,
                        format!("`start_indices`, `limit_indices` and `strides` must each have {rank} entries (the operand's rank)"),
                    ));
                }
                for i in 0..rank {
                    let dim = x.dims[i];
                    let bad =
                        st[i] < 0 || st[i] > li[i] || dim.is_some_and(|n| li[i] > n) || sr[i] < 1;
                    if bad {
                        return Err(self.op_error(
                            op,
                            format!(
                                "dimension {i}: start {}, limit {}, stride {} do not slice a dimension of size {} (0 <= start <= limit <= size, stride >= 1)",
                                st[i],
                                li[i],
                                sr[i],
                                dim.map_or("?".to_string(), |n| n.to_string())
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Follows integer shape arithmetic symbolically when all operands are symbolic and the
    /// result is a small integer/boolean tensor; `None` otherwise (the op is then data).
    fn try_symbolic(
        &mut self,
        frame: &Frame,
        op: &OperationRef<'c, 'a>,
        name: &str,
    ) -> R<Option<SymVal>> {
        if op.result_count() != 1 || op.operand_count() == 0 {
            return Ok(None);
        }
        let rt = self.result_type(op, 0)?;
        let Some(shape) = rt.dims.iter().copied().collect::<Option<Vec<i64>>>() else {
            return Ok(None);
        };
        if !(rt.dtype.is_int() || rt.dtype == DType::I1)
            || shape.iter().product::<i64>() > MAX_SYM_ELEMS
        {
            return Ok(None);
        }
        let mut ins = Vec::new();
        for v in op.operands() {
            match frame.get(v).and_then(|e| e.s) {
                Some(s) => ins.push(s),
                None => return Ok(None),
            }
        }
        self.check_symbolic_attrs(op, name)?;
        let ints = |i: usize| ins.get(i).and_then(|s| s.ints()).map(|v| v.to_vec());
        let elems = match name {
            "reshape" | "convert" if rt.dtype != DType::I1 => ints(0).map(Elems::Int),
            // Along the first dimension (row-major), so rows of a padding matrix too.
            "concatenate" if shape.len() == 1 || self.int_attr(op, "dimension")? == 0 => {
                let mut all = Vec::new();
                for s in &ins {
                    all.extend(s.ints().map(|v| v.to_vec()).unwrap_or_default());
                }
                Some(Elems::Int(all))
            }
            "slice" if shape.len() == 1 => {
                let st = self.required_ints_attr(op, "start_indices")?;
                let li = self.required_ints_attr(op, "limit_indices")?;
                let sr = self.required_ints_attr(op, "strides")?;
                match (ints(0), st.first(), li.first()) {
                    (Some(v), Some(&s), Some(&l)) => {
                        let step = sr.first().copied().unwrap_or(1).max(1) as usize;
                        v.get(s as usize..l as usize)
                            .map(|x| Elems::Int(x.iter().step_by(step).cloned().collect()))
                    }
                    _ => None,
                }
            }
            "broadcast_in_dim" if ins[0].len() == 1 => {
                let n = shape.iter().product::<i64>() as usize;
                match &ins[0].elems {
                    Elems::Int(v) => Some(Elems::Int(vec![v[0].clone(); n])),
                    Elems::Bool(v) => Some(Elems::Bool(vec![v[0].clone(); n])),
                }
            }
            "add" | "subtract" | "multiply" | "divide" | "remainder" | "maximum" | "minimum" => {
                match (ints(0), ints(1)) {
                    (Some(a), Some(b)) => sym::binary(name, &a, &b, &self.scope).map(Elems::Int),
                    _ => None,
                }
            }
            "negate" => ints(0).map(|a| Elems::Int(a.into_iter().map(|x| -x).collect())),
            // `floor_divide`/`remainder` as JAX writes them: `sign(a) != sign(b) and r != 0`.
            "sign" => match ints(0) {
                Some(a) => a
                    .iter()
                    .map(|x| sym::sign(x, &self.scope).map(DimExpr::constant))
                    .collect::<Option<Vec<_>>>()
                    .map(Elems::Int),
                None => None,
            },
            "and" | "or" if rt.dtype == DType::I1 => match (&ins[0].elems, &ins[1].elems) {
                (Elems::Bool(p), Elems::Bool(q)) if p.len() == q.len() => p
                    .iter()
                    .zip(q)
                    .map(|(a, b)| {
                        if name == "and" {
                            Pred::and(a, b, &self.scope)
                        } else {
                            Pred::or(a, b, &self.scope)
                        }
                    })
                    .collect::<Option<Vec<_>>>()
                    .map(Elems::Bool),
                _ => None,
            },
            "not" if rt.dtype == DType::I1 => match &ins[0].elems {
                Elems::Bool(p) => Some(Elems::Bool(p.iter().map(Pred::not).collect())),
                _ => None,
            },
            // Comparing two decided predicates (`sign(a) < 0 != sign(b) < 0` in JAX's
            // `remainder`).
            "compare" if ins.iter().all(|s| matches!(s.elems, Elems::Bool(_))) => {
                match (self.comparison_direction(op), &ins[0].elems, &ins[1].elems) {
                    (Some(rel @ (Relation::Eq | Relation::Ne)), Elems::Bool(p), Elems::Bool(q))
                        if p.len() == q.len() =>
                    {
                        p.iter()
                            .zip(q)
                            .map(|(a, b)| {
                                let (a, b) = (a.decide(&self.scope)?, b.decide(&self.scope)?);
                                Some(Pred::Const((a == b) == (rel == Relation::Eq)))
                            })
                            .collect::<Option<Vec<_>>>()
                            .map(Elems::Bool)
                    }
                    _ => None,
                }
            }
            "compare" => match (self.comparison_direction(op), ints(0), ints(1)) {
                (Some(rel), Some(a), Some(b)) if a.len() == b.len() => Some(Elems::Bool(
                    a.into_iter()
                        .zip(b)
                        .map(|(x, y)| match (x.as_const(), y.as_const()) {
                            (Some(p), Some(q)) => Pred::Const(rel.holds(p, q)),
                            _ => Pred::Cmp(x, rel, y),
                        })
                        .collect(),
                )),
                _ => None,
            },
            "select" => match (&ins[0].elems, ints(1), ints(2)) {
                // Shapes the verifier rejects later: not folded here.
                (Elems::Bool(p), Some(a), Some(b))
                    if b.len() == a.len() && (p.len() == 1 || p.len() == a.len()) =>
                {
                    let n = a.len();
                    let mut out = Vec::with_capacity(n);
                    for i in 0..n {
                        let pi = if p.len() == 1 { &p[0] } else { &p[i] };
                        match pi.decide(&self.scope) {
                            Some(true) => out.push(a[i].clone()),
                            Some(false) => out.push(b[i].clone()),
                            None => return Ok(None),
                        }
                    }
                    Some(Elems::Int(out))
                }
                _ => None,
            },
            _ => None,
        };
        Ok(elems.map(|elems| SymVal {
            dtype: rt.dtype,
            shape,
            elems,
        }))
    }

    /// Symbolic integer elements of operand `i`, which must be a shape computation.
    fn shape_operand(&self, frame: &Frame, op: &OperationRef<'c, 'a>, i: usize) -> R<Vec<DimExpr>> {
        self.entry(frame, op, i)?
            .s
            .and_then(|s| s.ints().map(|v| v.to_vec()))
            .ok_or_else(|| {
                self.op_error(
                    op,
                    format!(
                        "shape operand {i} is not a symbolic expression of the input dimensions"
                    ),
                )
            })
    }

    fn static_result_dims(&self, op: &OperationRef<'c, 'a>) -> R<Vec<DimExpr>> {
        let t = self.result_type(op, 0)?;
        t.dims
            .iter()
            .map(|d| {
                d.map(DimExpr::constant)
                    .ok_or_else(|| self.op_error(op, "dynamic result shape on a static-shape op"))
            })
            .collect()
    }

    /// Imports an op that becomes a graph node, dispatching by op family (see the module docs).
    fn tensor_op(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
        name: &str,
    ) -> R<()> {
        match name {
            n if LAYOUT_OPS.contains(&n) => self.layout_op(g, frame, op, name),
            n if SLICE_OPS.contains(&n) => self.slice_op(g, frame, op, name),
            n if CONTRACTION_OPS.contains(&n) => self.contraction_op(g, frame, op, name),
            n if REDUCTION_OPS.contains(&n) => self.reduction_op(g, frame, op, name),
            n if INDEX_OPS.contains(&n) => self.index_op(g, frame, op, name),
            n if CONTROL_OPS.contains(&n) => self.conditional_op(g, frame, op, name),
            n if BATCH_NORM_OPS.contains(&n) => self.batch_norm_op(g, frame, op, name),
            "rng_bit_generator" => self.rng_op(g, frame, op),
            "optimization_barrier" => self.optimization_barrier(g, frame, op),
            _ => self.elementwise_op(g, frame, op, name),
        }
    }

    /// Elementwise ops (`compare` and `convert` with their payloads, the others payload-free)
    /// and the payload-free control ops (`while`, `optimization_barrier`,
    /// `dynamic_update_slice`).
    fn elementwise_op(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
        name: &str,
    ) -> R<()> {
        let payload = match name {
            "compare" => Op::Compare(self.compare_spec(&op)?),
            "convert" => Op::Convert(self.result_type(&op, 0)?.dtype),
            "reduce_precision" => Op::ReducePrecision(
                ebb_ir::op::ReducePrecisionSpec::new(
                    self.int_attr(&op, "exponent_bits")?,
                    self.int_attr(&op, "mantissa_bits")?,
                )
                .map_err(|m| self.op_error(&op, m))?,
            ),
            "bitcast_convert" => {
                let to = self.result_type(&op, 0)?.dtype;
                let x = self.operand_tensor(g, frame, &op, 0)?;
                if g.value_type(x).dtype.size_bytes() != to.size_bytes() {
                    let v = self.bitcast_resize(g, &op, x, to)?;
                    let (got, want) = (g.value_type(v), self.result_type(&op, 0)?);
                    let fits = got.rank() == want.dims.len()
                        && got
                            .shape
                            .iter()
                            .zip(&want.dims)
                            .all(|(a, b)| b.is_none_or(|k| a.as_const() == Some(k)));
                    if !fits {
                        return Err(self.op_error(
                            &op,
                            format!("the bitcast's type {got} conflicts with the declared result"),
                        ));
                    }
                    let r = op
                        .result(0)
                        .map_err(|e| self.op_error(&op, e.to_string()))?;
                    frame.set_tensor(melior::ir::Value::from(r), v);
                    return Ok(());
                }
                Op::BitcastConvert(to)
            }
            _ => elementwise_kind(name)
                .and_then(Op::simple)
                .ok_or_else(|| self.unsupported(&op))?,
        };
        self.finish(g, frame, &op, payload, None)
    }

    /// `compare`'s direction and, when given, its `compare_type`.
    fn compare_spec(&self, op: &OperationRef<'c, 'a>) -> R<CompareSpec> {
        let direction = self
            .comparison_direction(op)
            .ok_or_else(|| self.op_error(op, "missing or unknown comparison_direction"))?;
        let compare_type = match self.attr_text(op, "compare_type") {
            None => None,
            Some(t) => Some(
                mt::parse_enum(&t)
                    .as_deref()
                    .and_then(CompareType::from_name)
                    .ok_or_else(|| {
                        self.op_error(op, format!("unsupported compare_type {}", abbrev(&t)))
                    })?,
            ),
        };
        Ok(CompareSpec {
            direction,
            compare_type,
        })
    }

    /// `compare`'s `comparison_direction` (`#stablehlo<comparison_direction GE>`).
    fn comparison_direction(&self, op: &OperationRef<'c, 'a>) -> Option<Relation> {
        self.attr_text(op, "comparison_direction")
            .and_then(|t| mt::parse_enum(&t))
            .as_deref()
            .and_then(Relation::from_name)
    }

    /// Materializes the operands of `op` (those at `data`, or all when `None`), imports its
    /// regions and appends the node with `payload`.
    fn finish(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: &OperationRef<'c, 'a>,
        payload: Op,
        data: Option<&[usize]>,
    ) -> R<()> {
        let operands = self.operand_tensors(g, frame, op, data)?;
        self.finish_with(g, frame, op, payload, &operands)
    }

    /// Imports the regions of `op` and appends the node with `payload` and `operands`.
    fn finish_with(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: &OperationRef<'c, 'a>,
        payload: Op,
        operands: &[ValueRef],
    ) -> R<()> {
        let regions = self.regions(g, frame, op, payload.kind(), operands)?;
        self.add_node(g, frame, op, payload, operands, regions, None)
    }

    /// The graph values of the operands of `op` at `data` (all when `None`).
    fn operand_tensors(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: &OperationRef<'c, 'a>,
        data: Option<&[usize]>,
    ) -> R<Vec<ValueRef>> {
        let all: Vec<usize>;
        let data = match data {
            Some(d) => d,
            None => {
                all = (0..op.operand_count()).collect();
                &all
            }
        };
        data.iter()
            .map(|&i| self.operand_tensor(g, frame, op, i))
            .collect()
    }

    fn bool_attr(&self, op: &OperationRef<'c, 'a>, name: &str) -> bool {
        self.attr_text(op, name)
            .and_then(|t| mt::parse_bool(&t))
            .unwrap_or(false)
    }

    /// Like [`Self::ints_attr`], but the attribute must be present.
    fn required_ints_attr(&self, op: &OperationRef<'c, 'a>, name: &str) -> R<Vec<i64>> {
        if self.attr_text(op, name).is_none() {
            return Err(self.op_error(op, format!("missing `{name}`")));
        }
        self.ints_attr(op, name)
    }

    /// An integer-list attribute with one entry per dimension of an `n`-dimensional window:
    /// `default` repeated `n` times when missing or empty, an error for other lengths.
    fn ints_n_attr(
        &self,
        op: &OperationRef<'c, 'a>,
        name: &str,
        n: usize,
        default: i64,
    ) -> R<Vec<i64>> {
        let v = self.ints_attr(op, name)?;
        if v.is_empty() {
            return Ok(vec![default; n]);
        }
        if v.len() != n {
            return Err(self.op_error(
                op,
                format!("`{name}` has {} entries, expected {n}", v.len()),
            ));
        }
        Ok(v)
    }

    /// A `padding` attribute (`dense<[[lo, hi], ...]>`) of an `n`-dimensional window as
    /// `(low, high)` pairs; zero padding when missing or empty.
    fn padding_attr(&self, op: &OperationRef<'c, 'a>, n: usize) -> R<Vec<(i64, i64)>> {
        let v = self.ints_n_attr(op, "padding", 2 * n, 0)?;
        Ok(v.chunks_exact(2).map(|p| (p[0], p[1])).collect())
    }

    /// The fields of a struct-like attribute `#stablehlo.KIND<k1 = [..], k2 = ..>`, in order.
    fn struct_fields(
        &self,
        op: &OperationRef<'c, 'a>,
        name: &str,
        kind: &str,
    ) -> R<Vec<(String, Vec<i64>)>> {
        let t = self
            .attr_text(op, name)
            .ok_or_else(|| self.op_error(op, format!("missing `{name}`")))?;
        mt::parse_struct(&t, kind)
            .ok_or_else(|| self.op_error(op, format!("unsupported `{name}`: {}", abbrev(&t))))
    }

    /// The error for a field of struct attribute `name` that the importer does not know.
    fn unknown_field(
        &self,
        op: &OperationRef<'c, 'a>,
        name: &str,
        field: &str,
    ) -> super::ImportError {
        self.op_error(op, format!("unsupported field `{field}` in `{name}`"))
    }

    /// Imports the regions of `op`. Reduction-style bodies take scalar arguments of the
    /// operands' element types; `while` regions take the loop-carried values, and a carried
    /// symbolic integer that the body returns unchanged stays symbolic inside the loop.
    fn regions(
        &mut self,
        _g: &mut Graph,
        frame: &Frame,
        op: &OperationRef<'c, 'a>,
        kind: OpKind,
        operands: &[ValueRef],
    ) -> R<Vec<Graph>> {
        let n = kind.num_regions();
        if op.region_count() != n {
            return Err(self.op_error(
                op,
                format!("expected {n} regions, found {}", op.region_count()),
            ));
        }
        let mut out = Vec::new();
        for i in 0..n {
            let r: RegionRef<'c, 'a> =
                op.region(i).map_err(|e| self.op_error(op, e.to_string()))?;
            let block = melior::ir::RegionLike::first_block(&r)
                .ok_or_else(|| self.op_error(op, "empty region"))?;
            let args: Vec<(TensorType, Option<SymVal>)> = if kind == OpKind::While {
                (0..op.operand_count())
                    .map(|k| {
                        let e = self.entry(frame, op, k)?;
                        let ty = _g.value_type(operands[k]).clone();
                        let invariant = e.s.is_some() && self.body_passes_through(op, k);
                        let s = if invariant {
                            e.s
                        } else {
                            self.data_symbols(&ty)
                        };
                        Ok((ty, s))
                    })
                    .collect::<R<_>>()?
            } else {
                (0..melior::ir::block::BlockLike::argument_count(&block))
                    .map(|k| {
                        let a = melior::ir::block::BlockLike::argument(&block, k)
                            .map_err(|e| self.op_error(op, e.to_string()))?;
                        let t = mt::parse_tensor_type(&a.r#type().to_string())
                            .map_err(|m| self.op_error(op, m))?;
                        let d: Option<Vec<i64>> = t.dims.iter().copied().collect();
                        let d = d.ok_or_else(|| self.op_error(op, "dynamic region argument"))?;
                        Ok((TensorType::fixed(t.dtype, &d), None))
                    })
                    .collect::<R<_>>()?
            };
            let name = match (kind, i) {
                (OpKind::While, 0) => "cond",
                (OpKind::While, _) => "body",
                _ => "body",
            };
            out.push(self.import_region(op, r, &args, frame, name)?);
        }
        Ok(out)
    }

    /// Whether the `while` body (region 1) returns its block argument `k` unchanged at `k`.
    fn body_passes_through(&self, op: &OperationRef<'c, 'a>, k: usize) -> bool {
        let Ok(body) = op.region(1) else { return false };
        let Some(block) = melior::ir::RegionLike::first_block(&body) else {
            return false;
        };
        let (Ok(arg), Some(term)) = (
            melior::ir::block::BlockLike::argument(&block, k),
            melior::ir::block::BlockLike::terminator(&block),
        ) else {
            return false;
        };
        term.operand(k)
            .map(|v| v.to_raw().ptr == Value::from(arg).to_raw().ptr)
            .unwrap_or(false)
    }

    /// Infers result types, checks them against MLIR's declared types (dtype and every static
    /// dimension) and appends the node.
    #[allow(clippy::too_many_arguments)]
    fn add_node(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: &OperationRef<'c, 'a>,
        payload: Op,
        operands: &[ValueRef],
        regions: Vec<Graph>,
        declared: Option<Vec<TensorType>>,
    ) -> R<()> {
        let types: Vec<&TensorType> = operands.iter().map(|v| g.value_type(*v)).collect();
        let inferred =
            infer(&payload, &types, &regions).map_err(|e| self.op_error(op, e.to_string()))?;
        let outputs = match (inferred, declared) {
            (Some(t), _) | (None, Some(t)) => t,
            (None, None) => return Err(self.op_error(op, "result types cannot be inferred")),
        };
        if outputs.len() != op.result_count() {
            return Err(self.op_error(
                op,
                format!(
                    "{} results inferred, {} declared",
                    outputs.len(),
                    op.result_count()
                ),
            ));
        }
        for (i, t) in outputs.iter().enumerate() {
            let d = self.result_type(op, i)?;
            let ok = d.dtype == t.dtype
                && d.dims.len() == t.rank()
                && d.dims
                    .iter()
                    .zip(&t.shape)
                    .all(|(a, b)| a.is_none_or(|k| b.as_const() == Some(k)));
            if !ok {
                let r = op
                    .result(i)
                    .map(|r| r.r#type().to_string())
                    .unwrap_or_default();
                return Err(self.op_error(
                    op,
                    format!("inferred result type {t} conflicts with declared {r}"),
                ));
            }
        }
        if outputs.iter().any(|t| t.shape.iter().any(has_data)) {
            return Err(self.op_error(op, "result shape depends on tensor data"));
        }
        let syms: Vec<Option<SymVal>> = if matches!(payload, Op::Constant(_)) {
            vec![None; outputs.len()]
        } else {
            outputs.iter().map(|t| self.data_symbols(t)).collect()
        };
        let mut node = Node::new(payload, outputs);
        node.regions = regions;
        node.loc = Some(super::func::op_loc(op, &self.file));
        let id = g.add_node(node, operands);
        for (i, s) in syms.iter().enumerate().take(op.result_count()) {
            let r = op.result(i).map_err(|e| self.op_error(op, e.to_string()))?;
            frame.insert(
                Value::from(r),
                Entry {
                    t: Some(ValueRef::new(id, i as u32)),
                    s: s.clone(),
                },
            );
        }
        Ok(())
    }
}

/// StableHLO ops by importer family (without the `stablehlo.` prefix); the ones not listed
/// here are elementwise ([`elementwise_kind`]) or handled first in `import_op` (`constant`,
/// `custom_call`, `get_dimension_size`).
const LAYOUT_OPS: &[&str] = &[
    "broadcast_in_dim",
    "dynamic_broadcast_in_dim",
    "reshape",
    "dynamic_reshape",
    "iota",
    "dynamic_iota",
    "transpose",
    "concatenate",
    "reverse",
    "pad",
];
const SLICE_OPS: &[&str] = &["slice", "real_dynamic_slice", "dynamic_slice"];
const CONTRACTION_OPS: &[&str] = &["dot_general", "convolution"];
const REDUCTION_OPS: &[&str] = &["reduce", "reduce_window", "select_and_scatter"];
const INDEX_OPS: &[&str] = &["gather", "dynamic_gather", "scatter", "sort"];
const CONTROL_OPS: &[&str] = &["case", "if"];
const BATCH_NORM_OPS: &[&str] = &[
    "batch_norm_training",
    "batch_norm_inference",
    "batch_norm_grad",
];

/// The kind of an elementwise (or payload-free control) StableHLO op, by its name without the
/// prefix; `None` when the importer does not take it.
fn elementwise_kind(name: &str) -> Option<OpKind> {
    OpKind::from_name(name).filter(|k| {
        k.is_elementwise()
            || matches!(
                k,
                OpKind::DynamicUpdateSlice | OpKind::While | OpKind::OptimizationBarrier
            )
    })
}

/// The op families [`Importer::tensor_op`] dispatches by name.
const FAMILIES: &[&[&str]] = &[
    LAYOUT_OPS,
    SLICE_OPS,
    CONTRACTION_OPS,
    REDUCTION_OPS,
    INDEX_OPS,
    CONTROL_OPS,
    BATCH_NORM_OPS,
];

/// Ops handled by name outside the families and the payload-free elementwise kinds.
const SPECIAL_OPS: &[&str] = &[
    "constant",
    "custom_call",
    "get_dimension_size",
    "compare",
    "convert",
    "bitcast_convert",
    "reduce_precision",
    "rng_bit_generator",
    "composite",
];

/// Shardy's identity annotation of a tensor's sharding.
const SHARDING_CONSTRAINT: &str = "sdy.sharding_constraint";
/// Shardy's module-level mesh symbol (no data; skipped like every module-level op other than
/// `func.func`).
const SHARDY_MESH: &str = "sdy.mesh";

/// Whether the importer takes an op of this full name (`stablehlo.add`, `func.call`), from
/// the same tables its dispatch uses: for triage (`ebb import --allow-unsupported`).
pub fn is_supported_op(full: &str) -> bool {
    match full {
        "builtin.module" | "func.func" | "func.call" | "func.return" => true,
        SHARDING_CONSTRAINT | SHARDY_MESH => true,
        _ => full.strip_prefix("stablehlo.").is_some_and(|n| {
            n == "return"
                || SPECIAL_OPS.contains(&n)
                || FAMILIES.iter().any(|t| t.contains(&n))
                || elementwise_kind(n).and_then(Op::simple).is_some()
        }),
    }
}

/// For triage: the name under which `op` is listed as unsupported (`None` when the importer
/// takes it). By op name ([`is_supported_op`]); a `custom_call` also by its target: only the
/// targets imported as ops (`shape_assertion`, `stablehlo.dynamic_reduce_window`,
/// `annotate_device_placement`) are taken,
/// any other is listed as `stablehlo.custom_call @TARGET`.
pub fn unsupported_name(op: &OperationRef) -> Option<String> {
    let name = super::func::op_name(op);
    if !is_supported_op(&name) {
        return Some(name);
    }
    if name != "stablehlo.custom_call" {
        return None;
    }
    let target = op
        .attribute("call_target_name")
        .ok()
        .and_then(|a| mt::parse_string(&a.to_string()))
        .unwrap_or_default();
    if target == "shape_assertion"
        || target == dynamic_window::DYNAMIC_REDUCE_WINDOW
        || target == placement::ANNOTATE_DEVICE_PLACEMENT
    {
        return None;
    }
    Some(format!("{name} @{target}"))
}

/// Every op the importer takes, by full name (`stablehlo.add`, `func.call`), sorted: the
/// registry behind the README's op table and `ebb ops` (region terminators and the module
/// structure left out).
pub fn supported_op_names() -> Vec<String> {
    let mut names: Vec<String> = FAMILIES
        .iter()
        .chain([SPECIAL_OPS].iter())
        .flat_map(|t| t.iter().copied())
        .chain(OpKind::ALL.iter().map(|k| k.name()))
        .map(|n| format!("stablehlo.{n}"))
        .filter(|n| is_supported_op(n))
        .collect();
    names.push("func.call".into());
    names.push(SHARDING_CONSTRAINT.into());
    names.push(SHARDY_MESH.into());
    names.sort();
    names.dedup();
    names
}

/// Prefix of the fresh symbols that stand for integer values computed from tensor data.
pub const DATA_PREFIX: &str = "_data";

fn has_data(d: &DimExpr) -> bool {
    d.symbols()
        .iter()
        .any(|s| s.name().starts_with(DATA_PREFIX))
}

fn mentions_data(s: &SymVal) -> bool {
    match &s.elems {
        Elems::Int(v) => v.iter().any(has_data),
        Elems::Bool(v) => v
            .iter()
            .any(|p| matches!(p, Pred::Cmp(a, _, b) if has_data(a) || has_data(b))),
    }
}

fn abbrev(s: &str) -> String {
    if s.len() > 120 {
        format!(
            "{}...",
            &s[..s.char_indices().nth(117).map(|(i, _)| i).unwrap_or(s.len())]
        )
    } else {
        s.to_string()
    }
}
