//! Sequential durable writes (acks=all, one in flight, linger 0, fsync) with librdkafka,
//! then throughput at pipeline depths with librdkafka and with our client.

use super::*;

/// Sequential durable writes (acks=all, one in flight, linger 0, fsync) with
/// librdkafka, then throughput at pipeline depths with librdkafka and with our client.
pub fn sequential_writes(
    opts: &KafkaOptions,
    base: &Baselines,
    progress: &mut dyn FnMut(&str),
) -> Result<Section, BenchError> {
    let s = &opts.sizes;
    let broker = opts.broker.start(FlushPolicy::Fsync, "sequential_writes")?;
    let (idem, idem_label) = idempotence_for(opts, &broker)?;
    let settings = RdSettings {
        idempotence: idem,
        max_in_flight: Some(1),
        linger_ms: Some(0),
    };
    let mut rows = Vec::new();
    let mut n = 0;
    let topic = topic_name("sequential", &mut n);
    let samples = on_topic(&broker, &topic, 1, |t| {
        sequential_latency(
            &broker.bootstrap(),
            t,
            s.sequential_value_bytes,
            s.sequential_writes,
            200,
            settings,
            &[],
        )
    })?;
    let params = format!(
        "client=rdkafka writes={} flush={} acks=all idempotence={idem_label} max_in_flight=1 linger_ms=0 value_bytes={}",
        samples.len(),
        broker.flush,
        s.sequential_value_bytes
    );
    let echo = base.echo_for(0);
    for (name, q) in [
        ("sequential_p50", 0.5),
        ("sequential_p99", 0.99),
        ("sequential_p99.9", 0.999),
        ("sequential_p99.99", 0.9999),
    ] {
        let v = percentile_us(&samples, q, f64::NAN);
        let mut r = row(name, &broker.backend, params.clone(), "µs", vec![v]);
        r.ops = Some(samples.len() as u64);
        push_ratio(&mut r, "fio fdatasync p50", base.fdatasync_p50_us, "µs");
        if let Some((bytes, _, p50)) = echo {
            push_ratio(&mut r, &format!("tcp echo RTT p50 ({bytes} B)"), p50, "µs");
        }
        rows.push(r);
    }
    progress(&format!(
        "sequential {} writes: p50 {:.0} µs p99 {:.0} µs",
        samples.len(),
        rows[0].summary.median,
        rows[1].summary.median
    ));

    let limits = Limits {
        duration: s.pipeline_duration,
        max_payload_bytes: u64::MAX,
    };
    for client in ["rdkafka", "minikafka-client"] {
        for &depth in &s.pipeline_depths {
            // One point: this sweep repeats each depth before moving to the next.
            let runs = repeat_points(s.reps, &[depth], |rep, &depth| {
                let topic = topic_name("depth", &mut n);
                let ((records, per_s), syncs) = on_topic(&broker, &topic, 1, |t| {
                    with_flushes(opts, || {
                        if client == "rdkafka" {
                            let a = produce_acked(
                                &broker.bootstrap(),
                                t,
                                s.sequential_value_bytes,
                                s.pipeline_duration,
                                Some(depth as u64),
                                settings,
                            )?;
                            Ok((a.records, a.per_s()))
                        } else {
                            let pre = pre_encode(t, 0, s.sequential_value_bytes, 1);
                            let m = produce_run(broker.addr, &pre, depth, limits)?;
                            Ok((m.records, m.records_per_s()))
                        }
                    })
                })?;
                progress(&format!(
                    "depth rep {rep} {client} × {depth}: {per_s:.0} confirmed writes/s, device flushes {syncs:?}"
                ));
                Ok((records, per_s, syncs))
            })?;
            let params = if client == "rdkafka" {
                format!(
                    "client=rdkafka depth={depth} flush={} acks=all idempotence={idem_label} max_in_flight=1 linger_ms=0 value_bytes={}",
                    broker.flush, s.sequential_value_bytes
                )
            } else {
                format!(
                    "client=minikafka-client depth={depth} flush={} acks=1 requests_in_flight={depth} records_per_request=1 value_bytes={}",
                    broker.flush, s.sequential_value_bytes
                )
            };
            let (mut r, &(records, _, syncs)) = median_row(
                "confirmed_depth",
                &broker.backend,
                params,
                "records/s",
                &runs[0],
                |&(_, per_s, _)| per_s,
            );
            set_syncs(&mut r, records, syncs);
            push_ratio_to_row(
                &mut r,
                &rows,
                "confirmed_depth",
                &[("client", client), ("depth", "1")],
                "depth 1",
                "records/s",
            );
            rows.push(r);
        }
    }
    section("sequential_writes", rows)
}
