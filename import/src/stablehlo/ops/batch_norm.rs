//! `batch_norm_training`, `batch_norm_inference` and `batch_norm_grad` (StableHLO spec; JAX
//! and Flax write batch norm with ordinary ops, but other producers emit these), decomposed
//! into reductions over every dimension but `feature_index`, broadcasts along it and
//! elementwise math, as the spec's reference decompositions do: the variance is biased and
//! `grad_operand = scale·rsqrt(var + ε)/N · (N·dY − Σ dY − x̂·Σ dY·x̂)` with
//! `x̂ = (x − mean)·rsqrt(var + ε)` and `N` the elements per feature (symbolic when the batch
//! is).

use super::super::func::{Frame, Importer, R};
use ebb_ir::op::{BroadcastSpec, Literal};
use ebb_ir::{DimExpr, Graph, Node, Op, TensorType, ValueRef};
use melior::ir::operation::OperationLike;
use melior::ir::{OperationRef, Value};

/// The pieces every batch-norm op needs.
struct Bn<'o, 'c, 'a> {
    op: &'o OperationRef<'c, 'a>,
    /// `feature_index`.
    f: usize,
    /// The operand's type.
    t: TensorType,
    epsilon: f64,
}

impl<'c, 'a> Importer<'c, 'a> {
    /// `batch_norm_training`, `batch_norm_inference`, `batch_norm_grad`.
    pub(super) fn batch_norm_op(
        &mut self,
        g: &mut Graph,
        frame: &mut Frame,
        op: OperationRef<'c, 'a>,
        name: &str,
    ) -> R<()> {
        let ins = (0..op.operand_count())
            .map(|i| self.operand_tensor(g, frame, &op, i))
            .collect::<R<Vec<_>>>()?;
        let t = g.value_type(ins[0]).clone();
        let f = self.int_attr(&op, "feature_index")?;
        if f < 0 || f as usize >= t.rank() {
            return Err(self.op_error(&op, format!("feature_index {f} out of range for {t}")));
        }
        let epsilon = self
            .attr_text(&op, "epsilon")
            .and_then(|s| s.split(':').next()?.trim().parse::<f64>().ok())
            .ok_or_else(|| self.op_error(&op, "missing or malformed `epsilon`"))?;
        let bn = Bn {
            op: &op,
            f: f as usize,
            t,
            epsilon,
        };
        let results = match (name, ins.as_slice()) {
            ("batch_norm_inference", [x, scale, offset, mean, var]) => {
                vec![self.bn_normalize(g, &bn, *x, *scale, *offset, *mean, *var)?]
            }
            ("batch_norm_training", [x, scale, offset]) => {
                let (mean, var) = self.bn_stats(g, &bn, *x)?;
                let y = self.bn_normalize(g, &bn, *x, *scale, *offset, mean, var)?;
                vec![y, mean, var]
            }
            ("batch_norm_grad", [x, scale, mean, var, dy]) => {
                self.bn_grad(g, &bn, *x, *scale, *mean, *var, *dy)?
            }
            _ => return Err(self.op_error(&op, "unexpected number of operands")),
        };
        for (i, v) in results.into_iter().enumerate() {
            let want = self.result_type(&op, i)?;
            let got = g.value_type(v);
            if got.dtype != want.dtype || got.rank() != want.dims.len() {
                return Err(self.op_error(
                    &op,
                    format!("result {i}: {got} conflicts with the declared type"),
                ));
            }
            let r = op
                .result(i)
                .map_err(|e| self.op_error(&op, e.to_string()))?;
            frame.set_tensor(Value::from(r), v);
        }
        Ok(())
    }

    /// A per-feature vector broadcast along the feature dimension of the operand's shape.
    fn bn_spread(&self, g: &mut Graph, bn: &Bn, v: ValueRef) -> R<ValueRef> {
        let spec = BroadcastSpec {
            dims: vec![bn.f as i64],
            shape: bn.t.shape.clone(),
        };
        self.helper(g, bn.op, Op::BroadcastInDim(spec), &[v])
    }

    /// A scalar constant of the operand's type broadcast to `shape`.
    fn bn_splat(&self, g: &mut Graph, bn: &Bn, v: f64, shape: &[DimExpr]) -> R<ValueRef> {
        let lit = Literal::splat_f64(bn.t.dtype, v);
        let mut node = Node::new(Op::Constant(lit), vec![TensorType::new(bn.t.dtype, vec![])]);
        node.loc = Some(super::super::func::op_loc(bn.op, &self.file));
        let c = ValueRef::new(g.add_node(node, &[]), 0);
        let spec = BroadcastSpec {
            dims: vec![],
            shape: shape.to_vec(),
        };
        self.helper(g, bn.op, Op::BroadcastInDim(spec), &[c])
    }

    /// The sum of `x` over every dimension but the feature one.
    fn bn_sum(&self, g: &mut Graph, bn: &Bn, x: ValueRef) -> R<ValueRef> {
        let dtype = bn.t.dtype;
        let body = Graph::scalar_binary(Op::Add, dtype, dtype);
        let zero = self.bn_splat(g, bn, 0.0, &[])?;
        let dims: Vec<i64> = (0..bn.t.rank() as i64)
            .filter(|&d| d != bn.f as i64)
            .collect();
        let types: Vec<&TensorType> = [x, zero].iter().map(|v| g.value_type(*v)).collect();
        let payload = Op::Reduce(dims);
        let out = ebb_ir::shape::infer(&payload, &types, std::slice::from_ref(&body))
            .map_err(|e| self.op_error(bn.op, e.to_string()))?
            .ok_or_else(|| self.op_error(bn.op, "reduce without a type"))?;
        let mut node = Node::new(payload, out);
        node.regions = vec![body];
        node.loc = Some(super::super::func::op_loc(bn.op, &self.file));
        Ok(ValueRef::new(g.add_node(node, &[x, zero]), 0))
    }

    /// `N`, the elements per feature, as a per-feature vector.
    fn bn_count(&self, g: &mut Graph, bn: &Bn) -> R<ValueRef> {
        let n =
            bn.t.shape
                .iter()
                .enumerate()
                .filter(|(d, _)| *d != bn.f)
                .try_fold(DimExpr::constant(1), |acc, (_, d)| acc.checked_mul(d))
                .map_err(|e| self.op_error(bn.op, e.to_string()))?;
        let c = match n.as_const() {
            Some(k) => self.bn_splat(g, bn, k as f64, &[])?,
            None => {
                let i = self.helper(g, bn.op, Op::DimConstant(vec![n]), &[])?;
                self.helper(g, bn.op, Op::Convert(bn.t.dtype), &[i])?
            }
        };
        let spec = BroadcastSpec {
            dims: vec![],
            shape: vec![bn.t.shape[bn.f].clone()],
        };
        self.helper(g, bn.op, Op::BroadcastInDim(spec), &[c])
    }

    /// Batch mean and biased variance per feature.
    fn bn_stats(&self, g: &mut Graph, bn: &Bn, x: ValueRef) -> R<(ValueRef, ValueRef)> {
        let n = self.bn_count(g, bn)?;
        let s = self.bn_sum(g, bn, x)?;
        let mean = self.helper(g, bn.op, Op::Divide, &[s, n])?;
        let m = self.bn_spread(g, bn, mean)?;
        let d = self.helper(g, bn.op, Op::Subtract, &[x, m])?;
        let d2 = self.helper(g, bn.op, Op::Multiply, &[d, d])?;
        let s2 = self.bn_sum(g, bn, d2)?;
        let var = self.helper(g, bn.op, Op::Divide, &[s2, n])?;
        Ok((mean, var))
    }

    /// `rsqrt(var + ε)` per feature.
    fn bn_inv_std(&self, g: &mut Graph, bn: &Bn, var: ValueRef) -> R<ValueRef> {
        let shape = g.value_type(var).shape.clone();
        let e = self.bn_splat(g, bn, bn.epsilon, &shape)?;
        let ve = self.helper(g, bn.op, Op::Add, &[var, e])?;
        self.helper(g, bn.op, Op::Rsqrt, &[ve])
    }

    /// `(x − mean)·rsqrt(var + ε)·scale + offset`.
    #[allow(clippy::too_many_arguments)]
    fn bn_normalize(
        &self,
        g: &mut Graph,
        bn: &Bn,
        x: ValueRef,
        scale: ValueRef,
        offset: ValueRef,
        mean: ValueRef,
        var: ValueRef,
    ) -> R<ValueRef> {
        let inv = self.bn_inv_std(g, bn, var)?;
        let k = self.helper(g, bn.op, Op::Multiply, &[inv, scale])?;
        let (m, k, o) = (
            self.bn_spread(g, bn, mean)?,
            self.bn_spread(g, bn, k)?,
            self.bn_spread(g, bn, offset)?,
        );
        let c = self.helper(g, bn.op, Op::Subtract, &[x, m])?;
        let y = self.helper(g, bn.op, Op::Multiply, &[c, k])?;
        self.helper(g, bn.op, Op::Add, &[y, o])
    }

    /// `(grad_operand, grad_scale, grad_offset)` (see the module docs).
    #[allow(clippy::too_many_arguments)]
    fn bn_grad(
        &self,
        g: &mut Graph,
        bn: &Bn,
        x: ValueRef,
        scale: ValueRef,
        mean: ValueRef,
        var: ValueRef,
        dy: ValueRef,
    ) -> R<Vec<ValueRef>> {
        let inv = self.bn_inv_std(g, bn, var)?;
        let (m, i) = (self.bn_spread(g, bn, mean)?, self.bn_spread(g, bn, inv)?);
        let c = self.helper(g, bn.op, Op::Subtract, &[x, m])?;
        let xhat = self.helper(g, bn.op, Op::Multiply, &[c, i])?;
        let d_offset = self.bn_sum(g, bn, dy)?;
        let dyx = self.helper(g, bn.op, Op::Multiply, &[dy, xhat])?;
        let d_scale = self.bn_sum(g, bn, dyx)?;
        let n = self.bn_count(g, bn)?;
        let nb = self.bn_spread(g, bn, n)?;
        let ndy = self.helper(g, bn.op, Op::Multiply, &[dy, nb])?;
        let dob = self.bn_spread(g, bn, d_offset)?;
        let t = self.helper(g, bn.op, Op::Subtract, &[ndy, dob])?;
        let dsb = self.bn_spread(g, bn, d_scale)?;
        let xs = self.helper(g, bn.op, Op::Multiply, &[xhat, dsb])?;
        let t = self.helper(g, bn.op, Op::Subtract, &[t, xs])?;
        let k = self.helper(g, bn.op, Op::Multiply, &[scale, inv])?;
        let k = self.helper(g, bn.op, Op::Divide, &[k, n])?;
        let kb = self.bn_spread(g, bn, k)?;
        let dx = self.helper(g, bn.op, Op::Multiply, &[t, kb])?;
        Ok(vec![dx, d_scale, d_offset])
    }
}
