//! What the `request_percentage` quota costs per request (I159), against work measured in the
//! same run: the byte-rate charge every Produce already pays when a producer quota exists, and
//! encoding a small Metadata answer (the cheapest real request's own work).
//!
//! - `request_quota/off`: the check a request pays when no `request_percentage` quota exists
//!   (one relaxed atomic load).
//! - `request_quota/charged`: what a timed request pays when one exists: two clock reads
//!   around its handler's poll (one poll here; a request that waits pays two per poll) and
//!   the charge (resolution, the rate's lock and record).
//! - `byte_rate/charge`: `Quotas::charge` of a producer quota (the existing per-Produce cost).
//! - `metadata/encode`: encoding a Metadata v12 answer with 10 topics of 1 partition.
//!
//! After the criterion groups a same-run comparison prints the ratios. A timing is never
//! asserted.

use std::time::Instant;

use criterion::{black_box, Criterion};
use kafka_protocol::messages::metadata_response::{
    MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use minikafka_broker::protocol::encode_response_for;
use minikafka_broker::server::quotas::Quotas;
use minikafka_core::clock::MonoTime;
use minikafka_core::quota::{EntityName, QuotaConfigs, QuotaEntity, QuotaKind, Window};

fn quotas() -> Quotas {
    let q = Quotas::new(Window::default());
    let mut configs = QuotaConfigs::default();
    let client = QuotaEntity {
        user: None,
        client_id: Some(EntityName::Named("app".into())),
    };
    // Large enough never to throttle: the steady cost, not a throttled answer's.
    configs.set(client.clone(), QuotaKind::RequestPercentage, Some(1e12));
    configs.set(client, QuotaKind::ProducerByteRate, Some(1e15));
    q.set_configs(configs);
    q
}

fn metadata() -> MetadataResponse {
    let mut r = MetadataResponse::default();
    r.topics = (0..10)
        .map(|i| {
            let mut t = MetadataResponseTopic::default();
            t.name = Some(TopicName(StrBytes::from_string(format!("topic-{i}"))));
            t.partitions = vec![MetadataResponsePartition::default()];
            t
        })
        .collect();
    r
}

fn start() -> Instant {
    Instant::now()
}

fn charged(q: &Quotas, origin: Instant) -> u64 {
    // The two clock reads of request_quota::timed around one poll.
    let t0 = Instant::now();
    let t1 = Instant::now();
    let busy = t1.saturating_duration_since(t0);
    let now = MonoTime(origin.elapsed());
    q.charge_request_time("ANONYMOUS", "app", busy, now)
}

fn bench(c: &mut Criterion) {
    let q = quotas();
    let origin = start();
    let mut group = c.benchmark_group("request_quota");
    group.bench_function("off", |b| {
        let off = Quotas::new(Window::default());
        b.iter(|| black_box(&off).request_quota_on())
    });
    group.bench_function("charged", |b| b.iter(|| charged(black_box(&q), origin)));
    group.finish();
    c.bench_function("byte_rate/charge", |b| {
        b.iter(|| {
            let now = MonoTime(origin.elapsed());
            black_box(&q).charge(
                QuotaKind::ProducerByteRate,
                "ANONYMOUS",
                "app",
                1000,
                now,
                true,
            )
        })
    });
    let answer = metadata();
    c.bench_function("metadata/encode", |b| {
        b.iter(|| encode_response_for(12, 7, black_box(&answer)).expect("encodes"))
    });
}

/// Median ns per call of `f` over 11 runs of `n` calls.
fn median_ns(n: u32, mut f: impl FnMut()) -> f64 {
    let mut runs: Vec<f64> = (0..11)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(n)
        })
        .collect();
    runs.sort_by(|a, b| a.total_cmp(b));
    runs[5]
}

/// The same-run comparison: alternating, medians.
fn compare() {
    let q = quotas();
    let origin = start();
    let answer = metadata();
    let n = 20_000;
    let mut rows = Vec::new();
    for _ in 0..3 {
        let charge = median_ns(n, || {
            black_box(charged(&q, origin));
        });
        let bytes = median_ns(n, || {
            let now = MonoTime(origin.elapsed());
            black_box(q.charge(
                QuotaKind::ProducerByteRate,
                "ANONYMOUS",
                "app",
                1000,
                now,
                true,
            ));
        });
        let encode = median_ns(n, || {
            black_box(encode_response_for(12, 7, &answer).expect("encodes"));
        });
        rows.push((charge, bytes, encode));
    }
    for (charge, bytes, encode) in rows {
        println!(
            "request charge {charge:.0} ns; byte-rate charge {bytes:.0} ns (ratio {:.2}); \
             Metadata(10 topics) encode {encode:.0} ns (charge/encode {:.2})",
            charge / bytes,
            charge / encode
        );
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    compare();
}
