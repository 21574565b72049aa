//! The executor's record of device memory: which value holds which bytes, and the peak.
//!
//! Every value's bytes are claimed when the value comes into device memory (its op's
//! results, a reload, a recompute, its temporaries in scratch) and released when it leaves
//! (freed after its last use, evicted); an op's transient bytes are charged while it runs.
//! The measured peak is the largest total of held and charged bytes, the quantity the plan
//! checker proves and the plan promises (`ebb_passes::plan::check`).
//!
//! Invariant: two held ranges never share a byte: a claim overlapping a held range is an
//! error naming both values (a reload or a result landing on bytes still live).

use super::{DevRange, Space};
use std::collections::BTreeMap;

/// Held ranges and the peak; see the module docs.
#[derive(Debug, Default)]
pub struct Tracker {
    /// Held ranges: (space, offset) → (end, value).
    live: BTreeMap<(Space, u64), (u64, u32)>,
    /// Bytes held.
    pub held: u64,
    charge: u64,
    /// Largest `held + charge` so far.
    pub peak: u64,
    /// Program point where `peak` was first reached.
    pub peak_point: usize,
    point: usize,
    /// Highest byte held per space (arena, scratch).
    pub high_water: [u64; 2],
    /// Largest `held + charge` during each program point.
    pub per_point: Vec<u64>,
}

impl Tracker {
    fn bump(&mut self) {
        let now = self.held + self.charge;
        if let Some(x) = self.per_point.get_mut(self.point) {
            *x = (*x).max(now);
        }
        if now > self.peak {
            self.peak = now;
            self.peak_point = self.point;
        }
    }

    /// Starts program point `p` (the previous op's charge ends).
    pub fn point(&mut self, p: usize) {
        self.point = p;
        self.charge = 0;
        if self.per_point.len() <= p {
            self.per_point.resize(p + 1, 0);
        }
        self.per_point[p] = self.held;
    }

    /// `value` comes to hold `r`.
    ///
    /// # Errors
    /// The range overlaps one held by another value.
    pub fn claim(&mut self, r: DevRange, value: u32) -> Result<(), String> {
        if r.bytes == 0 {
            return Ok(());
        }
        let (s, start, end) = (r.ptr.space, r.ptr.offset, r.ptr.offset + r.bytes);
        let before = self
            .live
            .range((s, 0)..(s, end))
            .next_back()
            .map(|(&(_, o), &(e, v))| (o, e, v));
        if let Some((o, e, v)) = before.filter(|&(_, e, _)| e > start) {
            return Err(format!(
                "value {value} lands on bytes [{start}, {end}) of the {s:?} while value {v} \
                 still holds [{o}, {e})"
            ));
        }
        self.live.insert((s, start), (end, value));
        self.held += r.bytes;
        let hw = &mut self.high_water[usize::from(s == Space::Scratch)];
        *hw = (*hw).max(end);
        self.bump();
        Ok(())
    }

    /// `r` is released (a no-op for a range not held).
    pub fn release(&mut self, r: DevRange) {
        if let Some((end, _)) = self.live.remove(&(r.ptr.space, r.ptr.offset)) {
            self.held -= end - r.ptr.offset;
        }
    }

    /// The op running now holds `bytes` transient bytes besides the held ones.
    pub fn charge(&mut self, bytes: u64) {
        self.charge = bytes;
        self.bump();
    }
}
