//! The Prometheus text exposition format (version 0.0.4): `# HELP` and `# TYPE` before each
//! family, one sample per line, histograms as cumulative `_bucket{le=…}` plus `_sum` and
//! `_count`. Pure: a [`BrokerSnapshot`] in, the page out.

use std::collections::{BTreeMap, HashMap};
use std::fmt::{Display, Write};

use kafka_protocol::messages::ApiKey;
use minikafka_core::error_code::ErrorCode;

use super::counters::no_syncs;
use super::histogram::{HistogramSnapshot, LATENCY_SECONDS};
use super::snapshot::{BrokerSnapshot, PartitionSnapshot, TxnCounts};

/// The `Content-Type` of the page.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Builds the page family by family.
struct Page {
    out: String,
}

/// Escapes a label value (`\`, `"` and newlines, as the format asks).
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

impl Page {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{key}=\"{}\"", escape(value));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        for (i, n) in h.buckets.iter().enumerate() {
            cumulative += n;
            let le = h
                .bounds
                .get(i)
                .map_or("+Inf".to_string(), |b| b.to_string());
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, cumulative);
        }
        self.sample(&format!("{name}_sum"), labels, h.sum);
        self.sample(&format!("{name}_count"), labels, h.count());
    }

    /// One gauge or counter sample per partition.
    fn per_partition(
        &mut self,
        partitions: &[&PartitionSnapshot],
        (name, kind, help): (&str, &str, &str),
        value: impl Fn(&PartitionSnapshot) -> u64,
    ) {
        self.family(name, kind, help);
        for p in partitions {
            let partition = p.partition.to_string();
            let labels = [("topic", p.topic.as_str()), ("partition", &partition)];
            self.sample(name, &labels, value(p));
        }
    }
}

/// A per-partition family: name, type, help, and the value of one partition.
type PartitionFamily = (
    &'static str,
    &'static str,
    &'static str,
    fn(&PartitionSnapshot) -> u64,
);

/// The API's name as Kafka spells it (`Produce`, `Fetch`, …), or its key.
pub fn api_name(api_key: i16) -> String {
    match ApiKey::try_from(api_key) {
        Ok(key) => format!("{key:?}"),
        Err(_) => api_key.to_string(),
    }
}

/// The error code's name (`UNKNOWN_TOPIC_OR_PARTITION`, …), or its number.
pub fn error_name(code: i16) -> String {
    ErrorCode(code)
        .name()
        .map_or_else(|| code.to_string(), str::to_string)
}

/// Renders the whole page.
pub fn render(snapshot: &BrokerSnapshot) -> String {
    let mut page = Page { out: String::new() };
    let mut partitions: Vec<&PartitionSnapshot> = snapshot
        .shards
        .iter()
        .flat_map(|s| s.partitions.iter())
        .collect();
    partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));

    let per_partition: &[PartitionFamily] = &[
        (
            "minikafka_records_in_total",
            "counter",
            "Records appended to the partition since startup.",
            |p| p.traffic.records_in,
        ),
        (
            "minikafka_bytes_in_total",
            "counter",
            "Bytes of record batches appended to the partition since startup.",
            |p| p.traffic.bytes_in,
        ),
        (
            "minikafka_records_out_total",
            "counter",
            "Records in the batches read from the partition for fetches since startup.",
            |p| p.traffic.records_out,
        ),
        (
            "minikafka_bytes_out_total",
            "counter",
            "Bytes of record batches read from the partition for fetches since startup.",
            |p| p.traffic.bytes_out,
        ),
        (
            "minikafka_log_size_bytes",
            "gauge",
            "Bytes of the partition's segment files.",
            |p| p.size_bytes,
        ),
        (
            "minikafka_log_start_offset",
            "gauge",
            "The partition's first offset.",
            |p| p.log_start_offset.max(0) as u64,
        ),
        (
            "minikafka_log_end_offset",
            "gauge",
            "The partition's high watermark (the offset the next record gets).",
            |p| p.log_end_offset.max(0) as u64,
        ),
        (
            "minikafka_partition_offline",
            "gauge",
            "1 when a failed fsync took the partition offline for writes (restart to recover).",
            |p| u64::from(p.offline),
        ),
    ];
    for &(name, kind, help, value) in per_partition {
        page.per_partition(&partitions, (name, kind, help), value);
    }

    // Requests, merged over the shards that received them.
    let mut apis: BTreeMap<i16, (HistogramSnapshot, BTreeMap<i16, u64>)> = BTreeMap::new();
    for api in snapshot.shards.iter().flat_map(|s| s.apis.iter()) {
        let (latency, errors) = apis
            .entry(api.api_key)
            .or_insert_with(|| (HistogramSnapshot::empty(LATENCY_SECONDS), BTreeMap::new()));
        latency.merge(&api.latency);
        for &(code, n) in &api.errors {
            *errors.entry(code).or_insert(0) += n;
        }
    }
    let names: BTreeMap<i16, String> = apis.keys().map(|&k| (k, api_name(k))).collect();
    page.family(
        "minikafka_requests_total",
        "counter",
        "Requests received, by API.",
    );
    for (key, (latency, _)) in &apis {
        page.sample(
            "minikafka_requests_total",
            &[("api", &names[key])],
            latency.count(),
        );
    }
    page.family(
        "minikafka_request_errors_total",
        "counter",
        "Error codes answered (per partition, topic or group in the response), by API and code.",
    );
    for (key, (_, errors)) in &apis {
        for (&code, &n) in errors {
            let error = error_name(code);
            let labels = [("api", names[key].as_str()), ("error", &error)];
            page.sample("minikafka_request_errors_total", &labels, n);
        }
    }
    page.family(
        "minikafka_request_duration_seconds",
        "histogram",
        "Time from a request's arrival to its response being ready, by API.",
    );
    for (key, (latency, _)) in &apis {
        page.histogram(
            "minikafka_request_duration_seconds",
            &[("api", &names[key])],
            latency,
        );
    }

    // Fsyncs, merged over shards.
    let mut syncs = no_syncs();
    for shard in &snapshot.shards {
        syncs.merge(&shard.syncs);
    }
    page.family(
        "minikafka_fsync_total",
        "counter",
        "Data fsyncs of partition logs (group commit, interval and shutdown flushes).",
    );
    page.sample("minikafka_fsync_total", &[], syncs.latency.count());
    page.family(
        "minikafka_fsync_failures_total",
        "counter",
        "Fsyncs that failed; each takes its partition offline for writes.",
    );
    page.sample("minikafka_fsync_failures_total", &[], syncs.failures);
    page.family(
        "minikafka_fsync_duration_seconds",
        "histogram",
        "Duration of each data fsync.",
    );
    page.histogram("minikafka_fsync_duration_seconds", &[], &syncs.latency);
    page.family(
        "minikafka_appends_per_fsync",
        "histogram",
        "Appends each fsync made durable (group commit: more than 1 means syncs were shared).",
    );
    page.histogram("minikafka_appends_per_fsync", &[], &syncs.appends_per_sync);

    // Connections.
    page.family(
        "minikafka_connections_open",
        "gauge",
        "Client connections open now.",
    );
    page.sample("minikafka_connections_open", &[], snapshot.connections_open);
    let accepted: u64 = snapshot.shards.iter().map(|s| s.connections_accepted).sum();
    let refused: u64 = snapshot.shards.iter().map(|s| s.connections_refused).sum();
    page.family(
        "minikafka_connections_accepted_total",
        "counter",
        "Client connections accepted.",
    );
    page.sample("minikafka_connections_accepted_total", &[], accepted);
    page.family(
        "minikafka_connections_refused_total",
        "counter",
        "Client connections refused because max.connections was reached.",
    );
    page.sample("minikafka_connections_refused_total", &[], refused);
    let mut errors: BTreeMap<&str, u64> = BTreeMap::new();
    for (reason, n) in snapshot
        .shards
        .iter()
        .flat_map(|s| s.connection_errors.iter())
    {
        *errors.entry(reason).or_insert(0) += n;
    }
    page.family(
        "minikafka_connection_errors_total",
        "counter",
        "Connections the broker closed, by reason (frame, request, handler, idle, io).",
    );
    for (reason, n) in errors {
        page.sample(
            "minikafka_connection_errors_total",
            &[("reason", reason)],
            n,
        );
    }

    page.family(
        "minikafka_request_quota_time_seconds_total",
        "counter",
        "Shard time charged to request_percentage quotas, by part: handler (decoding and handling a request) and network (writing its answer), as Kafka charges request and network threads.",
    );
    for (part, seconds) in &snapshot.request_quota_seconds {
        page.sample(
            "minikafka_request_quota_time_seconds_total",
            &[("part", part)],
            seconds,
        );
    }

    // Client quota throttling (KIP-219), broker-wide and per entity.
    page.family(
        "minikafka_throttle_time_ms_total",
        "counter",
        "Throttle time answered to clients over their quota (throttle_time_ms, summed), by kind (produce, fetch).",
    );
    for (kind, ms, _) in &snapshot.throttle_totals {
        page.sample("minikafka_throttle_time_ms_total", &[("kind", kind)], ms);
    }
    page.family(
        "minikafka_throttled_responses_total",
        "counter",
        "Answers that carried a throttle time, by kind (produce, fetch).",
    );
    for (kind, _, n) in &snapshot.throttle_totals {
        page.sample("minikafka_throttled_responses_total", &[("kind", kind)], n);
    }
    page.family(
        "minikafka_quota_throttle_time_ms_total",
        "counter",
        "Throttle time answered per quota entity (user and client_id as Kafka tags its quota sensors; empty for a side the entity lacks), while the entity is measured.",
    );
    for e in &snapshot.throttled_entities {
        let labels = [
            ("kind", e.kind),
            ("user", e.user.as_str()),
            ("client_id", e.client_id.as_str()),
        ];
        page.sample(
            "minikafka_quota_throttle_time_ms_total",
            &labels,
            e.throttle_ms,
        );
    }

    if let Some(registry) = &snapshot.schema_registry {
        page.family(
            "minikafka_schema_registry_requests_total",
            "counter",
            "Schema registry HTTP requests answered, by method, endpoint (the route's template) and status.",
        );
        for ((method, endpoint, status), n) in &registry.requests {
            let status = status.to_string();
            let labels = [
                ("method", *method),
                ("endpoint", *endpoint),
                ("status", status.as_str()),
            ];
            page.sample("minikafka_schema_registry_requests_total", &labels, n);
        }
        page.family(
            "minikafka_schema_registry_schemas",
            "gauge",
            "Schemas the registry stores (each id once).",
        );
        page.sample("minikafka_schema_registry_schemas", &[], registry.schemas);
        page.family(
            "minikafka_schema_registry_subjects",
            "gauge",
            "Subjects with a live version.",
        );
        page.sample("minikafka_schema_registry_subjects", &[], registry.subjects);
    }

    // Transactions, summed over the shards hosting coordinators.
    let mut txns = TxnCounts::default();
    for t in snapshot.shards.iter().map(|s| &s.transactions) {
        txns.committed += t.committed;
        txns.aborted += t.aborted;
        txns.timed_out += t.timed_out;
        txns.ongoing += t.ongoing;
    }
    page.family(
        "minikafka_transactions_total",
        "counter",
        "Transactions ended, by result: committed, aborted (timed-out ones included), and timed_out (aborted by the coordinator for running past their timeout).",
    );
    for (result, n) in [
        ("committed", txns.committed),
        ("aborted", txns.aborted),
        ("timed_out", txns.timed_out),
    ] {
        page.sample("minikafka_transactions_total", &[("result", result)], n);
    }
    page.family(
        "minikafka_transactions_ongoing",
        "gauge",
        "Transactions open now (Ongoing in their coordinator).",
    );
    page.sample("minikafka_transactions_ongoing", &[], txns.ongoing);

    // Shards.
    page.family(
        "minikafka_shard_inbox_depth",
        "gauge",
        "Partition operations from other shards waiting in the shard's inbox.",
    );
    for s in &snapshot.shards {
        let shard = s.shard.to_string();
        page.sample(
            "minikafka_shard_inbox_depth",
            &[("shard", &shard)],
            s.inbox_depth,
        );
    }
    page.family(
        "minikafka_shard_requests_in_flight",
        "gauge",
        "Requests being handled on the shard's connections.",
    );
    for s in &snapshot.shards {
        let shard = s.shard.to_string();
        let labels = [("shard", shard.as_str())];
        page.sample(
            "minikafka_shard_requests_in_flight",
            &labels,
            s.requests_in_flight,
        );
    }
    page.family(
        "minikafka_recovery_seconds",
        "gauge",
        "Time the shard's startup took to open (recover) its partitions and load its groups.",
    );
    for s in &snapshot.shards {
        if let Some(seconds) = s.recovery_seconds {
            let shard = s.shard.to_string();
            page.sample("minikafka_recovery_seconds", &[("shard", &shard)], seconds);
        }
    }
    page.family(
        "minikafka_previous_shutdown_clean",
        "gauge",
        "1 when the previous run shut down cleanly (startup trusted the logs), else 0.",
    );
    page.sample(
        "minikafka_previous_shutdown_clean",
        &[],
        u8::from(snapshot.clean_shutdown),
    );
    page.family(
        "minikafka_scrape_shards_missing",
        "gauge",
        "Shards that did not answer this scrape in time (their series are missing).",
    );
    page.sample(
        "minikafka_scrape_shards_missing",
        &[],
        snapshot.shards_missing,
    );

    // Consumer groups.
    let ends: HashMap<(&str, i32), i64> = partitions
        .iter()
        .map(|p| ((p.topic.as_str(), p.partition), p.log_end_offset))
        .collect();
    let mut committed: Vec<_> = snapshot
        .shards
        .iter()
        .flat_map(|s| s.committed.iter())
        .collect();
    committed
        .sort_by(|a, b| (&a.group, &a.topic, a.partition).cmp(&(&b.group, &b.topic, b.partition)));
    page.family(
        "minikafka_consumer_group_committed_offset",
        "gauge",
        "The offset a consumer group committed for a partition.",
    );
    for c in &committed {
        let partition = c.partition.to_string();
        let labels = [
            ("group", c.group.as_str()),
            ("topic", &c.topic),
            ("partition", &partition),
        ];
        page.sample(
            "minikafka_consumer_group_committed_offset",
            &labels,
            c.offset,
        );
    }
    page.family(
        "minikafka_consumer_group_lag",
        "gauge",
        "Records between a group's committed offset and the partition's end offset.",
    );
    for c in &committed {
        let Some(&end) = ends.get(&(c.topic.as_str(), c.partition)) else {
            continue;
        };
        let partition = c.partition.to_string();
        let labels = [
            ("group", c.group.as_str()),
            ("topic", &c.topic),
            ("partition", &partition),
        ];
        page.sample(
            "minikafka_consumer_group_lag",
            &labels,
            (end - c.offset).max(0),
        );
    }
    page.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::snapshot::{CommittedOffset, PartitionTraffic, ShardSnapshot};

    fn shard(index: usize, partition: PartitionSnapshot) -> ShardSnapshot {
        ShardSnapshot {
            shard: index,
            partitions: vec![partition],
            apis: Vec::new(),
            syncs: no_syncs(),
            connections_accepted: 1,
            connections_refused: 0,
            connection_errors: vec![("frame", 1)],
            inbox_depth: 0,
            requests_in_flight: 0,
            recovery_seconds: Some(0.5),
            committed: Vec::new(),
            transactions: TxnCounts {
                committed: 2,
                ongoing: 1,
                ..TxnCounts::default()
            },
        }
    }

    fn partition(topic: &str, p: i32, end: i64) -> PartitionSnapshot {
        PartitionSnapshot {
            topic: topic.into(),
            partition: p,
            traffic: PartitionTraffic {
                records_in: end as u64,
                ..PartitionTraffic::default()
            },
            size_bytes: 10,
            log_start_offset: 0,
            log_end_offset: end,
            offline: false,
        }
    }

    #[test]
    fn the_page_has_help_and_type_before_samples_and_computes_lag() {
        let mut a = shard(0, partition("t\"x", 0, 7));
        a.committed.push(CommittedOffset {
            group: "g".into(),
            topic: "t\"x".into(),
            partition: 0,
            offset: 5,
        });
        let b = shard(1, partition("t\"x", 1, 3));
        let page = render(&BrokerSnapshot {
            shards: vec![a, b],
            shards_missing: 0,
            connections_open: 2,
            clean_shutdown: true,
            throttle_totals: vec![("produce", 1500, 2), ("fetch", 0, 0)],
            throttled_entities: vec![crate::metrics::snapshot::ThrottledEntity {
                kind: "produce",
                user: "alice".into(),
                client_id: String::new(),
                throttle_ms: 1500,
                throttled: 2,
            }],
            request_quota_seconds: vec![("handler", 0.25), ("network", 0.125)],
            schema_registry: Some(crate::metrics::registry_counters::RegistrySnapshot {
                requests: [(("POST", "/subjects/{subject}/versions", 409), 4)].into(),
                schemas: 3,
                subjects: 2,
            }),
        });
        assert!(page.contains(
            "minikafka_schema_registry_requests_total{method=\"POST\",endpoint=\"/subjects/{subject}/versions\",status=\"409\"} 4\n"
        ));
        assert!(page.contains("minikafka_schema_registry_schemas 3\n"));
        assert!(
            page.contains("minikafka_request_quota_time_seconds_total{part=\"network\"} 0.125\n")
        );
        assert!(page.contains("minikafka_records_in_total{topic=\"t\\\"x\",partition=\"0\"} 7\n"));
        assert!(page.contains(
            "minikafka_consumer_group_lag{group=\"g\",topic=\"t\\\"x\",partition=\"0\"} 2\n"
        ));
        assert!(page.contains("minikafka_connections_accepted_total 2\n"));
        assert!(page.contains("minikafka_throttle_time_ms_total{kind=\"produce\"} 1500\n"));
        assert!(page.contains("minikafka_throttled_responses_total{kind=\"fetch\"} 0\n"));
        assert!(page.contains(
            "minikafka_quota_throttle_time_ms_total{kind=\"produce\",user=\"alice\",client_id=\"\"} 1500\n"
        ));
        // Two shards, each with 2 committed and 1 ongoing.
        assert!(page.contains("minikafka_transactions_total{result=\"committed\"} 4\n"));
        assert!(page.contains("minikafka_transactions_total{result=\"timed_out\"} 0\n"));
        assert!(page.contains("minikafka_transactions_ongoing 2\n"));
        assert!(page.contains("minikafka_connection_errors_total{reason=\"frame\"} 2\n"));
        assert!(page.contains("minikafka_fsync_duration_seconds_bucket{le=\"+Inf\"} 0\n"));
        // Every sample's family was declared first.
        let mut declared = std::collections::HashSet::new();
        for line in page.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                declared.insert(rest.split(' ').next().expect("present").to_string());
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().expect("present");
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s).filter(|f| declared.contains(*f)))
                    .unwrap_or(name);
                assert!(declared.contains(family), "{line}");
            }
        }
    }
}
