//! Reductions: `reduce`, `reduce_window` and `select_and_scatter` (StableHLO spec, section
//! "Ops").
//!
//! Bodies recognized by [`super::region::recognize`] run as typed loops; other bodies are
//! evaluated element by element: a body compiled to scalar instructions
//! ([`super::scalar_body`]; JAX's `argmax`) on register bits, [`LANES`] outputs at a time,
//! else through the region graph. `reduce` with a recognized body
//! merges adjacent reduced/kept dimensions, then walks the input once in memory order,
//! combining each element into its output's accumulator; float `add`/`multiply` accumulate in
//! `f64` and round once at the end (more accurate than any `f32` summation order, so the result
//! is within the reference's own rounding error of it). Large reductions are split across
//! threads along the outermost kept dimension only.
//!
//! `reduce_window` over dense channels-last windows (pooling and its gradient) folds runs of
//! channels a tap at a time ([`super::window_rows`]), the element walk's fold per output.
//!
//! Invariant: every output element combines its inputs in an order fixed by the shapes alone
//! (row-major, with contiguous rows folded in eight interleaved lanes), whatever the thread
//! split, so results are deterministic.

use super::layout::{istrides_of, unravel, PAR_MIN};
use super::region::{Body, Monoid, RegionFn};
use super::scalar_body::{data_from_regs, read_lanes, read_reg, Lanes, Reg, ScalarBody, LANES};
use super::{Ctx, OutType};
use crate::buffer::Buf;
use crate::error::{invalid, OpError};
use crate::tensor::{Data, Elem, Scalar, Tensor};
use ebb_ir::op::Window;
use ebb_ir::Bindings;
use ebb_ir::DimExpr;
use ebb_ir::{OpKind, Relation};

/// `reduce` over `dimensions`: operands are the inputs followed by as many init values.
pub(crate) fn reduce(
    ctx: &Ctx,
    dimensions: &[i64],
    ops: Vec<Tensor>,
) -> Result<Vec<Tensor>, OpError> {
    let n = ops.len() / 2;
    if n == 0 || ops.len() != 2 * n || ctx.out.len() != n {
        return invalid("expects inputs followed by as many init values");
    }
    let (xs, inits) = ops.split_at(n);
    let shape = xs[0].shape().to_vec();
    if xs.iter().any(|x| x.shape() != shape.as_slice()) || inits.iter().any(|i| i.len() != 1) {
        return invalid("inputs must share a shape and init values must be scalars");
    }
    let mut red = vec![false; shape.len()];
    for &d in dimensions {
        if d < 0 || d as usize >= shape.len() {
            return invalid(format!("dimension {d} out of range"));
        }
        red[d as usize] = true;
    }
    if ctx.node.regions.is_empty() {
        return invalid("reduce without a body");
    }
    let f = RegionFn::of(ctx, 0, "body")?;
    if let (1, Body::Monoid(m)) = (n, &f.body) {
        if xs[0].dtype() == inits[0].dtype() && ctx.out[0].dtype == xs[0].dtype() {
            if let (Data::F16(x), Some(Scalar::F16(init)), Monoid::Add | Monoid::Mul) =
                (xs[0].data(), inits[0].data().get(0), m)
            {
                let out = f16_sums(ctx, x, init, &shape, &red, *m == Monoid::Mul);
                let data = Data::F16(Buf::from(out));
                return Ok(vec![Tensor::from_parts(ctx.out[0].shape.clone(), data)]);
            }
            let data = reduce_monoid(xs[0].data(), inits[0].data(), &shape, &red, *m)?;
            return Ok(vec![Tensor::from_parts(ctx.out[0].shape.clone(), data)]);
        }
    }
    reduce_general(&f, xs, inits, &shape, &red, ctx.out)
}

/// Merges adjacent dimensions of the same kind and drops unit dimensions.
pub(crate) fn merge(shape: &[usize], red: &[bool]) -> (Vec<usize>, Vec<bool>) {
    let (mut s, mut r): (Vec<usize>, Vec<bool>) = (Vec::new(), Vec::new());
    for (&d, &k) in shape.iter().zip(red) {
        if d == 1 {
            continue;
        }
        if r.last() == Some(&k) {
            let last = s.len() - 1;
            s[last] *= d;
        } else {
            s.push(d);
            r.push(k);
        }
    }
    (s, r)
}

/// Output strides of the merged problem (0 for reduced dimensions).
fn out_strides(shape: &[usize], red: &[bool]) -> Vec<usize> {
    let mut st = vec![0usize; shape.len()];
    let mut acc = 1;
    for i in (0..shape.len()).rev() {
        if !red[i] {
            st[i] = acc;
            acc *= shape[i];
        }
    }
    st
}

/// Combines every element of `x` (merged `shape`/`red`) into `out` (pre-filled with the
/// lifted init): rows along a reduced innermost dimension through [`fold_row`], otherwise
/// element by element in row-major order.
fn fold_into<T: Copy, A: Copy>(
    x: &[T],
    shape: &[usize],
    red: &[bool],
    out: &mut [A],
    lift: &impl Fn(T) -> A,
    comb: &impl Fn(A, A) -> A,
) {
    let r = shape.len();
    if r == 0 {
        if let (Some(&v), Some(o)) = (x.first(), out.first_mut()) {
            *o = comb(*o, lift(v));
        }
        return;
    }
    let inner = shape[r - 1];
    let inner_red = red[r - 1];
    if let ([p, k, c], [true, false, true]) = (shape, red) {
        // Reduced rows around a kept block (group norm's statistics: positions × groups ×
        // channels): the same rows in the same order, without the general odometer.
        if *c > 0 {
            for block in x.chunks_exact(k * c).take(*p) {
                for (slot, row) in out.iter_mut().zip(block.chunks_exact(*c)) {
                    *slot = comb(*slot, fold_row(row, lift, comb));
                }
            }
        }
        return;
    }
    let ost = out_strides(shape, red);
    let outer = &shape[..r - 1];
    let mut idx = vec![0usize; outer.len()];
    let mut o = 0usize;
    for row in x.chunks(inner) {
        if inner_red {
            out[o] = comb(out[o], fold_row(row, lift, comb));
        } else {
            for (slot, &v) in out[o..o + inner].iter_mut().zip(row) {
                *slot = comb(*slot, lift(v));
            }
        }
        for k in (0..outer.len()).rev() {
            idx[k] += 1;
            o += ost[k];
            if idx[k] < outer[k] {
                break;
            }
            o -= ost[k] * outer[k];
            idx[k] = 0;
        }
    }
}

/// Combines a non-empty contiguous row in eight interleaved lanes (independent dependency
/// chains, so the loop is not bound by the combiner's latency), then the lanes pairwise and
/// the tail in order: a fixed order for a given row length.
#[inline(always)]
fn fold_row<T: Copy, A: Copy>(row: &[T], lift: &impl Fn(T) -> A, comb: &impl Fn(A, A) -> A) -> A {
    const L: usize = 8;
    if row.len() < 2 * L {
        let mut acc = lift(row[0]);
        for &v in &row[1..] {
            acc = comb(acc, lift(v));
        }
        return acc;
    }
    let mut lanes: [A; L] = std::array::from_fn(|j| lift(row[j]));
    let mut chunks = row[L..].chunks_exact(L);
    for c in chunks.by_ref() {
        for j in 0..L {
            lanes[j] = comb(lanes[j], lift(c[j]));
        }
    }
    let q = [
        comb(lanes[0], lanes[1]),
        comb(lanes[2], lanes[3]),
        comb(lanes[4], lanes[5]),
        comb(lanes[6], lanes[7]),
    ];
    let mut acc = comb(comb(q[0], q[1]), comb(q[2], q[3]));
    for &v in chunks.remainder() {
        acc = comb(acc, lift(v));
    }
    acc
}

/// One row of `f32` values that are exactly `T` values, reduced by monoid `m` from `init` and
/// rounded to `T` exactly as [`reduce`] reduces a row of `T` in a contiguous innermost
/// reduced block: `init ⊕ fold_row(row)` (sums and products through `f64`, rounded once by
/// `T::from_f64`; extrema exact), `init` for an empty row; `None` for the logical monoids.
/// The JIT executor folds the rows its input-fusion kernels write (`f32`, or `bf16` values
/// held in `f32`) with this, so its results are the reference's.
pub(crate) fn fold_row_as<T: Elem>(m: Monoid, init: T, row: &[f32]) -> Option<T> {
    if row.is_empty() {
        return Some(init);
    }
    let exact = |v: f32| T::from_f64(f64::from(v));
    Some(match m {
        Monoid::Add => {
            T::from_f64(init.to_f64() + fold_row(row, &|v: f32| f64::from(v), &|a, b| a + b))
        }
        Monoid::Mul => {
            T::from_f64(init.to_f64() * fold_row(row, &|v: f32| f64::from(v), &|a, b| a * b))
        }
        Monoid::Max => init.max_e(exact(fold_row(row, &|v| v, &f32::max_e))),
        Monoid::Min => init.min_e(exact(fold_row(row, &|v| v, &f32::min_e))),
        Monoid::And | Monoid::Or => return None,
    })
}

/// [`fold_row_as`] of each of the consecutive rows of `row` elements in `rows` into the
/// matching element of `out` (`rows.len() == out.len() * row`), with its bits. Rows shorter
/// than [`fold_row`]'s lanes are folded four at a time, each with its own sequential chain, so
/// that four chains overlap instead of one row's latency per row; longer rows one by one.
/// `None` for the logical monoids.
pub(crate) fn fold_rows_as<T: Elem>(
    m: Monoid,
    init: T,
    rows: &[f32],
    row: usize,
    out: &mut [T],
) -> Option<()> {
    if row == 0 || row >= 16 {
        for (j, o) in out.iter_mut().enumerate() {
            *o = fold_row_as(m, init, &rows[j * row..(j + 1) * row])?;
        }
        return Some(());
    }
    let exact = |v: f32| T::from_f64(f64::from(v));
    let i = init.to_f64();
    match m {
        Monoid::Add => short_rows(
            rows,
            row,
            out,
            f64::from,
            |a, b| a + b,
            |s| T::from_f64(i + s),
        ),
        Monoid::Mul => short_rows(
            rows,
            row,
            out,
            f64::from,
            |a, b| a * b,
            |s| T::from_f64(i * s),
        ),
        Monoid::Max => short_rows(rows, row, out, |v| v, f32::max_e, |s| init.max_e(exact(s))),
        Monoid::Min => short_rows(rows, row, out, |v| v, f32::min_e, |s| init.min_e(exact(s))),
        Monoid::And | Monoid::Or => return None,
    }
    Some(())
}

/// Rows of `1 ≤ row < 16` elements folded as [`fold_row`] folds them (`lift` the first,
/// `comb` each next in order), `fin` applied to each row's fold; four rows at a time.
#[inline(always)]
fn short_rows<A: Copy, T>(
    rows: &[f32],
    row: usize,
    out: &mut [T],
    lift: impl Fn(f32) -> A,
    comb: impl Fn(A, A) -> A,
    fin: impl Fn(A) -> T,
) {
    let mut outs = out.chunks_exact_mut(4);
    let mut quads = rows.chunks_exact(4 * row);
    for (o, q) in outs.by_ref().zip(quads.by_ref()) {
        let (r0, rest) = q.split_at(row);
        let (r1, rest) = rest.split_at(row);
        let (r2, r3) = rest.split_at(row);
        let mut a = [lift(r0[0]), lift(r1[0]), lift(r2[0]), lift(r3[0])];
        for k in 1..row {
            a[0] = comb(a[0], lift(r0[k]));
            a[1] = comb(a[1], lift(r1[k]));
            a[2] = comb(a[2], lift(r2[k]));
            a[3] = comb(a[3], lift(r3[k]));
        }
        for (o, a) in o.iter_mut().zip(a) {
            *o = fin(a);
        }
    }
    for (o, r) in outs
        .into_remainder()
        .iter_mut()
        .zip(quads.remainder().chunks_exact(row))
    {
        let mut a = lift(r[0]);
        for &v in &r[1..] {
            a = comb(a, lift(v));
        }
        *o = fin(a);
    }
}

/// The accumulators of an `f32` column reduction (a `reduce` of leading dimensions, the root
/// of a column input fusion) fed whole rows in order: per result element, the init value
/// lifted, then each row's element combined into it — the order in which [`reduce`] walks the
/// operand (memory order; a kept innermost block is combined element by element, and an outer
/// reduced dimension is never split across threads), so the result is bit-identical to
/// reducing the whole operand. Sums and products accumulate in `f64`, as there.
pub(crate) enum ColumnAcc {
    /// `add` / `multiply` (`true`) in `f64`.
    Float(Vec<f64>, bool),
    /// `maximum` / `minimum` (`true`) in `f32`.
    Extremum(Vec<f32>, bool),
}

impl ColumnAcc {
    /// `cols` accumulators of monoid `m` from `init`; `None` for the logical monoids.
    pub(crate) fn new(m: Monoid, init: f32, cols: usize) -> Option<ColumnAcc> {
        Some(match m {
            Monoid::Add => ColumnAcc::Float(vec![f64::from(init); cols], false),
            Monoid::Mul => ColumnAcc::Float(vec![f64::from(init); cols], true),
            Monoid::Max => ColumnAcc::Extremum(vec![init; cols], false),
            Monoid::Min => ColumnAcc::Extremum(vec![init; cols], true),
            Monoid::And | Monoid::Or => return None,
        })
    }

    /// Combines the whole rows `rows` (a multiple of the accumulators' count), in order.
    pub(crate) fn fold_rows(&mut self, rows: &[f32]) {
        match self {
            ColumnAcc::Float(acc, mul) => {
                for row in rows.chunks_exact(acc.len().max(1)) {
                    for (a, &v) in acc.iter_mut().zip(row) {
                        *a = if *mul {
                            *a * f64::from(v)
                        } else {
                            *a + f64::from(v)
                        };
                    }
                }
            }
            ColumnAcc::Extremum(acc, min) => {
                for row in rows.chunks_exact(acc.len().max(1)) {
                    for (a, &v) in acc.iter_mut().zip(row) {
                        *a = if *min { a.min_e(v) } else { a.max_e(v) };
                    }
                }
            }
        }
    }

    /// The result elements.
    pub(crate) fn finish(self) -> Vec<f32> {
        match self {
            ColumnAcc::Float(acc, _) => acc.into_iter().map(|a| a as f32).collect(),
            ColumnAcc::Extremum(acc, _) => acc,
        }
    }
}

/// Reduction with accumulator type `A`; splits along the outermost merged dimension when it
/// is kept and the input is large.
fn reduce_typed<T: Copy + Sync, A: Copy + Send + Sync>(
    x: &[T],
    shape: &[usize],
    red: &[bool],
    init: A,
    lift: impl Fn(T) -> A + Sync,
    comb: impl Fn(A, A) -> A + Sync,
) -> Vec<A> {
    let (s, r) = merge(shape, red);
    let n_out: usize = s
        .iter()
        .zip(&r)
        .filter(|(_, &k)| !k)
        .map(|(&d, _)| d)
        .product();
    let mut out = vec![init; n_out];
    if x.is_empty() {
        return out;
    }
    if let ([rows, cols], [true, false]) = (s.as_slice(), r.as_slice()) {
        // Leading rows reduced into a kept innermost block (a bias gradient): the columns
        // split over threads, each walking every row in order, so every result combines its
        // elements in the sequential order.
        let (rows, cols) = (*rows, *cols);
        let per = if x.len() >= PAR_MIN {
            cols.div_ceil(2 * rayon::current_num_threads().max(1))
                .next_multiple_of(16)
        } else {
            cols
        };
        super::par::chunks_mut(&mut out, per, &|c0, o| {
            for i in 0..rows {
                let row = &x[i * cols + c0..i * cols + c0 + o.len()];
                for (slot, &v) in o.iter_mut().zip(row) {
                    *slot = comb(*slot, lift(v));
                }
            }
        });
        return out;
    }
    if x.len() >= PAR_MIN && !s.is_empty() && !r[0] && s[0] > 1 {
        let x_row: usize = s[1..].iter().product();
        let o_row = n_out / s[0];
        let rows_per = s[0]
            .div_ceil(4 * rayon::current_num_threads().max(1))
            .max(1);
        super::par::chunks_mut(&mut out, o_row * rows_per, &|at, o| {
            let r0 = at / o_row;
            let rows = o.len() / o_row;
            let xc = &x[r0 * x_row..(r0 + rows) * x_row];
            let mut sub = s.clone();
            sub[0] = rows;
            fold_into(xc, &sub, &r, o, &lift, &comb);
        });
    } else {
        fold_into(x, &s, &r, &mut out, &lift, &comb);
    }
    out
}

/// `reduce` of float `x` (of `shape`, reducing where `red`) under `m`: sums and products
/// through `f64`, rounded once; the order is [`reduce_typed`]'s, fixed by the shapes alone.
///
/// # Errors
/// A logical monoid (`and`/`or`) on floats.
pub(crate) fn float_monoid<T: Elem>(
    x: &[T],
    init: T,
    shape: &[usize],
    red: &[bool],
    m: Monoid,
) -> Result<Vec<T>, OpError> {
    if let (Monoid::Add | Monoid::Mul, (s, r)) = (m, merge(shape, red)) {
        if let ([p, n, k], [false, true, false]) = (s.as_slice(), r.as_slice()) {
            return Ok(block_sums(x, [*p, *n, *k], init, m == Monoid::Mul));
        }
    }
    Ok(match m {
        Monoid::Add => reduce_typed(x, shape, red, init.to_f64(), |v| v.to_f64(), |a, b| a + b)
            .into_iter()
            .map(T::from_f64)
            .collect(),
        Monoid::Mul => reduce_typed(x, shape, red, init.to_f64(), |v| v.to_f64(), |a, b| a * b)
            .into_iter()
            .map(T::from_f64)
            .collect(),
        Monoid::Max => reduce_typed(x, shape, red, init, |v| v, T::max_e),
        Monoid::Min => reduce_typed(x, shape, red, init, |v| v, T::min_e),
        Monoid::And | Monoid::Or => {
            return Err(OpError::DType {
                dtype: T::DTYPE,
                what: " by a logical reduction".into(),
            })
        }
    })
}

/// [`float_monoid`]'s sums (products when `mul`) of `x` as `[p, n, k]` reduced over `n` (a
/// reduced middle block between kept ones: an embedding bag's sum over its indices, a mean
/// over the sequence of `[B, S, D]`): per block of `k` results, an `f64` accumulator per
/// result from the init, each of the `n` rows of `k` combined in order, rounded once into the
/// result — [`reduce_typed`]'s terms in its order (memory order), so its bits, without its
/// result-sized `f64` buffer. Blocks split across threads.
fn block_sums<T: Elem>(x: &[T], shape: [usize; 3], init: T, mul: bool) -> Vec<T> {
    if mul {
        block_fold(x, shape, init, |a, b| a * b)
    } else {
        block_fold(x, shape, init, |a, b| a + b)
    }
}

/// [`block_sums`] with the combiner `comb` (on `f64`) fixed at compile time.
#[inline(always)]
fn block_fold<T: Elem>(
    x: &[T],
    [p, n, k]: [usize; 3],
    init: T,
    comb: impl Fn(f64, f64) -> f64 + Sync,
) -> Vec<T> {
    let mut out = vec![init; p * k];
    if k == 0 {
        return out;
    }
    let per = if x.len() >= PAR_MIN {
        p.div_ceil(4 * rayon::current_num_threads().max(1)).max(1) * k
    } else {
        p * k
    };
    super::par::chunks_mut(&mut out, per, &|at, o| {
        let mut acc = vec![0f64; k];
        for (b, ob) in o.chunks_exact_mut(k).enumerate() {
            let block = &x[(at / k + b) * n * k..][..n * k];
            acc.fill(init.to_f64());
            for row in block.chunks_exact(k) {
                for (a, &v) in acc.iter_mut().zip(row) {
                    *a = comb(*a, v.to_f64());
                }
            }
            for (o, &a) in ob.iter_mut().zip(&acc) {
                *o = T::from_f64(a);
            }
        }
    });
    out
}

/// [`float_monoid`]'s sums (products when `mul`) of `f16` values, the operand widened to
/// `f32` first (F16C's vector conversion, into a buffer of the step's pool): the same `f64`
/// terms in the same order, so the same bits, without a conversion per element inside the
/// reduction's loops.
fn f16_sums(
    ctx: &Ctx,
    x: &[half::f16],
    init: half::f16,
    shape: &[usize],
    red: &[bool],
    mul: bool,
) -> Vec<half::f16> {
    let mut w = ctx.pool.take_vec::<f32>(x.len());
    super::par::elements(&mut w, &|s, o| {
        crate::f16_conv::f16_to_f32_slice(&x[s..s + o.len()], o);
    });
    let init = init.to_f64();
    let acc = if mul {
        reduce_typed(&w, shape, red, init, f64::from, |a, b| a * b)
    } else {
        reduce_typed(&w, shape, red, init, f64::from, |a, b| a + b)
    };
    ctx.pool.put(Data::F32(w));
    acc.into_iter().map(<half::f16 as Elem>::from_f64).collect()
}

fn int_monoid<T: super::arith::IntOps>(
    x: &[T],
    init: T,
    shape: &[usize],
    red: &[bool],
    m: Monoid,
) -> Vec<T> {
    match m {
        Monoid::Add => reduce_typed(x, shape, red, init, |v| v, T::wadd),
        Monoid::Mul => reduce_typed(x, shape, red, init, |v| v, T::wmul),
        Monoid::Max => reduce_typed(x, shape, red, init, |v| v, Ord::max),
        Monoid::Min => reduce_typed(x, shape, red, init, |v| v, Ord::min),
        Monoid::And => reduce_typed(x, shape, red, init, |v| v, T::band),
        Monoid::Or => reduce_typed(x, shape, red, init, |v| v, T::bor),
    }
}

fn reduce_monoid(
    x: &Data,
    init: &Data,
    shape: &[usize],
    red: &[bool],
    m: Monoid,
) -> Result<Data, OpError> {
    let first = |d: &Data| {
        d.get(0)
            .ok_or_else(|| OpError::Invalid("empty init value".into()))
    };
    Ok(match (x, first(init)?) {
        (Data::F32(v), Scalar::F32(i)) => Data::F32(Buf::from(float_monoid(v, i, shape, red, m)?)),
        (Data::F64(v), Scalar::F64(i)) => Data::F64(Buf::from(float_monoid(v, i, shape, red, m)?)),
        (Data::BF16(v), Scalar::BF16(i)) => {
            Data::BF16(Buf::from(float_monoid(v, i, shape, red, m)?))
        }
        (Data::F16(v), Scalar::F16(i)) => Data::F16(Buf::from(float_monoid(v, i, shape, red, m)?)),
        (Data::I8(v), Scalar::I8(i)) => Data::I8(Buf::from(int_monoid(v, i, shape, red, m))),
        (Data::I16(v), Scalar::I16(i)) => Data::I16(Buf::from(int_monoid(v, i, shape, red, m))),
        (Data::I32(v), Scalar::I32(i)) => Data::I32(Buf::from(int_monoid(v, i, shape, red, m))),
        (Data::I64(v), Scalar::I64(i)) => Data::I64(Buf::from(int_monoid(v, i, shape, red, m))),
        (Data::U8(v), Scalar::U8(i)) => Data::U8(Buf::from(int_monoid(v, i, shape, red, m))),
        (Data::U32(v), Scalar::U32(i)) => Data::U32(Buf::from(int_monoid(v, i, shape, red, m))),
        (Data::I1(v), Scalar::I1(i)) => Data::I1(match m {
            Monoid::And | Monoid::Min | Monoid::Mul => {
                Buf::from(reduce_typed(v, shape, red, i, |b| b, |a, b| a & b))
            }
            Monoid::Or | Monoid::Max | Monoid::Add => {
                Buf::from(reduce_typed(v, shape, red, i, |b| b, |a, b| a | b))
            }
        }),
        _ => return invalid("input and init value element types differ"),
    })
}

/// Evaluates `$body` with `$c` bound to `|a, b| combine(m, a, b)` for the monoid `$m` fixed at
/// compile time, so that loops over it are specialized (and vectorize) per monoid: the same
/// element operation, [`combine`].
macro_rules! with_monoid {
    ($m:expr, $c:ident => $body:expr) => {{
        use $crate::exec::region::Monoid as M;
        match $m {
            M::Add => {
                let $c = |a, b| $crate::exec::reduce::combine(M::Add, a, b);
                $body
            }
            M::Mul => {
                let $c = |a, b| $crate::exec::reduce::combine(M::Mul, a, b);
                $body
            }
            M::Max => {
                let $c = |a, b| $crate::exec::reduce::combine(M::Max, a, b);
                $body
            }
            M::Min => {
                let $c = |a, b| $crate::exec::reduce::combine(M::Min, a, b);
                $body
            }
            M::And => {
                let $c = |a, b| $crate::exec::reduce::combine(M::And, a, b);
                $body
            }
            M::Or => {
                let $c = |a, b| $crate::exec::reduce::combine(M::Or, a, b);
                $body
            }
        }
    }};
}
pub(crate) use with_monoid;

/// `a ⊕ b` for one pair of elements, with the rounding of the element type (floats through
/// `f64`, which rounds exactly like the native type for one operation; integers wrap).
pub(crate) fn combine<T: Elem>(m: Monoid, a: T, b: T) -> T {
    if T::DTYPE.is_float() {
        match m {
            Monoid::Add => T::from_f64(a.to_f64() + b.to_f64()),
            Monoid::Mul => T::from_f64(a.to_f64() * b.to_f64()),
            Monoid::Max => a.max_e(b),
            Monoid::Min => a.min_e(b),
            Monoid::And | Monoid::Or => T::from_f64(f64::NAN),
        }
    } else {
        let (x, y) = (a.to_i64(), b.to_i64());
        match m {
            Monoid::Add => T::from_i64(x.wrapping_add(y)),
            Monoid::Mul => T::from_i64(x.wrapping_mul(y)),
            Monoid::Max => a.max_e(b),
            Monoid::Min => a.min_e(b),
            Monoid::And => T::from_i64(x & y),
            Monoid::Or => T::from_i64(x | y),
        }
    }
}

/// Scalar-by-scalar reduction through the region (any number of inputs).
fn reduce_general(
    f: &RegionFn,
    xs: &[Tensor],
    inits: &[Tensor],
    shape: &[usize],
    red: &[bool],
    out: &[OutType],
) -> Result<Vec<Tensor>, OpError> {
    let n = xs.len();
    let kept: Vec<usize> = (0..shape.len()).filter(|&i| !red[i]).collect();
    let oshape: Vec<usize> = kept.iter().map(|&i| shape[i]).collect();
    let ost = super::layout::strides_of(&oshape);
    let n_out: usize = oshape.iter().product();
    if let Some(res) = f
        .scalar()
        .and_then(|b| reduce_registers(b, xs, inits, shape, &kept, n_out, out))
    {
        return Ok(res);
    }
    let init: Vec<Scalar> = inits
        .iter()
        .map(|t| t.scalar_value())
        .collect::<Option<_>>()
        .ok_or_else(|| OpError::Invalid("bad init".into()))?;
    let mut accs: Vec<Vec<Scalar>> = vec![init; n_out];
    let total: usize = shape.iter().product();
    let mut args = Vec::with_capacity(2 * n);
    // Each input dimension's stride in the outputs (0 for a reduced one).
    let mut step = vec![0isize; shape.len()];
    for (&d, &s) in kept.iter().zip(&ost) {
        step[d] = s as isize;
    }
    let mut idx = vec![0usize; shape.len()];
    let mut o = 0usize;
    for i in 0..total {
        args.clear();
        args.extend_from_slice(&accs[o]);
        for x in xs {
            args.push(
                x.data()
                    .get(i)
                    .ok_or_else(|| OpError::Invalid("index out of range".into()))?,
            );
        }
        f.call_into(&args, &mut accs[o])?;
        // The next input element's output position.
        o = o.wrapping_add_signed(super::layout::step(&mut idx, shape, &step));
    }
    collect_outputs(accs, out)
}

/// [`reduce_general`] on a body compiled to scalar instructions, its accumulators kept as
/// register bits (no per-element conversion to [`Scalar`]): the same body evaluations in the
/// same order, so the same results. `None` (nothing computed) where the operands', init
/// values' or results' element types are not the body's, or an operand is shorter than
/// `shape`; the caller then takes the general path, which reports any error.
#[allow(clippy::too_many_arguments)]
fn reduce_registers(
    body: &ScalarBody,
    xs: &[Tensor],
    inits: &[Tensor],
    shape: &[usize],
    kept: &[usize],
    n_out: usize,
    out: &[OutType],
) -> Option<Vec<Tensor>> {
    let n = xs.len();
    let types = body.input_types();
    let total: usize = shape.iter().product();
    if types.len() != 2 * n
        || body.outputs() != n
        || out.len() != n
        || inits.len() != n
        || (0..n).any(|k| {
            xs[k].dtype() != types[n + k]
                || inits[k].dtype() != types[k]
                || inits[k].len() != 1
                || body.output(k).map(|(_, t)| t) != Some(out[k].dtype)
                || out[k].dtype != types[k]
                || xs[k].len() < total
        })
    {
        return None;
    }
    let init: Vec<Reg> = inits
        .iter()
        .map(|t| read_reg(t.data(), 0))
        .collect::<Option<_>>()?;
    let res: Vec<usize> = (0..n)
        .map(|k| body.output(k).map(|(r, _)| r))
        .collect::<Option<_>>()?;
    // Output `o` folds the elements at `base[o] + roff[r]` for `r` in order: the elements that
    // reduce into it in increasing linear order (row-major over the reduced dimensions).
    let ist = super::layout::strides_of(shape);
    let offsets = |dims: &mut dyn Iterator<Item = usize>| {
        let dims: Vec<usize> = dims.collect();
        let sizes: Vec<usize> = dims.iter().map(|&d| shape[d]).collect();
        let count: usize = sizes.iter().product();
        let mut idx = vec![0usize; dims.len()];
        let mut v = Vec::with_capacity(count);
        for _ in 0..count {
            v.push(
                dims.iter()
                    .zip(&idx)
                    .map(|(&d, &i)| i * ist[d])
                    .sum::<usize>(),
            );
            advance(&mut idx, &sizes);
        }
        v
    };
    let base = offsets(&mut kept.iter().copied());
    let roff = offsets(&mut (0..shape.len()).filter(|d| !kept.contains(d)));
    let mut accs: Vec<Reg> = init.repeat(n_out);
    let file = body.registers();
    let mut regs: Vec<Lanes> = file.iter().map(|&r| [r; LANES]).collect();
    let mut at = [0usize; LANES];
    for o0 in (0..n_out).step_by(LANES) {
        // Lanes past the last output repeat it; their results are dropped.
        let lane = |l: usize| (o0 + l).min(n_out - 1);
        for (k, &v) in init.iter().enumerate() {
            regs[k] = [v; LANES];
        }
        for &r in &roff {
            for (l, a) in at.iter_mut().enumerate() {
                *a = base[lane(l)] + r;
            }
            for (k, x) in xs.iter().enumerate() {
                if !read_lanes(x.data(), &at, &mut regs[n + k]) {
                    return None;
                }
            }
            body.exec_lanes(&mut regs);
            for (k, &r) in res.iter().enumerate() {
                regs[k] = regs[r];
            }
        }
        for l in 0..LANES.min(n_out - o0) {
            for k in 0..n {
                accs[(o0 + l) * n + k] = regs[k][l];
            }
        }
    }
    Some(
        (0..n)
            .map(|k| {
                let d = data_from_regs(out[k].dtype, (0..n_out).map(|j| accs[j * n + k]));
                Tensor::from_parts(out[k].shape.as_slice(), d)
            })
            .collect(),
    )
}

/// Transposes per-output scalar tuples into result tensors of the declared types.
fn collect_outputs(accs: Vec<Vec<Scalar>>, out: &[OutType]) -> Result<Vec<Tensor>, OpError> {
    let mut res = Vec::with_capacity(out.len());
    for (k, ot) in out.iter().enumerate() {
        let mut d = Data::zeros(ot.dtype, accs.len());
        for (i, a) in accs.iter().enumerate() {
            let s = *a
                .get(k)
                .ok_or_else(|| OpError::Invalid("region returned too few values".into()))?;
            if !d.set(i, s) {
                return invalid("region returned a value of another element type");
            }
        }
        res.push(Tensor::from_parts(ot.shape.as_slice(), d));
    }
    Ok(res)
}

/// Window geometry shared by `reduce_window` and `select_and_scatter`: for every dimension
/// and every (output position, window position) the input index, or `None` for padding and
/// base-dilation holes (StableHLO spec, `reduce_window` semantics).
struct Windows {
    /// The input's shape.
    input: Vec<usize>,
    win: Vec<usize>,
    /// `table[d][o * win[d] + w]`.
    table: Vec<Vec<Option<usize>>>,
}

impl Windows {
    /// The window tables of `window` (its symbolic sizes and padding evaluated at
    /// `bindings`) over `input`, producing `output`.
    fn new(
        window: &Window,
        bindings: &Bindings,
        input: &[usize],
        output: &[usize],
    ) -> Result<Windows, OpError> {
        let r = input.len();
        let eval = |d: &DimExpr| {
            d.eval(bindings)
                .map_err(|e| OpError::Invalid(format!("window size or padding `{d}`: {e}")))
        };
        let win = &window
            .dimensions
            .iter()
            .map(eval)
            .collect::<Result<Vec<i64>, _>>()?;
        let pad = &window
            .padding
            .iter()
            .map(|(l, h)| Ok((eval(l)?, eval(h)?)))
            .collect::<Result<Vec<(i64, i64)>, OpError>>()?;
        let (st, bd, wd) = (
            &window.strides,
            &window.base_dilations,
            &window.window_dilations,
        );
        if [win.len(), st.len(), bd.len(), wd.len(), pad.len()]
            .iter()
            .any(|&l| l != r)
            || output.len() != r
        {
            return invalid("window lengths differ from the rank");
        }
        if win.iter().chain(st).chain(bd).chain(wd).any(|&v| v <= 0) {
            return invalid("window sizes, strides and dilations must be positive");
        }
        let mut table = Vec::with_capacity(r);
        for d in 0..r {
            let mut t = Vec::with_capacity(output[d] * win[d] as usize);
            for o in 0..output[d] as i64 {
                for w in 0..win[d] {
                    let p = o * st[d] + w * wd[d] - pad[d].0;
                    let ok = p >= 0 && p % bd[d] == 0 && p / bd[d] < input[d] as i64;
                    t.push(ok.then_some((p / bd[d].max(1)) as usize));
                }
            }
            table.push(t);
        }
        Ok(Windows {
            input: input.to_vec(),
            win: win.iter().map(|&w| w as usize).collect(),
            table,
        })
    }

    /// For windows that never touch padding or base-dilation holes and whose taps sit at the
    /// same distances from each window's first tap: per dimension the element offset of each
    /// output position's first tap, and the taps' offsets from it in row-major window order
    /// (what [`Windows::positions`] gives, as a sum). `None` otherwise.
    fn dense(&self, in_strides: &[isize]) -> Option<(Vec<Vec<usize>>, Vec<usize>)> {
        let mut base = Vec::with_capacity(self.win.len());
        let mut offs = vec![0usize];
        for (d, (t, &w)) in self.table.iter().zip(&self.win).enumerate() {
            let st = usize::try_from(in_strides[d]).ok()?;
            let mut firsts = Vec::with_capacity(t.len() / w.max(1));
            let mut rel: Option<Vec<usize>> = None;
            for row in t.chunks(w.max(1)) {
                let first = row.first().copied().flatten()?;
                let r: Vec<usize> = row
                    .iter()
                    .map(|v| v.and_then(|i| i.checked_sub(first)))
                    .collect::<Option<_>>()?;
                match &rel {
                    Some(x) if *x != r => return None,
                    Some(_) => {}
                    None => rel = Some(r),
                }
                firsts.push(first * st);
            }
            let rel = rel.unwrap_or_default();
            offs = offs
                .iter()
                .flat_map(|&o| rel.iter().map(move |&x| o + x * st))
                .collect();
            base.push(firsts);
        }
        Some((base, offs))
    }

    /// The one axis along which windows have more than one tap or touch padding, where every
    /// other axis has the input's extent and maps output index `o` to input index `o` with a
    /// one-tap window (a cumulative
    /// sum, `jnp.cumsum`'s `reduce_window` and its transpose); `None` otherwise.
    fn one_axis(&self, output: &[usize]) -> Option<usize> {
        let mut active = None;
        for d in 0..self.win.len() {
            if !self.identity_axis(d, output) {
                if active.is_some() {
                    return None;
                }
                active = Some(d);
            }
        }
        let a = active?;
        (self.table[a].len() == output[a] * self.win[a]).then_some(a)
    }

    /// Whether axis `d` has the input's extent and a one-tap window at each output's own index.
    fn identity_axis(&self, d: usize, output: &[usize]) -> bool {
        let t = &self.table[d];
        self.win[d] == 1
            && self.input[d] == output[d]
            && t.len() == output[d]
            && t.iter().enumerate().all(|(o, &i)| i == Some(o))
    }

    /// The number of elements of the trailing axes whose windows are one tap at the output's
    /// own index and whose input and output extents agree (so that a row of outputs along them
    /// reads a contiguous row of the input): 1 where the last axis is not such.
    fn identity_tail(&self, output: &[usize]) -> usize {
        let mut n = 1;
        for d in (0..self.win.len()).rev() {
            if !self.identity_axis(d, output) {
                break;
            }
            n *= output[d];
        }
        n
    }

    /// Input offsets (or `None` for padding) of the window of output multi-index `o`, in
    /// row-major window order.
    fn positions(&self, o: &[usize], in_strides: &[isize], out: &mut Vec<Option<usize>>) {
        self.positions_into(o, in_strides, out, &mut Vec::new());
    }

    /// [`Windows::positions`] with the window multi-index kept in `w` (no allocation once
    /// `out` and `w` have grown).
    fn positions_into(
        &self,
        o: &[usize],
        in_strides: &[isize],
        out: &mut Vec<Option<usize>>,
        w: &mut Vec<usize>,
    ) {
        out.clear();
        let r = o.len();
        let n: usize = self.win.iter().product();
        w.clear();
        w.resize(r, 0);
        for _ in 0..n {
            let mut off = 0usize;
            let mut valid = true;
            for d in 0..r {
                match self.table[d][o[d] * self.win[d] + w[d]] {
                    Some(i) => off += i * in_strides[d] as usize,
                    None => valid = false,
                }
            }
            out.push(valid.then_some(off));
            for d in (0..r).rev() {
                w[d] += 1;
                if w[d] < self.win[d] {
                    break;
                }
                w[d] = 0;
            }
        }
    }
}

/// `reduce_window`: operands are the inputs followed by as many init values.
pub(crate) fn reduce_window(
    ctx: &Ctx,
    window: &Window,
    ops: Vec<Tensor>,
) -> Result<Vec<Tensor>, OpError> {
    let n = ops.len() / 2;
    if n == 0 || ops.len() != 2 * n || ctx.out.len() != n {
        return invalid("expects inputs followed by as many init values");
    }
    let (xs, inits) = ops.split_at(n);
    let ishape = xs[0].shape().to_vec();
    if xs.iter().any(|x| x.shape() != ishape.as_slice()) || inits.iter().any(|i| i.len() != 1) {
        return invalid("inputs must share a shape and init values must be scalars");
    }
    let oshape = ctx.out[0].shape.clone();
    let w = Windows::new(window, ctx.bindings, &ishape, &oshape)?;
    let ist = istrides_of(&ishape);
    if ctx.node.regions.is_empty() {
        return invalid("reduce_window without a body");
    }
    let f = RegionFn::of(ctx, 0, "body")?;
    let n_out: usize = oshape.iter().product();
    if let (1, Body::Monoid(m)) = (n, &f.body) {
        let m = *m;
        if let Some(t) = f32_sum_rows(ctx, m, (&xs[0], &inits[0]), &w, &ist, &oshape) {
            return Ok(vec![t]);
        }
        #[allow(clippy::too_many_arguments)]
        fn go<T: Elem, C: Fn(T, T) -> T + Sync>(
            ctx: &Ctx,
            x: &[T],
            init: T,
            comb: C,
            w: &Windows,
            ist: &[isize],
            oshape: &[usize],
            n_out: usize,
        ) -> Buf<T> {
            // Parallel when the work (outputs times window) is large.
            let chunk = if n_out * w.win.iter().product::<usize>() >= PAR_MIN {
                super::par::grain(n_out).min(n_out.div_ceil(4)).max(1)
            } else {
                0
            };
            let dense = w.dense(ist);
            if let Some((base, offs)) = &dense {
                if super::window_rows::fits(x.len(), base, offs, oshape) {
                    // Channels-last runs folded a tap at a time (every output written).
                    let mut out = ctx.take_vec::<T>(n_out);
                    let w = (base.as_slice(), offs.as_slice());
                    super::window_rows::dense_rows(x, init, &comb, w, oshape, &mut out, chunk);
                    return out;
                }
            }
            let mut out = vec![init; n_out];
            if let Some((base, offs)) = dense {
                super::par::chunks_mut(&mut out, chunk, &|s, c| {
                    dense_walk(&base, oshape, s, c.len(), |k, b| {
                        c[k] = offs.iter().fold(init, |acc, &j| comb(acc, x[b + j]));
                    });
                });
                return Buf::from(out);
            }
            if let Some(a) = w.one_axis(oshape) {
                if one_axis_fold(x, init, &comb, w, (a, ist), oshape, &mut out, chunk > 0) {
                    return Buf::from(out);
                }
            }
            // Trailing axes with one-tap identity windows (channels, say): the windows of a
            // row of outputs along them are one window's taps shifted by the row's index, so
            // the taps are walked once per row and each tap adds a contiguous row.
            let inner = w.identity_tail(oshape);
            if inner >= 4 {
                let rows = n_out / inner;
                let row_chunk = if chunk > 0 {
                    inner
                        * rows
                            .div_ceil(4 * rayon::current_num_threads().max(1))
                            .max(1)
                } else {
                    0
                };
                super::par::chunks_mut(&mut out, row_chunk, &|s, c| {
                    let mut o = unravel(s, oshape);
                    let (mut pos, mut scratch) = (Vec::new(), Vec::new());
                    for o_row in c.chunks_mut(inner) {
                        w.positions_into(&o, ist, &mut pos, &mut scratch);
                        o_row.iter_mut().for_each(|v| *v = init);
                        for p in &pos {
                            match p {
                                Some(k) => {
                                    for (v, &xv) in o_row.iter_mut().zip(&x[*k..*k + inner]) {
                                        *v = comb(*v, xv);
                                    }
                                }
                                None => o_row.iter_mut().for_each(|v| *v = comb(*v, init)),
                            }
                        }
                        for _ in 0..inner {
                            advance(&mut o, oshape);
                        }
                    }
                });
                return Buf::from(out);
            }
            super::par::chunks_mut(&mut out, chunk, &|s, c| {
                let mut o = unravel(s, oshape);
                let (mut pos, mut scratch) = (Vec::new(), Vec::new());
                for d in c.iter_mut() {
                    w.positions_into(&o, ist, &mut pos, &mut scratch);
                    *d = pos
                        .iter()
                        .fold(init, |acc, p| comb(acc, p.map(|k| x[k]).unwrap_or(init)));
                    advance(&mut o, oshape);
                }
            });
            Buf::from(out)
        }
        let init = inits[0].data();
        let data = crate::tensor::zip_with!(xs[0].data(), init, x, i => Elem::wrap(with_monoid!(m, c => go(ctx, x, i[0], c, &w, &ist, &oshape, n_out))))
            .ok_or_else(|| OpError::Invalid("input and init value element types differ".into()))?;
        return Ok(vec![Tensor::from_parts(oshape, data)]);
    }
    let init: Vec<Scalar> = inits
        .iter()
        .map(|t| t.scalar_value())
        .collect::<Option<_>>()
        .ok_or_else(|| OpError::Invalid("bad init".into()))?;
    let mut accs = Vec::with_capacity(n_out);
    let mut pos = Vec::new();
    let mut args = Vec::with_capacity(2 * n);
    for i in 0..n_out {
        w.positions(&unravel(i, &oshape), &ist, &mut pos);
        let mut acc = init.clone();
        for p in &pos {
            args.clear();
            args.extend_from_slice(&acc);
            for (k, x) in xs.iter().enumerate() {
                args.push(match p {
                    Some(off) => x
                        .data()
                        .get(*off)
                        .ok_or_else(|| OpError::Invalid("index out of range".into()))?,
                    None => init[k],
                });
            }
            acc = f.call(&args)?;
        }
        accs.push(acc);
    }
    collect_outputs(accs, ctx.out)
}

/// `reduce_window` sums of `f32` over dense channels-last windows
/// ([`super::window_rows::fits`]) with the native `f32` addition, which rounds each sum as
/// [`combine`]'s `f64` one does (the exact sum of two `f32` rounded to `f64` and then to `f32`
/// is the correctly rounded `f32` sum: `f64` carries more than `2·24 + 2` bits), in fewer
/// instructions; `None` where the case does not apply.
fn f32_sum_rows(
    ctx: &Ctx,
    m: Monoid,
    (x, init): (&Tensor, &Tensor),
    w: &Windows,
    ist: &[isize],
    oshape: &[usize],
) -> Option<Tensor> {
    let (Monoid::Add, Data::F32(xv), Some(Scalar::F32(i0)), ebb_ir::DType::F32) =
        (m, x.data(), init.data().get(0), ctx.out.first()?.dtype)
    else {
        return None;
    };
    let (base, offs) = w.dense(ist)?;
    if !super::window_rows::fits(xv.len(), &base, &offs, oshape) {
        return None;
    }
    let n_out: usize = oshape.iter().product();
    let chunk = if n_out * offs.len() >= PAR_MIN {
        super::par::grain(n_out).min(n_out.div_ceil(4)).max(1)
    } else {
        0
    };
    let mut out = ctx.take_vec::<f32>(n_out);
    let add = |a: f32, b: f32| a + b;
    let wins = (base.as_slice(), offs.as_slice());
    super::window_rows::dense_rows(xv, i0, &add, wins, oshape, &mut out, chunk);
    Some(Tensor::from_parts(oshape.to_vec(), Data::F32(out)))
}

/// `reduce_window` of one monoid input whose windows vary along axis `a` only
/// ([`Windows::one_axis`]): each output folds its window's taps along `a` in window order,
/// padding taps contributing `init`, as the general walk does, without computing positions.
/// Where every window is padding followed by the input's elements `0..=o` (a cumulative sum
/// over the axis) and `init ⊕ init` is `init` bit for bit (so any run of padding taps leaves
/// `init`), output `o` is the running fold `init ⊕ x[0] ⊕ … ⊕ x[o]`: the same additions in
/// the same order, in linear time instead of quadratic. `ist` are the input's strides. Parallel
/// over the axes before `a` when `par`. `false` (nothing written) where `x` and `out` are not
/// the lengths the shapes give.
#[allow(clippy::too_many_arguments)]
fn one_axis_fold<T: Elem>(
    x: &[T],
    init: T,
    comb: &(impl Fn(T, T) -> T + Sync),
    w: &Windows,
    (a, ist): (usize, &[isize]),
    oshape: &[usize],
    out: &mut [T],
    par: bool,
) -> bool {
    let (na, wa, ta) = (oshape[a], w.win[a], &w.table[a]);
    let inner: usize = oshape[a + 1..].iter().product();
    let outer: usize = oshape[..a].iter().product();
    if inner == 0 || outer == 0 || na == 0 {
        return true;
    }
    // The input's length along `a` (the other axes are the output's).
    let la = match a {
        0 => x.len() / inner,
        _ => ist[a - 1] as usize / inner,
    };
    let same = |p: T, q: T| p.to_f64().to_bits() == q.to_f64().to_bits();
    let prefix = same(comb(init, init), init)
        && (0..na).all(|o| {
            let row = &ta[o * wa..(o + 1) * wa];
            let lead = row.iter().take_while(|t| t.is_none()).count();
            row[lead..].iter().enumerate().all(|(k, &t)| t == Some(k)) && wa - lead == o + 1
        });
    let block = na * inner;
    if la * inner * outer != x.len() || out.len() != outer * block {
        return false;
    }
    let chunk = if par {
        block
            * outer
                .div_ceil(4 * rayon::current_num_threads().max(1))
                .max(1)
    } else {
        0
    };
    super::par::chunks_mut(out, chunk, &|s, c| {
        for (q, o_blk) in c.chunks_mut(block).enumerate() {
            let pre = s / block + q;
            let xin = &x[pre * la * inner..(pre + 1) * la * inner];
            // Rows of `inner` outputs at a time (each output still folds its own taps in
            // window order; the rows only make the loads contiguous).
            for oa in 0..na {
                let (done, rest) = o_blk.split_at_mut(oa * inner);
                let o_row = &mut rest[..inner];
                if prefix {
                    let x_row = &xin[oa * inner..(oa + 1) * inner];
                    let prev = if oa == 0 {
                        None
                    } else {
                        Some(&done[(oa - 1) * inner..])
                    };
                    for p in 0..inner {
                        let acc = prev.map_or(init, |r| r[p]);
                        o_row[p] = comb(acc, x_row[p]);
                    }
                    continue;
                }
                o_row.iter_mut().for_each(|o| *o = init);
                for t in &ta[oa * wa..(oa + 1) * wa] {
                    match t {
                        Some(i) => {
                            let x_row = &xin[i * inner..(i + 1) * inner];
                            for (o, &v) in o_row.iter_mut().zip(x_row) {
                                *o = comb(*o, v);
                            }
                        }
                        None => o_row.iter_mut().for_each(|o| *o = comb(*o, init)),
                    }
                }
            }
        }
    });
    true
}

/// `select_and_scatter` (operand, source, init_value; regions select, scatter): for every
/// window, selects one valid operand position (keeping the current choice while
/// `select(current, candidate)` holds) and scatters the source element into the result there.
/// Padding positions are never selected.
pub(crate) fn select_and_scatter(
    ctx: &Ctx,
    window: &Window,
    ops: Vec<Tensor>,
) -> Result<Tensor, OpError> {
    super::arity(&ops, 3, OpKind::SelectAndScatter)?;
    let (x, src, init) = (&ops[0], &ops[1], &ops[2]);
    let w = Windows::new(window, ctx.bindings, x.shape(), src.shape())?;
    let ist = istrides_of(x.shape());
    if ctx.node.regions.len() != 2 {
        return invalid("select_and_scatter needs select and scatter regions");
    }
    let sel = RegionFn::of(ctx, 0, "select")?;
    let sc = RegionFn::of(ctx, 1, "scatter")?;
    let fill = init
        .scalar_value()
        .ok_or_else(|| OpError::Invalid("init_value must be a scalar".into()))?;
    let cmp = match &sel.body {
        Body::Compare { dir, total } => Some((*dir, *total)),
        _ => None,
    };
    if let (Some((dir, total)), Body::Monoid(m)) = (cmp, &sc.body) {
        let m = *m;
        let fast =
            |x: &Data, s: &Data| -> Option<Data> {
                Some(match (x, s, fill) {
                    (Data::F32(x), Data::F32(s), Scalar::F32(f)) => Data::F32(Buf::from(
                        sas_typed(x, s, f, (&w, &ist, src.shape()), (dir, total), m),
                    )),
                    (Data::F64(x), Data::F64(s), Scalar::F64(f)) => Data::F64(Buf::from(
                        sas_typed(x, s, f, (&w, &ist, src.shape()), (dir, total), m),
                    )),
                    _ => return None,
                })
            };
        if let Some(d) = fast(x.data(), src.data()) {
            return Ok(Tensor::from_parts(x.shape(), d));
        }
    }
    let mut out = Data::splat(fill, x.len());
    let mut pos = Vec::new();
    for i in 0..src.len() {
        w.positions(&unravel(i, src.shape()), &ist, &mut pos);
        let mut chosen: Option<usize> = None;
        for &p in pos.iter().flatten() {
            chosen = Some(match chosen {
                None => p,
                Some(c) => {
                    let (a, b) = (get(x.data(), c)?, get(x.data(), p)?);
                    let keep = match &cmp {
                        Some((dir, total)) => scalar_compare(a, b, *dir, *total)?,
                        None => sel.test(&[a, b])?,
                    };
                    if keep {
                        c
                    } else {
                        p
                    }
                }
            });
        }
        let Some(c) = chosen else { continue };
        let s = get(src.data(), i)?;
        let cur = get(&out, c)?;
        let new = match &sc.body {
            Body::Monoid(m) => combine_scalar(*m, cur, s)?,
            Body::Overwrite => s,
            _ => *sc
                .call(&[cur, s])?
                .first()
                .ok_or_else(|| OpError::Invalid("scatter region returned nothing".into()))?,
        };
        if !out.set(c, new) {
            return invalid("scatter region returned a value of another element type");
        }
    }
    Ok(Tensor::from_parts(x.shape(), out))
}

/// `select_and_scatter` of one float type whose select region is one `compare` and whose
/// scatter region is a monoid: the same choices and the same scatter order as the general
/// path, without scalar boxing.
fn sas_typed<T: Elem>(
    x: &[T],
    src: &[T],
    fill: T,
    (w, ist, sshape): (&Windows, &[isize], &[usize]),
    (dir, total): (Relation, bool),
    m: Monoid,
) -> Vec<T> {
    let f = super::elementwise::cmp_fn(dir);
    let keep = |a: T, b: T| {
        if total {
            f(Some(a.to_f64().total_cmp(&b.to_f64())))
        } else {
            f(a.partial_cmp(&b))
        }
    };
    // the first position kept while `keep(current, candidate)` holds
    let choose = |ps: &mut dyn Iterator<Item = usize>| {
        ps.fold(None, |ch: Option<usize>, p| match ch {
            Some(c) if keep(x[c], x[p]) => Some(c),
            _ => Some(p),
        })
    };
    let mut out = vec![fill; x.len()];
    let dense = w.dense(ist);
    // Source elements `[s0, s0 + len)` scattered into `out`, whose element 0 is `x`'s `at`:
    // every window of them lies inside it (checked by the caller's split).
    let run = |s0: usize, len: usize, at: usize, out: &mut [T]| match &dense {
        Some((base, offs)) => dense_walk(base, sshape, s0, len, |k, b| {
            if let Some(c) = choose(&mut offs.iter().map(|&j| b + j)) {
                out[c - at] = combine(m, out[c - at], src[s0 + k]);
            }
        }),
        None => {
            let mut o = unravel(s0, sshape);
            let (mut pos, mut scratch) = (Vec::new(), Vec::new());
            for &s in &src[s0..s0 + len] {
                w.positions_into(&o, ist, &mut pos, &mut scratch);
                if let Some(c) = choose(&mut pos.iter().flatten().copied()) {
                    out[c - at] = combine(m, out[c - at], s);
                }
                advance(&mut o, sshape);
            }
        }
    };
    // Windows that keep the leading dimension (extent 1, stride 1, no padding) never reach
    // across its slabs: the slabs are scattered in parallel, each in the sequential order.
    let lead = sshape.first().copied().unwrap_or(0);
    let slab_x = ist.first().map_or(0, |&v| v.max(0) as usize);
    let slab_s = src.len() / lead.max(1);
    let keeps_lead = lead > 1
        && w.win.first() == Some(&1)
        && w.table
            .first()
            .is_some_and(|t| t.len() == lead && t.iter().enumerate().all(|(q, p)| *p == Some(q)))
        && slab_x * lead == x.len();
    if keeps_lead && src.len() * w.win.iter().product::<usize>() >= PAR_MIN && slab_x > 0 {
        let per = (super::par::grain(src.len()) / slab_s.max(1)).clamp(1, lead.div_ceil(4));
        super::par::chunks_mut(&mut out, per * slab_x, &|start, c| {
            let first = start / slab_x;
            let slabs = c.len() / slab_x;
            run(first * slab_s, slabs * slab_s, start, c);
        });
    } else {
        run(0, src.len(), 0, &mut out);
    }
    out
}

/// Walks output elements `[s, s + len)` of `oshape` in row-major order, calling `f(k, b)`
/// with `k` the element's index from `s` and `b` its window's first tap (the sum of the
/// per-dimension `base` offsets, [`Windows::dense`]): the outer dimensions' part once per
/// row of the innermost dimension.
fn dense_walk(
    base: &[Vec<usize>],
    oshape: &[usize],
    s: usize,
    len: usize,
    mut f: impl FnMut(usize, usize),
) {
    let Some((last, outer)) = base.split_last() else {
        if len > 0 {
            f(0, 0);
        }
        return;
    };
    let inner = oshape[oshape.len() - 1];
    let mut o = unravel(s, oshape);
    let mut k = 0;
    while k < len {
        let row: usize = o.iter().zip(outer).map(|(&q, t)| t[q]).sum();
        let q0 = o[o.len() - 1];
        let n = (inner - q0).min(len - k);
        for (q, &b) in last[q0..q0 + n].iter().enumerate() {
            f(k + q, row + b);
        }
        k += n;
        let r = o.len();
        o[r - 1] = 0;
        advance(&mut o[..r - 1], &oshape[..r - 1]);
    }
}

/// Steps the row-major multi-index `o` within `shape` (wrapping to zeros after the last).
pub(super) fn advance(o: &mut [usize], shape: &[usize]) {
    for d in (0..o.len()).rev() {
        o[d] += 1;
        if o[d] < shape[d] {
            return;
        }
        o[d] = 0;
    }
}

fn get(d: &Data, i: usize) -> Result<Scalar, OpError> {
    d.get(i)
        .ok_or_else(|| OpError::Invalid("index out of range".into()))
}

/// [`combine`] on two scalars of the same element type.
pub(crate) fn combine_scalar(m: Monoid, a: Scalar, b: Scalar) -> Result<Scalar, OpError> {
    use Scalar::*;
    Ok(match (a, b) {
        (F32(x), F32(y)) => F32(combine(m, x, y)),
        (F64(x), F64(y)) => F64(combine(m, x, y)),
        (BF16(x), BF16(y)) => BF16(combine(m, x, y)),
        (F16(x), F16(y)) => F16(combine(m, x, y)),
        (I1(x), I1(y)) => I1(combine(m, x, y)),
        (I8(x), I8(y)) => I8(combine(m, x, y)),
        (I16(x), I16(y)) => I16(combine(m, x, y)),
        (I32(x), I32(y)) => I32(combine(m, x, y)),
        (I64(x), I64(y)) => I64(combine(m, x, y)),
        (U8(x), U8(y)) => U8(combine(m, x, y)),
        (U32(x), U32(y)) => U32(combine(m, x, y)),
        (U64(x), U64(y)) => U64(combine(m, x, y)),
        _ => return invalid("element types differ"),
    })
}

/// `compare(a, b)` on two scalars (see [`super::elementwise::compare`]), without allocating.
///
/// # Errors
/// [`OpError::Invalid`] when their element types differ.
pub(crate) fn scalar_compare(
    a: Scalar,
    b: Scalar,
    dir: Relation,
    total: bool,
) -> Result<bool, OpError> {
    super::scalar_body::compare_scalars(a, b, dir, total).ok_or_else(|| {
        OpError::Invalid(format!(
            "operand element types differ: {} vs {}",
            a.dtype(),
            b.dtype()
        ))
    })
}
