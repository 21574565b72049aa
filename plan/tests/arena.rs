//! The arena layouts (`ebb_plan::arena`): the online best-fit scan, greedy by size, the
//! anchored layout, on random intervals from a fixed LCG.

use ebb_plan::arena::anchored::{anchored_layout, anchored_layout_beside};
use ebb_plan::arena::greedy::{order, order_first, pass_in_order, Item, VARIANTS};
use ebb_plan::arena::scan::{best_fit_scan, scan_with, Placement, Pool, Unit};
use ebb_plan::arena::{align, check_layout, live_max, Allocation, Arena, ALIGN};
use ebb_plan::format::{Point, ValueId};
use ebb_plan::index::{IndexVec, IntervalIx, PointIx, Window};
use std::sync::atomic::AtomicBool;

/// The greedy's view of an allocation: its points and its aligned size.
fn item(a: &Allocation) -> Item {
    Item {
        window: Window::new(a.start.into(), a.end.into()),
        need: align(a.bytes),
    }
}

/// The arena of `items` placed at `offsets` (bytes) in `top` bytes, item `i` as value `i`,
/// for [`check_layout`] in tests.
fn layout_of(
    items: &IndexVec<IntervalIx, Item>,
    offsets: &IndexVec<IntervalIx, i64>,
    top: i64,
) -> Arena {
    Arena {
        arena_bytes: top,
        fragmentation: 1.0,
        allocations: items
            .iter()
            .zip(offsets)
            .enumerate()
            .map(|(i, (it, &offset))| Allocation {
                value: ValueId::new(i),
                start: it.window.start.into(),
                end: it.window.end.into(),
                offset,
                bytes: it.need,
            })
            .collect(),
        shared: Vec::new(),
    }
}

/// `n` random intervals for tests: each starts before point `starts`, lasts up to `longest`
/// more points and needs 1 to `sizes` times [`ALIGN`] bytes.
fn random_items(
    next: &mut impl FnMut(u64) -> u64,
    n: usize,
    starts: u64,
    longest: u64,
    sizes: u64,
) -> IndexVec<IntervalIx, Item> {
    (0..n)
        .map(|_| {
            let start = next(starts) as usize;
            let end = start + next(longest) as usize;
            Item {
                window: Window::new(PointIx::new(start), PointIx::new(end)),
                need: (1 + next(sizes) as i64) * ALIGN,
            }
        })
        .collect()
}

/// Random intervals (a fixed LCG): the scan's (with and without slabs) and the anchored
/// layouts (every order, few to many anchors) are valid and never below the largest live
/// bytes at a point.
#[test]
fn both_layouts_are_valid_and_hold_the_live_bytes() {
    let mut next = ebb_testkit::lcg(0x2545_f491_4f6c_dd1d);
    for _ in 0..50 {
        let n = 1 + next(60) as usize;
        let allocs: Vec<Allocation> = (0..n)
            .map(|i| {
                let start = next(40) as usize;
                Allocation {
                    value: ValueId::new(i),
                    start: Point::new(start),
                    end: Point::new(start + next(15) as usize),
                    offset: 0,
                    bytes: 1 + next(5000) as i64,
                }
            })
            .collect();
        let live_max = (0..60)
            .map(|p| {
                allocs
                    .iter()
                    .filter(|a| a.start.index() <= p && p <= a.end.index())
                    .map(|a| align(a.bytes))
                    .sum::<i64>()
            })
            .max()
            .unwrap_or(0);
        let items: IndexVec<IntervalIx, Item> = allocs.iter().map(item).collect();
        assert_eq!(ebb_plan::arena::live_max(&items), live_max);
        // The scan with every interval in the free list (peak 0), every one in slabs (a
        // huge peak), and a mix (small = 2 KiB).
        let mut layouts = Vec::new();
        for peak in [0, 2048 * 4096, i64::MAX] {
            let never = AtomicBool::new(false);
            let (scan, placement) =
                best_fit_scan(&items, peak, &never, |placement| placement.clone()).unwrap();
            let (offsets, top) = (placement.iter().map(|&c| scan.offset(c)), scan.top);
            let mut a = allocs.clone();
            for (x, o) in a.iter_mut().zip(offsets) {
                x.offset = o;
            }
            layouts.push((a, top));
        }
        for order in 0..VARIANTS.len() {
            let never = AtomicBool::new(false);
            let small = [0, 64 * ALIGN][order % 2];
            let (offsets, top) = anchored_layout(
                items.raw(),
                small,
                1 + order * 3,
                order,
                i64::MAX,
                None,
                &never,
            )
            .unwrap();
            let mut b = allocs.clone();
            for (x, o) in b.iter_mut().zip(offsets) {
                x.offset = o;
            }
            layouts.push((b, top));
        }
        for (allocations, top) in layouts {
            assert!(top >= live_max);
            let arena = Arena {
                arena_bytes: top,
                fragmentation: 1.0,
                allocations,
                shared: Vec::new(),
            };
            check_layout(&arena).unwrap();
        }
    }
}

/// On random intervals (a fixed LCG) a pass of every variant gives a valid layout, never
/// below the largest live bytes.
#[test]
fn every_variant_gives_a_valid_layout() {
    let mut next = ebb_testkit::lcg(0x5eed_0f1a_7000_u64);
    for (n, longest) in [(1, 3), (50, 10), (400, 300)] {
        let items = random_items(&mut next, n, 200, longest, 40);
        let all: Vec<u32> = (0..n as u32).collect();
        for &(r, by_end, first_fit) in &VARIANTS {
            let order = order(items.raw(), &all, r, by_end);
            let never = AtomicBool::new(false);
            let (placed, top) =
                pass_in_order(items.raw(), &order, 0, first_fit, i64::MAX, &never).unwrap();
            assert!(top >= live_max(&items));
            let mut offsets = vec![0i64; n];
            for (&i, &o) in order.iter().zip(&placed) {
                offsets[i as usize] = o;
            }
            let offsets: ebb_plan::index::IndexVec<IntervalIx, i64> = offsets.into_iter().collect();
            check_layout(&layout_of(&items, &offsets, top)).unwrap();
        }
    }
}

/// On random intervals with many equal sizes (a fixed LCG), for every variant: `order` is a
/// sort by descending `need · points^r`, ties by start (or by end, latest first), then by
/// position, and `order_first` puts the same `k` first in the same order, the others after
/// them (a permutation of the intervals given, a subset in scrambled order).
#[test]
fn the_first_k_are_ordered_as_the_full_sort() {
    let mut next = ebb_testkit::lcg(0x0dde_f125_u64);
    for (n, longest) in [(1, 3), (40, 10), (700, 200)] {
        let items = random_items(&mut next, n, 100, longest, 4);
        // Every other interval, in a scrambled order.
        let mut rest: Vec<u32> = (0..n as u32).step_by(2).collect();
        for i in (1..rest.len()).rev() {
            rest.swap(i, next(i as u64 + 1) as usize);
        }
        for &(r, by_end, _) in &VARIANTS {
            let key = |i: u32| {
                let it = items.raw()[i as usize];
                let tie = if by_end {
                    u32::MAX - it.window.end.raw()
                } else {
                    it.window.start.raw()
                };
                (
                    it.need as f64 * f64::from(it.window.points()).powf(r),
                    tie,
                    i,
                )
            };
            let mut want = rest.clone();
            want.sort_by(|&a, &b| {
                let (ka, kb) = (key(a), key(b));
                kb.0.total_cmp(&ka.0)
                    .then(ka.1.cmp(&kb.1))
                    .then(ka.2.cmp(&kb.2))
            });
            assert_eq!(order(items.raw(), &rest, r, by_end), want);
            for k in [
                0,
                1,
                rest.len() / 3,
                rest.len().saturating_sub(1),
                rest.len(),
                rest.len() + 5,
            ] {
                let got = order_first(items.raw(), &rest, r, by_end, k);
                let k = k.min(rest.len());
                assert_eq!(got[..k], want[..k], "k = {k}, r = {r}, by_end = {by_end}");
                let (mut a, mut b) = (got.clone(), rest.clone());
                a.sort_unstable();
                b.sort_unstable();
                assert_eq!(a, b, "a permutation of the intervals given");
            }
        }
    }
}

/// On random intervals (a fixed LCG), with few and many anchors and with slabs, every
/// layout is valid and never below the largest live bytes, and the same when given the slabs
/// of the best-fit scan, made first or beside the large intervals
/// (`anchored_layout_beside`).
#[test]
fn anchored_layouts_are_valid() {
    let mut next = ebb_testkit::lcg(0xa11c_0fed_u64);
    for (n, longest) in [(1, 3), (30, 8), (300, 60), (2000, 400)] {
        for anchors in [0, 1, 7, 64, 4096] {
            for small in [0, 10 * ALIGN] {
                let items = random_items(&mut next, n, 200, longest, 40);
                let never = AtomicBool::new(false);
                let (offsets, top) = anchored_layout(
                    items.raw(),
                    small,
                    anchors,
                    anchors % 8,
                    i64::MAX,
                    None,
                    &never,
                )
                .unwrap();
                assert!(top >= live_max(&items));
                // A layout to beat above its top is the same layout; at its top, abandoned.
                let variant = anchors % 8;
                let layout = |beat| {
                    anchored_layout(items.raw(), small, anchors, variant, beat, None, &never)
                        .unwrap()
                };
                assert_eq!(layout(top + 1), (offsets.clone(), top));
                let (none, over) = layout(top);
                assert!(none.is_empty() && over >= top, "n {n} anchors {anchors}");
                // Given the slabs the best-fit scan made (its small intervals are those of at
                // most `small` bytes under this planned peak), the same layout.
                let peak = small * 4096;
                let (scan, above) = best_fit_scan(&items, peak, &never, |placement| {
                    placement
                        .iter()
                        .map(|&p| match p {
                            Placement::Slab(above) => above,
                            Placement::Large(_) => 0,
                        })
                        .collect::<Vec<i64>>()
                })
                .unwrap();
                let slabs = Some((above.as_slice(), scan.slab_height()));
                assert_eq!(
                    anchored_layout(
                        items.raw(),
                        small,
                        anchors,
                        variant,
                        i64::MAX,
                        slabs,
                        &never
                    ),
                    Some((offsets.clone(), top)),
                    "n {n} anchors {anchors} small {small}"
                );
                // Its large intervals laid out beside the slabs (the one-order layout), the
                // same layout, and what the slabs' side computes handed back.
                let beside =
                    anchored_layout_beside(items.raw(), small, anchors, variant, &never, || {
                        Some((above.clone(), scan.slab_height(), n))
                    });
                assert_eq!(
                    beside,
                    Some(((offsets.clone(), top), n)),
                    "beside: n {n} anchors {anchors} small {small}"
                );
                let offsets: IndexVec<IntervalIx, i64> = offsets.into_iter().collect();
                check_layout(&layout_of(&items, &offsets, top))
                    .unwrap_or_else(|e| panic!("n {n} anchors {anchors}: {e}"));
            }
        }
    }
}

/// Greedy by size's pass places every interval where the textbook pass does (random
/// intervals, a fixed LCG, every order): at the lowest gap (first fit) or the smallest gap
/// (best fit) between the placed intervals overlapping it in time, sorted by offset, else above
/// them.
#[test]
fn the_pass_places_as_the_textbook_greedy() {
    let mut next = ebb_testkit::lcg(0x9e37_79b9_7f4a_7c15);
    let never = AtomicBool::new(false);
    for _ in 0..40 {
        let n = 1 + next(90) as usize;
        let items = random_items(&mut next, n, 60, 25, 12);
        let all: Vec<u32> = (0..n as u32).collect();
        for &(r, by_end, first_fit) in &VARIANTS {
            let ranked = order(items.raw(), &all, r, by_end);
            let (got, top) =
                pass_in_order(items.raw(), &ranked, 0, first_fit, i64::MAX, &never).unwrap();
            let mut want: Vec<i64> = Vec::new();
            for (k, &i) in ranked.iter().enumerate() {
                let it = items.raw()[i as usize];
                let mut placed: Vec<(i64, i64)> = (0..k)
                    .filter(|&j| items.raw()[ranked[j] as usize].window.overlaps(it.window))
                    .map(|j| (want[j], want[j] + items.raw()[ranked[j] as usize].need))
                    .collect();
                placed.sort_unstable();
                let (mut free_from, mut best) = (0i64, None::<(i64, i64)>);
                for (o, e) in placed {
                    let gap = o - free_from;
                    if gap >= it.need && best.is_none_or(|(g, _)| gap < g) {
                        best = Some((gap, free_from));
                        if first_fit {
                            break;
                        }
                    }
                    free_from = free_from.max(e);
                }
                want.push(best.map_or(free_from, |(_, o)| o));
            }
            assert_eq!(got, want, "n {n} variant ({r}, {by_end}, {first_fit})");
            let end = |k: usize| want[k] + items.raw()[ranked[k] as usize].need;
            assert_eq!(top, (0..n).map(end).max().unwrap_or(0));
        }
    }
}

/// The pool places the same whether it counts in 32 or 64 bits (random intervals, a fixed
/// LCG), and its layouts hold: no two intervals resident at one point share a byte.
#[test]
fn both_unit_widths_place_alike() {
    let mut next = ebb_testkit::lcg(0x0bad_5eed_1234_5678);
    for _ in 0..50 {
        let n = 1 + next(80) as usize;
        let items = random_items(&mut next, n, 50, 12, 40);
        let never = AtomicBool::new(false);
        let (narrow, p32) = scan_with(items.raw(), Pool::<u32>::default(), &never).unwrap();
        let (wide, p64) = scan_with(items.raw(), Pool::<i64>::default(), &never).unwrap();
        assert_eq!(narrow, wide);
        assert_eq!(p32.top.bytes(), p64.top.bytes());
        check_layout(&layout_of(&items, &narrow, p32.top.bytes())).unwrap();
    }
}
