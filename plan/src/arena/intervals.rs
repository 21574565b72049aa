//! The residency intervals a layout places, in a compact form: every value's device-resident
//! pieces under the decisions (a value without decisions is one piece, `[def, last_use]`; each
//! decision cuts a gap from the point after its eviction to the point it is back), and the
//! in-place groups joined into one item each.
//!
//! Invariant: pieces are in value order, a value's pieces in point order and disjoint; a
//! group's item spans its members and is as large as the largest, and its root (first piece)
//! precedes its other members.

use super::{align, greedy::Item};
use crate::format::{Decision, Plan, Point, ValueId};
use std::collections::BTreeMap;

/// One resident piece of a value: points `[start, end]`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Piece {
    pub value: u32,
    pub start: u32,
    pub end: u32,
}

/// The pieces of every value with bytes under `decisions`, in value order, and per value `v`
/// the range `first[v]..first[v + 1]` of its pieces. `live` is each value's `(def, last_use)`
/// points (indexed like `Plan::values`).
pub(super) fn pieces(
    plan: &Plan,
    live: &[(u32, u32)],
    value_bytes: &[i64],
    decisions: &[Decision],
) -> (Vec<Piece>, Vec<u32>) {
    // (value, first point it is not resident, point it is resident again), by value then
    // point: each value's gaps in order.
    let mut gaps: Vec<(usize, Point, Point)> = decisions
        .iter()
        .filter_map(|d| {
            let c = plan.candidate(d.candidate)?;
            let back = c.back_point(d.kind).point();
            (c.value.index() < live.len()).then(|| (c.value.index(), c.evict_after.next(), back))
        })
        .collect();
    gaps.sort_unstable();
    let mut out = Vec::with_capacity(live.len() + decisions.len());
    let mut first = Vec::with_capacity(live.len() + 1);
    // The values before the next one with a gap are one piece each (or none, without bytes).
    let whole = |out: &mut Vec<Piece>, first: &mut Vec<u32>, from: usize, to: usize| {
        for (i, &(def, last_use)) in live.iter().enumerate().take(to).skip(from) {
            first.push(out.len() as u32);
            if value_bytes.get(i).is_some_and(|&b| b > 0) && def <= last_use {
                out.push(piece(i, def, last_use));
            }
        }
    };
    let mut g = 0;
    let mut next = 0;
    while g < gaps.len() {
        let i = gaps[g].0;
        whole(&mut out, &mut first, next, i);
        first.push(out.len() as u32);
        let bytes = value_bytes.get(i).copied().unwrap_or(0);
        let (def, last_use) = live[i];
        let mut start = def;
        while let Some(&(_, l, back)) = gaps.get(g).filter(|g| g.0 == i) {
            g += 1;
            if bytes <= 0 {
                continue;
            }
            let (l, back) = (l.index() as u32, back.index() as u32);
            if l > start {
                // The last resident point before the gap (`l > start`, so `l > 0`).
                out.push(piece(i, start, l - 1));
            }
            start = back;
        }
        if bytes > 0 && start <= last_use {
            out.push(piece(i, start, last_use));
        }
        next = i + 1;
    }
    whole(&mut out, &mut first, next, live.len());
    first.push(out.len() as u32);
    (out, first)
}

fn piece(value: usize, start: u32, end: u32) -> Piece {
    Piece {
        value: value as u32,
        start,
        end,
    }
}

/// One layout item per in-place group of `pieces` (union-find over [`Plan::in_place_writes`]
/// whose operand piece ends where the result's starts, with equal aligned sizes), each spanning
/// its members at the largest member's aligned size; per piece, its item; and the pairs joined.
/// `first` is [`pieces`]'s per-value range.
pub(super) fn group_items(
    plan: &Plan,
    pieces: &[Piece],
    first: &[u32],
    value_bytes: &[i64],
) -> (Vec<Item>, Vec<u32>, Vec<(ValueId, ValueId)>) {
    let need = |p: &Piece| align(value_bytes.get(p.value as usize).copied().unwrap_or(0));
    let find = |v: ValueId, pick: &dyn Fn(&Piece) -> bool| {
        let (lo, hi) = (*first.get(v.index())?, *first.get(v.index() + 1)?);
        (lo..hi).find(|&i| pick(&pieces[i as usize]))
    };
    // The pieces each in-place write joins (operand's, result's), where they qualify.
    let joins: Vec<(u32, u32, ValueId, ValueId)> = plan
        .in_place_writes
        .iter()
        .filter_map(|w| {
            let def = plan.values.get(w.result.index())?.def.index() as u32;
            let o = find(w.operand, &|p| p.end == def)?;
            let r = find(w.result, &|p| p.start == def)?;
            (need(&pieces[o as usize]) == need(&pieces[r as usize]))
                .then_some((o, r, w.operand, w.result))
        })
        .collect();
    let item = |p: &Piece| Item {
        start: p.start,
        end: p.end,
        need: need(p),
    };
    // Union-find over the joined pieces only (most plans join few or none): `parent` maps
    // each piece that is not its group's root to a lower piece of the group.
    let mut parent: BTreeMap<u32, u32> = BTreeMap::new();
    let root = |parent: &BTreeMap<u32, u32>, mut i: u32| {
        while let Some(&up) = parent.get(&i) {
            i = up;
        }
        i
    };
    let mut shared = Vec::new();
    for (o, r, operand, result) in joins {
        let (a, b) = (root(&parent, o), root(&parent, r));
        if a != b {
            parent.insert(b.max(a), a.min(b));
            shared.push((operand, result));
        }
    }
    // One item per piece but the members below a root, which extend their root's item (a
    // group's root is its lowest piece, so its item exists by then).
    let mut items: Vec<Item> = Vec::with_capacity(pieces.len());
    let mut slot: Vec<u32> = Vec::with_capacity(pieces.len());
    let mut from = 0usize;
    for &member in parent.keys() {
        let member = member as usize;
        let first = items.len() as u32;
        items.extend(pieces[from..member].iter().map(item));
        slot.extend(first..items.len() as u32);
        let s = slot[root(&parent, member as u32) as usize];
        slot.push(s);
        let (it, j) = (item(&pieces[member]), &mut items[s as usize]);
        j.start = j.start.min(it.start);
        j.end = j.end.max(it.end);
        j.need = j.need.max(it.need);
        from = member + 1;
    }
    let first = items.len() as u32;
    items.extend(pieces[from..].iter().map(item));
    slot.extend(first..items.len() as u32);
    (items, slot, shared)
}
