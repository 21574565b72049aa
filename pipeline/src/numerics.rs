//! The numerics check of `ebb run --inputs REF.npz`: the step's outputs against the framework's
//! own (the npz's `out_i`), output by output, with a rule that fails a wrong result and does not
//! fail f32 round-off that the step itself amplifies.
//!
//! # The rule
//! Each output `x` is compared with its reference `y` by the **normwise relative error**
//! `‖x − y‖₂ / ‖y‖₂` (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., SIAM
//! 2002, §1.2 and §7.1: one number per vector, dominated by its large components, which an
//! elementwise relative error is not). An output that is the new value of a step input — a
//! parameter or optimizer state, paired with its input as `--donate auto` pairs them — is
//! compared by its **update**: `‖(x − x₀) − (y − x₀)‖₂ / ‖y − x₀‖₂`, so a wrong gradient is not
//! hidden under the parameter's own magnitude (SGD's `w − lr·g` is close to `w` whatever `g`).
//! The pairing is `--donate auto`'s, by type, so it can pair an output that updates nothing (a
//! loss paired with a loss-scale input of its type); the update is used only where its norm is
//! below the value's, so the denominator is the smaller of `‖y‖` and `‖y − x₀‖`: a real
//! update is judged by its own size, and a loss beside a large unrelated input by its value.
//! An output passes when that error is at most the tolerance (`--tolerance`, default 2%).
//!
//! Where an output fails that test only, its **sensitivity to round-off** is measured: the step
//! runs again on the same inputs (the outputs must repeat bit for bit: Ebb's executor is
//! deterministic) and on inputs perturbed by one unit of the step's round-off (every
//! floating-point element multiplied by `1 ± ε`, signs from a fixed seed, where `ε` is the
//! machine epsilon of the least precise floating-point type the step computes in — f32's for
//! an f32 step, bf16's `2⁻⁷` for a step whose forward pass runs in bf16 even when its
//! parameters are f32: [`roundoff_epsilon`]), and the output's change under that perturbation,
//! in the same norm and relative to the same denominator, is its sensitivity `s`. The output passes when its error is at most [`SENSITIVITY_FACTOR`]` · s`.
//! This is the rule of thumb *forward error ≲ condition number × backward error* (Higham §1.5–
//! §1.6): two implementations that each compute the exact result of slightly perturbed data (a
//! backward error of a few units of round-off of the arithmetic they compute in, which is what
//! a different summation order or rounding of intermediates gives) differ by about the
//! condition number times that perturbation, and the perturbed run measures exactly that
//! product for this step at these inputs. It matters where a parameter's
//! gradient is zero in exact arithmetic (a key bias of attention: softmax ignores a constant
//! added to every logit of a row; a Mixer's token-mixing bias): the computed gradient is
//! round-off, and a sign-like optimizer update (Adam's `m̂/(√v̂ + ε)` with `√v̂ ≲ ε`, Lion's
//! `sign`, momentum on such noise) turns it into updates of the size of the learning rate that
//! no two implementations share — ONNX Runtime and eager PyTorch disagree there too. Those
//! outputs have a sensitivity of the order of their error and pass; an output computed wrongly
//! (a corrupted kernel result) has an error far above its sensitivity and fails.
//!
//! Always failures, whatever the errors: a shape that differs from the reference's, and a
//! NaN or infinity where the reference has a finite value (or the reverse, or another
//! infinity); NaN against NaN and an infinity against the same infinity are equal.

use anyhow::{bail, Result};
use ebb_ir::{DType, Graph};
use ebb_runtime::tensor::{Data, Tensor};
use serde::Serialize;

/// An output passes when its error is at most this many times its sensitivity to a perturbation
/// of the inputs by one unit of the step's round-off (see the module docs).
pub const SENSITIVITY_FACTOR: f64 = 8.0;

/// The rule, as reports state it.
pub const RULE: &str = "normwise relative error ||x - y|| / ||y|| (of the update x - x0 for \
    an output that updates input x0) <= tolerance, or <= 8 x the output's change when the \
    step reruns on inputs perturbed by one unit of round-off of the least precise float type \
    it computes in; shapes and NaN/inf positions must match";

/// What one output was compared by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Compared {
    /// Its value.
    Value,
    /// Its update: the value minus the step input it updates.
    Update,
}

/// One output against its reference.
#[derive(Clone, Debug, Serialize)]
pub struct OutputNumerics {
    /// Graph output index.
    pub index: usize,
    /// The npz member compared with (`out_3`).
    pub name: String,
    /// The output's pytree path (`new_params['wte']`; empty when the model names none).
    pub path: String,
    /// Element type of the output.
    pub dtype: String,
    /// Concrete shape of the output.
    pub shape: Vec<usize>,
    /// Shape of the reference array.
    pub reference_shape: Vec<usize>,
    /// Value or update.
    pub compared: Compared,
    /// For an update: the index of the input it updates.
    pub update_of: Option<usize>,
    /// Largest `|x − y|` over the finite elements (of the compared quantity: equal for both).
    pub max_abs_err: f64,
    /// `max |x − y|` over the largest magnitude of the reference (value or update).
    pub max_rel_err: f64,
    /// `‖x − y‖₂` over the reference's `‖·‖₂` (value or update); see the module docs.
    pub normwise_rel_err: f64,
    /// Elements with `|x − y|` above the tolerance times the reference's largest magnitude.
    pub over_tolerance: usize,
    /// Elements where one side is NaN or infinite and the other is not the same.
    pub nonfinite_mismatches: usize,
    /// The output's normwise change when the step reruns on inputs perturbed by one unit of
    /// its round-off ([`roundoff_epsilon`]), relative to the same denominator (measured only
    /// where the tolerance alone fails).
    pub sensitivity: Option<f64>,
    /// Whether the output passes the rule.
    pub passed: bool,
    /// Why it passes or fails, in words.
    pub verdict: String,
}

/// The whole comparison.
#[derive(Clone, Debug, Serialize)]
pub struct NumericsReport {
    /// The comparison rule ([`RULE`]).
    pub rule: &'static str,
    /// The tolerance on the normwise relative error.
    pub tolerance: f64,
    /// [`SENSITIVITY_FACTOR`].
    pub sensitivity_factor: f64,
    /// Every output passed.
    pub passed: bool,
    /// `name (path)` of every output that failed.
    pub failed: Vec<String>,
    /// The step reran (unperturbed and perturbed) to measure sensitivities.
    pub reran: bool,
    /// Per output, in graph output order.
    pub outputs: Vec<OutputNumerics>,
}

impl NumericsReport {
    /// The largest `max_rel_err` over the outputs (infinite where a shape or NaN/inf
    /// position differs).
    pub fn max_rel_err(&self) -> f64 {
        self.outputs
            .iter()
            .map(|o| {
                if o.shape != o.reference_shape || o.nonfinite_mismatches > 0 {
                    f64::INFINITY
                } else {
                    o.max_rel_err
                }
            })
            .fold(0f64, f64::max)
    }
}

/// For every graph output, the input it updates: the graph's donation pairs, and for the
/// other inputs the rule of `--donate auto` (an input not returned as it is pairs with the
/// first unpaired output of its type computed by an op, in argument order).
pub fn update_pairs(g: &Graph) -> Vec<Option<usize>> {
    let mut paired = g.clone();
    let mut pairs = vec![None; g.outputs().len()];
    if ebb_passes::donate::apply(&mut paired, &ebb_passes::donate::DonatePolicy::Auto).is_err() {
        return pairs;
    }
    for (i, &id) in paired.inputs().iter().enumerate() {
        if let Some(slot) = paired.aliasing_output(id).and_then(|k| pairs.get_mut(k)) {
            *slot = Some(i);
        }
    }
    pairs
}

/// Error figures of one output (see [`OutputNumerics`]). Public for the tests only.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Diff {
    max_abs: f64,
    max_ref: f64,
    diff_sq: f64,
    ref_sq: f64,
    /// Elements where one side is not finite and the two differ.
    pub nonfinite_mismatches: usize,
    /// Compared as the update of the paired input (else by value).
    pub by_update: bool,
}

impl Diff {
    /// `‖x − y‖ / ‖y‖` (0 when both are 0, infinite when only the reference is 0).
    pub fn normwise(&self) -> f64 {
        ratio(self.diff_sq.sqrt(), self.ref_sq.sqrt())
    }
}

fn ratio(num: f64, den: f64) -> f64 {
    if num == 0.0 {
        0.0
    } else if den == 0.0 {
        f64::INFINITY
    } else {
        num / den
    }
}

/// Compares `x` with `y` (both of one length), as updates of `base` when given and the
/// reference's update is smaller in norm than its value (see the module docs). Public for the
/// tests only.
#[doc(hidden)]
pub fn diff(x: &[f64], y: &[f64], base: Option<&[f64]>) -> Diff {
    let mut d = Diff::default();
    // The reference's update `y − x₀` (its value where `x₀` is absent or not finite), beside
    // its value: largest magnitude and squared norm of each.
    let (mut upd_max, mut upd_sq) = (0f64, 0f64);
    for (k, (&a, &b)) in x.iter().zip(y).enumerate() {
        if !(a.is_finite() && b.is_finite()) {
            let same = (a.is_nan() && b.is_nan()) || a == b;
            if !same {
                d.nonfinite_mismatches += 1;
            }
            continue;
        }
        let r = match base.map(|s| s[k]) {
            Some(x0) if x0.is_finite() => b - x0,
            _ => b,
        };
        let e = (a - b).abs();
        d.max_abs = d.max_abs.max(e);
        d.diff_sq += e * e;
        d.max_ref = d.max_ref.max(b.abs());
        d.ref_sq += b * b;
        upd_max = upd_max.max(r.abs());
        upd_sq += r * r;
    }
    // By update only where the reference changes the input, by less than its value's norm (an
    // output paired with an input it does not update is compared by value).
    if base.is_some() && upd_sq > 0.0 && upd_sq <= d.ref_sq {
        d.max_ref = upd_max;
        d.ref_sq = upd_sq;
        d.by_update = true;
    }
    d
}

/// `‖x − x'‖₂` over the finite elements of both.
fn distance(x: &[f64], x2: &[f64]) -> f64 {
    x.iter()
        .zip(x2)
        .filter(|(a, b)| a.is_finite() && b.is_finite())
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt()
}

/// Unit roundoff times two (machine epsilon) of a floating-point type; `None` otherwise.
fn epsilon(d: DType) -> Option<f64> {
    match d {
        DType::F32 => Some(f32::EPSILON as f64),
        DType::F64 => Some(f64::EPSILON),
        DType::BF16 => Some(2f64.powi(-7)),
        DType::F16 => Some(2f64.powi(-10)),
        _ => None,
    }
}

/// The machine epsilon of the least precise floating-point type among the values `g` computes
/// (its inputs, every op's results, nested regions included): the unit of the round-off the
/// step's own arithmetic commits. `None` when it computes no floating-point value.
pub fn roundoff_epsilon(g: &Graph) -> Option<f64> {
    let inputs = g.inputs().iter().flat_map(|&n| &g.node(n).outputs);
    let mut eps = inputs
        .chain(g.order().iter().flat_map(|&n| &g.node(n).outputs))
        .filter_map(|t| epsilon(t.dtype))
        .reduce(f64::max);
    for &n in g.order() {
        for r in &g.node(n).regions {
            eps = eps.into_iter().chain(roundoff_epsilon(r)).reduce(f64::max);
        }
    }
    eps
}

/// `inputs` with every floating-point element multiplied by `1 ± max(ε, floor)`, `ε` the machine
/// epsilon of its type (`floor` 0: one unit in the last place), rounded to the type; signs from
/// a fixed seed; other inputs unchanged.
///
/// # Errors
/// A tensor that cannot be rebuilt (not expected: the shape is the input's).
pub fn perturb_by_roundoff(inputs: &[Tensor], floor: f64, seed: u64) -> Result<Vec<Tensor>> {
    let mut state = seed;
    let mut next_sign = move || {
        // splitmix64
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        if (z ^ (z >> 31)) & 1 == 0 {
            1.0
        } else {
            -1.0
        }
    };
    inputs
        .iter()
        .map(|t| match epsilon(t.dtype()) {
            None => Ok(t.clone()),
            Some(eps) => {
                let eps = eps.max(floor);
                let v: Vec<f64> = t
                    .to_f64_vec()
                    .into_iter()
                    .map(|x| x * (1.0 + next_sign() * eps))
                    .collect();
                let data = Data::F64(v.into_iter().collect()).into_dtype(t.dtype());
                Tensor::new(t.shape().to_vec(), data).map_err(anyhow::Error::from)
            }
        })
        .collect()
}

/// Compares the step's outputs `got` (on `inputs`) with the framework's `want` by the rule of
/// the module docs; `rerun` runs the step again on the inputs it is given (called twice at
/// most, only when an output fails the tolerance alone).
///
/// # Errors
/// A reference with another number of outputs than the step (naming both counts), and a
/// failed rerun.
pub fn compare(
    g: &Graph,
    inputs: &[Tensor],
    got: &[Tensor],
    want: &[Tensor],
    tolerance: f64,
    rerun: &mut dyn FnMut(Vec<Tensor>) -> Result<Vec<Tensor>>,
) -> Result<NumericsReport> {
    if want.len() != got.len() {
        bail!(
            "the reference holds {} outputs (out_0..out_{}), the step has {}: it was made for \
             another model",
            want.len(),
            want.len().saturating_sub(1),
            got.len()
        );
    }
    let pairs = update_pairs(g);
    let mut outputs = Vec::with_capacity(got.len());
    let mut diffs = Vec::with_capacity(got.len());
    for (k, (x, y)) in got.iter().zip(want).enumerate() {
        let base = pairs[k]
            .and_then(|i| inputs.get(i))
            .filter(|t| t.shape() == x.shape());
        let same_shape = x.shape() == y.shape();
        let (xs, ys) = (x.to_f64_vec(), y.to_f64_vec());
        let d = if same_shape {
            let base = base.map(Tensor::to_f64_vec);
            diff(&xs, &ys, base.as_deref())
        } else {
            Diff::default()
        };
        let compared = if d.by_update {
            Compared::Update
        } else {
            Compared::Value
        };
        let over = if same_shape {
            let limit = tolerance * d.max_ref;
            xs.iter()
                .zip(&ys)
                .filter(|&(a, b)| a.is_finite() && b.is_finite() && (a - b).abs() > limit)
                .count()
        } else {
            x.len()
        };
        let normwise = if same_shape {
            d.normwise()
        } else {
            f64::INFINITY
        };
        let (passed, verdict) = if !same_shape {
            (
                false,
                format!(
                    "shape {:?} differs from the reference's {:?}",
                    x.shape(),
                    y.shape()
                ),
            )
        } else if d.nonfinite_mismatches > 0 {
            (
                false,
                format!(
                    "{} element(s) NaN or infinite on one side only (or opposite infinities)",
                    d.nonfinite_mismatches
                ),
            )
        } else if normwise <= tolerance {
            (true, "within the tolerance".to_string())
        } else {
            (false, String::new())
        };
        outputs.push(OutputNumerics {
            index: k,
            name: format!("out_{k}"),
            path: g.output_names.get(k).cloned().unwrap_or_default(),
            dtype: x.dtype().to_string(),
            shape: x.shape().to_vec(),
            reference_shape: y.shape().to_vec(),
            compared,
            update_of: if d.by_update { pairs[k] } else { None },
            max_abs_err: d.max_abs,
            max_rel_err: if same_shape {
                ratio(d.max_abs, d.max_ref)
            } else {
                f64::INFINITY
            },
            normwise_rel_err: normwise,
            over_tolerance: over,
            nonfinite_mismatches: d.nonfinite_mismatches,
            sensitivity: None,
            passed,
            verdict,
        });
        diffs.push(d);
    }
    // Outputs that fail the tolerance only: measure their sensitivity to round-off.
    let undecided: Vec<usize> = outputs
        .iter()
        .filter(|o| !o.passed && o.verdict.is_empty())
        .map(|o| o.index)
        .collect();
    let reran = !undecided.is_empty();
    if reran {
        let again = rerun(inputs.to_vec())?;
        let deterministic =
            again.len() == got.len() && again.iter().zip(got).all(|(a, b)| a.bits_eq(b));
        let perturbed = if deterministic {
            let floor = roundoff_epsilon(g).unwrap_or(0.0);
            Some(rerun(perturb_by_roundoff(inputs, floor, 0x5EED)?)?)
        } else {
            None
        };
        for k in undecided {
            let o = &mut outputs[k];
            let Some(p) = perturbed.as_ref().and_then(|p| p.get(k)) else {
                o.verdict = format!(
                    "normwise error {:.3e} above the tolerance, and the step does not repeat \
                     bit for bit on the same inputs, so no sensitivity is measured",
                    o.normwise_rel_err
                );
                continue;
            };
            let s = if p.shape() == got[k].shape() {
                ratio(
                    distance(&got[k].to_f64_vec(), &p.to_f64_vec()),
                    diffs[k].ref_sq.sqrt(),
                )
            } else {
                f64::INFINITY
            };
            o.sensitivity = Some(s);
            if o.normwise_rel_err <= SENSITIVITY_FACTOR * s {
                o.passed = true;
                o.verdict = format!(
                    "above the tolerance, within {SENSITIVITY_FACTOR} x its sensitivity \
                     {s:.3e} to a one-unit round-off perturbation of the inputs (round-off the \
                     step amplifies)"
                );
            } else {
                o.verdict = format!(
                    "normwise error {:.3e} above the tolerance and above {SENSITIVITY_FACTOR} x \
                     its sensitivity {s:.3e} to a one-unit round-off perturbation of the \
                     inputs",
                    o.normwise_rel_err
                );
            }
        }
    }
    let failed: Vec<String> = outputs
        .iter()
        .filter(|o| !o.passed)
        .map(|o| match o.path.as_str() {
            "" => o.name.clone(),
            p => format!("{} ({p})", o.name),
        })
        .collect();
    Ok(NumericsReport {
        rule: RULE,
        tolerance,
        sensitivity_factor: SENSITIVITY_FACTOR,
        passed: failed.is_empty(),
        failed,
        reran,
        outputs,
    })
}
