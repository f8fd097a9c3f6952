//! Cost of durability: flush policy × records per request, 1 KB records, one in flight.

use super::*;

/// Cost of durability: flush policy × records per request, 1 KB records, one in flight.
pub fn durability(
    opts: &KafkaOptions,
    base: &Baselines,
    progress: &mut dyn FnMut(&str),
) -> Result<Section, BenchError> {
    let s = &opts.sizes;
    let limits = point_limits(s);
    let mut rows: Vec<Row> = Vec::new();
    let sync_rate = 1e6 / base.fdatasync_p50_us;
    let all = [
        FlushPolicy::None,
        FlushPolicy::Fsync,
        FlushPolicy::Interval {
            ms: crate::broker_proc::DEFAULT_FLUSH_INTERVAL_MS,
        },
    ];
    for policy in policies(&opts.broker, &all) {
        let broker = opts.broker.start(policy, "durability")?;
        let mut n = 0;
        let runs = repeat_points(s.reps, &s.durability_batches, |rep, &batch| {
            let topic = topic_name("durability", &mut n);
            let m = on_topic(&broker, &topic, 1, |t| {
                with_flushes(opts, || {
                    produce_run(broker.addr, &pre_encode(t, 0, 1000, batch), 1, limits)
                })
            })?;
            progress(&format!(
                "durability rep {rep} flush {} × {batch}: {:.1} MB/s, {:.0} req/s, device flushes {:?}",
                broker.flush,
                m.0.mb_per_s(),
                m.0.requests_per_s(),
                m.1
            ));
            Ok(m)
        })?;
        for (&batch, runs) in s.durability_batches.iter().zip(&runs) {
            let params = format!(
                "flush={} batch_records={batch} record_bytes=1000 depth=1",
                broker.flush
            );
            let (mut r, &(m, syncs)) = median_row(
                "durability",
                &broker.backend,
                params,
                "MB/s",
                runs,
                |(m, _)| m.mb_per_s(),
            );
            set_syncs(&mut r, m.requests, syncs);
            push_ratio_to_row(
                &mut r,
                &rows,
                "durability",
                &[("flush", "none"), ("batch_records", &batch.to_string())],
                "flush=none",
                "MB/s",
            );
            if broker.flush == "fsync" {
                r.baselines.push(ratio_to(
                    median_of(runs, |(m, _)| m.requests_per_s()),
                    "1/fio fdatasync p50",
                    sync_rate,
                    "requests/s",
                ));
            }
            rows.push(r);
        }
    }
    section("durability", rows)
}
