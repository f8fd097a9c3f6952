//! Produce throughput: records per request × record size × pipeline depth, flush none,
//! pre-encoded batches.

use super::*;

/// Produce throughput: records per request × record size × pipeline depth, flush none,
/// pre-encoded batches.
pub fn produce(
    opts: &KafkaOptions,
    base: &Baselines,
    progress: &mut dyn FnMut(&str),
) -> Result<Section, BenchError> {
    let s = &opts.sizes;
    let broker = opts.broker.start(FlushPolicy::None, "produce")?;
    let limits = point_limits(s);
    let points: Vec<(usize, usize, usize)> = s
        .record_bytes
        .iter()
        .flat_map(|&rb| {
            s.batches
                .iter()
                .flat_map(move |&b| s.depths.iter().map(move |&d| (rb, b, d)))
        })
        .collect();
    let mut n = 0;
    let runs = repeat_points(s.reps, &points, |rep, &(rb, batch, depth)| {
        let topic = topic_name("produce", &mut n);
        let m = on_topic(&broker, &topic, 1, |t| {
            produce_run(broker.addr, &pre_encode(t, 0, rb, batch), depth, limits)
        })?;
        progress(&format!(
            "produce rep {rep} {rb} B × {batch} depth {depth}: {:.1} MB/s, {:.0} req/s",
            m.mb_per_s(),
            m.requests_per_s()
        ));
        Ok(m)
    })?;
    let mut rows = Vec::new();
    for (&(rb, batch, depth), runs) in points.iter().zip(&runs) {
        let params = format!(
            "record_bytes={rb} batch_records={batch} depth={depth} flush={} encoding=pre_encoded",
            broker.flush
        );
        let (mut r, med) = median_row(
            "produce",
            &broker.backend,
            params,
            "MB/s",
            runs,
            Measurement::mb_per_s,
        );
        r.ops = Some(med.requests);
        push_ratio(&mut r, "tcp stream", base.stream_mb_s, "MB/s");
        if batch == 1 {
            let pre = pre_encode("p", 0, rb, 1);
            if let Some((bytes, rate, _)) = base.echo_for(request_frame_bytes(&pre, 9)) {
                r.baselines.push(ratio_to(
                    median_of(runs, Measurement::requests_per_s),
                    &format!("tcp echo round trips/s ({bytes} B)"),
                    rate,
                    "requests/s",
                ));
            }
        }
        rows.push(r);
    }
    section("produce", rows)
}
