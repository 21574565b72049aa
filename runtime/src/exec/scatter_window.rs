//! The typed application of `scatter` windows (bodies recognized as a [`Monoid`] or as
//! overwriting, one input): each update window combined into the input as one strided block,
//! its dimensions merged where both the input and the updates are contiguous across them, so
//! that the innermost loop runs over contiguous slices. No per-element offsets are built for a
//! window that lies inside the input; a window that sticks out is applied element by element
//! from its in-bounds `(input offset, update offset)` pairs.
//!
//! Invariant: windows are applied in the order given (the row-major order of the scatter
//! index space) and each window's elements in row-major window order, the order of
//! `gather_scatter`'s per-element pairs, so results are bit-identical to applying those pairs
//! one by one, even where windows overlap.

use super::reduce::with_monoid;
use super::region::Monoid;
use crate::error::{invalid, OpError};
use crate::tensor::{Data, Elem, Tensor};

/// One update window of a scatter, in scatter-index order.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Window {
    /// A window inside the input: its origin's offset in the input and in the updates.
    Full { x: usize, u: usize },
    /// A window partly outside the input: `pairs[start..end]` of the scatter's pair list hold
    /// its in-bounds elements' `(input offset, update offset)`, in window order.
    Pairs { start: usize, end: usize },
}

/// The loop nest of one window, shared by every window of a scatter: `shape` with the input
/// strides `xs` and update strides `us`, unit dimensions dropped and dimensions merged where
/// both strides allow (row-major order kept). Empty `shape`: a one-element window.
pub(crate) struct WindowLoop {
    shape: Vec<usize>,
    xs: Vec<usize>,
    us: Vec<usize>,
    /// Elements per window (0 when a window dimension is 0).
    n: usize,
    /// Largest offset from the window origin, in the input and in the updates.
    x_span: usize,
    u_span: usize,
}

impl WindowLoop {
    /// The loop nest of a window of `shape` (row-major) with input strides `xs` and update
    /// strides `us` (one per window dimension).
    pub(crate) fn new(shape: &[usize], xs: &[usize], us: &[usize]) -> WindowLoop {
        let n: usize = shape.iter().product();
        let span = |st: &[usize]| {
            shape
                .iter()
                .zip(st)
                .map(|(&d, &s)| d.saturating_sub(1) * s)
                .sum()
        };
        let (x_span, u_span) = (span(xs), span(us));
        let (mut sh, mut xm, mut um): (Vec<usize>, Vec<usize>, Vec<usize>) =
            (Vec::new(), Vec::new(), Vec::new());
        for ((&d, &a), &b) in shape.iter().zip(xs).zip(us) {
            if d == 1 {
                continue;
            }
            if let (Some(pd), Some(pa), Some(pb)) = (sh.last_mut(), xm.last_mut(), um.last_mut()) {
                if *pa == a * d && *pb == b * d {
                    *pd *= d;
                    *pa = a;
                    *pb = b;
                    continue;
                }
            }
            sh.push(d);
            xm.push(a);
            um.push(b);
        }
        WindowLoop {
            shape: sh,
            xs: xm,
            us: um,
            n,
            x_span,
            u_span,
        }
    }

    /// `x[x0 + o] = f(x[x0 + o], u[u0 + p])` for every window element at offsets `(o, p)`,
    /// in row-major window order. The caller has checked that the window lies inside both
    /// buffers.
    #[inline]
    fn apply<T: Elem>(&self, x: &mut [T], x0: usize, u: &[T], u0: usize, f: impl Fn(T, T) -> T) {
        let Some((&inner, outer)) = self.shape.split_last() else {
            x[x0] = f(x[x0], u[u0]);
            return;
        };
        let (xi, ui) = (self.xs[outer.len()], self.us[outer.len()]);
        let (xo, uo) = (&self.xs[..outer.len()], &self.us[..outer.len()]);
        let mut idx = [0usize; 8];
        let mut heap = Vec::new();
        let idx: &mut [usize] = if outer.len() <= idx.len() {
            &mut idx[..outer.len()]
        } else {
            heap.resize(outer.len(), 0);
            &mut heap
        };
        let (mut a, mut b) = (x0, u0);
        for _ in 0..self.n / inner {
            if xi == 1 && ui == 1 {
                let (dst, src) = (&mut x[a..a + inner], &u[b..b + inner]);
                dst.iter_mut().zip(src).for_each(|(p, &q)| *p = f(*p, q));
            } else {
                for j in 0..inner {
                    let (p, q) = (a + j * xi, b + j * ui);
                    x[p] = f(x[p], u[q]);
                }
            }
            // advance both offsets over the outer dimensions (an odometer)
            for k in (0..outer.len()).rev() {
                idx[k] += 1;
                a += xo[k];
                b += uo[k];
                if idx[k] < outer[k] {
                    break;
                }
                a -= xo[k] * outer[k];
                b -= uo[k] * outer[k];
                idx[k] = 0;
            }
        }
    }
}

/// Applies `windows` of `u` to `x` in order (see the module docs): full windows through
/// `lp`, partial ones from their `pairs`; combining with `m` (`None`: overwriting).
///
/// # Errors
/// [`OpError::Invalid`] when the element types of `x` and `u` differ or a window or pair
/// leaves a buffer.
pub(crate) fn apply_windows(
    x: &mut Tensor,
    u: &Tensor,
    lp: &WindowLoop,
    windows: &[Window],
    pairs: &[(usize, usize)],
    m: Option<Monoid>,
) -> Result<(), OpError> {
    fn go<T: Elem>(
        x: &mut [T],
        u: &[T],
        lp: &WindowLoop,
        windows: &[Window],
        pairs: &[(usize, usize)],
        f: impl Fn(T, T) -> T + Copy,
    ) -> Result<(), OpError> {
        for w in windows {
            match *w {
                Window::Full { x: x0, u: u0 } => {
                    if lp.n == 0 {
                        continue;
                    }
                    if x0 + lp.x_span >= x.len() || u0 + lp.u_span >= u.len() {
                        return invalid("internal: a scatter window leaves its buffer");
                    }
                    lp.apply(x, x0, u, u0, f);
                }
                Window::Pairs { start, end } => {
                    for &(xo, uo) in pairs.get(start..end).unwrap_or(&[]) {
                        let (Some(&a), Some(&b)) = (x.get(xo), u.get(uo)) else {
                            return invalid("index out of range");
                        };
                        x[xo] = f(a, b);
                    }
                }
            }
        }
        Ok(())
    }
    // The combiner is fixed per call, so that each loop is specialized to it.
    fn by<T: Elem>(
        x: &mut [T],
        u: &[T],
        lp: &WindowLoop,
        windows: &[Window],
        pairs: &[(usize, usize)],
        m: Option<Monoid>,
    ) -> Result<(), OpError> {
        match m {
            None => go(x, u, lp, windows, pairs, |_: T, b: T| b),
            Some(m) => with_monoid!(m, c => go(x, u, lp, windows, pairs, c)),
        }
    }
    macro_rules! arms {
        ($($v:ident),*) => {
            match (x.data_mut(), u.data()) {
                $((Data::$v(xv), Data::$v(uv)) => by(xv, uv, lp, windows, pairs, m),)*
                _ => invalid("input and update element types differ"),
            }
        };
    }
    arms!(F32, BF16, F16, F64, I1, I8, I16, I32, I64, U8, U32)
}
