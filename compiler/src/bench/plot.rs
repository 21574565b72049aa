//! SVG plots of a [`BenchReport`] (`plotters`, SVG backend; text is laid out with plotters'
//! built-in estimate, so no system fonts are needed):
//! - `<stem>_peak.svg`: peak MiB against the x symbol (`S`) per method — program order, Ebb
//!   scheduled (symbolic plan), Ebb precise (`--bind`), lower bound, planned at the budget
//!   (feasible shapes), XLA total (when present);
//! - `<stem>_timeline.svg`: resident MiB over program points at one shape, before and after the
//!   budget's decisions, with the budget line;
//! - [`budget_curve`] (`ebb plan --budget-curve --plot`): a plan's arena and planned peak
//!   against the budget (with the budget line they stay under), and the added time.

use super::{BenchReport, Timeline};
use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;
use std::path::{Path, PathBuf};

const MIB: f64 = 1048576.0;

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plotting: {e}")
}

/// Writes both plots into `dir` (created if needed); returns their paths.
///
/// # Errors
/// The directory cannot be created or a file cannot be written.
pub fn write_plots(r: &BenchReport, dir: &Path, stem: &str) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut out = Vec::new();
    let peak = dir.join(format!("{stem}_peak.svg"));
    peak_vs_x(r, &peak)?;
    out.push(peak);
    if let Some(t) = &r.timeline {
        let p = dir.join(format!("{stem}_timeline.svg"));
        timeline(t, &r.fixture.clone().unwrap_or_default(), &p)?;
        out.push(p);
    }
    Ok(out)
}

/// One series: name, colour, points (x, MiB).
type Series = (String, RGBColor, Vec<(f64, f64)>);

/// Peak against the x symbol per method.
pub fn peak_vs_x(r: &BenchReport, path: &Path) -> Result<()> {
    write_svg(path, &peak_vs_x_svg(r)?)
}

/// The chart of the line plots: f64 on both axes, drawn as SVG.
type Chart<'a> = ChartContext<
    'a,
    SVGBackend<'a>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// Draws each series as a labelled line with a dot at each point.
fn draw_lines(chart: &mut Chart<'_>, series: Vec<Series>) -> Result<()> {
    for (name, color, pts) in series {
        let style = ShapeStyle::from(color).stroke_width(2);
        chart
            .draw_series(LineSeries::new(pts.clone(), style))
            .map_err(err)?
            .label(name)
            .legend(move |(a, b)| PathElement::new(vec![(a, b), (a + 20, b)], style));
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(err)?;
    }
    Ok(())
}

/// Draws the series legend (upper left, on a translucent white box) and finishes the drawing.
fn legend_and_present<'a>(
    chart: &mut Chart<'a>,
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Writes an SVG document atomically ([`ebb_pipeline::output::write_file`]): a failed write names
/// the path and leaves no truncated file.
fn write_svg(path: &Path, svg: &str) -> Result<()> {
    Ok(ebb_pipeline::output::write_file(path, svg.as_bytes())?)
}

/// The SVG of [`peak_vs_x`].
fn peak_vs_x_svg(r: &BenchReport) -> Result<String> {
    let mut buf = String::new();
    let x = |row: &super::Row| row.bind.get(&r.x_symbol).copied().unwrap_or(0) as f64;
    let m = |b: i64| b as f64 / MIB;
    let mut series: Vec<Series> = vec![
        (
            "program order".into(),
            RGBColor(120, 120, 120),
            r.rows
                .iter()
                .map(|w| (x(w), m(w.peak_bytes_program_order)))
                .collect(),
        ),
        (
            "Ebb scheduled (symbolic)".into(),
            RGBColor(31, 119, 180),
            r.rows
                .iter()
                .map(|w| (x(w), m(w.peak_bytes_scheduled)))
                .collect(),
        ),
        (
            "Ebb precise (--bind)".into(),
            RGBColor(23, 190, 207),
            r.rows
                .iter()
                .map(|w| (x(w), m(w.peak_bytes_precise)))
                .collect(),
        ),
        (
            "lower bound".into(),
            RGBColor(44, 160, 44),
            r.rows
                .iter()
                .map(|w| (x(w), m(w.lower_bound_bytes)))
                .collect(),
        ),
    ];
    if let Some(b) = &r.budget {
        series.push((
            format!("planned at budget {b}"),
            RGBColor(214, 39, 40),
            r.rows
                .iter()
                .filter_map(|w| Some((x(w), m(w.budget.as_ref()?.peak_bytes_planned?))))
                .collect(),
        ));
    }
    if r.xla.available {
        series.push((
            "XLA (memory_analysis)".into(),
            RGBColor(255, 127, 14),
            r.rows
                .iter()
                .filter_map(|w| Some((x(w), m(w.xla.as_ref()?.total_bytes))))
                .collect(),
        ));
    }
    let all = series.iter().flat_map(|s| s.2.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0f64);
    for &(a, b) in all {
        x0 = x0.min(a);
        x1 = x1.max(a);
        y1 = y1.max(b);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    let pad = ((x1 - x0) * 0.03).max(1.0);
    let title = format!(
        "{}: peak memory vs {}",
        r.fixture.as_deref().unwrap_or(&r.input),
        r.x_symbol
    );
    {
        let root = SVGBackend::with_string(&mut buf, (960, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d((x0 - pad)..(x1 + pad), 0f64..(y1 * 1.08).max(1.0))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(r.x_symbol.as_str())
            .y_desc("peak (MiB)")
            .draw()
            .map_err(err)?;
        draw_lines(&mut chart, series)?;
        legend_and_present(&mut chart, &root)?;
    }
    Ok(buf)
}

/// Resident bytes over program points, before/after decisions, with the budget line.
pub fn timeline(t: &Timeline, name: &str, path: &Path) -> Result<()> {
    write_svg(path, &timeline_svg(t, name)?)
}

/// The SVG of [`timeline`].
fn timeline_svg(t: &Timeline, name: &str) -> Result<String> {
    let mut buf = String::new();
    let shape = t
        .bind
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ");
    let n = t.before.len().max(1) as f64;
    let ymax = t
        .before
        .iter()
        .chain(t.after.iter().flatten())
        .copied()
        .chain(t.budget_bytes)
        .max()
        .unwrap_or(1) as f64
        / MIB;
    {
        let root = SVGBackend::with_string(&mut buf, (960, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{name}: resident memory over the schedule at {shape}"),
                ("sans-serif", 22),
            )
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..n, 0f64..(ymax * 1.08).max(1.0))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("program point (scheduled)")
            .y_desc("resident (MiB)")
            .draw()
            .map_err(err)?;
        let pts = |v: &[i64]| -> Vec<(f64, f64)> {
            v.iter()
                .enumerate()
                .map(|(i, &b)| (i as f64, b as f64 / MIB))
                .collect()
        };
        let grey = ShapeStyle::from(RGBColor(120, 120, 120)).stroke_width(1);
        chart
            .draw_series(LineSeries::new(pts(&t.before), grey))
            .map_err(err)?
            .label("before decisions")
            .legend(move |(a, b)| PathElement::new(vec![(a, b), (a + 20, b)], grey));
        if let Some(after) = &t.after {
            let blue = ShapeStyle::from(RGBColor(31, 119, 180)).stroke_width(2);
            chart
                .draw_series(LineSeries::new(pts(after), blue))
                .map_err(err)?
                .label("after decisions")
                .legend(move |(a, b)| PathElement::new(vec![(a, b), (a + 20, b)], blue));
        }
        if let Some(after) = &t.after {
            use super::MarkKind;
            let kinds = [
                (
                    MarkKind::Evict,
                    "evict (recompute)",
                    RGBColor(148, 103, 189),
                ),
                (MarkKind::Regenerate, "regenerate", RGBColor(44, 160, 44)),
                (MarkKind::Offload, "offload (swap)", RGBColor(255, 127, 14)),
                (
                    MarkKind::Reload,
                    "reload (prefetch)",
                    RGBColor(23, 190, 207),
                ),
            ];
            for (kind, label, color) in kinds {
                let pts: Vec<(f64, f64)> = t
                    .marks
                    .iter()
                    .filter(|m| m.kind == kind)
                    .filter_map(|m| {
                        let p = m.at.point().index();
                        after.get(p).map(|&b| (p as f64, b as f64 / MIB))
                    })
                    .collect();
                if pts.is_empty() {
                    continue;
                }
                let style = color.filled();
                chart
                    .draw_series(pts.into_iter().map(|p| TriangleMarker::new(p, 5, style)))
                    .map_err(err)?
                    .label(label)
                    .legend(move |(a, b)| TriangleMarker::new((a + 10, b), 5, style));
            }
        }
        if let Some(b) = t.budget_bytes {
            let red = ShapeStyle::from(RGBColor(214, 39, 40)).stroke_width(1);
            let y = b as f64 / MIB;
            chart
                .draw_series(DashedLineSeries::new(vec![(0.0, y), (n, y)], 8, 6, red))
                .map_err(err)?
                .label("budget")
                .legend(move |(a, b)| PathElement::new(vec![(a, b), (a + 20, b)], red));
        }
        legend_and_present(&mut chart, &root)?;
    }
    Ok(buf)
}

/// Writes the run's memory timeline as SVG: resident bytes per program point without
/// decisions and as measured with them (regeneration peaks included), and the budget line.
///
/// # Errors
/// The file cannot be written.
pub fn run_timeline(r: &ebb_pipeline::run::RunResult, path: &std::path::Path) -> Result<()> {
    let stats = &r.step.stats;
    let measured: Vec<i64> = stats
        .resident_bytes
        .iter()
        .zip(&stats.regen_peak)
        .map(|(&a, &b)| a.max(b) as i64)
        .collect();
    let t = crate::bench::Timeline {
        bind: r.report.plan.bind.clone(),
        before: r.resident_unplanned.clone(),
        after: Some(measured),
        budget_bytes: r.report.plan.budget_bytes,
        marks: crate::bench::decision_marks(
            r.plan.variant(r.step.concrete.variant).unwrap_or(&r.plan),
            &r.step.concrete.decisions,
        ),
    };
    timeline(&t, &r.graph_name, path)
}

/// Writes a budget curve ([`ebb_pipeline::BudgetCurve`]) as SVG: above, the arena and the
/// planned peak (MiB) of each fitting point against its budget, with the line arena = budget;
/// below, the modelled time the decisions add (% of the step).
///
/// # Errors
/// The file cannot be written.
pub fn budget_curve(c: &ebb_pipeline::BudgetCurve, path: &Path) -> Result<()> {
    write_svg(path, &budget_curve_svg(c)?)
}

/// The SVG of [`budget_curve`].
fn budget_curve_svg(c: &ebb_pipeline::BudgetCurve) -> Result<String> {
    let fit: Vec<_> = c.points.iter().filter(|p| p.fits).collect();
    let m = |b: i64| b as f64 / MIB;
    let x0 = c.points.first().map_or(0.0, |p| m(p.budget_bytes));
    let x1 = c
        .points
        .last()
        .map_or(1.0, |p| m(p.budget_bytes))
        .max(x0 + 1e-3);
    let pad = (x1 - x0) * 0.03;
    let step = c.step_us_modelled.max(f64::MIN_POSITIVE);
    let added: Vec<(f64, f64)> = fit
        .iter()
        .map(|p| (m(p.budget_bytes), 100.0 * p.added_us / step))
        .collect();
    let y_added = added.iter().map(|p| p.1).fold(0.0f64, f64::max).max(0.1) * 1.1;
    let series: Vec<Series> = vec![
        (
            "budget".into(),
            RGBColor(120, 120, 120),
            vec![(x0, x0), (x1, x1)],
        ),
        (
            "arena".into(),
            RGBColor(214, 39, 40),
            fit.iter()
                .map(|p| (m(p.budget_bytes), m(p.arena_bytes)))
                .collect(),
        ),
        (
            "planned peak".into(),
            RGBColor(31, 119, 180),
            fit.iter()
                .map(|p| (m(p.budget_bytes), m(p.peak_bytes_planned)))
                .collect(),
        ),
    ];
    let y0 = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.1))
        .fold(f64::MAX, f64::min)
        .min(x0);
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (960, 720)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let title = format!(
            "budget curve at {} on {}",
            c.bind
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(","),
            c.device
        );
        let root = root.titled(&title, ("sans-serif", 22)).map_err(err)?;
        let (upper, lower) = root.split_vertically(420);
        let mut chart = ChartBuilder::on(&upper)
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d((x0 - pad)..(x1 + pad), (y0 * 0.98)..(x1 * 1.02))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("budget (MiB)")
            .y_desc("bytes (MiB)")
            .draw()
            .map_err(err)?;
        draw_lines(&mut chart, series)?;
        // The legend only: the document is presented once, after the lower chart.
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        let mut chart = ChartBuilder::on(&lower)
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d((x0 - pad)..(x1 + pad), 0f64..y_added)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("budget (MiB)")
            .y_desc("added time (% of step)")
            .draw()
            .map_err(err)?;
        draw_lines(
            &mut chart,
            vec![("added time".into(), RGBColor(44, 160, 44), added)],
        )?;
        root.present().map_err(err)?;
    }
    Ok(buf)
}
