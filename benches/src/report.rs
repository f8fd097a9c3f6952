//! Result rows of an experiment and their three renderings: CSV, JSON Lines, Markdown.
//!
//! Contract:
//! - Input: [`Row`]s, each one measured figure (median, min, max of its repetitions) with its
//!   parameters, the ratios to baselines measured in the same run, side counts (operations,
//!   syncs) and the load average when it was measured.
//! - Outputs: strings ([`to_csv`], [`to_jsonl`], [`to_markdown`]); [`write_files`] puts the
//!   first two (and the Markdown) under a directory.
//! - Never: rounds the stored figures (only the Markdown is rounded, for reading), or reorders
//!   rows.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::stats::Summary;

/// A figure divided by a baseline of the same run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ratio {
    /// What the baseline is (`fio seq write`).
    pub name: String,
    /// The baseline's value, in `unit`.
    pub value: f64,
    /// The baseline's unit (the row's unit, so `ratio` is dimensionless).
    pub unit: String,
    /// The row's median divided by `value`.
    pub ratio: f64,
}

impl Ratio {
    /// The ratio of `median` to a baseline `value` (NaN when the baseline is not positive).
    pub fn of(median: f64, name: &str, value: f64, unit: &str) -> Ratio {
        Ratio {
            name: name.to_owned(),
            value,
            unit: unit.to_owned(),
            ratio: if value > 0.0 {
                median / value
            } else {
                f64::NAN
            },
        }
    }
}

/// One measured figure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// The experiment (`log`).
    pub experiment: String,
    /// The workload (`append`, `durable_append`, `read`, `fio_seq_write`, …).
    pub workload: String,
    /// `uring`, `portable`, or `fio` for a baseline.
    pub backend: String,
    /// The parameters, `key=value` separated by spaces.
    pub params: String,
    /// Unit of the figures (`MB/s` is decimal: 10^6 bytes per second).
    pub unit: String,
    /// Median, min and max over the repetitions.
    pub summary: Summary,
    /// Every repetition's value, in run order.
    pub reps: Vec<f64>,
    /// Ratios to baselines of the same run (the first is the primary one).
    pub baselines: Vec<Ratio>,
    /// This row's median divided by the portable backend's for the same workload and
    /// parameters (`None` for baselines, or when portable was not run).
    pub vs_portable: Option<f64>,
    /// Operations (appends, fetches) in the median repetition.
    pub ops: Option<u64>,
    /// Syncs the partition log issued in the median repetition (`PartitionLog::sync_count`).
    pub syncs: Option<u64>,
    /// `fdatasync`s the backend counted in the median repetition (a cross-check of `syncs`).
    pub backend_syncs: Option<u64>,
    /// `ops / syncs` in the median repetition.
    pub ops_per_sync: Option<f64>,
    /// The 1-minute load average read at the end of the row's last repetition.
    pub load_avg_1m: Option<f64>,
}

impl Row {
    /// A row of `reps` with no ratios, side figures or load average: the summary of `reps`,
    /// or NaN figures with a count of 0 when `reps` is empty or holds a NaN.
    pub fn new(
        experiment: &str,
        workload: &str,
        backend: &str,
        params: String,
        unit: &str,
        reps: Vec<f64>,
    ) -> Row {
        let summary = Summary::of(&reps).unwrap_or(Summary {
            median: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
            count: 0,
        });
        Row {
            experiment: experiment.to_owned(),
            workload: workload.to_owned(),
            backend: backend.to_owned(),
            params,
            unit: unit.to_owned(),
            summary,
            reps,
            baselines: Vec::new(),
            vs_portable: None,
            ops: None,
            syncs: None,
            backend_syncs: None,
            ops_per_sync: None,
            load_avg_1m: None,
        }
    }
}

const CSV_HEADER: &str = "experiment,workload,backend,params,unit,median,min,max,count,\
baseline,baseline_value,ratio,baseline2,baseline2_value,ratio2,vs_portable,ops,syncs,\
backend_syncs,ops_per_sync,load_avg_1m";

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

fn opt<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(String::new, |v| v.to_string())
}

/// The rows as CSV with a header line.
pub fn to_csv(rows: &[Row]) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for row in rows {
        let baseline = |i: usize| -> [String; 3] {
            row.baselines.get(i).map_or_else(
                || [String::new(), String::new(), String::new()],
                |b| [csv_field(&b.name), b.value.to_string(), b.ratio.to_string()],
            )
        };
        let mut fields = vec![
            csv_field(&row.experiment),
            csv_field(&row.workload),
            csv_field(&row.backend),
            csv_field(&row.params),
            csv_field(&row.unit),
            row.summary.median.to_string(),
            row.summary.min.to_string(),
            row.summary.max.to_string(),
            row.summary.count.to_string(),
        ];
        fields.extend(baseline(0));
        fields.extend(baseline(1));
        fields.extend([
            opt(row.vs_portable),
            opt(row.ops),
            opt(row.syncs),
            opt(row.backend_syncs),
            opt(row.ops_per_sync),
            opt(row.load_avg_1m),
        ]);
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

/// The rows as JSON Lines (one object per row).
pub fn to_jsonl(rows: &[Row]) -> Result<String, serde_json::Error> {
    let mut out = String::new();
    for row in rows {
        out.push_str(&serde_json::to_string(row)?);
        out.push('\n');
    }
    Ok(out)
}

/// A figure rounded for reading: three significant digits or whole numbers.
pub fn fmt_figure(value: f64) -> String {
    let magnitude = value.abs();
    if !value.is_finite() {
        "–".to_owned()
    } else if magnitude >= 100.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else if magnitude >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

/// The rows as a Markdown table.
pub fn to_markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| workload | backend | params | median | min – max | unit | ratio to baseline | vs portable | syncs (ops/sync) | load 1m |\n\
         |---|---|---|---:|---:|---|---|---:|---|---:|\n",
    );
    for row in rows {
        let ratios: Vec<String> = row
            .baselines
            .iter()
            .map(|b| format!("{} × {}", fmt_figure(b.ratio), b.name))
            .collect();
        let syncs = match (row.syncs, row.ops_per_sync) {
            (Some(s), Some(per)) => format!("{s} ({})", fmt_figure(per)),
            (Some(s), None) => s.to_string(),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} – {} | {} | {} | {} | {} | {} |",
            row.workload,
            row.backend,
            row.params,
            fmt_figure(row.summary.median),
            fmt_figure(row.summary.min),
            fmt_figure(row.summary.max),
            row.unit,
            ratios.join("; "),
            row.vs_portable.map_or_else(String::new, fmt_figure),
            syncs,
            row.load_avg_1m
                .map_or_else(String::new, |l| format!("{l:.2}")),
        );
    }
    out
}

/// Writes `<name>.csv`, `<name>.jsonl` and `<name>.md` under `dir` (created if needed) and
/// returns their paths.
pub fn write_files(dir: &Path, name: &str, rows: &[Row]) -> io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    let jsonl = to_jsonl(rows).map_err(io::Error::other)?;
    let files = [
        (dir.join(format!("{name}.csv")), to_csv(rows)),
        (dir.join(format!("{name}.jsonl")), jsonl),
        (dir.join(format!("{name}.md")), to_markdown(rows)),
    ];
    let mut written = Vec::with_capacity(files.len());
    for (path, text) in files {
        fs::write(&path, text)?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Row {
        let summary = Summary::of(&[100.0, 90.0, 110.0]).expect("values");
        Row {
            experiment: "log".into(),
            workload: "append".into(),
            backend: "uring".into(),
            params: "record_bytes=1024 note=\"a,b\"".into(),
            unit: "MB/s".into(),
            summary,
            reps: vec![100.0, 90.0, 110.0],
            baselines: vec![Ratio::of(summary.median, "fio seq write", 50.0, "MB/s")],
            vs_portable: Some(1.25),
            ops: None,
            syncs: Some(4),
            backend_syncs: Some(4),
            ops_per_sync: None,
            load_avg_1m: Some(0.5),
        }
    }

    #[test]
    fn ratio_divides_the_median_by_the_baseline() {
        assert_eq!(Ratio::of(300.0, "b", 150.0, "MB/s").ratio, 2.0);
        assert!(Ratio::of(300.0, "b", 0.0, "MB/s").ratio.is_nan());
    }

    #[test]
    fn csv_has_one_line_per_row_with_as_many_fields_as_the_header() {
        let csv = to_csv(&[row(), row()]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        // The params field holds a comma and quotes: it is quoted, quotes doubled.
        assert!(lines[1].contains("\"record_bytes=1024 note=\"\"a,b\"\"\""));
        let header_fields = lines[0].split(',').count();
        let unquoted = lines[1].replace("\"record_bytes=1024 note=\"\"a,b\"\"\"", "P");
        assert_eq!(unquoted.split(',').count(), header_fields);
        assert!(unquoted.starts_with(
            "log,append,uring,P,MB/s,100,90,110,3,fio seq write,50,2,,,,1.25,,4,4,,0.5"
        ));
    }

    #[test]
    fn jsonl_round_trips_through_serde_json() {
        let text = to_jsonl(&[row()]).expect("serialize");
        assert_eq!(text.lines().count(), 1);
        let value: serde_json::Value = serde_json::from_str(text.trim()).expect("json");
        assert_eq!(value["summary"]["median"], 100.0);
        assert_eq!(value["baselines"][0]["ratio"], 2.0);
        assert_eq!(value["reps"][2], 110.0);
    }

    #[test]
    fn markdown_has_header_separator_and_rows() {
        let md = to_markdown(&[row()]);
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[2].contains("| 100 | 90.0 – 110 | MB/s | 2.00 × fio seq write | 1.25 |"));
    }

    #[test]
    fn figures_are_rounded_by_magnitude() {
        assert_eq!(fmt_figure(1234.56), "1235");
        assert_eq!(fmt_figure(12.345), "12.3");
        assert_eq!(fmt_figure(1.2345), "1.23");
        assert_eq!(fmt_figure(0.01234), "0.012");
        assert_eq!(fmt_figure(f64::NAN), "–");
    }
}
