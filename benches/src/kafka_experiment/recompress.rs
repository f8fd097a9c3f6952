//! Recompression: what a topic's `compression.type` costs when it differs from the codec the
//! producer sends (the broker inflates every batch and compresses it again, docs/DESIGN.md
//! "compression.type, as Kafka honours it"), against the copy-free append of a topic that
//! keeps the producer's codec (`compression.type=producer`).
//!
//! Contract:
//! - Inputs: [`RecompressOptions`]: the `minikafka` executable, the producer's codec, the
//!   topic codecs to compare (`producer` first, the baseline), record count and value size,
//!   repetitions.
//! - Per run: a fresh broker (flush policy `none`: the figure is the broker's CPU, not the
//!   disk's) and a fresh one-partition topic created with the case's `compression.type`; a
//!   librdkafka producer (acks=all, the producer codec, librdkafka's default batching) sends
//!   `records` values of `value_bytes` drawn in turn from a set of distinct, compressible,
//!   JSON-like values. Figures: acknowledged records/s, the broker's CPU (user + system, from
//!   `/proc`) per record during the produce, the bytes the partition's log holds per record
//!   afterwards, and the 1-minute load average.
//! - Repetitions are the outer loop and the cases alternate inside it, so the shared
//!   machine's drift falls on every case alike; each figure is the median with min–max.
//! - Never: asserts a timing; a failed delivery report or a short count is an error.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::broker_proc::{BrokerSource, FlushPolicy};
use crate::error::BenchError;
use crate::kafka_workloads::create_topic_with;
use crate::machine;
use crate::proc_stats;
use crate::rdkafka_workloads::{produce_values, RdSettings};
use crate::stats::Summary;

/// The topic codecs compared by default: the copy-free baseline, then each recompression.
pub const DEFAULT_TOPIC_CODECS: [&str; 5] = ["producer", "gzip", "snappy", "lz4", "zstd"];

/// Distinct values the producer cycles through: more than a batch holds (librdkafka's 1 MB
/// batches hold about 5,000 values of 200 B), so no batch repeats a value and compresses
/// better than real data would; 13 MB of 200 B values, built up front.
const DISTINCT_VALUES: usize = 65_536;

/// What to run.
#[derive(Clone, Debug)]
pub struct RecompressOptions {
    /// The `minikafka` executable.
    pub broker_bin: PathBuf,
    /// Parent of the brokers' data directories.
    pub scratch: PathBuf,
    /// The producer's `compression.type` (librdkafka's names: none, gzip, snappy, lz4, zstd).
    pub producer_codec: String,
    /// The topics' `compression.type`s, in the order each repetition runs them.
    pub topic_codecs: Vec<String>,
    /// Records per run.
    pub records: u64,
    /// Size of every value.
    pub value_bytes: usize,
    /// Repetitions of every case.
    pub reps: usize,
}

/// One run of one case.
#[derive(Clone, Debug, Serialize)]
pub struct RecompressRun {
    /// The topic's `compression.type`.
    pub topic_codec: String,
    /// The producer's codec.
    pub producer_codec: String,
    /// Repetition, from 1.
    pub rep: usize,
    /// Acknowledged records per second.
    pub records_per_s: f64,
    /// The broker's CPU per record during the produce, in microseconds.
    pub broker_cpu_us_per_record: f64,
    /// Bytes of the partition's log files per record after the run.
    pub log_bytes_per_record: f64,
    /// The 1-minute load average after the run.
    pub load_1m: Option<f64>,
}

/// `count` distinct JSON-like values of `value_bytes` each: field names and words repeat
/// (compressible, as real events are), numbers differ.
pub fn sample_values(count: usize, value_bytes: usize) -> Vec<Vec<u8>> {
    const WORDS: [&str; 8] = [
        "page_view",
        "add_to_cart",
        "checkout",
        "search",
        "login",
        "logout",
        "refund",
        "review",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // xorshift64: a fixed, seedless sequence (the same values on every run).
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..count)
        .map(|i| {
            let mut v = Vec::with_capacity(value_bytes);
            while v.len() < value_bytes {
                let r = next();
                let word = WORDS[(r % WORDS.len() as u64) as usize];
                let field = format!(
                    "{{\"id\":{i},\"user\":\"user-{}\",\"event\":\"{word}\",\"amount\":{}.{:02},\"path\":\"/products/{}\"}}",
                    (r >> 8) % 100_000,
                    (r >> 24) % 1000,
                    (r >> 40) % 100,
                    (r >> 48) % 5000
                );
                v.extend_from_slice(field.as_bytes());
            }
            v.truncate(value_bytes);
            v
        })
        .collect()
}

/// Total size of the regular files under `dir` whose name ends with `.log` (the segments).
fn log_bytes(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let path = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => log_bytes(&path),
                Ok(t) if t.is_file() && path.extension().is_some_and(|x| x == "log") => {
                    e.metadata().map(|m| m.len()).unwrap_or(0)
                }
                _ => 0,
            }
        })
        .sum()
}

/// Runs every case `reps` times (repetitions outer, cases alternating); `progress` sees each
/// run as it ends.
pub fn run(
    opts: &RecompressOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<RecompressRun>, BenchError> {
    let values = sample_values(DISTINCT_VALUES, opts.value_bytes);
    let source = BrokerSource::Spawn {
        bin: opts.broker_bin.clone(),
        scratch: opts.scratch.clone(),
        expect_backend: None,
        shards: None,
    };
    let settings = RdSettings {
        idempotence: false,
        max_in_flight: None,
        linger_ms: None,
    };
    let extra = [("compression.type", opts.producer_codec.clone())];
    let mut runs = Vec::new();
    for rep in 1..=opts.reps {
        for codec in &opts.topic_codecs {
            let broker = source.start(FlushPolicy::None, &format!("recompress-{codec}"))?;
            let topic = format!("recompress-{codec}-{rep}");
            create_topic_with(
                broker.addr,
                &topic,
                1,
                &[("compression.type".to_owned(), codec.clone())],
            )?;
            let pid = broker.pid();
            let cpu_before = pid.and_then(proc_stats::cpu_seconds);
            let acked = produce_values(
                &broker.bootstrap(),
                &topic,
                &values,
                opts.records,
                settings,
                &extra,
            )?;
            let cpu_after = pid.and_then(proc_stats::cpu_seconds);
            let cpu_s = cpu_before
                .zip(cpu_after)
                .map(|(a, b)| b - a)
                .ok_or_else(|| BenchError::Check("the broker's CPU time is unreadable".into()))?;
            let bytes = broker.data_dir().map(log_bytes).unwrap_or(0);
            let run = RecompressRun {
                topic_codec: codec.clone(),
                producer_codec: opts.producer_codec.clone(),
                rep,
                records_per_s: acked.per_s(),
                broker_cpu_us_per_record: cpu_s * 1e6 / acked.records as f64,
                log_bytes_per_record: bytes as f64 / acked.records as f64,
                load_1m: machine::load_avg_1m(),
            };
            progress(&format!(
                "rep {rep}: producer {} → topic {codec}: {:.0} records/s, broker {:.2} µs CPU/record, {:.1} log B/record, load {:.1}",
                opts.producer_codec,
                run.records_per_s,
                run.broker_cpu_us_per_record,
                run.log_bytes_per_record,
                run.load_1m.unwrap_or(f64::NAN)
            ));
            runs.push(run);
        }
    }
    Ok(runs)
}

/// `median (min–max)` of `values`, with `digits` decimals.
fn cell(values: &[f64], digits: usize) -> String {
    match Summary::of(values) {
        Some(s) => format!("{:.d$} ({:.d$}–{:.d$})", s.median, s.min, s.max, d = digits),
        None => "–".into(),
    }
}

/// The Markdown table: one row per topic codec, medians with min–max, and each case's
/// records/s and CPU per record as a ratio to the `producer` (copy-free) case's medians.
pub fn table_markdown(runs: &[RecompressRun], opts: &RecompressOptions) -> String {
    let pick = |codec: &str, f: fn(&RecompressRun) -> f64| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.topic_codec == codec)
            .map(f)
            .collect()
    };
    let median = |v: &[f64]| Summary::of(v).map(|s| s.median);
    let base_rate = median(&pick("producer", |r| r.records_per_s));
    let base_cpu = median(&pick("producer", |r| r.broker_cpu_us_per_record));
    let mut out = format!(
        "Producer codec `{}`, {} records of {} B per run, {} repetition(s), one partition, \
         acks=all, flush.policy=none; median (min–max).\n\n\
         | topic `compression.type` | records/s | × copy-free | broker CPU µs/record | × copy-free | log B/record | load (1 min) |\n\
         |---|---|---|---|---|---|---|\n",
        opts.producer_codec, opts.records, opts.value_bytes, opts.reps
    );
    for codec in &opts.topic_codecs {
        let rate = pick(codec, |r| r.records_per_s);
        let cpu = pick(codec, |r| r.broker_cpu_us_per_record);
        let bytes = pick(codec, |r| r.log_bytes_per_record);
        let load = pick(codec, |r| r.load_1m.unwrap_or(f64::NAN));
        let ratio = |m: Option<f64>, b: Option<f64>| match m.zip(b) {
            Some((m, b)) if b > 0.0 => format!("{:.2}", m / b),
            _ => "–".into(),
        };
        let name = if codec == "producer" {
            "producer (copy-free)".to_owned()
        } else {
            codec.clone()
        };
        out.push_str(&format!(
            "| {name} | {} | {} | {} | {} | {} | {} |\n",
            cell(&rate, 0),
            ratio(median(&rate), base_rate),
            cell(&cpu, 2),
            ratio(median(&cpu), base_cpu),
            cell(&bytes, 1),
            cell(&load, 1),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_values_are_distinct_sized_and_compressible() {
        let values = sample_values(64, 300);
        assert!(values.iter().all(|v| v.len() == 300));
        let distinct: std::collections::HashSet<_> = values.iter().collect();
        assert_eq!(distinct.len(), 64);
        // Field names repeat in every value: far fewer distinct bytes than a random value.
        let bytes: std::collections::HashSet<u8> = values.concat().into_iter().collect();
        assert!(bytes.len() < 80, "{} distinct bytes", bytes.len());
    }

    #[test]
    fn table_shows_ratios_to_the_copy_free_case() {
        let opts = RecompressOptions {
            broker_bin: PathBuf::new(),
            scratch: PathBuf::new(),
            producer_codec: "none".into(),
            topic_codecs: vec!["producer".into(), "zstd".into()],
            records: 10,
            value_bytes: 100,
            reps: 1,
        };
        let run = |codec: &str, rate: f64, cpu: f64| RecompressRun {
            topic_codec: codec.into(),
            producer_codec: "none".into(),
            rep: 1,
            records_per_s: rate,
            broker_cpu_us_per_record: cpu,
            log_bytes_per_record: 10.0,
            load_1m: Some(1.0),
        };
        let table = table_markdown(
            &[run("producer", 1000.0, 2.0), run("zstd", 500.0, 5.0)],
            &opts,
        );
        assert!(
            table.contains("| zstd | 500 (500–500) | 0.50 | 5.00 (5.00–5.00) | 2.50 |"),
            "{table}"
        );
        assert!(
            table.contains("| producer (copy-free) | 1000 (1000–1000) | 1.00 |"),
            "{table}"
        );
    }
}
