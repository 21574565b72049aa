//! What holds the memory at one program point: the resident bytes split by value class, and
//! the largest values resident there — the answer to "why is the peak this high".

use super::{Liveness, ValueClass};
use ebb_ir::dim::DimError;
use ebb_ir::{Bindings, Graph, Point};
use serde::Serialize;

/// Resident bytes at one point by value class (bytes at the bindings).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Breakdown {
    /// The point.
    pub point: Point,
    /// Kind of the op at the point (empty for a graph without ops).
    pub op: String,
    /// Inputs that are not donated (resident throughout).
    pub inputs: i64,
    /// Donated inputs not yet past their last read.
    pub donated: i64,
    /// Graph outputs already computed.
    pub outputs: i64,
    /// Intermediates (activations, gradients, temporaries).
    pub intermediates: i64,
    /// Transient memory of the op at the point: its regions' peak (a `while` body, a
    /// branch), a fusion's tile buffers (never negative).
    pub transient: i64,
    /// Bytes the op at the point writes into operands that die there (an in-place write):
    /// counted both as the operand and as the result above, held once, so subtracted in
    /// [`Breakdown::total`].
    pub in_place: i64,
    /// The largest resident values (at most [`Breakdown::LARGEST`]), largest first: the
    /// producer's op kind and result index, with its source location when the graph has one
    /// (`multiply#0 @ models.py:219:10`), and bytes.
    pub largest: Vec<(String, i64)>,
}

impl Breakdown {
    /// How many values [`Breakdown::largest`] lists at most.
    pub const LARGEST: usize = 12;

    /// The resident bytes at the point: the classes and the transient bytes, less the bytes
    /// an in-place write shares between an operand and a result.
    pub fn total(&self) -> i64 {
        self.inputs + self.donated + self.outputs + self.intermediates + self.transient
            - self.in_place
    }
}

impl Liveness {
    /// The breakdown (see [`Breakdown`]) at the peak under bindings `b`, the first point where
    /// the resident bytes are largest; `g` names the producers. The sizes are evaluated once.
    ///
    /// # Errors
    /// As [`Liveness::resident_bytes`].
    pub fn peak_breakdown(&self, g: &Graph, b: &Bindings) -> Result<Breakdown, DimError> {
        let vals = self.sizes.eval(b)?;
        let (_, p) = super::argmax(&self.resident_from_sizes(&vals)?);
        self.breakdown_from_sizes(g, b, &vals, Point::new(p))
    }

    /// The resident bytes at `p` under bindings `b` by class (see [`Breakdown`]); `g` names
    /// the producers. Linear in the number of ranges.
    ///
    /// # Errors
    /// As [`Liveness::resident_bytes`].
    pub fn breakdown(&self, g: &Graph, b: &Bindings, p: Point) -> Result<Breakdown, DimError> {
        self.breakdown_from_sizes(g, b, &self.sizes.eval(b)?, p)
    }

    /// [`Liveness::breakdown`] from the sizes already evaluated (indexed by size id).
    fn breakdown_from_sizes(
        &self,
        g: &Graph,
        b: &Bindings,
        vals: &[i64],
        p: Point,
    ) -> Result<Breakdown, DimError> {
        let mut out = Breakdown {
            point: p,
            ..Breakdown::default()
        };
        let mut all = Vec::new();
        for (r, &sid) in self.ranges.iter().zip(&self.size_of) {
            if !(r.def <= p && p <= r.last_use) {
                continue;
            }
            let x = vals[sid as usize];
            let slot = match r.class {
                ValueClass::Input => &mut out.inputs,
                ValueClass::Donated => &mut out.donated,
                ValueClass::Output => &mut out.outputs,
                ValueClass::Intermediate => &mut out.intermediates,
            };
            *slot = slot.checked_add(x).ok_or(DimError::Overflow)?;
            if g.contains(r.value.node) {
                all.push((x, r.value));
            }
        }
        let mut in_place = None;
        for (t, &sid) in self.transients.iter().zip(&self.transient_size) {
            if t.point == p {
                // The transient charge is the op's own transient bytes less what it writes in
                // place: reported apart, both non-negative.
                let writes = in_place.get_or_insert_with(|| ebb_ir::op::in_place_writes(g));
                let shared = match writes.get(&t.node).filter(|_| g.contains(t.node)) {
                    Some(w) => ebb_ir::op::in_place_bytes(g, t.node, w)?.eval(b)?,
                    None => 0,
                };
                out.transient += vals[sid as usize] + shared;
                out.in_place += shared;
            }
        }
        if let Some(r) = self
            .ranges
            .iter()
            .find(|r| r.def == p && !matches!(r.class, ValueClass::Input | ValueClass::Donated))
        {
            out.op = g.node(r.value.node).kind().name().to_string();
        }
        all.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.node.index().cmp(&b.1.node.index())));
        out.largest = all
            .into_iter()
            .take(Breakdown::LARGEST)
            .map(|(x, v)| (describe(g, v), x))
            .collect();
        Ok(out)
    }
}

/// `kind#output`, with the part of the op's location after the last `/` (JAX puts the source
/// line there: `jit(step)/jvp()/mul @ models.py:219:10` gives `mul @ models.py:219:10`).
fn describe(g: &Graph, v: ebb_ir::ValueRef) -> String {
    let node = g.node(v.node);
    let name = format!("{}#{}", node.kind().name(), v.output);
    match &node.loc {
        Some(l) => {
            let short = l.rsplit('/').next().unwrap_or(l).trim_matches('"');
            format!("{name} ({short})")
        }
        None => name,
    }
}
