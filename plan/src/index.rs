//! Compact typed indices of finalize's and the arena's tables, a vector typed by its index
//! ([`IndexVec`]), and [`Window`], an inclusive range of program points.
//!
//! The plan format's indices ([`ValueId`], [`Point`], [`CandidateId`] of `ebb_ir`) are `usize`
//! inside. Finalize and the arena keep tens of thousands of them in tables their hot loops read
//! at random (options, heap entries, residency intervals), so there they are 32-bit:
//! [`ValueIx`], [`PointIx`] and [`CandidateIx`] are the compact forms of those three, and
//! [`ExprIx`] (an interned expression), [`OptionIx`] (a candidate and a kind it allows),
//! [`PricedIx`] (an option's place among those priced in one finalize), [`PieceIx`] (a resident
//! piece of a value), [`IntervalIx`] (an interval the arena places) and [`StoredNode`] (a
//! segment-tree node holding intervals) have no `usize` form.
//! Each is `#[repr(transparent)]` over `u32` with inlined accessors, so it costs what the bare
//! `u32` cost. As in rustc's `IndexVec` and regalloc2's `index.rs`, indices of different tables
//! do not mix: a table is an [`IndexVec`] indexed by its own index type.
//!
//! Invariant: every table indexed this way has fewer than 2³² entries (a plan's values,
//! points, candidates and expressions; debug builds check it where an index is made).

use crate::format::{CandidateId, Point, ValueId};
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

/// A compact index: a `u32` newtype that converts to and from `usize` positions.
pub trait Idx: Copy {
    /// The index of position `i` (`i < 2³²`).
    fn new(i: usize) -> Self;
    /// The position, to index a slice.
    fn index(self) -> usize;
}

macro_rules! compact_index {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(transparent)]
        pub struct $name(u32);

        impl $name {
            /// The index of position `i` (`i < 2³²`, checked in debug builds).
            #[inline(always)]
            #[allow(dead_code)]
            pub const fn new(i: usize) -> Self {
                debug_assert!(i <= u32::MAX as usize);
                $name(i as u32)
            }

            /// The position, to index a slice.
            #[inline(always)]
            #[allow(dead_code)]
            pub const fn index(self) -> usize {
                self.0 as usize
            }

            /// The index as its `u32` (for keys that pack it with other bits).
            #[inline(always)]
            #[allow(dead_code)]
            pub const fn raw(self) -> u32 {
                self.0
            }

            /// The index whose `u32` is `raw` (inverse of `raw`).
            #[inline(always)]
            #[allow(dead_code)]
            pub const fn from_raw(raw: u32) -> Self {
                $name(raw)
            }
        }

        impl Idx for $name {
            #[inline(always)]
            fn new(i: usize) -> Self {
                $name::new(i)
            }

            #[inline(always)]
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Debug for $name {
            /// The bare number.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
    };
}

compact_index!(
    /// An interned expression: an index into a prepared plan's distinct size and cost
    /// expressions (`finalize::Prepared`) and into their values at one binding.
    ExprIx
);

/// The value of every interned expression at one binding (`finalize::Prepared::eval`).
pub type ExprValues = IndexVec<ExprIx, i64>;

compact_index!(
    /// A value (index into `Plan::values`), the compact form of [`ValueId`].
    ValueIx
);

compact_index!(
    /// A program point (a position in the schedule), the compact form of [`Point`].
    PointIx
);

compact_index!(
    /// A candidate (index into `Plan::candidates`), the compact form of [`CandidateId`].
    CandidateIx
);

compact_index!(
    /// An option: a candidate and a decision kind it allows with a non-empty window (index into
    /// a prepared plan's options, grouped by candidate, recompute before swap).
    OptionIx
);

compact_index!(
    /// An option's place among the options priced so far in one finalize (in the order first
    /// read): a dense index for per-option state of the few options a greedy run reads.
    PricedIx
);

compact_index!(
    /// A resident piece of a value under the decisions (index into the arena's pieces, in value
    /// order); each becomes one `Allocation`.
    PieceIx
);

compact_index!(
    /// An interval the arena places: a piece, or an in-place group of pieces placed as one.
    IntervalIx
);

compact_index!(
    /// A segment-tree node that stores intervals, by its rank among the nodes that do
    /// (`finalize::segtree::IntervalIndex`): for per-node state kept only where there are
    /// intervals.
    StoredNode
);

/// A segment-tree node (`2k` and `2k + 1` the children of `k`) or any other position computed
/// by arithmetic: `usize` is its own index.
impl Idx for usize {
    #[inline(always)]
    fn new(i: usize) -> Self {
        i
    }

    #[inline(always)]
    fn index(self) -> usize {
        self
    }
}

impl From<ValueId> for ValueIx {
    #[inline(always)]
    fn from(v: ValueId) -> Self {
        ValueIx::new(v.index())
    }
}

impl From<ValueIx> for ValueId {
    #[inline(always)]
    fn from(v: ValueIx) -> Self {
        ValueId::new(v.index())
    }
}

impl From<Point> for PointIx {
    #[inline(always)]
    fn from(p: Point) -> Self {
        PointIx::new(p.index())
    }
}

impl From<PointIx> for Point {
    #[inline(always)]
    fn from(p: PointIx) -> Self {
        Point::new(p.index())
    }
}

impl From<CandidateId> for CandidateIx {
    #[inline(always)]
    fn from(c: CandidateId) -> Self {
        CandidateIx::new(c.index())
    }
}

impl From<CandidateIx> for CandidateId {
    #[inline(always)]
    fn from(c: CandidateIx) -> Self {
        CandidateId::new(c.index())
    }
}

/// A vector indexed by `I` only (rustc's `IndexVec`): `v[i]` takes an `I`, so an index of
/// another table does not compile. Bounds are checked as for `Vec`.
#[derive(Clone, PartialEq, Eq)]
pub struct IndexVec<I, T> {
    raw: Vec<T>,
    _index: PhantomData<fn(&I)>,
}

impl<I: Idx, T> IndexVec<I, T> {
    /// An empty vector.
    pub fn new() -> Self {
        Self::from_raw(Vec::new())
    }

    /// An empty vector with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        Self::from_raw(Vec::with_capacity(n))
    }

    /// `raw[k]` as the entry of index `k`.
    pub fn from_raw(raw: Vec<T>) -> Self {
        IndexVec {
            raw,
            _index: PhantomData,
        }
    }

    /// `n` copies of `x`.
    pub fn from_elem(x: T, n: usize) -> Self
    where
        T: Clone,
    {
        Self::from_raw(vec![x; n])
    }

    /// Appends `x`; returns its index.
    #[inline]
    pub fn push(&mut self, x: T) -> I {
        self.raw.push(x);
        I::new(self.raw.len() - 1)
    }

    /// The number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// Whether it holds no entry.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// The entry of index `i`, if there is one.
    #[inline]
    pub fn get(&self, i: I) -> Option<&T> {
        self.raw.get(i.index())
    }

    /// The entries in index order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.raw.iter()
    }

    /// The entries with their indices, in index order.
    pub fn iter_enumerated(&self) -> impl Iterator<Item = (I, &T)> + '_ {
        self.raw.iter().enumerate().map(|(k, x)| (I::new(k), x))
    }

    /// The entries as a slice indexed by position.
    pub fn raw(&self) -> &[T] {
        &self.raw
    }

    /// Sets every entry to `x`.
    pub fn fill(&mut self, x: T)
    where
        T: Clone,
    {
        self.raw.fill(x);
    }

    /// Grows or shrinks to `n` entries, new ones `x`.
    pub fn resize(&mut self, n: usize, x: T)
    where
        T: Clone,
    {
        self.raw.resize(n, x);
    }
}

impl<I: Idx, T> Default for IndexVec<I, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<I: Idx, T> FromIterator<T> for IndexVec<I, T> {
    fn from_iter<It: IntoIterator<Item = T>>(it: It) -> Self {
        Self::from_raw(it.into_iter().collect())
    }
}

impl<I, T> Extend<T> for IndexVec<I, T> {
    fn extend<It: IntoIterator<Item = T>>(&mut self, it: It) {
        self.raw.extend(it);
    }
}

impl<'a, I, T> IntoIterator for &'a IndexVec<I, T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.raw.iter()
    }
}

impl<I, T> IntoIterator for IndexVec<I, T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        self.raw.into_iter()
    }
}

impl<I: Idx, T> Index<I> for IndexVec<I, T> {
    type Output = T;

    #[inline(always)]
    fn index(&self, i: I) -> &T {
        &self.raw[i.index()]
    }
}

impl<I: Idx, T> IndexMut<I> for IndexVec<I, T> {
    #[inline(always)]
    fn index_mut(&mut self, i: I) -> &mut T {
        &mut self.raw[i.index()]
    }
}

impl<I, T: fmt::Debug> fmt::Debug for IndexVec<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.raw, f)
    }
}

/// The program points `[start, end]`, both inclusive (a value's residency, an option's freed
/// points, an interval the arena places); empty when `start > end`.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct Window {
    /// The first point.
    pub start: PointIx,
    /// The last point (inclusive).
    pub end: PointIx,
}

impl Window {
    /// The points `[start, end]`.
    #[inline(always)]
    pub const fn new(start: PointIx, end: PointIx) -> Window {
        Window { start, end }
    }

    /// Whether it holds no point (`start > end`).
    #[inline(always)]
    pub fn is_empty(self) -> bool {
        self.start > self.end
    }

    /// How many points it holds, `end − start + 1` (not empty).
    #[inline(always)]
    pub fn points(self) -> u32 {
        self.end.0 - self.start.0 + 1
    }

    /// Whether it holds point `p`.
    #[inline(always)]
    pub fn contains(self, p: PointIx) -> bool {
        self.start <= p && p <= self.end
    }

    /// Whether it holds every point of `other`.
    #[inline(always)]
    pub fn contains_window(self, other: Window) -> bool {
        self.start <= other.start && other.end <= self.end
    }

    /// Whether the two share a point.
    pub fn overlaps(self, other: Window) -> bool {
        self.start <= other.end && other.start <= self.end
    }

    /// The position of the point after it, `end + 1` (as `usize`: never overflows).
    #[inline(always)]
    pub const fn after(self) -> usize {
        self.end.index() + 1
    }

    /// The smallest window holding both.
    #[inline(always)]
    pub fn hull(self, other: Window) -> Window {
        Window::new(self.start.min(other.start), self.end.max(other.end))
    }
}
