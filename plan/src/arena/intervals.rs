//! The residency intervals a layout places, in a compact form: every value's device-resident
//! pieces under the decisions (a value without decisions is one piece, `[def, last_use]`; each
//! decision cuts a gap from the point after its eviction to the point it is back), and the
//! in-place groups joined into one item each.
//!
//! Invariant: pieces are in value order, a value's pieces in point order and disjoint; a
//! group's interval spans its members and is as large as the largest, and its root (first
//! piece) precedes its other members.

use super::{align, greedy::Item};
use crate::csr::Csr;
use crate::format::{Decision, Plan, ValueId};
use crate::index::{IndexVec, IntervalIx, PieceIx, PointIx, ValueIx, Window};

/// One resident piece of a value: the points of `window`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Piece {
    pub value: ValueIx,
    pub window: Window,
}

/// The resident pieces of every value, in value order: a piece's [`PieceIx`] is its position.
pub(super) struct Pieces {
    by_value: Csr<ValueIx, Piece>,
}

impl Pieces {
    /// Piece `i`.
    #[inline]
    pub fn get(&self, i: PieceIx) -> &Piece {
        &self.by_value.entries()[i.index()]
    }

    /// Every piece, in value order (a piece's position is its [`PieceIx`]).
    pub fn all(&self) -> &[Piece] {
        self.by_value.entries()
    }

    /// The pieces of value `v`, in point order (none for a value the plan does not have).
    pub fn of_value(&self, v: ValueIx) -> impl Iterator<Item = PieceIx> {
        self.by_value.row_range(v).map(PieceIx::new)
    }
}

/// The pieces of every value with bytes under `decisions`. `live` is each value's
/// `[def, last_use]` points.
pub(super) fn pieces(
    plan: &Plan,
    live: &IndexVec<ValueIx, Window>,
    value_bytes: &[i64],
    decisions: &[Decision],
) -> Pieces {
    // (value, first point it is not resident, point it is resident again), by value then
    // point: each value's gaps in order.
    let mut gaps: Vec<(ValueIx, PointIx, PointIx)> = decisions
        .iter()
        .filter_map(|d| {
            let c = plan.candidate(d.candidate)?;
            let back = c.back_point(d.kind).point();
            (c.value.index() < live.len())
                .then(|| (c.value.into(), c.evict_after.next().into(), back.into()))
        })
        .collect();
    gaps.sort_unstable();
    let mut by_value = Csr::with_capacity(live.len(), live.len() + decisions.len());
    let has_bytes = |v: ValueIx| value_bytes.get(v.index()).is_some_and(|&b| b > 0);
    // The values before the next one with a gap are one piece each (or none, without bytes).
    let whole = |by_value: &mut Csr<ValueIx, Piece>, from: usize, to: usize| {
        for value in (from..to.min(live.len())).map(ValueIx::new) {
            let window = live[value];
            if has_bytes(value) && !window.is_empty() {
                by_value.push(Piece { value, window });
            }
            by_value.end_row();
        }
    };
    let mut g = 0;
    let mut next = 0;
    while g < gaps.len() {
        let value = gaps[g].0;
        whole(&mut by_value, next, value.index());
        let bytes = has_bytes(value);
        let resident = live[value];
        let mut start = resident.start;
        while let Some(&(_, l, back)) = gaps.get(g).filter(|g| g.0 == value) {
            g += 1;
            if !bytes {
                continue;
            }
            if l > start {
                // The last resident point before the gap (`l > start`, so `l > 0`).
                let window = Window::new(start, PointIx::new(l.index() - 1));
                by_value.push(Piece { value, window });
            }
            start = back;
        }
        if bytes && start <= resident.end {
            let window = Window::new(start, resident.end);
            by_value.push(Piece { value, window });
        }
        by_value.end_row();
        next = value.index() + 1;
    }
    whole(&mut by_value, next, live.len());
    Pieces { by_value }
}

/// A root's entry in [`group_items`]'s union-find.
const NO_PARENT: u32 = u32::MAX;

/// The intervals a layout places ([`group_items`]).
pub(super) struct Intervals {
    /// One per in-place group of pieces (most are one piece).
    pub items: IndexVec<IntervalIx, Item>,
    /// Per piece, its interval.
    pub interval_of: IndexVec<PieceIx, IntervalIx>,
    /// The in-place writes joined: `(operand, result)`.
    pub shared: Vec<(ValueId, ValueId)>,
}

/// One layout interval per in-place group of `pieces` (union-find over
/// [`Plan::in_place_writes`] whose operand piece ends where the result's starts, with equal
/// aligned sizes), each spanning its members at the largest member's aligned size.
pub(super) fn group_items(plan: &Plan, pieces: &Pieces, value_bytes: &[i64]) -> Intervals {
    let need = |p: &Piece| align(value_bytes.get(p.value.index()).copied().unwrap_or(0));
    let find = |v: ValueId, pick: &dyn Fn(&Piece) -> bool| {
        pieces.of_value(v.into()).find(|&i| pick(pieces.get(i)))
    };
    // The pieces each in-place write joins (operand's, result's), where they qualify.
    let joins: Vec<(PieceIx, PieceIx, ValueId, ValueId)> = plan
        .in_place_writes
        .iter()
        .filter_map(|w| {
            let def = PointIx::from(plan.values.get(w.result.index())?.def);
            let o = find(w.operand, &|p| p.window.end == def)?;
            let r = find(w.result, &|p| p.window.start == def)?;
            (need(pieces.get(o)) == need(pieces.get(r))).then_some((o, r, w.operand, w.result))
        })
        .collect();
    let item = |p: &Piece| Item {
        window: p.window,
        need: need(p),
    };
    // Union-find over the joined pieces: `parent[i]` is a lower piece of piece `i`'s group, or
    // [`NO_PARENT`] for a group's root (the other pieces are its members). Finding a root
    // splits the path it walks (each piece on it then points at its grandparent, still a lower
    // piece of the group), so a chain of k in-place writes costs O(k log k), not O(k²).
    let mut parent: Vec<u32> = vec![NO_PARENT; pieces.all().len()];
    let root = |parent: &mut [u32], mut i: PieceIx| {
        while parent[i.index()] != NO_PARENT {
            let up = parent[i.index()];
            let grand = parent[up as usize];
            if grand != NO_PARENT {
                parent[i.index()] = grand;
            }
            i = PieceIx::from_raw(up);
        }
        i
    };
    let mut shared = Vec::with_capacity(joins.len());
    for (o, r, operand, result) in joins {
        let (a, b) = (root(&mut parent, o), root(&mut parent, r));
        if a != b {
            // (A root has no parent yet, and once a member it is never a root again.)
            parent[b.max(a).index()] = a.min(b).raw();
            shared.push((operand, result));
        }
    }
    // One interval per piece but the members below a root, which extend their root's interval
    // (a member's parent is a lower piece of its group, whose interval exists by then).
    let all = pieces.all();
    let mut items: IndexVec<IntervalIx, Item> = IndexVec::with_capacity(all.len());
    let mut interval_of: IndexVec<PieceIx, IntervalIx> = IndexVec::with_capacity(all.len());
    for (p, &up) in all.iter().zip(&parent) {
        if up == NO_PARENT {
            interval_of.push(IntervalIx::new(items.len()));
            items.push(item(p));
        } else {
            let joined = interval_of[PieceIx::from_raw(up)];
            interval_of.push(joined);
            let (m, j) = (item(p), &mut items[joined]);
            j.window = j.window.hull(m.window);
            j.need = j.need.max(m.need);
        }
    }
    Intervals {
        items,
        interval_of,
        shared,
    }
}
