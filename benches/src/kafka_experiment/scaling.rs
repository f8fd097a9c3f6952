//! Producer scaling: N producers, each on its own connection, to their own partitions or to
//! one shared partition.

use super::*;

/// Producer scaling: N producers, each on its own connection, to their own partitions or to
/// one shared partition.
pub fn scaling(
    opts: &KafkaOptions,
    base: &Baselines,
    progress: &mut dyn FnMut(&str),
) -> Result<Section, BenchError> {
    let s = &opts.sizes;
    let broker = opts.broker.start(FlushPolicy::None, "scaling")?;
    let limits = point_limits(s);
    let max_producers = s.producer_counts.iter().copied().max().unwrap_or(1) as i32;
    let modes = ["own_partition", "shared_partition"];
    let points: Vec<(&str, usize)> = modes
        .iter()
        .flat_map(|&m| s.producer_counts.iter().map(move |&c| (m, c)))
        .collect();
    let mut n = 0;
    let runs = repeat_points(s.reps, &points, |rep, &(mode, count)| {
        let topic = topic_name("scaling", &mut n);
        let partitions = if mode == "own_partition" {
            max_producers
        } else {
            1
        };
        let m = on_topic(&broker, &topic, partitions, |t| {
            let pres = (0..count)
                .map(|i| {
                    let partition = if mode == "own_partition" { i as i32 } else { 0 };
                    pre_encode(t, partition, 1000, s.scaling_batch)
                })
                .collect();
            concurrent_produce(broker.addr, pres, 1, limits)
        })?;
        progress(&format!(
            "scaling rep {rep} {mode} × {count}: {:.1} MB/s",
            m.mb_per_s()
        ));
        Ok(m)
    })?;
    let mut rows: Vec<Row> = Vec::new();
    for (&(mode, count), runs) in points.iter().zip(&runs) {
        let params = format!(
            "mode={mode} producers={count} record_bytes=1000 batch_records={} depth=1 flush={}",
            s.scaling_batch, broker.flush
        );
        let (mut r, med) = median_row(
            "scaling",
            &broker.backend,
            params,
            "MB/s",
            runs,
            Measurement::mb_per_s,
        );
        r.ops = Some(med.requests);
        push_ratio(&mut r, "tcp stream", base.stream_mb_s, "MB/s");
        push_ratio_to_row(
            &mut r,
            &rows,
            "scaling",
            &[("mode", mode), ("producers", "1")],
            "1 producer",
            "MB/s",
        );
        rows.push(r);
    }
    section("scaling", rows)
}
