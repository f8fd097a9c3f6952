//! SVG line charts of the Kafka sweeps (plotters, SVG backend only: no font or image
//! libraries to build; text is laid out by plotters' built-in estimate).
//!
//! Contract:
//! - Inputs: a [`Chart`]: series of `(x, y)` points, axis labels, and whether each axis is
//!   logarithmic; or result [`Row`]s and the parameter keys to pull series out of them
//!   ([`series_from_rows`]).
//! - Outputs: an SVG file ([`render_svg`]). A logarithmic axis plots `log10` of the values on
//!   a linear axis and labels ticks with the original values; points that cannot be shown on
//!   it (zero, negative, NaN) are dropped ([`plotted_points`]).
//! - Never: changes the figures (the CSV/JSONL hold them; a plot only shows them).

use std::path::Path;

use plotters::prelude::*;

use crate::error::BenchError;
use crate::report::Row;

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// Points in x order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// X axis description.
    pub x_label: String,
    /// Y axis description.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

/// The value of `key` in a `key=value key2=value2` parameter string.
pub fn param<'a>(params: &'a str, key: &str) -> Option<&'a str> {
    params
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// Series from the rows of `workload`: one per distinct value of the `group_keys` (joined
/// as `k=v` in the label), x from the numeric parameter `x_key`, y the row's median; points
/// sorted by x. Rows lacking `x_key` are skipped.
pub fn series_from_rows(
    rows: &[Row],
    workload: &str,
    x_key: &str,
    group_keys: &[&str],
) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for row in rows.iter().filter(|r| r.workload == workload) {
        let Some(x) = param(&row.params, x_key).and_then(|v| v.parse::<f64>().ok()) else {
            continue;
        };
        let label = group_keys
            .iter()
            .map(|k| format!("{k}={}", param(&row.params, k).unwrap_or("?")))
            .collect::<Vec<_>>()
            .join(" ");
        let point = (x, row.summary.median);
        match out.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push(point),
            None => out.push(Series {
                label,
                points: vec![point],
            }),
        }
    }
    for s in &mut out {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// The points as drawn: `log10` applied on logarithmic axes; points without a finite
/// image dropped.
pub fn plotted_points(points: &[(f64, f64)], log_x: bool, log_y: bool) -> Vec<(f64, f64)> {
    let axis = |v: f64, log: bool| {
        if log {
            (v > 0.0).then(|| v.log10())
        } else {
            Some(v)
        }
    };
    points
        .iter()
        .filter_map(|&(x, y)| Some((axis(x, log_x)?, axis(y, log_y)?)))
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect()
}

/// A range covering `values` with a little room (a unit around a single value).
pub fn padded_range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() || !hi.is_finite() {
        return None;
    }
    let pad = if hi > lo { (hi - lo) * 0.05 } else { 0.5 };
    Some((lo - pad, hi + pad))
}

/// A tick label for a plotted coordinate: the original value on a logarithmic axis.
pub fn tick_label(v: f64, log: bool) -> String {
    let value = if log { 10f64.powf(v) } else { v };
    crate::report::fmt_figure(value)
}

/// Draws `chart` into an SVG file at `path`.
pub fn render_svg(chart: &Chart, path: &Path) -> Result<(), BenchError> {
    let series: Vec<(String, Vec<(f64, f64)>)> = chart
        .series
        .iter()
        .map(|s| {
            (
                s.label.clone(),
                plotted_points(&s.points, chart.log_x, chart.log_y),
            )
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    let all = || series.iter().flat_map(|(_, p)| p.iter().copied());
    let (Some((x0, x1)), Some((y0, y1))) = (
        padded_range(all().map(|p| p.0)),
        padded_range(all().map(|p| p.1)),
    ) else {
        return Err(BenchError::Plot(format!(
            "{}: nothing to plot",
            chart.title
        )));
    };
    let plot_err = |e: &dyn std::fmt::Display| BenchError::Plot(format!("{}: {e}", chart.title));
    let root = SVGBackend::new(path, (820, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(&e))?;
    let mut ctx = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| plot_err(&e))?;
    let (log_x, log_y) = (chart.log_x, chart.log_y);
    let x_fmt = move |v: &f64| tick_label(*v, log_x);
    let y_fmt = move |v: &f64| tick_label(*v, log_y);
    ctx.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .draw()
        .map_err(|e| plot_err(&e))?;
    for (i, (label, points)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        ctx.draw_series(LineSeries::new(
            points.iter().copied(),
            color.stroke_width(2),
        ))
        .map_err(|e| plot_err(&e))?
        .label(label.as_str())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        ctx.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| plot_err(&e))?;
    }
    ctx.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| plot_err(&e))?;
    root.present().map_err(|e| plot_err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(workload: &str, params: &str, median: f64) -> Row {
        Row::new(
            "kafka",
            workload,
            "uring",
            params.into(),
            "MB/s",
            vec![median],
        )
    }

    #[test]
    fn param_finds_a_key_among_pairs() {
        assert_eq!(param("a=1 bb=22 c=x", "bb"), Some("22"));
        assert_eq!(param("a=1", "b"), None);
        assert_eq!(param("", "a"), None);
    }

    #[test]
    fn series_group_by_keys_and_sort_by_x() {
        let rows = vec![
            row("produce", "record_bytes=100 batch=10 depth=1", 2.0),
            row("produce", "record_bytes=100 batch=1 depth=1", 1.0),
            row("produce", "record_bytes=1000 batch=1 depth=1", 5.0),
            row("consume", "record_bytes=100 batch=1", 9.0),
            row("produce", "record_bytes=100 depth=1", 7.0),
        ];
        let s = series_from_rows(&rows, "produce", "batch", &["record_bytes", "depth"]);
        assert_eq!(
            s,
            vec![
                Series {
                    label: "record_bytes=100 depth=1".into(),
                    points: vec![(1.0, 1.0), (10.0, 2.0)],
                },
                Series {
                    label: "record_bytes=1000 depth=1".into(),
                    points: vec![(1.0, 5.0)],
                },
            ]
        );
    }

    #[test]
    fn log_axes_drop_what_they_cannot_show() {
        let p = plotted_points(
            &[(1.0, 10.0), (0.0, 5.0), (100.0, -1.0), (1000.0, 1.0)],
            true,
            true,
        );
        assert_eq!(p, vec![(0.0, 1.0), (3.0, 0.0)]);
        let p = plotted_points(&[(0.0, -1.0), (2.0, f64::NAN)], false, false);
        assert_eq!(p, vec![(0.0, -1.0)]);
    }

    #[test]
    fn ranges_are_padded_and_ticks_show_original_values() {
        assert_eq!(padded_range([1.0, 3.0].into_iter()), Some((0.9, 3.1)));
        assert_eq!(padded_range([2.0].into_iter()), Some((1.5, 2.5)));
        assert_eq!(padded_range(std::iter::empty()), None);
        assert_eq!(tick_label(3.0, true), "1000");
        assert_eq!(tick_label(2.5, false), "2.50");
    }

    #[test]
    fn renders_an_svg_with_the_series_labels() {
        let dir = std::env::temp_dir().join(format!("mk-bench-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("c.svg");
        let chart = Chart {
            title: "t".into(),
            x_label: "records per request".into(),
            y_label: "MB/s".into(),
            log_x: true,
            log_y: false,
            series: vec![Series {
                label: "record_bytes=100".into(),
                points: vec![(1.0, 3.0), (10.0, 30.0), (100.0, 200.0)],
            }],
        };
        render_svg(&chart, &path).expect("render");
        let svg = std::fs::read_to_string(&path).expect("svg");
        assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
        assert!(svg.contains("record_bytes=100"));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
