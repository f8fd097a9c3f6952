//! Consume throughput: fetch size × record size from a pre-filled partition, CRC checked
//! by the client.

use super::*;

/// Consume throughput: fetch `max_bytes` × record size from a pre-filled partition, CRC
/// checked by the client.
pub fn consume(
    opts: &KafkaOptions,
    base: &Baselines,
    progress: &mut dyn FnMut(&str),
) -> Result<Section, BenchError> {
    let s = &opts.sizes;
    let broker = opts.broker.start(FlushPolicy::None, "consume")?;
    let limits = Limits {
        max_payload_bytes: u64::MAX,
        ..point_limits(s)
    };
    let mut filled = Vec::new();
    let mut n = 0;
    for &rb in &s.record_bytes {
        let topic = topic_name("consume", &mut n);
        create_topic(broker.addr, &topic, 1)?;
        let records = fill(broker.addr, &topic, rb, s.consume_fill_bytes)?;
        progress(&format!("consume: filled {topic} with {records} × {rb} B"));
        filled.push((rb, topic, records));
    }
    let points: Vec<(usize, i32)> = filled
        .iter()
        .enumerate()
        .flat_map(|(i, _)| s.fetch_sizes.iter().map(move |&f| (i, f)))
        .collect();
    let runs = repeat_points(s.reps, &points, |rep, &(i, fetch)| {
        let (rb, topic, records) = &filled[i];
        let m = consume_run(broker.addr, topic, *records, fetch, limits)?;
        progress(&format!(
            "consume rep {rep} {rb} B fetch {fetch}: {:.1} MB/s ({} fetches)",
            m.mb_per_s(),
            m.requests
        ));
        Ok(m)
    })?;
    let mut rows = Vec::new();
    for (&(i, fetch), runs) in points.iter().zip(&runs) {
        let (rb, _, records) = &filled[i];
        let params = format!(
            "record_bytes={rb} fetch_max_bytes={fetch} partition_records={records} crc=checked"
        );
        let (mut r, med) = median_row(
            "consume",
            &broker.backend,
            params,
            "MB/s",
            runs,
            Measurement::mb_per_s,
        );
        r.ops = Some(med.requests);
        push_ratio(&mut r, "tcp stream", base.stream_mb_s, "MB/s");
        rows.push(r);
    }
    for (_, topic, _) in &filled {
        delete_topic(broker.addr, topic)?;
    }
    section("consume", rows)
}
