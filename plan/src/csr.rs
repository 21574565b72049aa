//! [`Csr`]: rows of entries in compressed sparse row form (one offsets vector and one entries
//! vector), the one implementation of the grouped tables of finalize, the arena and the cost
//! tables (the values each point produces, each candidate's options and recompute points, the
//! intervals at each segment-tree node, the intervals starting at each point).
//!
//! Invariant: `offsets` is non-decreasing, starts at 0 and ends at `entries.len()`; row `r`
//! is `entries[offsets[r]..offsets[r + 1]]`.

use crate::index::Idx;
use std::marker::PhantomData;
use std::ops::Range;

/// Rows indexed by `R`, each a slice of entries `E`, stored contiguously: row `r` is
/// `entries[offsets[r]..offsets[r + 1]]` (offsets are `u32`: fewer than 2³² entries).
#[derive(Clone, Debug)]
pub struct Csr<R, E> {
    offsets: Vec<u32>,
    entries: Vec<E>,
    _row: PhantomData<fn(&R)>,
}

impl<R: Idx, E> Default for Csr<R, E> {
    /// No rows.
    fn default() -> Self {
        Csr::with_capacity(0, 0)
    }
}

impl<R: Idx, E> Csr<R, E> {
    /// No rows yet, with room for `rows` rows and `entries` entries; fill with
    /// [`Csr::push`] and [`Csr::end_row`].
    pub fn with_capacity(rows: usize, entries: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        Csr {
            offsets,
            entries: Vec::with_capacity(entries),
            _row: PhantomData,
        }
    }

    /// Appends `e` to the row being filled (the one after the last ended).
    #[inline]
    pub fn push(&mut self, e: E) {
        self.entries.push(e);
    }

    /// Ends the row being filled; the next entries go to the next row.
    #[inline]
    pub fn end_row(&mut self) {
        self.offsets.push(self.entries.len() as u32);
    }

    /// Rows `0..rows` from `(row, entry)` pairs (every row below `rows`), each row's entries
    /// in the order of the pairs: a counting sort, O(rows + pairs). `pairs` is read twice.
    pub fn from_pairs<I>(rows: usize, pairs: impl Fn() -> I) -> Self
    where
        I: Iterator<Item = (R, E)>,
        E: Copy + Default,
    {
        let mut offsets = vec![0u32; rows + 1];
        for (r, _) in pairs() {
            offsets[r.index() + 1] += 1;
        }
        for r in 0..rows {
            offsets[r + 1] += offsets[r];
        }
        let mut fill = offsets.clone();
        let mut entries = vec![E::default(); offsets[rows] as usize];
        for (r, e) in pairs() {
            let slot = &mut fill[r.index()];
            entries[*slot as usize] = e;
            *slot += 1;
        }
        Csr {
            offsets,
            entries,
            _row: PhantomData,
        }
    }

    /// The indices of `items` grouped by `key` (rows `0..=` the largest key), each row in index
    /// order: a stable counting sort, O(items + rows).
    pub fn group<T>(items: &[T], key: impl Fn(&T) -> R) -> Self
    where
        E: Idx + Default,
    {
        let rows = items.iter().map(|t| key(t).index() + 1).max().unwrap_or(0);
        Csr::from_pairs(rows, || {
            items.iter().enumerate().map(|(i, t)| (key(t), E::new(i)))
        })
    }

    /// How many rows.
    pub fn rows(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The positions in [`Csr::entries`] of row `r` (empty past the last row).
    #[inline(always)]
    pub fn row_range(&self, r: R) -> Range<usize> {
        match (self.offsets.get(r.index()), self.offsets.get(r.index() + 1)) {
            (Some(&lo), Some(&hi)) => lo as usize..hi as usize,
            _ => 0..0,
        }
    }

    /// Row `r`'s entries (empty past the last row).
    #[inline(always)]
    pub fn row(&self, r: R) -> &[E] {
        &self.entries[self.row_range(r)]
    }

    /// Row `r`'s entries, to reorder them.
    pub fn row_mut(&mut self, r: R) -> &mut [E] {
        let range = self.row_range(r);
        &mut self.entries[range]
    }

    /// Every entry, in row order.
    #[inline(always)]
    pub fn entries(&self) -> &[E] {
        &self.entries
    }

    /// Every entry, in row order, without the rows.
    pub fn into_entries(self) -> Vec<E> {
        self.entries
    }
}
