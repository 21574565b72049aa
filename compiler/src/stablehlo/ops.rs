//! Per-op conversion of StableHLO operations into graph nodes: attributes, symbolic shape
//! operands, result-type inference and the check against MLIR's declared result types.
//!
//! Supported (StableHLO spec names): elementwise unary/binary ops, `compare`, `select`,
//! `clamp`, `convert`, `constant`, `iota`/`dynamic_iota`, `broadcast_in_dim`/
//! `dynamic_broadcast_in_dim`, `reshape`/`dynamic_reshape`, `transpose`, `concatenate`,
//! `slice`/`real_dynamic_slice`, `dynamic_slice`, `dynamic_update_slice`, `pad`, `reverse`,
//! `reduce`, `reduce_window`, `select_and_scatter`, `dot_general`, `convolution`,
//! `gather`/`dynamic_gather`, `scatter`, `sort`, `while`, `optimization_barrier`,
//! `get_dimension_size`, `custom_call` (`shape_assertion` becomes a shape assertion; other
//! targets an opaque `custom_call` node with static result types), and `func.call` (inlined).

use super::func::{op_name, Entry, Frame, Importer, R};
use super::mlir_text::{self as mt, MlirTensorType};
use super::sym::{self, Elems, Pred, SymVal, MAX_SYM_ELEMS};
use ebb_ir::shape::infer;
use ebb_ir::{
    Attr, Attrs, DType, DimExpr, Graph, Node, OpKind, Relation, ShapeAssertion, TensorType,
    ValueRef,
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
        if full == "func.call" {
            return self.inline_call(g, frame, op);
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
            loc: super::func::op_loc(op),
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
        self.tensor(g, frame, v, e)
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
        let mut attrs = Attrs::new();
        attrs.insert("value".into(), Attr::Literal(lit));
        self.add_node(
            g,
            frame,
            &op,
            OpKind::Constant,
            attrs,
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
        let mut attrs = Attrs::new();
        attrs.insert("call_target_name".into(), Attr::Str(target));
        if let Some(b) = self.attr_text(&op, "backend_config") {
            attrs.insert(
                "backend_config".into(),
                Attr::Str(mt::parse_string(&b).unwrap_or(b)),
            );
        }
        let mut types = Vec::new();
        for i in 0..op.result_count() {
            let t = self.result_type(&op, i)?;
            let dims: Option<Vec<i64>> = t.dims.iter().copied().collect();
            let dims = dims.ok_or_else(|| {
                self.op_error(
                    &op,
                    "custom_call with a dynamic result shape is not supported",
                )
            })?;
            types.push(TensorType::fixed(t.dtype, &dims));
        }
        let operands = (0..op.operand_count())
            .map(|i| self.operand_tensor(g, frame, &op, i))
            .collect::<R<Vec<_>>>()?;
        self.add_node(
            g,
            frame,
            &op,
            OpKind::CustomCall,
            attrs,
            &operands,
            Vec::new(),
            Some(types),
        )
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
        let ints = |i: usize| ins.get(i).and_then(|s| s.ints()).map(|v| v.to_vec());
        let elems = match name {
            "reshape" | "convert" if rt.dtype != DType::I1 => ints(0).map(Elems::Int),
            "concatenate" if shape.len() == 1 => {
                let mut all = Vec::new();
                for s in &ins {
                    all.extend(s.ints().map(|v| v.to_vec()).unwrap_or_default());
                }
                Some(Elems::Int(all))
            }
            "slice" if shape.len() == 1 => {
                let st = self.ints_attr(op, "start_indices")?;
                let li = self.ints_attr(op, "limit_indices")?;
                let sr = self.ints_attr(op, "strides")?;
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
            "compare" => {
                let dir = self
                    .attr_text(op, "comparison_direction")
                    .and_then(|t| mt::parse_enum(&t));
                match (
                    dir.as_deref().and_then(Relation::from_name),
                    ints(0),
                    ints(1),
                ) {
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
                }
            }
            "select" => match (&ins[0].elems, ints(1), ints(2)) {
                (Elems::Bool(p), Some(a), Some(b)) => {
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

    fn tensor_op(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
        name: &str,
    ) -> R<()> {
        let mut attrs = Attrs::new();
        let mut data: Vec<usize> = (0..op.operand_count()).collect();
        let dims = |v: Vec<i64>| Attr::Dims(v.into_iter().map(DimExpr::constant).collect());
        let kind = match name {
            "dynamic_broadcast_in_dim" | "broadcast_in_dim" => {
                attrs.insert(
                    "broadcast_dimensions".into(),
                    Attr::Ints(self.ints_attr(&op, "broadcast_dimensions")?),
                );
                let shape = if name == "broadcast_in_dim" {
                    self.static_result_dims(&op)?
                } else {
                    self.shape_operand(frame, &op, 1)?
                };
                attrs.insert("shape".into(), Attr::Dims(shape));
                data = vec![0];
                OpKind::BroadcastInDim
            }
            "dynamic_reshape" | "reshape" => {
                let shape = if name == "reshape" {
                    self.static_result_dims(&op)?
                } else {
                    self.shape_operand(frame, &op, 1)?
                };
                attrs.insert("shape".into(), Attr::Dims(shape));
                data = vec![0];
                OpKind::Reshape
            }
            "dynamic_iota" | "iota" => {
                let shape = if name == "iota" {
                    self.static_result_dims(&op)?
                } else {
                    self.shape_operand(frame, &op, 0)?
                };
                attrs.insert("shape".into(), Attr::Dims(shape));
                attrs.insert(
                    "iota_dimension".into(),
                    Attr::I64(self.int_attr(&op, "iota_dimension")?),
                );
                attrs.insert("dtype".into(), Attr::DType(self.result_type(&op, 0)?.dtype));
                data = vec![];
                OpKind::Iota
            }
            "slice" => {
                for k in ["start_indices", "limit_indices", "strides"] {
                    attrs.insert(k.into(), dims(self.ints_attr(&op, k)?));
                }
                OpKind::Slice
            }
            "real_dynamic_slice" => {
                let st = self.shape_operand(frame, &op, 1)?;
                let li = self.shape_operand(frame, &op, 2)?;
                let sr = self.shape_operand(frame, &op, 3)?;
                if st.iter().any(has_data) {
                    return self.data_dependent_slice(g, frame, op, st, li, sr);
                }
                attrs.insert("start_indices".into(), Attr::Dims(st));
                attrs.insert("limit_indices".into(), Attr::Dims(li));
                attrs.insert("strides".into(), Attr::Dims(sr));
                data = vec![0];
                OpKind::Slice
            }
            "dynamic_slice" => {
                attrs.insert(
                    "slice_sizes".into(),
                    dims(self.ints_attr(&op, "slice_sizes")?),
                );
                OpKind::DynamicSlice
            }
            "pad" => {
                for k in ["edge_padding_low", "edge_padding_high", "interior_padding"] {
                    attrs.insert(k.into(), Attr::Ints(self.ints_attr(&op, k)?));
                }
                OpKind::Pad
            }
            "gather" | "dynamic_gather" => {
                self.struct_attr(&op, "dimension_numbers", "gather", &mut attrs)?;
                let sizes = if name == "gather" {
                    self.ints_attr(&op, "slice_sizes")?
                        .into_iter()
                        .map(DimExpr::constant)
                        .collect()
                } else {
                    self.shape_operand(frame, &op, 2)?
                };
                attrs.insert("slice_sizes".into(), Attr::Dims(sizes));
                attrs.insert(
                    "indices_are_sorted".into(),
                    Attr::Bool(self.bool_attr(&op, "indices_are_sorted")),
                );
                data = vec![0, 1];
                OpKind::Gather
            }
            "scatter" => {
                self.struct_attr(&op, "scatter_dimension_numbers", "scatter", &mut attrs)?;
                attrs.insert(
                    "indices_are_sorted".into(),
                    Attr::Bool(self.bool_attr(&op, "indices_are_sorted")),
                );
                attrs.insert(
                    "unique_indices".into(),
                    Attr::Bool(self.bool_attr(&op, "unique_indices")),
                );
                OpKind::Scatter
            }
            "dot_general" => {
                self.struct_attr(&op, "dot_dimension_numbers", "dot", &mut attrs)?;
                OpKind::DotGeneral
            }
            "convolution" => {
                let dn = self
                    .attr_text(&op, "dimension_numbers")
                    .and_then(|t| mt::parse_conv_dimension_numbers(&t));
                attrs.insert(
                    "dimension_numbers".into(),
                    Attr::Str(dn.ok_or_else(|| self.op_error(&op, "missing dimension_numbers"))?),
                );
                for k in ["window_strides", "padding", "lhs_dilation", "rhs_dilation"] {
                    attrs.insert(k.into(), Attr::Ints(self.ints_attr(&op, k)?));
                }
                for k in ["feature_group_count", "batch_group_count"] {
                    attrs.insert(k.into(), Attr::I64(self.int_attr(&op, k).unwrap_or(1)));
                }
                OpKind::Convolution
            }
            "reduce_window" | "select_and_scatter" => {
                for k in [
                    "window_dimensions",
                    "window_strides",
                    "base_dilations",
                    "window_dilations",
                    "padding",
                ] {
                    let v = self.ints_attr(&op, k)?;
                    if !v.is_empty() {
                        attrs.insert(k.into(), Attr::Ints(v));
                    }
                }
                if name == "reduce_window" {
                    OpKind::ReduceWindow
                } else {
                    OpKind::SelectAndScatter
                }
            }
            "compare" => {
                let dir = self
                    .attr_text(&op, "comparison_direction")
                    .and_then(|t| mt::parse_enum(&t));
                attrs.insert(
                    "comparison_direction".into(),
                    Attr::Str(
                        dir.ok_or_else(|| self.op_error(&op, "missing comparison_direction"))?,
                    ),
                );
                if let Some(t) = self
                    .attr_text(&op, "compare_type")
                    .and_then(|t| mt::parse_enum(&t))
                {
                    attrs.insert("compare_type".into(), Attr::Str(t));
                }
                OpKind::Compare
            }
            "convert" => {
                attrs.insert("dtype".into(), Attr::DType(self.result_type(&op, 0)?.dtype));
                OpKind::Convert
            }
            "sort" => {
                attrs.insert(
                    "dimension".into(),
                    Attr::I64(self.int_attr(&op, "dimension")?),
                );
                attrs.insert(
                    "is_stable".into(),
                    Attr::Bool(self.bool_attr(&op, "is_stable")),
                );
                OpKind::Sort
            }
            "transpose" => {
                attrs.insert(
                    "permutation".into(),
                    Attr::Ints(self.ints_attr(&op, "permutation")?),
                );
                OpKind::Transpose
            }
            "reverse" | "reduce" => {
                attrs.insert(
                    "dimensions".into(),
                    Attr::Ints(self.ints_attr(&op, "dimensions")?),
                );
                OpKind::from_name(name).unwrap_or(OpKind::Reduce)
            }
            "concatenate" => {
                attrs.insert(
                    "dimension".into(),
                    Attr::I64(self.int_attr(&op, "dimension")?),
                );
                OpKind::Concatenate
            }
            _ => match OpKind::from_name(name) {
                Some(k)
                    if k.is_elementwise()
                        || matches!(
                            k,
                            OpKind::DynamicUpdateSlice
                                | OpKind::While
                                | OpKind::OptimizationBarrier
                        ) =>
                {
                    k
                }
                _ => return Err(self.unsupported(&op)),
            },
        };
        let mut operands = Vec::with_capacity(data.len());
        for &i in &data {
            operands.push(self.operand_tensor(g, frame, &op, i)?);
        }
        if kind == OpKind::DotGeneral || kind == OpKind::Convolution {
            let rd = self.result_type(&op, 0)?.dtype;
            if rd != g.value_type(operands[0]).dtype {
                attrs.insert("dtype".into(), Attr::DType(rd));
            }
        }
        let regions = self.regions(g, frame, &op, kind, &operands)?;
        self.add_node(g, frame, &op, kind, attrs, &operands, regions, None)
    }

    /// `real_dynamic_slice` whose start indices depend on data (a loop counter) but whose sizes
    /// `limit - start` do not: becomes `dynamic_slice` with scalar start operands sliced out of
    /// the start vector (indices are in bounds already, so `dynamic_slice`'s clamping is a no-op).
    fn data_dependent_slice(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
        st: Vec<DimExpr>,
        li: Vec<DimExpr>,
        sr: Vec<DimExpr>,
    ) -> R<()> {
        if sr.iter().any(|k| k.as_const() != Some(1)) {
            return Err(self.op_error(
                &op,
                "data-dependent start indices with non-unit strides are not supported",
            ));
        }
        let sizes: Vec<DimExpr> = st
            .iter()
            .zip(&li)
            .map(|(s, l)| l.clone() - s.clone())
            .collect();
        if sizes.iter().any(has_data) {
            return Err(self.op_error(&op, "slice sizes depend on tensor data"));
        }
        let x = self.operand_tensor(g, frame, &op, 0)?;
        let start = self.operand_tensor(g, frame, &op, 1)?;
        let sty = g.value_type(start).clone();
        let mut operands = vec![x];
        for i in 0..st.len() as i64 {
            let mut a = Attrs::new();
            let c = |v: i64| Attr::Dims(vec![DimExpr::constant(v)]);
            a.insert("start_indices".into(), c(i));
            a.insert("limit_indices".into(), c(i + 1));
            a.insert("strides".into(), c(1));
            let one = TensorType::fixed(sty.dtype, &[1]);
            let mut n = Node::new(OpKind::Slice, a, vec![one]);
            n.loc = Some(super::func::op_loc(&op));
            let sl = g.add_node(n, &[start]);
            let mut a = Attrs::new();
            a.insert("shape".into(), Attr::Dims(vec![]));
            let mut n = Node::new(OpKind::Reshape, a, vec![TensorType::scalar(sty.dtype)]);
            n.loc = Some(super::func::op_loc(&op));
            operands.push(ValueRef::new(g.add_node(n, &[ValueRef::new(sl, 0)]), 0));
        }
        let mut attrs = Attrs::new();
        attrs.insert("slice_sizes".into(), Attr::Dims(sizes));
        self.add_node(
            g,
            frame,
            &op,
            OpKind::DynamicSlice,
            attrs,
            &operands,
            Vec::new(),
            None,
        )
    }

    fn bool_attr(&self, op: &OperationRef<'c, 'a>, name: &str) -> bool {
        self.attr_text(op, name)
            .and_then(|t| mt::parse_bool(&t))
            .unwrap_or(false)
    }

    fn struct_attr(
        &self,
        op: &OperationRef<'c, 'a>,
        name: &str,
        kind: &str,
        attrs: &mut Attrs,
    ) -> R<()> {
        let t = self
            .attr_text(op, name)
            .ok_or_else(|| self.op_error(op, format!("missing `{name}`")))?;
        let fields = mt::parse_struct(&t, kind)
            .ok_or_else(|| self.op_error(op, format!("unsupported `{name}`: {}", abbrev(&t))))?;
        if kind == "gather" || kind == "scatter" {
            // The MLIR printer omits `index_vector_dim` when it is 0.
            attrs.insert("index_vector_dim".into(), Attr::I64(0));
        }
        for (k, v) in fields {
            if k == "index_vector_dim" {
                attrs.insert(k, Attr::I64(v.first().copied().unwrap_or(0)));
            } else {
                attrs.insert(k, Attr::Ints(v));
            }
        }
        Ok(())
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
        kind: OpKind,
        attrs: Attrs,
        operands: &[ValueRef],
        regions: Vec<Graph>,
        declared: Option<Vec<TensorType>>,
    ) -> R<()> {
        let types: Vec<&TensorType> = operands.iter().map(|v| g.value_type(*v)).collect();
        let inferred =
            infer(kind, &attrs, &types, &regions).map_err(|e| self.op_error(op, e.to_string()))?;
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
        let syms: Vec<Option<SymVal>> = if kind == OpKind::Constant {
            vec![None; outputs.len()]
        } else {
            outputs.iter().map(|t| self.data_symbols(t)).collect()
        };
        let mut node = Node::new(kind, attrs, outputs);
        node.regions = regions;
        node.loc = Some(super::func::op_loc(op));
        let id = g.add_node(node, operands);
        for i in 0..op.result_count() {
            let r = op.result(i).map_err(|e| self.op_error(op, e.to_string()))?;
            frame.insert(
                Value::from(r),
                Entry {
                    t: Some(ValueRef::new(id, i as u32)),
                    s: syms[i].clone(),
                },
            );
        }
        Ok(())
    }
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
