//! End-to-end latency per flush policy × rate × batch.

use super::*;

/// End-to-end latency per flush policy × rate × batch.
pub fn latency(
    opts: &KafkaOptions,
    base: &Baselines,
    progress: &mut dyn FnMut(&str),
) -> Result<Section, BenchError> {
    let s = &opts.sizes;
    let echo = base.echo_for(0);
    let mut rows = Vec::new();
    for policy in policies(&opts.broker, &[FlushPolicy::None, FlushPolicy::Fsync]) {
        let broker = opts.broker.start(policy, "latency")?;
        let configs: Vec<(f64, usize)> = s
            .latency_rates
            .iter()
            .flat_map(|&r| s.latency_batches.iter().map(move |&b| (r, b)))
            .collect();
        let mut n = 0;
        let runs = repeat_points(s.reps, &configs, |rep, &(rate, batch)| {
            let spec = LatencySpec {
                rate_per_s: rate,
                batch_records: batch,
                value_bytes: s.latency_value_bytes,
                duration: s.latency_duration,
                warmup: s.latency_warmup,
                max_in_flight: 64,
            };
            let topic = topic_name("latency", &mut n);
            let run = on_topic(&broker, &topic, 1, |t| latency_run(broker.addr, t, spec))?;
            progress(&format!(
                "latency rep {rep} flush {} {rate}/s × {batch}: p50 {:.0} µs p99 {:.0} µs, ack p50 {:.0} µs, achieved {:.0}/s",
                broker.flush,
                percentile_us(&run.e2e_ns, 0.5, 0.0),
                percentile_us(&run.e2e_ns, 0.99, 0.0),
                percentile_us(&run.ack_ns, 0.5, 0.0),
                run.achieved_rate_per_s
            ));
            Ok(run)
        })?;
        for (&(rate, batch), runs) in configs.iter().zip(&runs) {
            let params = format!(
                "rate={rate} batch_records={batch} flush={} value_bytes={} duration_s={} warmup_s={}",
                broker.flush,
                s.latency_value_bytes,
                s.latency_duration.as_secs_f64(),
                s.latency_warmup.as_secs_f64()
            );
            let latency_row = |name: &str, unit: &str, f: &dyn Fn(&kw::LatencyRun) -> f64| {
                row(
                    name,
                    &broker.backend,
                    params.clone(),
                    unit,
                    runs.iter().map(f).collect(),
                )
            };
            for (name, q) in [("e2e_p50", 0.5), ("e2e_p99", 0.99), ("e2e_p99.9", 0.999)] {
                let mut r = latency_row(name, "µs", &|x| percentile_us(&x.e2e_ns, q, f64::NAN));
                r.ops = runs.first().map(|x| x.e2e_ns.len() as u64);
                if let Some((bytes, _, p50)) = echo {
                    push_ratio(&mut r, &format!("tcp echo RTT p50 ({bytes} B)"), p50, "µs");
                }
                rows.push(r);
            }
            rows.push(latency_row("ack_p50", "µs", &|x| {
                percentile_us(&x.ack_ns, 0.5, f64::NAN)
            }));
            rows.push(latency_row("ack_p99", "µs", &|x| {
                percentile_us(&x.ack_ns, 0.99, f64::NAN)
            }));
            rows.push(latency_row("schedule_lag_p99", "µs", &|x| {
                percentile_us(&x.lag_ns, 0.99, f64::NAN)
            }));
            rows.push(latency_row("achieved_rate", "records/s", &|x| {
                x.achieved_rate_per_s
            }));
        }
    }
    section("latency", rows)
}
