//! Convolution and pooling: `Conv`, `MaxPool`, `AveragePool`, `GlobalAveragePool`,
//! `GlobalMaxPool` (ai.onnx), and ONNX Runtime's training gradients `ConvGrad`
//! (com.microsoft) and `MaxPoolGrad` (registered by ORT in the ai.onnx domain), lowered to
//! `convolution`, `reduce_window`, `reduce` and `select_and_scatter`.
//!
//! Layouts are ONNX's: `X` is `[N, C, D1..Dk]`, `W` is `[M, C/group, k1..kk]`. Padding must be
//! explicit (`auto_pad` `NOTSET` or `VALID`) and `ceil_mode` 0. `ConvGrad` follows JAX's
//! transpose rules for `conv_general_dilated` (`_conv_general_vjp_lhs_padding` and
//! `_conv_general_vjp_rhs_padding`): the input gradient is a convolution of `dY` dilated by the
//! strides with the spatially reversed kernel, the weight gradient a convolution of `X` with
//! `dY` that contracts the batch; both need static spatial sizes, and `group` 1.
//!
//! `AveragePoolGrad(dY)` (ORT, ai.onnx domain) spreads each `dY` element, divided by its
//! window's count, over the window: `dY / count` dilated by the strides, padded, and summed
//! over windows of the kernel's size (the transpose of the pool). Its input size per spatial
//! dimension is ORT's `(out − 1)·stride − pads + kernel`.
//!
//! `MaxPool`'s `Indices` output is not computed: it is kept as the pooled input and window,
//! and `MaxPoolGrad(dY, Indices)` becomes `select_and_scatter` on that input (select `GE`, so
//! the first maximum of a window receives the gradient, as ORT's strict `>` scan picks it;
//! padded positions are never selected, as ORT's indices never point at padding).

use super::super::ctx::{Cx, NodeAttrs, PoolArgmax, Val, R};
use super::super::proto::NodeProto;
use super::{one, Lower};
use ebb_ir::op::{CompareSpec, ConvDimensionNumbers, ConvSpec, PadSpec, Window};
use ebb_ir::{DType, DimExpr, Graph, Op, Relation, ValueRef};
use std::rc::Rc;

/// The ai.onnx ops this module lowers, by op type.
pub(super) static OPS: &[(&str, &dyn Lower)] = &[
    ("Conv", &Conv),
    ("MaxPool", &Pool { max: true }),
    ("AveragePool", &Pool { max: false }),
    ("GlobalAveragePool", &GlobalPool { max: false }),
    ("GlobalMaxPool", &GlobalPool { max: true }),
    ("MaxPoolGrad", &MaxPoolGrad),
    ("AveragePoolGrad", &AveragePoolGrad),
];

/// The com.microsoft ops this module lowers, by op type.
pub(super) static OPS_MS: &[(&str, &dyn Lower)] = &[("ConvGrad", &ConvGrad)];

/// The spatial configuration shared by `Conv`, `ConvGrad` and the pools.
struct Spatial {
    kernel: Vec<i64>,
    strides: Vec<i64>,
    dilations: Vec<i64>,
    /// `(begin, end)` per spatial dimension.
    pads: Vec<(i64, i64)>,
}

/// Reads `kernel_shape` (or `kernel` when given), `strides`, `dilations`, `pads` and
/// `auto_pad` for `k` spatial dimensions.
fn spatial(cx: &Cx, n: &NodeProto, k: usize, kernel: Option<Vec<i64>>) -> R<Spatial> {
    let list = |name: &str, default: i64| -> R<Vec<i64>> {
        let v = n.ints(name).unwrap_or_else(|| vec![default; k]);
        if v.len() != k {
            return Err(cx.err(format!(
                "`{name}` has {} values for {k} spatial dims",
                v.len()
            )));
        }
        Ok(v)
    };
    let kernel = match (kernel, n.ints("kernel_shape")) {
        (Some(w), Some(a)) if a != w => {
            return Err(cx.err(format!(
                "kernel_shape {a:?} differs from the weights' {w:?}"
            )))
        }
        (Some(w), _) => w,
        (None, Some(a)) if a.len() == k => a,
        _ => return Err(cx.err("missing or malformed `kernel_shape`")),
    };
    let auto_pad = n.string("auto_pad").unwrap_or_else(|| "NOTSET".into());
    let pads = match auto_pad.as_str() {
        "NOTSET" => {
            let p = n.ints("pads").unwrap_or_else(|| vec![0; 2 * k]);
            if p.len() != 2 * k || p.iter().any(|&x| x < 0) {
                return Err(cx.err(format!("malformed `pads` {p:?}")));
            }
            (0..k).map(|i| (p[i], p[k + i])).collect()
        }
        "VALID" => vec![(0, 0); k],
        other => {
            return Err(cx.err(format!(
                "auto_pad {other} is not supported (explicit `pads` or VALID only)"
            )))
        }
    };
    if n.int_or("ceil_mode", 0) != 0 {
        return Err(cx.err("ceil_mode 1 is not supported"));
    }
    Ok(Spatial {
        kernel,
        strides: list("strides", 1)?,
        dilations: list("dilations", 1)?,
        pads,
    })
}

/// `[b, f, 0, 1, ..]` dimension numbers for `k` spatial dimensions (ONNX's NCHW / OIHW).
fn nchw(k: usize) -> ConvDimensionNumbers {
    let spatial: Vec<usize> = (2..2 + k).collect();
    ConvDimensionNumbers {
        input_batch: 0,
        input_feature: 1,
        input_spatial: spatial.clone(),
        kernel_output_feature: 0,
        kernel_input_feature: 1,
        kernel_spatial: spatial.clone(),
        output_batch: 0,
        output_feature: 1,
        output_spatial: spatial,
    }
}

/// The static spatial sizes of `v` (dims 2..).
fn static_spatial(cx: &Cx, v: ValueRef, what: &str) -> R<Vec<i64>> {
    cx.ty(v).shape[2..]
        .iter()
        .map(|d| d.as_const())
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| {
            cx.err(format!(
                "{what} needs static spatial sizes, got {}",
                cx.ty(v)
            ))
        })
}

/// A weight's static kernel sizes (dims 2..).
fn kernel_of(cx: &Cx, w: ValueRef) -> R<Vec<i64>> {
    static_spatial(cx, w, "the weight")
}

/// `b` added along the feature dimension 1 of `y`.
fn add_bias(cx: &mut Cx, y: ValueRef, b: ValueRef) -> R<ValueRef> {
    let shape = cx.ty(y).shape;
    let bb = cx.broadcast_in_dim(b, &[1], &shape)?;
    cx.binary(Op::Add, y, bb)
}

/// `Conv(X, W, B?)`.
struct Conv;

impl Lower for Conv {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        let w = cx.input(n, 1)?;
        let k = cx.ty(x).rank().saturating_sub(2);
        if k == 0 || cx.ty(w).rank() != k + 2 {
            return Err(cx.err("X and W must have rank 2 + spatial dims"));
        }
        let s = spatial(cx, n, k, Some(kernel_of(cx, w)?))?;
        let mut spec = ConvSpec::new(nchw(k));
        spec.window_strides = s.strides;
        spec.rhs_dilation = s.dilations;
        spec.padding = s.pads;
        spec.feature_group_count = n.int_or("group", 1);
        let mut y = cx.emit(Op::Convolution(spec), &[x, w])?;
        if cx.opt_input(n, 2).is_some() {
            let b = cx.input(n, 2)?;
            y = add_bias(cx, y, b)?;
        }
        one(y)
    }
}

/// `1 + d·(s − 1)` (0 for an empty dimension): a size after dilation by `d`.
fn dilate(s: i64, d: i64) -> i64 {
    if s == 0 {
        0
    } else {
        1 + d * (s - 1)
    }
}

/// `ConvGrad(dY, X, W) -> (dX, dW, dB)` (each output optional).
struct ConvGrad;

impl Lower for ConvGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dy = cx.input(n, 0)?;
        let x = cx.input(n, 1)?;
        let w = cx.input(n, 2)?;
        let k = cx.ty(x).rank().saturating_sub(2);
        if k == 0 {
            return Err(cx.err("X must have rank 2 + spatial dims"));
        }
        if n.int_or("group", 1) != 1 {
            return Err(cx.err("ConvGrad with group > 1 is not supported"));
        }
        let kernel = kernel_of(cx, w)?;
        let s = spatial(cx, n, k, Some(kernel.clone()))?;
        let ins = static_spatial(cx, x, "ConvGrad")?;
        let outs = static_spatial(cx, dy, "ConvGrad")?;
        let wanted = |i: usize| n.output.get(i).is_some_and(|o| !o.is_empty());
        let mut res = vec![Val::default(); 3];
        if wanted(0) {
            // dX: dY dilated by the strides, convolved with the reversed kernel whose
            // feature dimensions swap roles (JAX `_conv_general_vjp_lhs_padding`).
            let spatial_dims: Vec<i64> = (2..2 + k as i64).collect();
            let rev = cx.emit(Op::Reverse(spatial_dims), &[w])?;
            let mut dims = nchw(k);
            dims.kernel_output_feature = 1;
            dims.kernel_input_feature = 0;
            let mut spec = ConvSpec::new(dims);
            spec.lhs_dilation = s.strides.clone();
            spec.rhs_dilation = s.dilations.clone();
            spec.padding = (0..k)
                .map(|i| {
                    let before = dilate(kernel[i], s.dilations[i]) - s.pads[i].0 - 1;
                    let after = ins[i] + dilate(kernel[i], s.dilations[i])
                        - 1
                        - dilate(outs[i], s.strides[i])
                        - before;
                    (before, after)
                })
                .collect();
            res[0] = Val::t(cx.emit(Op::Convolution(spec), &[dy, rev])?);
        }
        if wanted(1) {
            // dW: X convolved with dY over the batch (JAX `_conv_general_vjp_rhs_padding`):
            // X's channels act as the batch, its batch as the features.
            let spatial: Vec<usize> = (2..2 + k).collect();
            let dims = ConvDimensionNumbers {
                input_batch: 1,
                input_feature: 0,
                input_spatial: spatial.clone(),
                kernel_output_feature: 1,
                kernel_input_feature: 0,
                kernel_spatial: spatial.clone(),
                output_batch: 1,
                output_feature: 0,
                output_spatial: spatial,
            };
            let mut spec = ConvSpec::new(dims);
            spec.window_strides = s.dilations.clone();
            spec.rhs_dilation = s.strides.clone();
            spec.padding = (0..k)
                .map(|i| {
                    let lo = s.pads[i].0;
                    let hi = (dilate(outs[i], s.strides[i]) - ins[i])
                        + (dilate(kernel[i], s.dilations[i]) - lo - 1);
                    (lo, hi)
                })
                .collect();
            let dw = cx.emit(Op::Convolution(spec), &[x, dy])?;
            if cx.ty(dw).shape != cx.ty(w).shape {
                return Err(cx.err(format!(
                    "the weight gradient has type {}, the weight {}",
                    cx.ty(dw),
                    cx.ty(w)
                )));
            }
            res[1] = Val::t(dw);
        }
        if wanted(2) {
            let axes: Vec<usize> = (0..k + 2).filter(|&a| a != 1).collect();
            res[2] = Val::t(cx.reduce(dy, &axes, Op::Add, 0.0, false)?);
        }
        Ok(res)
    }
}

/// The `reduce_window` window of a pool over `[N, C, spatial..]`.
fn pool_window(s: &Spatial) -> Window {
    let mut w = Window::new([vec![1, 1], s.kernel.clone()].concat());
    w.strides = [vec![1, 1], s.strides.clone()].concat();
    w.window_dilations = [vec![1, 1], s.dilations.clone()].concat();
    w.with_padding(&[vec![(0, 0), (0, 0)], s.pads.clone()].concat())
}

/// `reduce_window` of `x` with `op` from `init`.
fn reduce_window(cx: &mut Cx, x: ValueRef, w: Window, op: Op, init: f64) -> R<ValueRef> {
    let dtype = cx.ty(x).dtype;
    let init = cx.scalar(dtype, init);
    let body = Graph::scalar_binary(op, dtype, dtype);
    Ok(cx.emit_n(Op::ReduceWindow(w), &[x, init], vec![body])?[0])
}

/// `MaxPool` (with its `Indices` kept for `MaxPoolGrad`) and `AveragePool`.
struct Pool {
    max: bool,
}

impl Lower for Pool {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        let k = cx.ty(x).rank().saturating_sub(2);
        if k == 0 {
            return Err(cx.err("X must have rank 2 + spatial dims"));
        }
        if n.int_or("storage_order", 0) != 0 {
            return Err(cx.err("storage_order 1 is not supported"));
        }
        let s = spatial(cx, n, k, None)?;
        let w = pool_window(&s);
        if self.max {
            let y = reduce_window(cx, x, w.clone(), Op::Maximum, f64::NEG_INFINITY)?;
            let indices = Val {
                pool: Some(Rc::new(PoolArgmax {
                    input: x,
                    window: w,
                })),
                ..Default::default()
            };
            return Ok(vec![Val::t(y), indices]);
        }
        let sum = reduce_window(cx, x, w.clone(), Op::Add, 0.0)?;
        let padded = s.pads.iter().any(|&(a, b)| a > 0 || b > 0);
        let count = if padded && n.int_or("count_include_pad", 0) == 0 {
            // Divide by the number of non-padding elements of each window.
            let ones = cx.full(cx.ty(x).dtype, 1.0, &cx.ty(x).shape)?;
            reduce_window(cx, ones, w, Op::Add, 0.0)?
        } else {
            let size: i64 = s.kernel.iter().product();
            let c = cx.scalar(cx.ty(x).dtype, size as f64);
            let shape = cx.ty(sum).shape;
            cx.broadcast_in_dim(c, &[], &shape)?
        };
        one(cx.binary(Op::Divide, sum, count)?)
    }
}

/// `GlobalAveragePool` / `GlobalMaxPool`: a reduction over the spatial dimensions, kept as
/// size 1.
struct GlobalPool {
    max: bool,
}

impl Lower for GlobalPool {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let x = cx.input(n, 0)?;
        let t = cx.ty(x);
        let axes: Vec<usize> = (2..t.rank()).collect();
        if self.max {
            return one(cx.reduce(x, &axes, Op::Maximum, f64::NEG_INFINITY, true)?);
        }
        let sum = cx.reduce(x, &axes, Op::Add, 0.0, true)?;
        let count = t.shape[2..]
            .iter()
            .try_fold(DimExpr::constant(1), |a, d| a.checked_mul(d))
            .map_err(|e| cx.err(e.to_string()))?;
        let c = cx.dim_scalar(&count, t.dtype)?;
        let shape = cx.ty(sum).shape;
        let c = cx.broadcast_in_dim(c, &[], &shape)?;
        one(cx.binary(Op::Divide, sum, c)?)
    }
}

/// `MaxPoolGrad(dY, Indices)`: `select_and_scatter` of `dY` onto the pooled input.
struct MaxPoolGrad;

impl Lower for MaxPoolGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dy = cx.input(n, 0)?;
        let Some(p) = cx.input_val(n, 1)?.pool else {
            return Err(cx.err("input 1 must be the Indices output of a MaxPool"));
        };
        let dtype = cx.ty(p.input).dtype;
        let zero = cx.scalar(dtype, 0.0);
        let ge = CompareSpec {
            direction: Relation::Ge,
            compare_type: None,
        };
        let select = Graph::scalar_binary(Op::Compare(ge), dtype, DType::I1);
        let scatter = Graph::scalar_binary(Op::Add, dtype, dtype);
        let dx = cx.emit_n(
            Op::SelectAndScatter(p.window.clone()),
            &[p.input, dy, zero],
            vec![select, scatter],
        )?[0];
        one(dx)
    }
}

/// `AveragePoolGrad(dY) -> dX` (see the module docs).
struct AveragePoolGrad;

impl Lower for AveragePoolGrad {
    fn lower(&self, cx: &mut Cx, n: &NodeProto) -> R<Vec<Val>> {
        let dy = cx.input(n, 0)?;
        let k = cx.ty(dy).rank().saturating_sub(2);
        if k == 0 {
            return Err(cx.err("dY must have rank 2 + spatial dims"));
        }
        let s = spatial(cx, n, k, None)?;
        if s.dilations.iter().any(|&d| d != 1) {
            return Err(cx.err("AveragePoolGrad with dilations is not supported"));
        }
        let outs = static_spatial(cx, dy, "AveragePoolGrad")?;
        let ins: Vec<i64> = (0..k)
            .map(|i| (outs[i] - 1) * s.strides[i] - s.pads[i].0 - s.pads[i].1 + s.kernel[i])
            .collect();
        let dyt = cx.ty(dy);
        let mut x_shape = dyt.shape[..2].to_vec();
        x_shape.extend(ins.iter().map(|&d| DimExpr::constant(d)));
        let padded = s.pads.iter().any(|&(a, b)| a > 0 || b > 0);
        let count = if padded && n.int_or("count_include_pad", 0) == 0 {
            let ones = cx.full(dyt.dtype, 1.0, &x_shape)?;
            reduce_window(cx, ones, pool_window(&s), Op::Add, 0.0)?
        } else {
            let size: i64 = s.kernel.iter().product();
            let c = cx.scalar(dyt.dtype, size as f64);
            cx.broadcast_in_dim(c, &[], &dyt.shape)?
        };
        let share = cx.binary(Op::Divide, dy, count)?;
        let mut pad = PadSpec {
            low: vec![0, 0],
            high: vec![0, 0],
            interior: vec![0, 0],
        };
        for i in 0..k {
            let before = s.kernel[i] - 1 - s.pads[i].0;
            let after = ins[i] + s.kernel[i] - 1 - dilate(outs[i], s.strides[i]) - before;
            if before < 0 || after < 0 {
                return Err(cx.err("pads larger than the kernel are not supported"));
            }
            pad.low.push(before);
            pad.high.push(after);
            pad.interior.push(s.strides[i] - 1);
        }
        let zero = cx.scalar(dyt.dtype, 0.0);
        let spread = cx.emit(Op::Pad(pad), &[share, zero])?;
        let window = Window::new([vec![1, 1], s.kernel.clone()].concat());
        one(reduce_window(cx, spread, window, Op::Add, 0.0)?)
    }
}
