//! Target judging: each goal of the experiment, measured from the rows and judged.

use super::*;

/// One performance target, measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Target {
    /// What is asked.
    pub goal: String,
    /// The measured figure, as text (with its unit).
    pub measured: String,
    /// `Some(true)` met, `Some(false)` missed, `None` not measured in this run.
    pub met: Option<bool>,
}

fn ratio_of(row: Option<&Row>, i: usize) -> Option<f64> {
    row.and_then(|r| r.baselines.get(i))
        .map(|b| b.ratio)
        .filter(|x| x.is_finite())
}

/// Judges the performance targets on the rows of a run.
pub fn evaluate_targets(rows: &[Row], fdatasync_p50_us: f64) -> Vec<Target> {
    let mut out = Vec::new();
    let mut at_least = |goal: &str, value: Option<f64>, min: f64, what: &str| {
        out.push(Target {
            goal: goal.into(),
            measured: value.map_or("not measured".into(), |v| {
                format!("{} {what}", report::fmt_figure(v))
            }),
            met: value.map(|v| v >= min),
        });
    };
    let p = find(
        rows,
        "produce",
        &[
            ("record_bytes", "1000"),
            ("batch_records", "1000"),
            ("depth", "1"),
        ],
    );
    at_least(
        "produce 1 KB × 1000/request ≥ 0.40 × TCP stream",
        ratio_of(p, 0),
        0.4,
        "× stream",
    );
    let p = find(
        rows,
        "produce",
        &[
            ("record_bytes", "100"),
            ("batch_records", "1"),
            ("depth", "1"),
        ],
    );
    at_least(
        "1 record/request (100 B, one in flight) ≥ 0.70 × echo round trips/s",
        ratio_of(p, 1),
        0.7,
        "× echo rate",
    );
    let c = find(
        rows,
        "consume",
        &[("record_bytes", "100"), ("fetch_max_bytes", "1048576")],
    );
    at_least(
        "consume 100 B with 1 MiB fetches ≥ 0.40 × TCP stream",
        ratio_of(c, 0),
        0.4,
        "× stream",
    );
    let l = find(
        rows,
        "e2e_p50",
        &[("rate", "10000"), ("batch_records", "1"), ("flush", "none")],
    );
    let v = ratio_of(l, 0);
    out.push(Target {
        goal: "e2e p50 at 10k msg/s, flush none ≤ 2 × echo RTT p50".into(),
        measured: v.map_or("not measured".into(), |v| {
            format!("{} × echo RTT", report::fmt_figure(v))
        }),
        met: v.map(|v| v <= 2.0),
    });
    let q = find(rows, "sequential_p50", &[("client", "rdkafka")]).map(|r| r.summary.median);
    let excess = q.map(|v| v - fdatasync_p50_us).filter(|x| x.is_finite());
    out.push(Target {
        goal: "fsync, one in flight: p50 ≤ fdatasync p50 + 100 µs".into(),
        measured: excess.map_or("not measured".into(), |x| {
            format!("fdatasync p50 + {} µs", report::fmt_figure(x))
        }),
        met: excess.map(|x| x <= 100.0),
    });
    for client in ["rdkafka", "minikafka-client"] {
        let d = find(
            rows,
            "confirmed_depth",
            &[("client", client), ("depth", "128")],
        );
        let mut at_least = |goal: &str, value: Option<f64>, min: f64, what: &str| {
            out.push(Target {
                goal: goal.into(),
                measured: value.map_or("not measured".into(), |v| {
                    format!("{} {what}", report::fmt_figure(v))
                }),
                met: value.map(|v| v >= min),
            });
        };
        at_least(
            &format!("depth 128 ≥ 20 × depth 1 ({client}, fsync)"),
            ratio_of(d, 0),
            20.0,
            "× depth 1",
        );
    }
    out
}

/// The targets as a Markdown table.
pub fn targets_markdown(targets: &[Target]) -> String {
    let mut out = String::from("| target | measured | met |\n|---|---|---|\n");
    for t in targets {
        let met = match t.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "–",
        };
        out.push_str(&format!("| {} | {} | {met} |\n", t.goal, t.measured));
    }
    out
}
