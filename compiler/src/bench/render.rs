//! Markdown rendering of a [`BenchReport`]: a header, one table row per shape (MiB = 2^20 bytes),
//! and the worst cases. Columns of absent parts (budget, XLA, exact) are left out.

use super::{BenchReport, Row};
use std::fmt::Write;

/// Bytes as MiB with one decimal.
pub fn mib(bytes: i64) -> String {
    format!("{:.1}", bytes as f64 / 1048576.0)
}

/// A step time in ms with three significant digits below 10 ms (sub-millisecond steps stay
/// readable), one decimal above.
fn step_ms(t: f64) -> String {
    if t < 1.0 {
        format!("{t:.3}")
    } else if t < 10.0 {
        format!("{t:.2}")
    } else {
        format!("{t:.1}")
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

/// `n` empty cells.
fn dashes(n: usize) -> impl Iterator<Item = String> {
    std::iter::repeat_n("–".to_string(), n)
}

/// The report as markdown (see the module docs).
pub fn markdown(r: &BenchReport) -> String {
    let mut s = header(r);
    s.push('\n');
    let parts = Parts::of(r);
    let head = parts.head(r);
    let _ = writeln!(s, "| {} |", head.join(" | "));
    let _ = writeln!(s, "|{}", head.iter().map(|_| "---|").collect::<String>());
    for row in &r.rows {
        let _ = writeln!(s, "| {} |", parts.cells(row).join(" | "));
    }
    let _ = writeln!(s, "\nWorst cases: {}.", worst_cases(r, &parts).join("; "));
    s.push('\n');
    s
}

/// The title and the paragraph before the table: what was compiled, the budget and its
/// pricing, and how XLA was measured.
fn header(r: &BenchReport) -> String {
    let mut s = String::new();
    let name = r.fixture.as_deref().unwrap_or(&r.input);
    let _ = writeln!(s, "### `{name}`\n");
    let compile = r
        .compile_ms_symbolic
        .map_or("n/a (plan file)".to_string(), |ms| format!("{ms:.0} ms"));
    let _ = writeln!(
        s,
        "Symbolic plan: compiled once in {compile}, {} schedule variant(s), {} candidates. \
         Precise plans (`--bind`): {:.0} ms in total over {} shapes. Sizes in MiB.",
        r.plan_variants, r.candidates, r.summary.compile_ms_precise_total, r.summary.shapes
    );
    let _ = writeln!(
        s,
        "Ebb plans {} fusion group(s) and {} donated input(s).",
        r.fusion_groups, r.donated_inputs
    );
    if let Some(b) = &r.budget {
        let kinds: Vec<&str> = r
            .kinds
            .iter()
            .map(|k| match k {
                ebb_plan::format::DecisionKind::Recompute => "recompute",
                ebb_plan::format::DecisionKind::Swap => "swap",
            })
            .collect();
        let _ = writeln!(
            s,
            "Budget: {b}; decisions ({}) priced on `{}` ({}): \"added\" is the modelled time \
             they add (recompute + exposed transfers) over the modelled step; \"arena/planned\" is the \
             arena the decisions' offsets lay out over their planned peak (the fragmentation).",
            kinds.join(", "),
            r.device.name,
            r.device.source
        );
    }
    match (&r.xla.requested, &r.xla.note, &r.xla.jax_version) {
        (true, Some(note), _) => {
            let _ = writeln!(s, "XLA: not available ({note}).");
        }
        (true, None, Some(v)) => {
            let _ = writeln!(
                s,
                "XLA: `compiled.memory_analysis()` of JAX {v} on CPU; \"donated\": every argument \
                 donated (`donate_argnums`), the peer of Ebb with `--donate auto`{}; step ms: \
                 median of the timed XLA:CPU executions.",
                if r.donated_inputs > 0 {
                    " (as here)"
                } else {
                    " (here Ebb donates nothing: compare with the undonated column)"
                }
            );
        }
        _ => {}
    }
    s
}

/// Which optional parts of the report have columns.
struct Parts {
    budget: bool,
    xla: bool,
    xla_time: bool,
    exact: bool,
    exec: bool,
}

impl Parts {
    fn of(r: &BenchReport) -> Parts {
        Parts {
            budget: r.budget.is_some(),
            xla: r.xla.available,
            xla_time: r
                .rows
                .iter()
                .any(|row| row.xla.as_ref().is_some_and(|x| x.step_ms.is_some())),
            exact: r.exact_time_limit_s.is_some(),
            exec: r.rows.iter().any(|row| row.exec.is_some()),
        }
    }

    /// The column heads: the symbols, the memory columns, then each part's.
    fn head(&self, r: &BenchReport) -> Vec<String> {
        let mut head: Vec<String> = r
            .rows
            .first()
            .map_or_else(Vec::new, |row| row.bind.keys().cloned().collect());
        let mut add = |names: &[&str]| head.extend(names.iter().map(|n| n.to_string()));
        add(&[
            "program order",
            "Ebb scheduled",
            "Ebb precise",
            "sym/precise",
            "lower bound",
            "compile precise ms",
        ]);
        if self.xla {
            add(&[
                "XLA total",
                "Ebb/XLA",
                "XLA donated",
                "Ebb/XLA donated",
                "XLA compile ms",
            ]);
            if self.xla_time {
                add(&["XLA step ms"]);
            }
        }
        if self.budget {
            add(&[
                "budget",
                "planned",
                "arena/planned",
                "recompute",
                "swap",
                "added",
                "finalize µs",
            ]);
        }
        if self.exec {
            add(&["Ebb step ms", "Ebb/XLA step", "kernels compiled (warm-up)"]);
        }
        if self.exact {
            add(&["ILP", "optimum overhead", "greedy gap"]);
        }
        head
    }

    /// The cells of one row, in [`Parts::head`]'s order.
    fn cells(&self, row: &Row) -> Vec<String> {
        let mut c: Vec<String> = row.bind.values().map(|v| v.to_string()).collect();
        c.push(mib(row.peak_bytes_program_order));
        c.push(mib(row.peak_bytes_scheduled));
        c.push(mib(row.peak_bytes_precise));
        c.push(format!("{:.4}", row.symbolic_over_precise));
        c.push(mib(row.lower_bound_bytes));
        c.push(format!("{:.0}", row.compile_ms_precise));
        if self.xla {
            self.xla_cells(row, &mut c);
        }
        if self.budget {
            budget_cells(row, &mut c);
        }
        if self.exec {
            match &row.exec {
                Some(e) => {
                    c.push(step_ms(e.step_ms));
                    c.push(
                        e.ebb_over_xla_step
                            .map_or("–".into(), |r| format!("{r:.2}")),
                    );
                    c.push(e.kernels_compiled_warmup.to_string());
                }
                None => c.extend(dashes(3)),
            }
        }
        if self.exact {
            match &row.exact {
                Some(e) => {
                    c.push(e.status.clone());
                    c.push(e.optimum_overhead_fraction.map_or("–".into(), pct));
                    c.push(e.greedy_gap.map_or("–".into(), pct));
                }
                None => c.extend(dashes(3)),
            }
        }
        c
    }

    /// The XLA columns of `row`.
    fn xla_cells(&self, row: &Row, c: &mut Vec<String>) {
        match &row.xla {
            Some(x) => {
                c.push(mib(x.total_bytes));
                c.push(format!("{:.2}", x.ebb_over_xla));
                c.push(x.total_bytes_donated.map_or("–".into(), mib));
                c.push(
                    x.ebb_over_xla_donated
                        .map_or("–".into(), |r| format!("{r:.2}")),
                );
                c.push(format!("{:.0}", x.compile_ms));
                if self.xla_time {
                    c.push(x.step_ms.map_or("–".into(), step_ms));
                }
            }
            None => c.extend(dashes(if self.xla_time { 6 } else { 5 })),
        }
    }
}

/// The budget columns of `row`.
fn budget_cells(row: &Row, c: &mut Vec<String>) {
    match &row.budget {
        Some(b) if b.feasible => {
            c.push(mib(b.budget_bytes));
            c.push(b.peak_bytes_planned.map_or("–".into(), mib));
            c.push(match (b.arena_bytes, b.peak_bytes_planned) {
                (Some(a), Some(p)) => format!("{:.4}", a as f64 / p.max(1) as f64),
                _ => "–".into(),
            });
            c.push(pct(b.recompute_fraction));
            c.push(mib(b.swap_bytes));
            c.push(pct(b.added_fraction));
            c.push(format!("{:.0}", b.finalize_us));
        }
        Some(b) => {
            c.push(mib(b.budget_bytes));
            c.push(format!(
                "infeasible (≥ {})",
                b.smallest_feasible_bytes.map_or("?".into(), mib)
            ));
            c.extend(dashes(5));
        }
        None => c.extend(dashes(7)),
    }
}

/// The worst case of each figure over the rows.
fn worst_cases(r: &BenchReport, parts: &Parts) -> Vec<String> {
    let sm = &r.summary;
    let mut worst = vec![format!("sym/precise ≤ {:.4}", sm.max_symbolic_over_precise)];
    if let (Some(lo), Some(hi)) = (sm.min_ebb_over_xla, sm.max_ebb_over_xla) {
        worst.push(format!("Ebb/XLA in [{lo:.2}, {hi:.2}]"));
    }
    if parts.budget {
        worst.push(format!(
            "budget infeasible at {} of {} shapes",
            sm.budget_infeasible, sm.shapes
        ));
        worst.push(format!(
            "recompute ≤ {} of step FLOPs",
            sm.max_recompute_fraction.map_or("–".into(), pct)
        ));
        worst.push(format!(
            "added step time ≤ {}",
            sm.max_added_fraction.map_or("–".into(), pct)
        ));
        worst.push(format!(
            "arena/planned ≤ {}",
            sm.max_arena_over_planned
                .map_or("–".into(), |r| format!("{r:.4}"))
        ));
    }
    if let Some(g) = sm.max_greedy_gap {
        worst.push(format!("greedy gap to the optimum ≤ {}", pct(g)));
    }
    worst
}
