//! Output: the charts of a run's sections, writing every file, and the run of every
//! experiment in order.

use super::*;

/// The charts of a run's sections.
pub fn charts(sections: &[Section]) -> Vec<(String, Chart)> {
    let rows: Vec<Row> = sections
        .iter()
        .flat_map(|s| s.rows.iter().cloned())
        .collect();
    let chart = |title: &str,
                 workload: &str,
                 x: &str,
                 groups: &[&str],
                 xl: &str,
                 yl: &str,
                 lx: bool,
                 ly: bool| Chart {
        title: title.into(),
        x_label: xl.into(),
        y_label: yl.into(),
        log_x: lx,
        log_y: ly,
        series: plots::series_from_rows(&rows, workload, x, groups),
    };
    let list = vec![
        (
            "produce",
            chart(
                "Produce throughput (pre-encoded, flush none)",
                "produce",
                "batch_records",
                &["record_bytes", "depth"],
                "records per request",
                "MB/s (payload)",
                true,
                true,
            ),
        ),
        (
            "consume",
            chart(
                "Consume throughput (CRC checked)",
                "consume",
                "fetch_max_bytes",
                &["record_bytes"],
                "fetch max_bytes",
                "MB/s (payload)",
                true,
                true,
            ),
        ),
        (
            "latency_p50",
            chart(
                "End-to-end latency p50",
                "e2e_p50",
                "rate",
                &["batch_records", "flush"],
                "records/s",
                "µs",
                true,
                true,
            ),
        ),
        (
            "latency_p99",
            chart(
                "End-to-end latency p99",
                "e2e_p99",
                "rate",
                &["batch_records", "flush"],
                "records/s",
                "µs",
                true,
                true,
            ),
        ),
        (
            "durability",
            chart(
                "Cost of durability (1 KB records, one in flight)",
                "durability",
                "batch_records",
                &["flush"],
                "records per request",
                "MB/s (payload)",
                true,
                true,
            ),
        ),
        (
            "scaling",
            chart(
                "Producer scaling (1 KB × 100, one in flight each)",
                "scaling",
                "producers",
                &["mode"],
                "producers",
                "MB/s aggregate",
                false,
                false,
            ),
        ),
        (
            "confirmed_depth",
            chart(
                "Confirmed writes vs depth (flush fsync)",
                "confirmed_depth",
                "depth",
                &["client"],
                "writes outstanding",
                "confirmed records/s",
                true,
                true,
            ),
        ),
    ];
    list.into_iter()
        .filter(|(_, c)| !c.series.is_empty())
        .map(|(n, c)| (n.to_owned(), c))
        .collect()
}

/// Writes every section's files, the plots and `targets.md` under `out`; returns the paths.
pub fn write_outputs(
    out: &Path,
    sections: &[Section],
    targets: &[Target],
) -> Result<Vec<PathBuf>, BenchError> {
    let mut written = Vec::new();
    for s in sections {
        written.extend(report::write_files(out, &s.name, &s.rows)?);
    }
    let plot_dir = out.join("plots");
    fs::create_dir_all(&plot_dir)?;
    for (name, chart) in charts(sections) {
        let path = plot_dir.join(format!("{name}.svg"));
        plots::render_svg(&chart, &path)?;
        written.push(path);
    }
    let path = out.join("targets.md");
    fs::write(&path, targets_markdown(targets))?;
    written.push(path);
    Ok(written)
}

/// Runs every experiment in order; `on_section` sees each section as soon as it is done
/// (so a failure late in the run keeps what came before).
pub fn run(
    opts: &KafkaOptions,
    progress: &mut dyn FnMut(&str),
    on_section: &mut dyn FnMut(&Section) -> Result<(), BenchError>,
) -> Result<(Vec<Section>, Vec<Target>), BenchError> {
    let (base_section, base) = baselines(opts, progress)?;
    on_section(&base_section)?;
    let mut sections = vec![base_section];
    type Experiment =
        fn(&KafkaOptions, &Baselines, &mut dyn FnMut(&str)) -> Result<Section, BenchError>;
    let experiments: [Experiment; 7] = [
        produce,
        consume,
        latency,
        durability,
        scaling,
        rdkafka_saturation,
        sequential_writes,
    ];
    for experiment in experiments {
        let section = experiment(opts, &base, progress)?;
        on_section(&section)?;
        sections.push(section);
    }
    let rows: Vec<Row> = sections
        .iter()
        .flat_map(|s| s.rows.iter().cloned())
        .collect();
    let targets = evaluate_targets(&rows, base.fdatasync_p50_us);
    Ok((sections, targets))
}
