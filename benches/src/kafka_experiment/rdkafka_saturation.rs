//! librdkafka saturation: acks=all (+ idempotence when possible), acknowledged records/s,
//! with flush fsync and none.

use super::*;

/// librdkafka saturation: acks=all (+ idempotence when possible) at saturation, acknowledged
/// records/s, with flush fsync and none.
pub fn rdkafka_saturation(
    opts: &KafkaOptions,
    base: &Baselines,
    progress: &mut dyn FnMut(&str),
) -> Result<Section, BenchError> {
    let s = &opts.sizes;
    let mut rows = Vec::new();
    for policy in policies(&opts.broker, &[FlushPolicy::Fsync, FlushPolicy::None]) {
        let broker = opts.broker.start(policy, "rdkafka")?;
        let (idem, idem_label) = idempotence_for(opts, &broker)?;
        let settings = RdSettings {
            idempotence: idem,
            max_in_flight: None,
            linger_ms: None,
        };
        let mut n = 0;
        let values = (1..=s.reps)
            .map(|rep| {
                let topic = topic_name("rdkafka", &mut n);
                let acked = on_topic(&broker, &topic, 1, |t| {
                    produce_acked(
                        &broker.bootstrap(),
                        t,
                        s.rd_value_bytes,
                        s.rd_duration,
                        None,
                        settings,
                    )
                })?;
                progress(&format!(
                    "rdkafka rep {rep} flush {}: {:.0} acked records/s",
                    broker.flush,
                    acked.per_s()
                ));
                Ok(acked.per_s())
            })
            .collect::<Result<Vec<f64>, BenchError>>()?;
        let params = format!(
            "flush={} acks=all idempotence={idem_label} value_bytes={} duration_s={} producer=ThreadedProducer",
            broker.flush,
            s.rd_value_bytes,
            s.rd_duration.as_secs_f64()
        );
        let mut r = row(
            "rdkafka_saturation",
            &broker.backend,
            params,
            "records/s",
            values,
        );
        let mb = r.summary.median * s.rd_value_bytes as f64 / 1e6;
        r.baselines.push(ratio_to(
            mb,
            "tcp stream (payload MB/s)",
            base.stream_mb_s,
            "MB/s",
        ));
        rows.push(r);
    }
    section("rdkafka_saturation", rows)
}
