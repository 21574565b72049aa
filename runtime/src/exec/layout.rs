//! Strided views: the one data-movement primitive behind `broadcast_in_dim`, `transpose`,
//! `slice`, `reverse`, `dynamic_slice`, `pad`, `gather` and the operand layouts of
//! `dot_general`.
//!
//! A view of a row-major buffer is `(offset, strides, shape)` with element strides that may be
//! zero (broadcast) or negative (reverse). Invariant: every helper checks, before touching
//! memory, that the smallest and largest offsets the view reaches lie inside the buffer, so a
//! wrong view is an error, never an out-of-bounds access.

pub(crate) use super::par::PAR_MIN;
use crate::error::{invalid, OpError};
use std::ops::DerefMut;

/// Row-major element strides of `shape`.
pub(crate) fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Per-dimension values of a view (strides, extents, indices) held inline up to rank 6: the
/// views of a loop body's small ops then allocate nothing.
pub(crate) type Dims<T> = smallvec::SmallVec<[T; 6]>;

/// [`istrides_of`] held inline ([`Dims`]).
pub(crate) fn istrides(shape: &[usize]) -> Dims<isize> {
    // Filled innermost first into an array, then copied once (a `SmallVec` built element by
    // element costs more than the strides themselves).
    let mut s = [1isize; 6];
    if shape.len() > s.len() {
        return Dims::from_vec(istrides_of(shape));
    }
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1] as isize;
    }
    Dims::from_slice(&s[..shape.len()])
}

/// Row-major strides as `isize`.
pub fn istrides_of(shape: &[usize]) -> Vec<isize> {
    let mut s = vec![1isize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1] as isize;
    }
    s
}

/// The lowest and highest element a view of `shape` with `strides` reaches, relative to its
/// offset (elements; a shape with a 0 extent gives a meaningless span, which callers skip).
fn view_span(strides: &[isize], shape: &[usize]) -> (i128, i128) {
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&s, &d) in strides.iter().zip(shape) {
        let span = s as i128 * (d as i128 - 1);
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    (lo, hi)
}

/// Checks that the view stays inside a buffer of `len` elements.
fn check_view(
    len: usize,
    offset: isize,
    strides: &[isize],
    shape: &[usize],
    what: &str,
) -> Result<(), OpError> {
    if shape.contains(&0) {
        return Ok(());
    }
    let (lo, hi) = view_span(strides, shape);
    let (lo, hi) = (offset as i128 + lo, offset as i128 + hi);
    if strides.len() != shape.len() || lo < 0 || hi >= len as i128 {
        return Err(OpError::Invalid(format!(
            "internal: {what} view (offset {offset}, strides {strides:?}, shape {shape:?}) leaves a buffer of {len} elements"
        )));
    }
    Ok(())
}

/// Drops unit dimensions and merges dimensions that are contiguous with each other, so that
/// the innermost loop is as long as possible. Returns (strides, shape); empty for a scalar.
fn simplify(strides: &[isize], shape: &[usize]) -> (Dims<isize>, Dims<usize>) {
    let mut st: Dims<isize> = Dims::new();
    let mut sh: Dims<usize> = Dims::new();
    for (&s, &d) in strides.iter().zip(shape) {
        if d == 1 {
            continue;
        }
        if let (Some(&ps), Some(&pd)) = (st.last(), sh.last()) {
            if ps == s * d as isize {
                *st.last_mut().unwrap_or(&mut 0) = s;
                *sh.last_mut().unwrap_or(&mut 0) = pd * d;
                continue;
            }
        }
        st.push(s);
        sh.push(d);
    }
    (st, sh)
}

/// Output rows copied together by a transposing [`gather_view`].
const TILE: usize = 16;

/// Copies the view `(offset, strides, shape)` of `src` into a new row-major vector.
pub fn gather_view<T: Copy + Send + Sync + Default>(
    src: &[T],
    offset: isize,
    strides: &[isize],
    shape: &[usize],
) -> Result<Vec<T>, OpError> {
    let n = shape.iter().product();
    gather_view_into(src, offset, strides, shape, vec![T::default(); n])
}

/// [`gather_view`] writing into `out`, which must have the view's element count (a recycled
/// buffer: every element is overwritten).
pub fn gather_view_into<T: Copy + Send + Sync + Default, B: DerefMut<Target = [T]>>(
    src: &[T],
    offset: isize,
    strides: &[isize],
    shape: &[usize],
    mut out: B,
) -> Result<B, OpError> {
    check_view(src.len(), offset, strides, shape, "source")?;
    let n: usize = shape.iter().product();
    if out.len() != n {
        return invalid("internal: view output of the wrong size");
    }
    if n == 0 {
        return Ok(out);
    }
    let (st, sh) = simplify(strides, shape);
    if sh.is_empty() {
        out[0] = src[offset as usize];
        return Ok(out);
    }
    let inner = *sh.last().unwrap_or(&1);
    let inner_stride = *st.last().unwrap_or(&1);
    let outer_shape = &sh[..sh.len() - 1];
    let outer_strides = &st[..st.len() - 1];
    let rows = n / inner;
    // A transpose: the innermost output dimension strides through the source while the next
    // one is contiguous there. Rows are then copied in blocks of `TILE` along that dimension,
    // so that each source cache line read serves `TILE` output rows.
    let tiled = inner_stride.unsigned_abs() > 1 && outer_strides.last() == Some(&1);
    let fill = |chunk: &mut [T], row0: usize| {
        let mut idx = unravel(row0, outer_shape);
        let mut off = offset
            + idx
                .iter()
                .zip(outer_strides)
                .map(|(&i, &s)| i as isize * s)
                .sum::<isize>();
        let rows = chunk.len() / inner;
        let mut r = 0;
        while r < rows {
            let t = match (tiled, idx.last(), outer_shape.last()) {
                (true, Some(&i), Some(&n)) => TILE.min(rows - r).min(n - i),
                _ => 1,
            };
            let block = &mut chunk[r * inner..(r + t) * inner];
            if t > 1 {
                for j in 0..inner {
                    let base = off + j as isize * inner_stride;
                    for rr in 0..t {
                        block[rr * inner + j] = src[(base + rr as isize) as usize];
                    }
                }
            } else if inner_stride == 1 {
                let o = off as usize;
                block.copy_from_slice(&src[o..o + inner]);
            } else if inner_stride == 0 {
                block.fill(src[off as usize]);
            } else {
                for (j, x) in block.iter_mut().enumerate() {
                    *x = src[(off + j as isize * inner_stride) as usize];
                }
            }
            for _ in 0..t {
                off += step(&mut idx, outer_shape, outer_strides);
            }
            r += t;
        }
    };
    if n >= PAR_MIN && rows > 1 {
        let rows_per = rows
            .div_ceil(4 * rayon::current_num_threads().max(1))
            .max(1);
        super::par::chunks_mut(&mut out, rows_per * inner, &|s, chunk| {
            fill(chunk, s / inner)
        });
    } else {
        fill(&mut out, 0);
    }
    Ok(out)
}

/// Whether the view of strides `st` over `shape` walks its elements in row-major order with
/// no gaps (dimensions of size 1 ignored, whatever their stride).
fn row_major(st: &[isize], shape: &[usize]) -> bool {
    let mut want = 1isize;
    for (&n, &s) in shape.iter().zip(st).rev() {
        if n != 1 && s != want {
            return false;
        }
        want *= n as isize;
    }
    true
}

/// `dst[view d] = src[view s]` elementwise over `shape`; one slice copy where both views are
/// row-major without gaps (an embedding row, a scan step written into its stack).
pub fn assign_view<T: Copy>(
    dst: &mut [T],
    doff: isize,
    dstr: &[isize],
    src: &[T],
    soff: isize,
    sstr: &[isize],
    shape: &[usize],
) -> Result<(), OpError> {
    check_view(dst.len(), doff, dstr, shape, "destination")?;
    check_view(src.len(), soff, sstr, shape, "source")?;
    let n: usize = shape.iter().product();
    if n == 0 {
        return Ok(());
    }
    if row_major(dstr, shape) && row_major(sstr, shape) {
        // (Both ranges lie in their buffers: `check_view` above.)
        let (d, s) = (doff as usize, soff as usize);
        dst[d..d + n].copy_from_slice(&src[s..s + n]);
        return Ok(());
    }
    // keep only non-unit dims (merging needs both views to agree; do it pairwise)
    let mut ds: Dims<isize> = Dims::new();
    let mut ss: Dims<isize> = Dims::new();
    let mut sh: Dims<usize> = Dims::new();
    for i in 0..shape.len() {
        if shape[i] == 1 {
            continue;
        }
        if let (Some(&pd), Some(&ps), Some(&pn)) = (ds.last(), ss.last(), sh.last()) {
            if pd == dstr[i] * shape[i] as isize && ps == sstr[i] * shape[i] as isize {
                let k = sh.len() - 1;
                ds[k] = dstr[i];
                ss[k] = sstr[i];
                sh[k] = pn * shape[i];
                continue;
            }
        }
        ds.push(dstr[i]);
        ss.push(sstr[i]);
        sh.push(shape[i]);
    }
    if sh.is_empty() {
        dst[doff as usize] = src[soff as usize];
        return Ok(());
    }
    let inner = sh[sh.len() - 1];
    let (di, si) = (ds[ds.len() - 1], ss[ss.len() - 1]);
    let outer = &sh[..sh.len() - 1];
    let (dos, sos) = (&ds[..ds.len() - 1], &ss[..ss.len() - 1]);
    let mut idx: Dims<usize> = smallvec::smallvec![0usize; outer.len()];
    let (mut d, mut s) = (doff, soff);
    for _ in 0..n / inner {
        if di == 1 && si == 1 {
            dst[d as usize..d as usize + inner]
                .copy_from_slice(&src[s as usize..s as usize + inner]);
        } else {
            for j in 0..inner as isize {
                dst[(d + j * di) as usize] = src[(s + j * si) as usize];
            }
        }
        // advance both odometers together
        for k in (0..outer.len()).rev() {
            idx[k] += 1;
            d += dos[k];
            s += sos[k];
            if idx[k] < outer[k] {
                break;
            }
            d -= dos[k] * outer[k] as isize;
            s -= sos[k] * outer[k] as isize;
            idx[k] = 0;
        }
    }
    Ok(())
}

/// [`assign_view`] for many windows of one geometry (a `gather`'s windows, which differ only
/// in their offsets): the views' extents and whether both are row-major are worked out once,
/// so that a window costs a bounds check and one element or one slice copied. A window that
/// is not row-major in both views, or leaves a buffer, goes through [`assign_view`] (which
/// copies it, or reports the error), so the bits written are the same.
pub(crate) struct WindowCopy<'a> {
    dstr: &'a [isize],
    sstr: &'a [isize],
    shape: &'a [usize],
    /// Elements of a window.
    n: usize,
    /// Both views row-major without gaps: a window is one slice of `n` elements.
    contiguous: bool,
    /// Lowest and highest element of the destination and source views, relative to their
    /// offsets.
    dspan: (i128, i128),
    sspan: (i128, i128),
}

impl<'a> WindowCopy<'a> {
    /// The copy of windows of `shape` from strides `sstr` into strides `dstr`.
    pub(crate) fn new(dstr: &'a [isize], sstr: &'a [isize], shape: &'a [usize]) -> Self {
        WindowCopy {
            dstr,
            sstr,
            shape,
            n: shape.iter().product(),
            contiguous: dstr.len() == shape.len()
                && sstr.len() == shape.len()
                && row_major(dstr, shape)
                && row_major(sstr, shape),
            dspan: view_span(dstr, shape),
            sspan: view_span(sstr, shape),
        }
    }

    /// `dst[view at doff] = src[view at soff]`, as [`assign_view`] does.
    ///
    /// # Errors
    /// As [`assign_view`]: a view that leaves its buffer.
    #[inline]
    pub(crate) fn copy<T: Copy>(
        &self,
        dst: &mut [T],
        doff: isize,
        src: &[T],
        soff: isize,
    ) -> Result<(), OpError> {
        let inside = |len: usize, off: isize, (lo, hi): (i128, i128)| {
            off as i128 + lo >= 0 && off as i128 + hi < len as i128
        };
        if self.n == 0
            || !self.contiguous
            || !inside(dst.len(), doff, self.dspan)
            || !inside(src.len(), soff, self.sspan)
        {
            return assign_view(dst, doff, self.dstr, src, soff, self.sstr, self.shape);
        }
        // (Both ranges lie in their buffers: checked above.)
        let (d, s) = (doff as usize, soff as usize);
        if self.n == 1 {
            dst[d] = src[s];
        } else {
            dst[d..d + self.n].copy_from_slice(&src[s..s + self.n]);
        }
        Ok(())
    }
}

/// The multi-index of row-major linear index `i` in `shape` (inline up to rank 6: [`Dims`]).
pub(crate) fn unravel(mut i: usize, shape: &[usize]) -> Dims<usize> {
    let mut idx: Dims<usize> = smallvec::smallvec![0usize; shape.len()];
    for k in (0..shape.len()).rev() {
        let d = shape[k].max(1);
        idx[k] = i % d;
        i /= d;
    }
    idx
}

/// Advances the odometer `idx` over `shape` by one and returns the change of the offset.
#[inline]
pub(crate) fn step(idx: &mut [usize], shape: &[usize], strides: &[isize]) -> isize {
    let mut delta = 0isize;
    for k in (0..shape.len()).rev() {
        idx[k] += 1;
        delta += strides[k];
        if idx[k] < shape[k] {
            return delta;
        }
        delta -= strides[k] * shape[k] as isize;
        idx[k] = 0;
    }
    delta
}
