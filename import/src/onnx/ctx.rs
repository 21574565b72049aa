//! The lowering context: ONNX value names → Ebb values, the node being lowered, and the
//! builders that op lowerings use (numpy broadcasting, constants, reductions, dots).
//!
//! An ONNX value is a [`Val`]: a graph value and/or, for small integer tensors with a static
//! shape, its elements as symbolic dimensions ([`SymVal`]) — that is how `Shape` → `Gather` →
//! `Concat` → `Reshape` chains are evaluated at import time — and/or a literal (constants,
//! materialized as graph `constant`s only when used as data).
//!
//! Invariant: every node added goes through [`Cx::emit`]/[`Cx::emit_n`], which take the typed
//! [`Op`] (kind and payload) and whose result types come from [`ebb_ir::shape::infer`]; a
//! lowering never states a result type itself except for constants.

use super::error::{NodeLoc, OnnxError};
use super::proto::{AttributeProto, NodeProto, TensorProto};
use super::tensor::scalar_literal;
use crate::sym::{Elems, SymVal};
use ebb_ir::op::{BroadcastSpec, CompareSpec, CompareType, DotDims, IotaSpec, Literal};
use ebb_ir::{DType, DimExpr, Graph, Node, Op, Relation, TensorType, ValueRef};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;

/// Result type of the front end.
pub(crate) type R<T> = Result<T, OnnxError>;

/// What the importer knows of one ONNX value (see the module docs). At least one part is set.
#[derive(Clone, Debug, Default)]
pub(crate) struct Val {
    /// The graph value.
    pub t: Option<ValueRef>,
    /// Elements as symbolic integers (small integer tensors with a static shape).
    pub s: Option<SymVal>,
    /// A literal with its type (constants and initializers).
    pub lit: Option<Rc<(TensorType, Literal)>>,
    /// The elements of a tensor sequence (`SplitToSequence` → `SequenceAt`).
    pub seq: Option<Rc<Vec<Val>>>,
    /// A `MaxPool`'s `Indices` output, kept symbolically for `MaxPoolGrad`.
    pub pool: Option<Rc<PoolArgmax>>,
}

/// The argmax indices of a `MaxPool`, not computed: the pooled input and the window, from
/// which `MaxPoolGrad` scatters the gradient with `select_and_scatter`.
#[derive(Debug)]
pub(crate) struct PoolArgmax {
    /// The pooled input `X`.
    pub input: ValueRef,
    /// The pool's `reduce_window` window over `[N, C, spatial..]`.
    pub window: ebb_ir::op::Window,
}

impl Val {
    /// A graph value.
    pub fn t(v: ValueRef) -> Val {
        Val {
            t: Some(v),
            ..Default::default()
        }
    }

    /// A symbolic integer value.
    pub fn sym(s: SymVal) -> Val {
        Val {
            s: Some(s),
            ..Default::default()
        }
    }
}

/// Largest integer tensor (elements) tracked symbolically.
pub(crate) const MAX_SYM: usize = 64;

/// A symbolic value from integer literal elements, if small enough.
pub(crate) fn sym_of_literal(ty: &TensorType, lit: &Literal) -> Option<SymVal> {
    let dims = ty.static_dims()?;
    let n: i64 = dims.iter().product();
    if n as usize > MAX_SYM {
        return None;
    }
    let get = |i: usize| if lit.splat { 0 } else { i };
    if lit.dtype == DType::I1 {
        let v = (0..n as usize)
            .map(|i| crate::sym::Pred::Const(lit.data.get(get(i)).copied().unwrap_or(0) != 0))
            .collect();
        return Some(SymVal {
            dtype: DType::I1,
            shape: dims,
            elems: Elems::Bool(v),
        });
    }
    if !lit.dtype.is_int() {
        return None;
    }
    let v: Option<Vec<DimExpr>> = (0..n as usize)
        .map(|i| lit.get_i64(get(i)).map(DimExpr::constant))
        .collect();
    Some(SymVal {
        dtype: lit.dtype,
        shape: dims,
        elems: Elems::Int(v?),
    })
}

/// The lowering context for one graph.
pub(crate) struct Cx {
    /// File name, for errors.
    pub file: String,
    /// Directory of the model file (for external data).
    pub model_dir: Option<PathBuf>,
    /// The graph being built.
    pub g: Graph,
    /// ONNX value name → what is known of it.
    pub vals: HashMap<String, Val>,
    /// Imported opset version per domain (`ai.onnx` for the default domain).
    pub opsets: HashMap<String, i64>,
    /// The node being lowered.
    pub node: NodeLoc,
    /// Warnings for the report.
    pub warnings: Vec<String>,
    /// Results of ops that update an input in place (ONNX Runtime's `InPlaceAccumulatorV2`,
    /// `AdamWOptimizer`): (input name, new value). They become extra graph outputs named
    /// `<input>@after`, after the declared outputs.
    pub in_place: Vec<(String, ValueRef)>,
    /// The `ebb.rng_seed` graph input, added by the first random op (see
    /// [`Cx::rng_state`]).
    pub rng_seed: Option<ValueRef>,
    /// Nested graphs (`If` branches, `Loop`/`Scan` bodies) around this one (at most
    /// [`ebb_ir::graph::MAX_IMPORT_REGION_DEPTH`]).
    pub depth: usize,
}

/// The graph input a model with random ops (training-mode `Dropout`, `RandomUniformLike`, ...)
/// gains, after its own inputs: a `ui64` scalar that a trainer sets anew at every step (the
/// step number will do). Every random value is a pure function of it, of the node and of the
/// element, so a recomputed dropout mask equals the original.
pub const RNG_SEED_INPUT: &str = "ebb.rng_seed";

/// The canonical name of a node's domain (`""` → `ai.onnx`).
pub(crate) fn domain_name(d: Option<&str>) -> &str {
    match d {
        None | Some("") | Some("ai.onnx") => "ai.onnx",
        Some(d) => d,
    }
}

impl Cx {
    /// An error about the current node.
    pub fn err(&self, msg: impl Into<String>) -> OnnxError {
        OnnxError::Op {
            file: self.file.clone(),
            node: Box::new(self.node.clone()),
            msg: msg.into(),
        }
    }

    /// A structural error (not tied to a node).
    pub fn structure(&self, msg: impl Into<String>) -> OnnxError {
        OnnxError::Structure {
            file: self.file.clone(),
            msg: msg.into(),
        }
    }

    /// The opset version of the current node's domain.
    pub fn opset(&self) -> i64 {
        self.opsets.get(&self.node.domain).copied().unwrap_or(0)
    }

    // ----- values ---------------------------------------------------------------------------

    /// What is known of the value named `name`.
    pub fn val(&self, name: &str) -> R<Val> {
        self.vals
            .get(name)
            .cloned()
            .ok_or_else(|| self.err(format!("input `{name}` is not defined before its use")))
    }

    /// The graph value of `name`, materializing a literal or symbolic value as a constant.
    pub fn tensor(&mut self, name: &str) -> R<ValueRef> {
        let v = self.val(name)?;
        let t = self.materialize(&v)?;
        if let Some(e) = self.vals.get_mut(name) {
            e.t = Some(t);
        }
        Ok(t)
    }

    /// The graph value of `v` (adds a `constant`/`dim_constant` node when it has none).
    pub fn materialize(&mut self, v: &Val) -> R<ValueRef> {
        if let Some(t) = v.t {
            return Ok(t);
        }
        if let Some(l) = &v.lit {
            return Ok(self.constant(l.0.clone(), l.1.clone()));
        }
        let Some(s) = &v.s else {
            if v.pool.is_some() {
                return Err(self.err(
                    "a MaxPool's Indices output is supported only as the Indices input of \
                     MaxPoolGrad",
                ));
            }
            return Err(self.err("a value without data"));
        };
        let ty = TensorType::fixed(s.dtype, &s.shape);
        let node = match &s.elems {
            Elems::Int(vals) if vals.iter().all(|d| d.as_const().is_some()) => {
                let esz = s.dtype.size_bytes() as usize;
                let mut data = Vec::new();
                for d in vals {
                    let k = d.as_const().unwrap_or(0);
                    data.extend_from_slice(&k.to_le_bytes()[..esz]);
                }
                return Ok(self.constant(
                    ty,
                    Literal {
                        dtype: s.dtype,
                        splat: false,
                        data,
                    },
                ));
            }
            Elems::Int(vals) => Node::new(Op::DimConstant(vals.clone()), vec![ty]),
            Elems::Bool(preds) => {
                let mut data = Vec::new();
                for p in preds {
                    match p.decide(&self.g.scope) {
                        Some(b) => data.push(b as u8),
                        None => {
                            return Err(self.err(
                                "a shape predicate that cannot be decided at import time is used as data",
                            ))
                        }
                    }
                }
                return Ok(self.constant(
                    ty,
                    Literal {
                        dtype: DType::I1,
                        splat: false,
                        data,
                    },
                ));
            }
        };
        let id = self.g.add_node(self.located(node), &[]);
        Ok(ValueRef::new(id, 0))
    }

    /// The type of graph value `v`.
    pub fn ty(&self, v: ValueRef) -> TensorType {
        self.g.value_type(v).clone()
    }

    // ----- node access ----------------------------------------------------------------------

    /// Input `i` of `n` by name, `None` when absent or empty (an omitted optional input).
    pub fn opt_input<'n>(&self, n: &'n NodeProto, i: usize) -> Option<&'n str> {
        n.input.get(i).map(|s| s.as_str()).filter(|s| !s.is_empty())
    }

    /// Input `i` of `n` by name. Errors when missing.
    pub fn input_name<'n>(&self, n: &'n NodeProto, i: usize) -> R<&'n str> {
        self.opt_input(n, i)
            .ok_or_else(|| self.err(format!("missing required input {i}")))
    }

    /// The graph value of input `i` of `n`.
    pub fn input(&mut self, n: &NodeProto, i: usize) -> R<ValueRef> {
        let name = self.input_name(n, i)?.to_string();
        self.tensor(&name)
    }

    /// What is known of input `i` of `n`.
    pub fn input_val(&self, n: &NodeProto, i: usize) -> R<Val> {
        let name = self.input_name(n, i)?;
        self.val(name)
    }

    /// The symbolic integer elements of input `i` (a shape, axes, indices computed from
    /// shapes). Errors when they are not known at import time.
    pub fn input_dims(&self, n: &NodeProto, i: usize) -> R<Vec<DimExpr>> {
        let v = self.input_val(n, i)?;
        match v.s.as_ref().and_then(|s| s.ints()) {
            Some(d) => Ok(d.to_vec()),
            None => Err(self.err(format!(
                "input {i} (`{}`) must be an integer tensor known at import time (a constant or computed from shapes)",
                n.input[i]
            ))),
        }
    }

    /// Input `i` as constant integers.
    pub fn input_ints(&self, n: &NodeProto, i: usize) -> R<Vec<i64>> {
        let d = self.input_dims(n, i)?;
        d.iter()
            .map(|x| {
                x.as_const().ok_or_else(|| {
                    self.err(format!("input {i} must be constant, found symbolic `{x}`"))
                })
            })
            .collect()
    }

    /// Input `i` as one constant float (a scalar or one-element literal).
    pub fn input_scalar_f64(&self, n: &NodeProto, i: usize) -> Option<f64> {
        let v = self.input_val(n, i).ok()?;
        if let Some(l) = &v.lit {
            if l.1.stored_elements() == 1 {
                return l.1.get_f64(0);
            }
        }
        v.s.as_ref()
            .and_then(|s| s.ints())
            .filter(|d| d.len() == 1)
            .and_then(|d| d[0].as_const())
            .map(|k| k as f64)
    }

    /// The `ui64[2]` state `[seed, stream]` of the current node's random bits: the
    /// [`RNG_SEED_INPUT`] (added on first use) and a stream number hashed from the node's
    /// first output name (FNV-1a), so that two nodes draw from different counter ranges.
    pub fn rng_state(&mut self, n: &NodeProto) -> R<ValueRef> {
        let seed = match self.rng_seed {
            Some(s) => s,
            None => {
                let s = self
                    .g
                    .add_input(RNG_SEED_INPUT, TensorType::scalar(DType::U64));
                self.rng_seed = Some(s);
                s
            }
        };
        let name = n.output.first().map(String::as_str).unwrap_or("");
        let stream = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        let one = [DimExpr::constant(1)];
        let s1 = self.reshape(seed, &one)?;
        let lit = Literal {
            dtype: DType::U64,
            splat: false,
            data: stream.to_le_bytes().to_vec(),
        };
        let st = self.constant(TensorType::fixed(DType::U64, &[1]), lit);
        self.emit(Op::Concatenate(0), &[s1, st])
    }

    // ----- builders -------------------------------------------------------------------------

    fn located(&self, mut node: Node) -> Node {
        node.loc = Some(if self.node.name.is_empty() {
            self.node.op_type.clone()
        } else {
            self.node.name.clone()
        });
        node
    }

    /// Adds a `constant` of type `ty` with literal `lit`.
    pub fn constant(&mut self, ty: TensorType, lit: Literal) -> ValueRef {
        let node = self.located(Node::new(Op::Constant(lit), vec![ty]));
        ValueRef::new(self.g.add_node(node, &[]), 0)
    }

    /// A rank-0 constant `v` of `dtype`.
    pub fn scalar(&mut self, dtype: DType, v: f64) -> ValueRef {
        self.constant(TensorType::scalar(dtype), scalar_literal(dtype, v))
    }

    /// A tensor of `shape` filled with `v`.
    pub fn full(&mut self, dtype: DType, v: f64, shape: &[DimExpr]) -> R<ValueRef> {
        let s = self.scalar(dtype, v);
        self.broadcast_in_dim(s, &[], shape)
    }

    /// Adds `op` with one result; the result type is inferred.
    pub fn emit(&mut self, op: Op, operands: &[ValueRef]) -> R<ValueRef> {
        Ok(self.emit_n(op, operands, Vec::new())?[0])
    }

    /// Adds `op` with regions; returns all results (types inferred).
    pub fn emit_n(
        &mut self,
        op: Op,
        operands: &[ValueRef],
        regions: Vec<Graph>,
    ) -> R<Vec<ValueRef>> {
        let types: Vec<&TensorType> = operands.iter().map(|v| self.g.value_type(*v)).collect();
        let outs = ebb_ir::shape::infer(&op, &types, &regions)
            .map_err(|e| self.err(e.to_string()))?
            .ok_or_else(|| self.err(format!("op `{}` has no shape rule", op.kind())))?;
        // Every value's size fits in 64 bits, so products of a value's dimensions (`Size`,
        // `Flatten`, reductions) cannot overflow either.
        if let Some(t) = outs.iter().find(|t| t.checked_size_bytes().is_err()) {
            return Err(self.err(format!(
                "result type {t}: its size in bytes overflows 64-bit integers"
            )));
        }
        let n = outs.len();
        let mut node = self.located(Node::new(op, outs));
        node.regions = regions;
        let id = self.g.add_node(node, operands);
        Ok((0..n as u32).map(|i| ValueRef::new(id, i)).collect())
    }

    /// `broadcast_in_dim` of `v` to `shape` with `dims` (skipped when the shape is unchanged).
    pub fn broadcast_in_dim(
        &mut self,
        v: ValueRef,
        dims: &[i64],
        shape: &[DimExpr],
    ) -> R<ValueRef> {
        let t = self.ty(v);
        if t.shape == shape && dims.iter().enumerate().all(|(i, d)| *d == i as i64) {
            return Ok(v);
        }
        let spec = BroadcastSpec {
            dims: dims.to_vec(),
            shape: shape.to_vec(),
        };
        self.emit(Op::BroadcastInDim(spec), &[v])
    }

    /// Numpy (multidirectional) broadcast of two shapes (ONNX "Broadcasting").
    pub fn broadcast_shape(&self, a: &[DimExpr], b: &[DimExpr]) -> R<Vec<DimExpr>> {
        let r = a.len().max(b.len());
        let mut out = Vec::with_capacity(r);
        for i in 0..r {
            let x = (i + a.len()).checked_sub(r).map(|j| &a[j]);
            let y = (i + b.len()).checked_sub(r).map(|j| &b[j]);
            out.push(match (x, y) {
                (Some(x), None) => x.clone(),
                (None, Some(y)) => y.clone(),
                (Some(x), Some(y)) => {
                    if x == y || y.as_const() == Some(1) {
                        x.clone()
                    } else if x.as_const() == Some(1) || self.g.scope.prove_eq(x, y) {
                        y.clone()
                    } else {
                        return Err(self.err(format!(
                            "shapes {} and {} do not broadcast (dimension {x} vs {y})",
                            fmt_dims(a),
                            fmt_dims(b)
                        )));
                    }
                }
                (None, None) => unreachable!("i < max rank"),
            });
        }
        Ok(out)
    }

    /// Broadcasts `v` numpy-style (right-aligned) to `shape`.
    pub fn broadcast_to(&mut self, v: ValueRef, shape: &[DimExpr]) -> R<ValueRef> {
        let t = self.ty(v);
        if t.shape == shape {
            return Ok(v);
        }
        if t.rank() > shape.len() {
            return Err(self.err(format!(
                "cannot broadcast {} to {}",
                fmt_dims(&t.shape),
                fmt_dims(shape)
            )));
        }
        let off = shape.len() - t.rank();
        // Drop unit dimensions that broadcast, so broadcast_in_dim sees matching dims only.
        let dims: Vec<i64> = (0..t.rank()).map(|i| (i + off) as i64).collect();
        self.broadcast_in_dim(v, &dims, shape)
    }

    /// Converts `v` to `dtype` (no-op when equal).
    pub fn convert(&mut self, v: ValueRef, dtype: DType) -> R<ValueRef> {
        if self.ty(v).dtype == dtype {
            return Ok(v);
        }
        self.emit(Op::Convert(dtype), &[v])
    }

    /// An elementwise binary op (payload-free, e.g. `Op::Add`) with numpy broadcasting.
    pub fn binary(&mut self, op: Op, a: ValueRef, b: ValueRef) -> R<ValueRef> {
        let (ta, tb) = (self.ty(a), self.ty(b));
        if ta.dtype != tb.dtype {
            return Err(self.err(format!(
                "operand element types differ: {} vs {}",
                ta.dtype, tb.dtype
            )));
        }
        let s = self.broadcast_shape(&ta.shape, &tb.shape)?;
        let a = self.broadcast_to(a, &s)?;
        let b = self.broadcast_to(b, &s)?;
        self.emit(op, &[a, b])
    }

    /// `a <direction> b` with numpy broadcasting.
    pub fn compare(&mut self, direction: Relation, a: ValueRef, b: ValueRef) -> R<ValueRef> {
        let (ta, tb) = (self.ty(a), self.ty(b));
        if ta.dtype != tb.dtype {
            return Err(self.err(format!(
                "operand element types differ: {} vs {}",
                ta.dtype, tb.dtype
            )));
        }
        let s = self.broadcast_shape(&ta.shape, &tb.shape)?;
        let a = self.broadcast_to(a, &s)?;
        let b = self.broadcast_to(b, &s)?;
        let compare_type = if ta.dtype.is_float() {
            CompareType::Float
        } else if matches!(ta.dtype, DType::U8 | DType::U32 | DType::I1) {
            CompareType::Unsigned
        } else {
            CompareType::Signed
        };
        let spec = CompareSpec {
            direction,
            compare_type: Some(compare_type),
        };
        self.emit(Op::Compare(spec), &[a, b])
    }

    /// `select(p, a, b)` with numpy broadcasting of all three.
    pub fn select(&mut self, p: ValueRef, a: ValueRef, b: ValueRef) -> R<ValueRef> {
        let (tp, ta, tb) = (self.ty(p), self.ty(a), self.ty(b));
        let s = self.broadcast_shape(&ta.shape, &tb.shape)?;
        let s = self.broadcast_shape(&tp.shape, &s)?;
        let p = self.broadcast_to(p, &s)?;
        let a = self.broadcast_to(a, &s)?;
        let b = self.broadcast_to(b, &s)?;
        self.emit(Op::Select, &[p, a, b])
    }

    /// A unary elementwise op (payload-free, e.g. `Op::Exponential`).
    pub fn unary(&mut self, op: Op, v: ValueRef) -> R<ValueRef> {
        self.emit(op, &[v])
    }

    /// `v ∘ c` for a scalar constant `c` of `v`'s type, broadcast.
    pub fn binary_scalar(&mut self, op: Op, v: ValueRef, c: f64) -> R<ValueRef> {
        let d = self.ty(v).dtype;
        let s = self.scalar(d, c);
        self.binary(op, v, s)
    }

    /// `reshape` to `shape` (no-op when equal).
    pub fn reshape(&mut self, v: ValueRef, shape: &[DimExpr]) -> R<ValueRef> {
        if self.ty(v).shape == shape {
            return Ok(v);
        }
        self.emit(Op::Reshape(shape.to_vec()), &[v])
    }

    /// `transpose` by `perm` (no-op for the identity).
    pub fn transpose(&mut self, v: ValueRef, perm: &[i64]) -> R<ValueRef> {
        if perm.iter().enumerate().all(|(i, p)| *p == i as i64) {
            return Ok(v);
        }
        self.emit(Op::Transpose(perm.to_vec()), &[v])
    }

    /// A reduction of `v` over `axes` with the monoid `op` (`Op::Add`, `Op::Maximum`,
    /// `Op::Minimum`, `Op::Multiply`) and initial value `init`; with `keep`, reduced axes stay
    /// as size 1.
    pub fn reduce(
        &mut self,
        v: ValueRef,
        axes: &[usize],
        op: Op,
        init: f64,
        keep: bool,
    ) -> R<ValueRef> {
        let t = self.ty(v);
        let body = Graph::scalar_binary(op, t.dtype, t.dtype);
        let init = self.scalar(t.dtype, init);
        let mut axes = axes.to_vec();
        axes.sort_unstable();
        axes.dedup();
        let dims = axes.iter().map(|&a| a as i64).collect();
        let out = self.emit_n(Op::Reduce(dims), &[v, init], vec![body])?[0];
        if !keep {
            return Ok(out);
        }
        let shape: Vec<DimExpr> = (0..t.rank())
            .map(|i| {
                if axes.contains(&i) {
                    DimExpr::constant(1)
                } else {
                    t.shape[i].clone()
                }
            })
            .collect();
        self.reshape(out, &shape)
    }

    /// `dot_general` with the given batching and contracting dimensions.
    pub fn dot(
        &mut self,
        a: ValueRef,
        b: ValueRef,
        batch: (&[i64], &[i64]),
        contract: (&[i64], &[i64]),
    ) -> R<ValueRef> {
        let dims = DotDims {
            lhs_batch: batch.0.to_vec(),
            rhs_batch: batch.1.to_vec(),
            lhs_contract: contract.0.to_vec(),
            rhs_contract: contract.1.to_vec(),
            result_dtype: None,
        };
        self.emit(Op::DotGeneral(dims), &[a, b])
    }

    /// An `iota` of `shape` along `dim`.
    pub fn iota(&mut self, dtype: DType, shape: &[DimExpr], dim: usize) -> R<ValueRef> {
        let spec = IotaSpec {
            dimension: dim as i64,
            shape: shape.to_vec(),
            dtype,
        };
        self.emit(Op::Iota(spec), &[])
    }

    /// A graph value holding the symbolic dimension `d` as a rank-0 tensor of `dtype`.
    pub fn dim_scalar(&mut self, d: &DimExpr, dtype: DType) -> R<ValueRef> {
        let v = Val::sym(SymVal {
            dtype: DType::I64,
            shape: vec![],
            elems: Elems::Int(vec![d.clone()]),
        });
        let t = self.materialize(&v)?;
        self.convert(t, dtype)
    }
}

/// `[a,b,c]` for messages.
pub(crate) fn fmt_dims(s: &[DimExpr]) -> String {
    let p: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", p.join(","))
}

/// Typed attribute access on a node.
pub(crate) trait NodeAttrs {
    /// The attribute `name`, if present.
    fn attr(&self, name: &str) -> Option<&AttributeProto>;
    /// An integer attribute or `default`.
    fn int_or(&self, name: &str, default: i64) -> i64 {
        self.attr(name).and_then(|a| a.i).unwrap_or(default)
    }
    /// A float attribute or `default`.
    fn float_or(&self, name: &str, default: f32) -> f32 {
        self.attr(name).and_then(|a| a.f).unwrap_or(default)
    }
    /// An integer-list attribute, if present.
    fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name).map(|a| a.ints.clone())
    }
    /// A string attribute, if present.
    fn string(&self, name: &str) -> Option<String> {
        self.attr(name)
            .and_then(|a| a.s.as_ref())
            .map(|s| String::from_utf8_lossy(s).into_owned())
    }
    /// A tensor attribute, if present.
    fn tensor_attr(&self, name: &str) -> Option<&TensorProto> {
        self.attr(name).and_then(|a| a.t.as_ref())
    }
}

impl NodeAttrs for NodeProto {
    fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.attribute
            .iter()
            .find(|a| a.name.as_deref() == Some(name))
    }
}

/// Normalizes a possibly negative axis against `rank` (ONNX: `-rank <= axis < rank`).
pub(crate) fn norm_axis(cx: &Cx, axis: i64, rank: usize) -> R<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(cx.err(format!("axis {axis} out of range for rank {rank}")));
    }
    Ok(if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    })
}
