//! What the long-tail finalize benchmark (`bench/benches/finalize_longtail.rs`) and the
//! finalize lab (`plan/examples/finalize_lab.rs`) share: the budgets of its modes, a digest of
//! finalize's results (to check across builds that decisions and offsets are byte-identical),
//! and the process's CPU time.

use ebb_ir::Bindings;
use ebb_plan::finalize::{ConcretePlan, FinalizeError, FinalizeOptions, Finalizer};
use ebb_plan::format::Plan;
use std::ops::Deref;

/// How many sample lengths the benchmark's atlases are prepared from.
pub const ATLAS_SAMPLES: usize = 32;

/// The benchmark's atlas samples ([`Finalizer::prepare_atlas`]): B=8 and [`ATLAS_SAMPLES`]
/// lengths geometric over the long-tail range (32..=1024), de-duplicated, those `plan`'s
/// symbol facts admit.
pub fn atlas_samples(plan: &Plan) -> Vec<Bindings> {
    let n = ATLAS_SAMPLES;
    let mut lengths: Vec<i64> = (0..n)
        .map(|i| (32.0 * 32f64.powf(i as f64 / (n - 1) as f64)).round() as i64)
        .collect();
    lengths.dedup();
    lengths
        .iter()
        .map(|&s| crate::bs(8, s))
        .filter(|b| plan.symbols.check(b).is_ok())
        .collect()
}

/// The budget modes, in the benchmark's order (see [`Budgets::of`]).
pub const MODES: [&str; 3] = ["fixed-mid-median", "fixed-fits-all", "po-50%"];

/// What the budgets of the modes over one list of shapes depend on.
pub struct Budgets {
    /// Per shape, the scheduled peak without a budget, bytes.
    pub scheduled: Vec<i64>,
    /// Midway between the smallest feasible budget and the scheduled peak at the shape of
    /// median scheduled peak, bytes.
    pub mid_median: i64,
}

impl Budgets {
    /// The budgets of `shapes` finalized by `fin` on the device of `base` (no shape: no
    /// budget but 0).
    ///
    /// # Errors
    /// A shape that does not finalize without a budget.
    pub fn new<P: Deref<Target = Plan> + Sync>(
        fin: &Finalizer<P>,
        shapes: &[Bindings],
        base: &FinalizeOptions,
    ) -> Result<Budgets, FinalizeError> {
        let scheduled = shapes
            .iter()
            .map(|b| Ok(fin.finalize(b, base)?.peak_bytes_scheduled))
            .collect::<Result<Vec<i64>, FinalizeError>>()?;
        let mut order: Vec<usize> = (0..shapes.len()).collect();
        order.sort_by_key(|&i| scheduled[i]);
        let Some(&median) = order.get(order.len() / 2) else {
            return Ok(Budgets {
                scheduled,
                mid_median: 0,
            });
        };
        let one = FinalizeOptions {
            budget: Some(1),
            ..base.clone()
        };
        let smallest = match fin.finalize(&shapes[median], &one) {
            Err(FinalizeError::Infeasible { smallest, .. }) => smallest,
            _ => 0,
        };
        let mid_median = (smallest + scheduled[median]) / 2;
        Ok(Budgets {
            scheduled,
            mid_median,
        })
    }

    /// The budget of each shape in `mode` (bytes), given each shape's program-order peak:
    /// - `fixed-mid-median`: [`Budgets::mid_median`] for every shape (no decision at the short
    ///   shapes, decisions at the longer ones, infeasible at the longest);
    /// - `fixed-fits-all`: the largest scheduled peak, for every shape (no decision anywhere);
    /// - `po-50%`: half of each shape's own program-order peak;
    ///
    /// `None` for another mode (see [`MODES`]).
    pub fn of(&self, mode: &str, program_order: &[i64]) -> Option<Vec<i64>> {
        let n = self.scheduled.len();
        Some(match mode {
            "fixed-mid-median" => vec![self.mid_median; n],
            "fixed-fits-all" => vec![*self.scheduled.iter().max().unwrap_or(&0); n],
            "po-50%" => program_order.iter().map(|p| p / 2).collect(),
            _ => return None,
        })
    }
}

/// The digest of nothing (the FNV-1a offset basis), where [`digest`] starts.
pub const DIGEST_START: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a over `bytes`, continuing from `h`.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// `h` continued over one finalize's outcome: its variant, decisions, added time (bits),
/// planned peak, arena size and every offset; an error by its text.
pub fn digest(h: u64, r: &Result<ConcretePlan, FinalizeError>) -> u64 {
    match r {
        Err(e) => fnv(h, e.to_string().as_bytes()),
        Ok(cp) => {
            let mut h = fnv(h, &(cp.variant as u64).to_le_bytes());
            for d in &cp.decisions {
                h = fnv(
                    h,
                    format!("{}{:?},", d.candidate.index(), d.kind).as_bytes(),
                );
            }
            for x in [
                cp.overhead_us.to_bits() as i64,
                cp.peak_bytes_planned,
                cp.arena.arena_bytes,
            ] {
                h = fnv(h, &x.to_le_bytes());
            }
            for a in &cp.arena.allocations {
                h = fnv(h, &a.offset.to_le_bytes());
            }
            h
        }
    }
}

/// The process's CPU time so far, over all its threads, in ms.
pub fn process_cpu_ms() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to write.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 * 1e-6
}
