//! `ebb plan --budget-curve`: the budget curve ([`ebb_pipeline::BudgetCurve`]) as a table.

use anyhow::Result;
use ebb_pipeline as pipeline;
use std::fmt::Write as _;

/// The budget curve as a table (`ebb plan --budget-curve`).
pub(crate) fn curve_text(bind: &str, c: &pipeline::BudgetCurve) -> Result<String> {
    use ebb_compiler::units::{bytes, percent};
    let mib = |x: i64| format!("{:.2}", x as f64 / 1048576.0);
    let mut out = String::new();
    writeln!(
        out,
        "bind: {bind}; device {}: step {:.1} us modelled",
        c.device, c.step_us_modelled
    )?;
    writeln!(
        out,
        "peak, program order {}; peak, scheduled {} (the best schedule variant, no decisions)",
        bytes(c.peak_bytes_program_order),
        bytes(c.peak_bytes_scheduled)
    )?;
    writeln!(
        out,
        "smallest feasible budget {} (planned peak); an arena fits from {}; no decisions from {} \
         (the arena without decisions)",
        bytes(c.smallest_feasible_bytes),
        c.smallest_fitting_bytes
            .map_or("no budget here".into(), bytes),
        bytes(c.no_decisions_arena_bytes)
    )?;
    writeln!(
        out,
        "{:>11} {:>8} {:>11} {:>11} {:>10} {:>7} {:>9} {:>5}  decided at (MiB)",
        "budget MiB",
        "of sched",
        "planned MiB",
        "arena MiB",
        "added us",
        "added",
        "recompute",
        "swap"
    )?;
    for p in &c.points {
        if !p.fits {
            writeln!(
                out,
                "{:>11} {:>8}   no arena fits (finalize's own: {})",
                mib(p.budget_bytes),
                percent(p.budget_fraction_of_scheduled, 1.0),
                if p.own.feasible {
                    format!("arena {} MiB > the budget", mib(p.own.arena_bytes))
                } else {
                    "infeasible".into()
                }
            )?;
            continue;
        }
        let at = match p.decided_at_bytes {
            Some(x) if x == p.budget_bytes => "this budget".to_string(),
            Some(x) => format!("{} *", mib(x)),
            None => "no budget *".to_string(),
        };
        writeln!(
            out,
            "{:>11} {:>8} {:>11} {:>11} {:>10.1} {:>7} {:>9} {:>5}  {at}",
            mib(p.budget_bytes),
            percent(p.budget_fraction_of_scheduled, 1.0),
            mib(p.peak_bytes_planned),
            mib(p.arena_bytes),
            p.added_us,
            percent(p.added_us, c.step_us_modelled),
            p.recompute_decisions,
            p.swap_decisions
        )?;
    }
    writeln!(
        out,
        "* {} of {} points run decisions found at a smaller budget (or none): {}",
        c.points_from_smaller_budget,
        c.points.len(),
        c.rule
    )?;
    writeln!(out, "curve: {:.0} ms", c.curve_ms)?;
    Ok(out)
}
