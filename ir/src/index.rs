//! Typed indices of the memory plan, so that the index spaces of [`crate::plan`] do not mix:
//!
//! * [`OpPos`]: a position in the graph's program order ([`Graph::order`](crate::Graph::order),
//!   inputs included) — what [`PlanValue::node`](crate::plan::PlanValue::node),
//!   [`Candidate::recompute`](crate::plan::Candidate::recompute) and the entries of
//!   [`Plan::schedule`](crate::plan::Plan::schedule) hold;
//! * [`Point`]: a position in the schedule, i.e. a program point (`schedule[p]` runs at `p`);
//! * [`ProgPoint`]: a point and a side ([`Side::Before`] or [`Side::After`] its op), ordered as
//!   regalloc2's `ProgPoint`: `before(p) < after(p) < before(p + 1)`. Evictions happen after a
//!   point, regenerations and reloads before one;
//! * [`ValueId`]: an index into [`Plan::values`](crate::plan::Plan::values);
//! * [`CandidateId`]: an index into [`Plan::candidates`](crate::plan::Plan::candidates).
//!
//! [`OpPos`], [`Point`], [`ValueId`] and [`CandidateId`] serialize as the bare number
//! (`#[serde(transparent)]`) and print as it (`Display` and `Debug`), so the plan format,
//! messages and snapshots are the same as with `usize` (`Default` is index 0). Convert with
//! `new` and [`index`](Point::index) (to index a `Vec`); there is no `From<usize>`, so every
//! conversion is visible. They are `usize` inside, so `new` never fails.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! index_type {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(
            Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(usize);

        impl $name {
            #[doc = concat!("The ", $what, " with index `i`.")]
            pub const fn new(i: usize) -> Self {
                $name(i)
            }

            #[doc = concat!("The index of this ", $what, ", to index a `Vec`.")]
            pub const fn index(self) -> usize {
                self.0
            }

            #[doc = concat!("Every ", $what, " below `n`, ascending (`0..n`).")]
            pub fn all(
                n: usize,
            ) -> impl DoubleEndedIterator<Item = $name> + ExactSizeIterator + Clone {
                (0..n).map($name)
            }

            #[doc = concat!(
                "The ", $what, "s from `self` (inclusive) to `end` (exclusive), ascending."
            )]
            pub fn upto(
                self,
                end: $name,
            ) -> impl DoubleEndedIterator<Item = $name> + ExactSizeIterator + Clone {
                (self.0..end.0).map($name)
            }
        }

        impl fmt::Display for $name {
            /// The bare number.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            /// The bare number, as for `usize` (so `Debug` output of the types holding it is
            /// what it was before the index had a type).
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }
    };
}

index_type!(
    /// A program-order position of an op: an index into the graph's program order
    /// ([`Graph::order`](crate::Graph::order), inputs included) at the time the plan was made.
    OpPos,
    "position"
);

index_type!(
    /// A program point: a position in the schedule
    /// ([`Plan::schedule`](crate::plan::Plan::schedule)), point `p` being the execution of
    /// `schedule[p]`.
    Point,
    "point"
);

index_type!(
    /// A value id: an index into [`Plan::values`](crate::plan::Plan::values) (every result of
    /// every op, sorted by producer position and result index).
    ValueId,
    "value id"
);

index_type!(
    /// A candidate id: an index into [`Plan::candidates`](crate::plan::Plan::candidates).
    CandidateId,
    "candidate id"
);

impl Point {
    /// The next point, `p + 1`.
    pub const fn next(self) -> Point {
        Point(self.0 + 1)
    }

    /// The previous point, `p - 1`; `None` at point 0.
    pub const fn prev(self) -> Option<Point> {
        match self.0.checked_sub(1) {
            Some(p) => Some(Point(p)),
            None => None,
        }
    }
}

/// The side of a point's op at which an event happens.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Side {
    /// Before the op runs (regenerations, reloads).
    Before,
    /// After the op has run and its values whose last use it is are freed (evictions).
    After,
}

/// A [`Point`] and a [`Side`]: the moment before or after the op at a point, ordered as
/// regalloc2's `ProgPoint` (`before(p) < after(p) < before(p + 1)`). Encoded as
/// `2 * point + side`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProgPoint(usize);

impl ProgPoint {
    /// `side` of the op at `point`.
    pub const fn new(point: Point, side: Side) -> ProgPoint {
        ProgPoint(2 * point.0 + side as usize)
    }

    /// Before the op at `point` runs.
    pub const fn before(point: Point) -> ProgPoint {
        ProgPoint::new(point, Side::Before)
    }

    /// After the op at `point` has run.
    pub const fn after(point: Point) -> ProgPoint {
        ProgPoint::new(point, Side::After)
    }

    /// The point.
    pub const fn point(self) -> Point {
        Point(self.0 / 2)
    }

    /// The side.
    pub const fn side(self) -> Side {
        if self.0 & 1 == 0 {
            Side::Before
        } else {
            Side::After
        }
    }

    /// The next program point: `after(p)` for `before(p)`, `before(p + 1)` for `after(p)`.
    pub const fn next(self) -> ProgPoint {
        ProgPoint(self.0 + 1)
    }

    /// The encoding `2 * point + side`: an index into a `Vec` with two entries per point
    /// (before and after each op), in program-point order.
    pub const fn index(self) -> usize {
        self.0
    }

    /// The previous program point; `None` for `before(0)`.
    pub const fn prev(self) -> Option<ProgPoint> {
        match self.0.checked_sub(1) {
            Some(x) => Some(ProgPoint(x)),
            None => None,
        }
    }
}

impl fmt::Display for ProgPoint {
    /// `before 3` / `after 3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.side() {
            Side::Before => write!(f, "before {}", self.point()),
            Side::After => write!(f, "after {}", self.point()),
        }
    }
}

impl fmt::Debug for ProgPoint {
    /// As [`Display`](fmt::Display).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
