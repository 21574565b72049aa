//! A GPU executor's outputs against the reference executor's (`ebb run --check` with
//! `--executor cuda|simt`): per output, the relative error (max |x − y| over max |y| of the
//! finite reference values, [`Tensor::rel_err`]) and where the largest difference is, and
//! the tolerance that output is held to.
//!
//! The tolerance of an output is `--device-tolerance` or, where the step computes in a
//! coarser floating-point type anywhere ([`coarsest_float`]: `bf16` or `f16` values, in
//! fusion and loop regions too), two units in the last place of that type relative to the
//! output's largest element: `2·ε` with ε = 2⁻⁷ for `bf16`, 2⁻¹⁰ for `f16`. The rounding of
//! an `f32` sum to `bf16` lands one unit apart when the sums differ in their last bits, as
//! cuBLAS's summation order makes them, and every output computed from that value inherits
//! the step's coarsest precision. Steps computing in `f32`/`f64` only are held to
//! `--device-tolerance`.
//!
//! An output over that tolerance still passes when it is no less accurate than the
//! reference executor's own output, within [`ACCURACY_FACTOR`]: against a run of the
//! reference executor whose `f32` contractions accumulate in `f64`
//! ([`ebb_runtime::exec::with_f64_dot`]), the device's relative error is at most
//! [`ACCURACY_FACTOR`] times the reference's own, plus the tolerance. Summing a contraction
//! in another order (cuBLAS's blocking, against the CPU's) moves a result by about as much as
//! the reference's own rounding does; where an output is a sum that cancels (the gradient of
//! an attention key bias, which softmax ignores), that rounding is a large part of the value,
//! and only a comparison with a more accurate run tells it from a wrong kernel.

use ebb_ir::{DType, Graph};
use ebb_runtime::Tensor;
use serde::{Deserialize, Serialize};

/// How many times the reference executor's own error against the `f64`-accumulated run a
/// device output's error against that run may be (see the module docs).
pub const ACCURACY_FACTOR: f64 = 4.0;

/// One output that is not bit-identical to the reference executor's.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OutputError {
    /// Output position (graph output order, as `--save-outputs`' `out_i`).
    pub index: usize,
    /// The output's name in the graph (empty when it has none).
    pub name: String,
    /// Element type and shape, e.g. `f32[2,16,128]`.
    pub ty: String,
    /// Relative error (max |x − y| over max |y|); infinity for a NaN or infinity on one
    /// side only, or a shape mismatch.
    pub rel_err: f64,
    /// The tolerance this output is held to (see the module docs).
    pub tolerance: f64,
    /// Flat (row-major) index of the largest difference, with the device's and the
    /// reference's values there; the first element with a NaN or infinity on one side
    /// only, where there is one (`None` for a shape mismatch).
    pub worst: Option<(usize, f64, f64)>,
    /// Where the `f64`-accumulated reference ran: the device output's relative error against
    /// it, and the reference executor's (see the module docs).
    pub against_f64_dot: Option<(f64, f64)>,
}

impl OutputError {
    /// Whether the output is within its tolerance, or no less accurate than the reference
    /// executor's (see the module docs).
    pub fn passed(&self) -> bool {
        self.rel_err <= self.tolerance
            || self.against_f64_dot.is_some_and(|(device, reference)| {
                device <= ACCURACY_FACTOR * reference + self.tolerance
            })
    }

    /// Records the errors of the device's output `got` and the reference's `want` against
    /// `exact`, the `f64`-accumulated reference run's.
    pub fn weigh(&mut self, got: &Tensor, want: &Tensor, exact: &Tensor) {
        self.against_f64_dot = Some((got.rel_err(exact), want.rel_err(exact)));
    }
}

/// The coarsest floating-point type among the values of `g` and of its ops' regions
/// (`bf16` before `f16`), if it is coarser than `f32`.
pub fn coarsest_float(g: &Graph) -> Option<DType> {
    let mut found = None;
    for &n in g.order() {
        let node = g.node(n);
        for t in &node.outputs {
            match t.dtype {
                DType::BF16 => return Some(DType::BF16),
                DType::F16 => found = Some(DType::F16),
                _ => {}
            }
        }
        for r in &node.regions {
            match coarsest_float(r) {
                Some(DType::BF16) => return Some(DType::BF16),
                Some(d) => found = Some(d),
                None => {}
            }
        }
    }
    found
}

/// The tolerance of the outputs of a step whose coarsest floating-point type is `dtype`
/// (see the module docs).
pub fn tolerance_of(dtype: DType, device_tolerance: f64) -> f64 {
    let ulps = match dtype {
        DType::BF16 => 2.0 * 2f64.powi(-7),
        DType::F16 => 2.0 * 2f64.powi(-10),
        _ => 0.0,
    };
    device_tolerance.max(ulps)
}

/// The outputs of `got` (device) that differ from `want` (reference), in output order, for
/// a step whose coarsest floating-point type is `coarsest` ([`coarsest_float`]).
pub fn compare(
    got: &[Tensor],
    want: &[Tensor],
    names: &[String],
    coarsest: Option<DType>,
    device_tolerance: f64,
) -> Vec<OutputError> {
    let tolerance = tolerance_of(coarsest.unwrap_or(DType::F32), device_tolerance);
    let mut out = Vec::new();
    for (k, (x, y)) in got.iter().zip(want).enumerate() {
        if x.bits_eq(y) {
            continue;
        }
        let dims: Vec<String> = y.shape().iter().map(|d| d.to_string()).collect();
        let worst = (x.shape() == y.shape())
            .then(|| {
                let (a, b) = (x.to_f64_vec(), y.to_f64_vec());
                let mut best: Option<(usize, f64, f64)> = None;
                let mut diff = -1f64;
                for (i, (&p, &q)) in a.iter().zip(&b).enumerate() {
                    let d = (p - q).abs();
                    if d.is_finite() && d > diff {
                        diff = d;
                        best = Some((i, p, q));
                    } else if !d.is_finite() && !(p.is_nan() && q.is_nan() || p == q) {
                        // A NaN or infinity on one side: the first such element.
                        return Some((i, p, q));
                    }
                }
                best
            })
            .flatten();
        out.push(OutputError {
            index: k,
            name: names.get(k).cloned().unwrap_or_default(),
            ty: format!("{}[{}]", y.dtype(), dims.join(",")),
            rel_err: x.rel_err(y),
            tolerance,
            worst,
            against_f64_dot: None,
        });
    }
    out
}

/// One line per output over its tolerance, for an error message.
pub fn describe(errors: &[OutputError]) -> String {
    let lines: Vec<String> = errors
        .iter()
        .filter(|e| !e.passed())
        .map(|e| {
            let name = if e.name.is_empty() {
                String::new()
            } else {
                format!(" ({})", e.name)
            };
            let at = match e.worst {
                Some((i, x, y)) => format!("; largest difference at element {i}: {x:e} vs {y:e}"),
                None => String::new(),
            };
            let weighed = match e.against_f64_dot {
                Some((d, r)) => format!(
                    "; against f64-accumulated contractions: {d:.2e}, the reference's own \
                     {r:.2e} (more than {ACCURACY_FACTOR}x)"
                ),
                None => String::new(),
            };
            format!(
                "output {}{name} {}: relative error {:.2e} > {:.1e}{at}{weighed}",
                e.index, e.ty, e.rel_err, e.tolerance
            )
        })
        .collect();
    lines.join("\n")
}
