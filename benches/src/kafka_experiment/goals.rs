//! The side-by-side goals: each one judged on one run's records (medians of the
//! repetitions) as met, not met, or not measured by this run.
//!
//! Contract: pure (runs and baselines in, [`Target`]s out); a goal whose figures are missing
//! on either side is `met: None`, never a guess.

use super::side_by_side::{
    values, values_over, BaselineRun, RunRecord, Side, Workload, CLIENT_CPU_PER_RECORD,
    CPU_PER_RECORD, PEAK_RSS, UNTIL_METADATA,
};
use super::Target;
use crate::report::fmt_figure;
use crate::security_cost::Protocol;
use crate::stats::Summary;

/// Which way a goal's ratio must go.
#[derive(Clone, Copy)]
enum Bound {
    /// ours ÷ peer ≥ factor.
    AtLeast(f64),
    /// ours ÷ peer ≤ factor.
    AtMost(f64),
}

fn median(v: &[f64]) -> Option<f64> {
    Summary::of(v).map(|s| s.median)
}

fn durability_label(durable: bool) -> &'static str {
    if durable {
        "durable"
    } else {
        "non-durable"
    }
}

/// ours ÷ peer of the medians of `metric` of `workload`, judged against `bound`.
fn ratio_goal(
    runs: &[RunRecord],
    workload: Workload,
    metric: &str,
    durable: bool,
    bound: Bound,
    goal: String,
) -> Target {
    let ours = median(&values(runs, workload.slug(), metric, Side::Ours, durable));
    let peer = median(&values(runs, workload.slug(), metric, Side::Peer, durable));
    match ours.zip(peer).filter(|(_, p)| *p > 0.0) {
        None => Target {
            goal,
            measured: "not measured by this run".into(),
            met: None,
        },
        Some((o, p)) => {
            let ratio = o / p;
            Target {
                goal,
                measured: format!("{} vs {} = {ratio:.2} ×", fmt_figure(o), fmt_figure(p)),
                met: Some(match bound {
                    Bound::AtLeast(f) => ratio >= f,
                    Bound::AtMost(f) => ratio <= f,
                }),
            }
        }
    }
}

/// Issue 22, item 8: our broker's saturation over SSL at least 0.8 × the same over PLAINTEXT
/// in the same run (medians); not measured when the run went without TLS.
fn tls_goal(runs: &[RunRecord], durable: bool) -> Target {
    let goal = format!(
        "librdkafka saturation over SSL, {}: ≥ 0.8 × ours over PLAINTEXT",
        durability_label(durable)
    );
    let over = |metric, p| {
        median(&values_over(
            runs,
            Workload::Saturation.slug(),
            metric,
            Side::Ours,
            durable,
            p,
        ))
    };
    // Where the CPU went: the client (librdkafka's TLS) shares the machine with the broker.
    let cpu_ratio =
        |metric| match over(metric, Protocol::Ssl).zip(over(metric, Protocol::Plaintext)) {
            Some((ssl, plain)) if plain > 0.0 => format!("{:.1} ×", ssl / plain),
            _ => "–".into(),
        };
    match over("acked", Protocol::Ssl).zip(over("acked", Protocol::Plaintext)) {
        Some((ssl, plain)) if plain > 0.0 => Target {
            goal,
            measured: format!(
                "SSL {} vs PLAINTEXT {} = {:.2} × (CPU per record SSL ÷ PLAINTEXT: client {}, broker {})",
                fmt_figure(ssl),
                fmt_figure(plain),
                ssl / plain,
                cpu_ratio(CLIENT_CPU_PER_RECORD),
                cpu_ratio(CPU_PER_RECORD),
            ),
            met: Some(ssl / plain >= 0.8),
        },
        _ => Target {
            goal,
            measured: "not measured by this run".into(),
            met: None,
        },
    }
}

/// Issue 23, item 2: a sequential durable write costs at most one fdatasync plus the client's
/// own round trip (our non-durable sequential p50 of the same run), with 10 % to spare.
fn disk_limit_goal(runs: &[RunRecord], sync_p50: &[f64]) -> Target {
    let goal = "sequential durable writes p50 ≤ 1.1 × (fdatasync p50 + non-durable p50)".to_owned();
    let ours = |durable| {
        median(&values(
            runs,
            Workload::Sequential.slug(),
            "p50",
            Side::Ours,
            durable,
        ))
    };
    match (ours(true), ours(false), median(sync_p50)) {
        (Some(durable), Some(non_durable), Some(sync)) if sync + non_durable > 0.0 => {
            let limit = sync + non_durable;
            Target {
                goal,
                measured: format!(
                    "{} µs = {:.2} × (fdatasync {} + non-durable {} µs)",
                    fmt_figure(durable),
                    durable / limit,
                    fmt_figure(sync),
                    fmt_figure(non_durable)
                ),
                met: Some(durable <= 1.1 * limit),
            }
        }
        _ => Target {
            goal,
            measured: "not measured by this run".into(),
            met: None,
        },
    }
}

/// Every goal of the comparison, in the order the table lists them.
pub fn evaluate(runs: &[RunRecord], baselines: &[BaselineRun]) -> Vec<Target> {
    let mut out = Vec::new();
    for durable in [true, false] {
        out.push(ratio_goal(
            runs,
            Workload::Saturation,
            "acked",
            durable,
            Bound::AtLeast(1.5),
            format!(
                "librdkafka saturation, {}: ≥ 1.5 × peer",
                durability_label(durable)
            ),
        ));
    }
    for durable in [true, false] {
        out.push(tls_goal(runs, durable));
    }
    out.push(ratio_goal(
        runs,
        Workload::Sequential,
        "p50",
        true,
        Bound::AtMost(0.65),
        "sequential durable writes p50 ≤ 0.65 × peer".into(),
    ));
    let sync_p50: Vec<f64> = baselines.iter().map(|b| b.fdatasync_p50_us).collect();
    let seq = median(&values(
        runs,
        Workload::Sequential.slug(),
        "p50",
        Side::Ours,
        true,
    ));
    out.push(match seq.zip(median(&sync_p50)) {
        None => Target {
            goal: "sequential durable writes p50 ≤ fdatasync p50 + 100 µs".into(),
            measured: "not measured by this run".into(),
            met: None,
        },
        Some((p50, sync)) => Target {
            goal: "sequential durable writes p50 ≤ fdatasync p50 + 100 µs".into(),
            measured: format!(
                "{} µs = fdatasync p50 {} µs {} {} µs",
                fmt_figure(p50),
                fmt_figure(sync),
                if p50 >= sync { "+" } else { "−" },
                fmt_figure((p50 - sync).abs())
            ),
            met: Some(p50 <= sync + 100.0),
        },
    });
    out.push(disk_limit_goal(runs, &sync_p50));
    out.push(ratio_goal(
        runs,
        Workload::Outstanding,
        "confirmed",
        true,
        Bound::AtLeast(2.0),
        "128 outstanding, durable: ≥ 2 × peer".into(),
    ));
    for durable in [true, false] {
        out.push(ratio_goal(
            runs,
            Workload::Consume,
            "consumed",
            durable,
            Bound::AtLeast(1.3),
            format!("consume, {}: ≥ 1.3 × peer", durability_label(durable)),
        ));
        out.push(ratio_goal(
            runs,
            Workload::EndToEnd,
            "p50",
            durable,
            Bound::AtMost(0.5),
            format!(
                "end-to-end p50, {}: ≤ 0.5 × peer",
                durability_label(durable)
            ),
        ));
        out.push(ratio_goal(
            runs,
            Workload::Saturation,
            CPU_PER_RECORD,
            durable,
            Bound::AtMost(0.5),
            format!(
                "broker CPU per record (saturation), {}: ≤ 0.5 × peer",
                durability_label(durable)
            ),
        ));
        out.push(ratio_goal(
            runs,
            Workload::Saturation,
            PEAK_RSS,
            durable,
            Bound::AtMost(1.0),
            format!(
                "peak RSS (saturation), {}: ≤ peer",
                durability_label(durable)
            ),
        ));
        out.push(ratio_goal(
            runs,
            Workload::Restart,
            UNTIL_METADATA,
            durable,
            Bound::AtMost(1.0),
            format!(
                "restart after kill -9, {}: no slower than peer",
                durability_label(durable)
            ),
        ));
    }
    // Issue 21: transactions, against the peer's durable mode (`--only txn`).
    for workload in [
        Workload::TxnCommit1,
        Workload::TxnCommit100,
        Workload::TxnCommit10k,
    ] {
        out.push(ratio_goal(
            runs,
            workload,
            "committed",
            true,
            Bound::AtLeast(1.5),
            format!("{}, durable: ≥ 1.5 × peer", workload.slug()),
        ));
        out.push(ratio_goal(
            runs,
            workload,
            "commit p50",
            true,
            Bound::AtMost(0.65),
            format!("{} commit p50, durable: ≤ 0.65 × peer", workload.slug()),
        ));
    }
    out.push(ratio_goal(
        runs,
        Workload::TxnReadCommitted,
        "consumed",
        true,
        Bound::AtLeast(1.5),
        "txn_read_committed, durable: ≥ 1.5 × peer".into(),
    ));
    for goal in [
        "startup time independent of the size of sealed segments (see the startup section)",
        "io_uring backend ≥ portable on every row (`mk-bench kafka --backend`, both builds)",
        "our client at depth 128 ≥ 20 × depth 1 (`mk-bench kafka`, sequential_writes)",
    ] {
        out.push(Target {
            goal: goal.into(),
            measured: "not measured by this run".into(),
            met: None,
        });
    }
    out
}

/// The goals as a Markdown table (goal, measured, met / **not met**), then one line naming the
/// goals this run did not measure (a table row each said nothing and made the page long).
pub fn markdown(goals: &[Target]) -> String {
    let mut md = String::from("| goal | measured (ours vs peer, medians) | met |\n|---|---|---|\n");
    let mut not_measured = Vec::new();
    for g in goals {
        let met = match g.met {
            Some(true) => "met",
            Some(false) => "**not met**",
            None => {
                not_measured.push(g.goal.as_str());
                continue;
            }
        };
        md.push_str(&format!("| {} | {} | {met} |\n", g.goal, g.measured));
    }
    if !not_measured.is_empty() {
        md.push_str(&format!(
            "\nNot measured by this run: {}.\n",
            not_measured.join("; ")
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka_experiment::side_by_side::Metric;

    fn run(side: Side, durable: bool, workload: &str, name: &str, value: f64) -> RunRecord {
        RunRecord {
            rep: 1,
            side,
            broker: "b".into(),
            listener: "PLAINTEXT".into(),
            durable,
            flush: "f".into(),
            workload: workload.into(),
            idempotence: true,
            records: 1,
            metrics: vec![Metric {
                name: name.into(),
                unit: "u".into(),
                value,
            }],
            broker_cpu_s: None,
            load_avg_1m: None,
        }
    }

    #[test]
    fn goals_are_met_missed_or_not_measured() {
        let runs = vec![
            run(Side::Ours, true, "saturation", "acked", 900.0),
            run(Side::Peer, true, "saturation", "acked", 600.0),
            run(Side::Ours, false, "saturation", "acked", 700.0),
            run(Side::Peer, false, "saturation", "acked", 600.0),
            run(Side::Ours, true, "sequential", "p50", 250.0),
            run(Side::Peer, true, "sequential", "p50", 300.0),
            run(Side::Ours, true, "restart", UNTIL_METADATA, 0.2),
            run(Side::Peer, true, "restart", UNTIL_METADATA, 0.2),
        ];
        let b = [BaselineRun {
            rep: 1,
            tcp_gbit_s: 40.0,
            fdatasync_p50_us: 80.0,
        }];
        let g = evaluate(&runs, &b);
        let find = |text: &str| g.iter().find(|t| t.goal.starts_with(text)).expect(text);
        assert_eq!(find("librdkafka saturation, durable").met, Some(true));
        assert_eq!(find("librdkafka saturation, non-durable").met, Some(false));
        assert_eq!(
            find("sequential durable writes p50 ≤ 0.65").met,
            Some(false)
        );
        let plus = find("sequential durable writes p50 ≤ fdatasync");
        assert_eq!(plus.met, Some(false), "250 > 80 + 100");
        assert!(plus.measured.contains("+ 170 µs"), "{}", plus.measured);
        assert_eq!(find("restart after kill -9, durable").met, Some(true));
        assert_eq!(find("restart after kill -9, non-durable").met, None);
        assert_eq!(find("consume, durable").met, None);
        // No non-durable sequential run: the disk-limit goal cannot be judged.
        assert_eq!(find("sequential durable writes p50 ≤ 1.1").met, None);
        let md = markdown(&g);
        assert!(md.contains("| met |") && md.contains("| **not met** |"));
        assert!(
            !md.contains("| consume, durable"),
            "unmeasured goals get no row"
        );
        let listed = md
            .lines()
            .find(|l| l.starts_with("Not measured by this run: "));
        assert!(
            listed.is_some_and(|l| l.contains("consume, durable: ≥ 1.3 × peer")),
            "{md}"
        );
    }

    #[test]
    fn the_tls_goal_compares_ours_over_ssl_with_ours_over_plaintext_of_the_same_run() {
        let over = |listener: &str, durable, value| RunRecord {
            listener: listener.into(),
            ..run(Side::Ours, durable, "saturation", "acked", value)
        };
        let runs = vec![
            over("PLAINTEXT", true, 1000.0),
            over("SSL", true, 850.0),
            over("SASL_SSL", true, 10.0),
            over("PLAINTEXT", false, 1000.0),
            over("SSL", false, 700.0),
            // The peer's figures never enter it.
            run(Side::Peer, true, "saturation", "acked", 1.0),
        ];
        let g = evaluate(&runs, &[]);
        let find = |text: &str| g.iter().find(|t| t.goal.starts_with(text)).expect(text);
        let durable = find("librdkafka saturation over SSL, durable");
        assert_eq!(durable.met, Some(true), "{}", durable.measured);
        assert_eq!(
            durable.measured,
            "SSL 850 vs PLAINTEXT 1000 = 0.85 × (CPU per record SSL ÷ PLAINTEXT: client –, broker –)"
        );
        assert_eq!(
            find("librdkafka saturation over SSL, non-durable").met,
            Some(false)
        );
        // Without TLS runs, the goal is not measured, and the peer goals see PLAINTEXT only.
        let plain: Vec<RunRecord> = runs
            .iter()
            .filter(|r| r.listener == "PLAINTEXT")
            .cloned()
            .collect();
        let g = evaluate(&plain, &[]);
        let find = |text: &str| g.iter().find(|t| t.goal.starts_with(text)).expect(text);
        assert_eq!(find("librdkafka saturation over SSL, durable").met, None);
        let g = evaluate(&runs, &[]);
        let sat = g
            .iter()
            .find(|t| t.goal.starts_with("librdkafka saturation, durable"))
            .expect("goal");
        assert_eq!(sat.measured, "1000 vs 1.00 = 1000.00 ×");
    }

    #[test]
    fn the_disk_limit_goal_adds_the_fdatasync_to_the_non_durable_round_trip() {
        let runs = vec![
            run(Side::Ours, true, "sequential", "p50", 330.0),
            run(Side::Ours, false, "sequential", "p50", 180.0),
        ];
        // 1.1 × (120 + 180) = 330: met at the boundary.
        let at = disk_limit_goal(&runs, &[120.0]);
        assert_eq!(at.met, Some(true), "{}", at.measured);
        assert!(at.measured.contains("1.10 ×"), "{}", at.measured);
        let over = disk_limit_goal(&runs, &[119.0]);
        assert_eq!(over.met, Some(false), "{}", over.measured);
        assert_eq!(disk_limit_goal(&runs, &[]).met, None);
    }
}
