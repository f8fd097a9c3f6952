//! Registrations/s and lookups/s of the schema registry, through its REST routes
//! (`rest::handle_in_memory`: the JSON body parsed, the schema parsed and canonicalized, the
//! compatibility checked, the `_schemas` records built and applied), without sockets or disk:
//! what the registry's shard spends per request beside HTTP framing and the durable append
//! (which the flush policy prices, docs/BENCHMARKS.md "Partition log").
//!
//! - `register/new_subject`: a new Avro schema under a new subject (a new id), the registry
//!   holding `PRELOADED` schemas at the start and growing by one per iteration (to about
//!   10^5 by the end of a run);
//! - `register/evolve`: version 2 of a subject, checked BACKWARD against version 1 (a fresh
//!   registry per iteration, its setup not measured);
//! - `register/existing`: a schema already registered under that subject (what a serializer with
//!   `auto.register.schemas` sends on every new producer: answered without a write);
//! - `lookup/by_id`: `GET /schemas/ids/{id}` (what a deserializer sends once per id);
//! - `lookup/by_schema`: `POST /subjects/{subject}` (a serializer with `use.latest.version` or
//!   `auto.register.schemas=false`);
//! - `baseline/json_body`: `serde_json` reading a registration's body into a `Value`, the floor
//!   of any request with a body, measured in the same run so the figures are read as ratios.

use criterion::{black_box, BatchSize, Criterion, Throughput};
use minikafka_schema::rest::handle_in_memory;
use minikafka_schema::Registry;
use serde_json::json;

const PRELOADED: usize = 1000;

/// An Avro record schema of 8 fields, distinct per `n`.
fn schema(n: usize) -> String {
    let fields: Vec<_> = (0..8)
        .map(|f| json!({"name": format!("f{f}"), "type": if f % 2 == 0 { "string" } else { "long" }}))
        .collect();
    json!({"type": "record", "name": format!("Rec{n}"), "namespace": "bench", "fields": fields})
        .to_string()
}

/// Version `n` of one evolving record: `n` optional fields with defaults (each version
/// BACKWARD-compatible with the one before).
fn evolving(n: usize) -> String {
    let mut fields = vec![json!({"name": "id", "type": "long"})];
    fields
        .extend((0..n).map(
            |f| json!({"name": format!("x{f}"), "type": ["null", "string"], "default": null}),
        ));
    json!({"type": "record", "name": "Evolving", "namespace": "bench", "fields": fields})
        .to_string()
}

fn body(schema: &str) -> Vec<u8> {
    json!({ "schema": schema }).to_string().into_bytes()
}

fn register(registry: &mut Registry, subject: &str, schema: &str) -> u16 {
    let target = format!("/subjects/{subject}/versions");
    handle_in_memory(registry, "POST", &target, &body(schema)).status
}

fn preloaded() -> Registry {
    let mut registry = Registry::new();
    for n in 0..PRELOADED {
        assert_eq!(
            register(&mut registry, &format!("s{n}-value"), &schema(n)),
            200
        );
    }
    registry
}

fn bench_register(c: &mut Criterion) {
    let mut group = c.benchmark_group("register");
    group.throughput(Throughput::Elements(1));
    let mut registry = preloaded();
    let mut next = PRELOADED;
    group.bench_function("new_subject", |b| {
        b.iter(|| {
            let status = register(&mut registry, &format!("s{next}-value"), &schema(next));
            next += 1;
            assert_eq!(status, 200);
        })
    });
    let (v1, v2) = (evolving(1), evolving(2));
    group.bench_function("evolve", |b| {
        b.iter_batched(
            || {
                let mut registry = Registry::new();
                assert_eq!(register(&mut registry, "evolving-value", &v1), 200);
                registry
            },
            |mut registry| {
                assert_eq!(register(&mut registry, "evolving-value", &v2), 200);
                registry
            },
            BatchSize::SmallInput,
        )
    });
    let mut registry = preloaded();
    let existing = schema(PRELOADED / 2);
    let subject = format!("s{}-value", PRELOADED / 2);
    group.bench_function("existing", |b| {
        b.iter(|| assert_eq!(register(&mut registry, &subject, black_box(&existing)), 200))
    });
    group.finish();
}

fn bench_lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("lookup");
    group.throughput(Throughput::Elements(1));
    let mut registry = preloaded();
    let mut id = 0usize;
    group.bench_function("by_id", |b| {
        b.iter(|| {
            id = id % PRELOADED + 1;
            let target = format!("/schemas/ids/{id}");
            let response = handle_in_memory(&mut registry, "GET", &target, b"");
            assert_eq!(response.status, 200);
            black_box(response.body.len())
        })
    });
    let subject = format!("/subjects/s{}-value", PRELOADED / 2);
    let lookup = body(&schema(PRELOADED / 2));
    group.bench_function("by_schema", |b| {
        b.iter(|| {
            let response = handle_in_memory(&mut registry, "POST", &subject, black_box(&lookup));
            assert_eq!(response.status, 200);
        })
    });
    group.finish();
}

fn bench_baseline(c: &mut Criterion) {
    let mut group = c.benchmark_group("baseline");
    group.throughput(Throughput::Elements(1));
    let registration = body(&schema(PRELOADED / 2));
    group.bench_function("json_body", |b| {
        b.iter(|| {
            let value: serde_json::Value =
                serde_json::from_slice(black_box(&registration)).expect("json");
            black_box(value)
        })
    });
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench_baseline(&mut criterion);
    bench_register(&mut criterion);
    bench_lookup(&mut criterion);
    criterion.final_summary();
}
