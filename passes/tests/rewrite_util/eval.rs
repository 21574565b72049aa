//! A reference evaluator (f64, row-major) for the op subset the rewrite tests generate:
//! inputs, splat constants, `broadcast_in_dim`, unary/binary elementwise ops, `convert`
//! (identity: the rewrites only move converts between data-movement ops), `transpose`,
//! `reshape`, `reduce` with an `add` body, `dot_general`. Used to check that a rewritten
//! graph computes what the input graph computes.

use ebb_ir::op::DotDims;
use ebb_ir::{Bindings, Graph, Op, OpKind, ValueRef};
use std::collections::HashMap;

/// A dense tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Calls `f` with every multi-index of `shape` in row-major order.
fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
    let n: usize = shape.iter().product();
    let mut idx = vec![0; shape.len()];
    for _ in 0..n {
        f(&idx);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

fn at(t: &Tensor, idx: &[usize]) -> f64 {
    let s = strides(&t.shape);
    t.data[idx.iter().zip(&s).map(|(i, s)| i * s).sum::<usize>()]
}

/// Deterministic input values in [-1, 1) for input `k`.
pub fn input_value(k: usize, shape: Vec<usize>) -> Tensor {
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|i| (((i * 7919 + k * 104_729 + 13) % 2003) as f64) / 1001.5 - 1.0)
        .collect();
    Tensor { shape, data }
}

fn usizes(v: &[i64]) -> Vec<usize> {
    v.iter().map(|&x| x as usize).collect()
}

/// Evaluates the outputs of `g` at bindings `b`.
pub fn eval(g: &Graph, b: &Bindings) -> Vec<Tensor> {
    let mut vals: HashMap<ValueRef, Tensor> = HashMap::new();
    for &id in g.order() {
        let n = g.node(id);
        let shape: Vec<usize> = n.outputs[0]
            .shape
            .iter()
            .map(|d| d.eval(b).expect("dim") as usize)
            .collect();
        let args: Vec<&Tensor> = g.operands(id).iter().map(|v| &vals[v]).collect();
        let size: usize = shape.iter().product();
        let kind = n.kind();
        let out = match &n.op {
            Op::Input(_) => {
                let k = g.inputs().iter().position(|x| *x == id).expect("input");
                input_value(k, shape)
            }
            Op::Constant(lit) => {
                let v = lit.get_f64(0).expect("splat");
                Tensor {
                    shape,
                    data: vec![v; size],
                }
            }
            Op::BroadcastInDim(bcast) => {
                let dims = usizes(&bcast.dims);
                let x = args[0];
                let mut data = Vec::with_capacity(size);
                for_each_index(&shape, |o| {
                    let src: Vec<usize> = dims
                        .iter()
                        .enumerate()
                        .map(|(i, &d)| if x.shape[i] == 1 { 0 } else { o[d] })
                        .collect();
                    data.push(at(x, &src));
                });
                Tensor { shape, data }
            }
            Op::Convert(_) | Op::Reshape(_) => Tensor {
                shape,
                data: args[0].data.clone(),
            },
            Op::Transpose(perm) => {
                let perm = usizes(perm);
                let mut data = Vec::with_capacity(size);
                for_each_index(&shape, |o| {
                    let mut src = vec![0; o.len()];
                    for (i, &p) in perm.iter().enumerate() {
                        src[p] = o[i];
                    }
                    data.push(at(args[0], &src));
                });
                Tensor { shape, data }
            }
            _ if kind.is_unary_elementwise() => {
                let f: fn(f64) -> f64 = match kind {
                    OpKind::Negate => |x| -x,
                    OpKind::Abs => f64::abs,
                    OpKind::Tanh => f64::tanh,
                    OpKind::Exponential => f64::exp,
                    other => panic!("unary {other} not supported"),
                };
                Tensor {
                    shape,
                    data: args[0].data.iter().map(|x| f(*x)).collect(),
                }
            }
            _ if kind.is_binary_elementwise() => {
                let f: fn(f64, f64) -> f64 = match kind {
                    OpKind::Add => |a, b| a + b,
                    OpKind::Subtract => |a, b| a - b,
                    OpKind::Multiply => |a, b| a * b,
                    OpKind::Divide => |a, b| a / b,
                    OpKind::Maximum => f64::max,
                    other => panic!("binary {other} not supported"),
                };
                Tensor {
                    shape,
                    data: args[0]
                        .data
                        .iter()
                        .zip(&args[1].data)
                        .map(|(a, b)| f(*a, *b))
                        .collect(),
                }
            }
            Op::Reduce(dims) => {
                let dims = usizes(dims);
                let (x, init) = (args[0], args[1].data[0]);
                let mut data = vec![init; size];
                let os = strides(&shape);
                for_each_index(&x.shape, |i| {
                    let kept = (0..i.len()).filter(|d| !dims.contains(d));
                    let o: usize = kept.zip(&os).map(|(d, s)| i[d] * s).sum();
                    data[o] += at(x, i);
                });
                Tensor { shape, data }
            }
            Op::DotGeneral(dims) => dot(dims, args[0], args[1], shape),
            _ => panic!("op {kind} not supported by the test evaluator"),
        };
        vals.insert(ValueRef::new(id, 0), out);
    }
    g.outputs().iter().map(|v| vals[v].clone()).collect()
}

fn dot(dims: &DotDims, a: &Tensor, b: &Tensor, shape: Vec<usize>) -> Tensor {
    let (lb, rb) = (usizes(&dims.lhs_batch), usizes(&dims.rhs_batch));
    let (lc, rc) = (usizes(&dims.lhs_contract), usizes(&dims.rhs_contract));
    let lf: Vec<usize> = (0..a.shape.len())
        .filter(|d| !lb.contains(d) && !lc.contains(d))
        .collect();
    let rf: Vec<usize> = (0..b.shape.len())
        .filter(|d| !rb.contains(d) && !rc.contains(d))
        .collect();
    let cshape: Vec<usize> = lc.iter().map(|&d| a.shape[d]).collect();
    let mut data = Vec::with_capacity(shape.iter().product());
    for_each_index(&shape, |o| {
        let mut ia = vec![0; a.shape.len()];
        let mut ib = vec![0; b.shape.len()];
        for (k, (&l, &r)) in lb.iter().zip(&rb).enumerate() {
            ia[l] = o[k];
            ib[r] = o[k];
        }
        for (k, &l) in lf.iter().enumerate() {
            ia[l] = o[lb.len() + k];
        }
        for (k, &r) in rf.iter().enumerate() {
            ib[r] = o[lb.len() + lf.len() + k];
        }
        let mut acc = 0.0;
        for_each_index(&cshape, |c| {
            for (k, (&l, &r)) in lc.iter().zip(&rc).enumerate() {
                ia[l] = c[k];
                ib[r] = c[k];
            }
            acc += at(a, &ia) * at(b, &ib);
        });
        data.push(acc);
    });
    Tensor { shape, data }
}

/// Asserts that two evaluations agree to a relative tolerance (sums may be reassociated).
pub fn assert_close(a: &[Tensor], b: &[Tensor]) {
    assert_eq!(a.len(), b.len());
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.shape, y.shape, "output {k}");
        for (i, (p, q)) in x.data.iter().zip(&y.data).enumerate() {
            let ok =
                (p - q).abs() <= 1e-9 * (1.0 + p.abs() + q.abs()) || (p.is_nan() && q.is_nan());
            assert!(ok, "output {k} element {i}: {p} vs {q}");
        }
    }
}
