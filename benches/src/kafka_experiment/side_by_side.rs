//! Side by side: the librdkafka workloads against our broker and a peer broker (kfake by
//! default), one broker at a time on the same machine, same client and settings, brokers
//! alternating over repetitions, with each run's broker CPU seconds and peak RSS and the
//! same-run baselines (loopback TCP stream, fio fdatasync p50).
//!
//! Contract:
//! - Inputs: [`SideBySideOptions`]: sizes ([`SideBySideSizes::full`] or `quick`), our broker
//!   ([`BrokerSource`]) and the peer ([`PeerCommand`]).
//! - Every run gets a fresh broker (so its `VmHWM` is that run's peak) on a fresh data
//!   directory and a fresh one-partition topic. Durable runs pair our `flush.policy=fsync`
//!   with the peer's durable flag (`-sync`); the others pair `flush.policy=none` with the
//!   peer without it. Repetitions are the outer loop; within each, every workload runs on
//!   both brokers back to back, ours first in odd repetitions and the peer first in even ones.
//! - CPU seconds count the workload only (after topic creation and, for consume, the fill);
//!   peak RSS is the broker's whole life (the fill included).
//! - With [`SideBySideOptions::tls`], saturation and sequential writes also run on our broker
//!   over an SSL and a SASL_SSL (PLAIN) listener, with the same librdkafka client (OpenSSL on
//!   its side, rustls on ours) and certificates made in the scratch directory: the cost of
//!   TLS beside PLAINTEXT in the same run (issue 22 item 8). Those runs join the alternation
//!   (odd repetitions: PLAINTEXT, peer, SSL, SASL_SSL; even ones the reverse) and are tabled
//!   apart ([`tls_table_markdown`]); every other figure is PLAINTEXT's.
//! - Outputs: [`RunRecord`]s (one per run), [`BaselineRun`]s (one per repetition), the
//!   Markdown table ([`table_markdown`]: medians with min–max, ratios ours ÷ peer) and charts.
//! - Never: asserts a timing; a run whose outcome contradicts what it did (a failed delivery
//!   report, a missing or out-of-order record) is an error, not a figure.

use serde::Serialize;

use super::*;
use crate::broker_proc::free_port;
use crate::broker_proc::PeerCommand;
use crate::kafka_experiment::restart;
use crate::plots::Series;
use crate::proc_stats;
use crate::rdkafka_txn;
use crate::rdkafka_workloads::{
    consume_assigned, produce_count, produce_values, sequential_latency,
};
use crate::report::fmt_figure;
use crate::security_cost::{self, Protocol};

/// Unmeasured sequential writes before the timed ones.
const SEQUENTIAL_WARMUP: usize = 200;

/// Longest a restarted broker may take to answer Metadata.
const RESTART_TIMEOUT: Duration = Duration::from_secs(300);

/// Name of the restart run's figure.
pub const UNTIL_METADATA: &str = "until Metadata answers";

/// Sizes of the side-by-side runs.
#[derive(Clone, Debug, Serialize)]
pub struct SideBySideSizes {
    /// Repetitions on each broker.
    pub reps: usize,
    /// Records of the librdkafka saturation run.
    pub saturation_records: u64,
    /// Value size of the librdkafka saturation run.
    pub saturation_value_bytes: usize,
    /// Sequential writes timed (after [`SEQUENTIAL_WARMUP`] unmeasured ones).
    pub sequential_writes: usize,
    /// Value size of the sequential and outstanding writes.
    pub sequential_value_bytes: usize,
    /// Writes outstanding in the pipelined run.
    pub outstanding: u64,
    /// Length of the pipelined run.
    pub outstanding_duration: Duration,
    /// Records written, then consumed, by the consume run.
    pub consume_records: u64,
    /// Value size of the consume run.
    pub consume_value_bytes: usize,
    /// Rate of the end-to-end latency run (records/s).
    pub e2e_rate_per_s: f64,
    /// Value size of the end-to-end latency run.
    pub e2e_value_bytes: usize,
    /// Length of the end-to-end latency run, warm-up included.
    pub e2e_duration: Duration,
    /// Warm-up excluded from the end-to-end samples.
    pub e2e_warmup: Duration,
    /// Partitions of the restart run (one record each).
    pub restart_partitions: i32,
    /// Length of the loopback TCP stream baseline.
    pub tcp_duration: Duration,
    /// Size of the fio fdatasync job (4 KiB per sync).
    pub fio_sync_bytes: u64,
    /// Length of each transactional producer run (`txn_commit_*`).
    pub txn_duration: Duration,
    /// Value size of the transactional runs.
    pub txn_value_bytes: usize,
    /// Records written in transactions of [`TXN_FILL_PER_TXN`], then read, by
    /// `txn_read_committed`.
    pub txn_consume_records: u64,
}

/// Records per transaction of the read_committed run's fill.
pub const TXN_FILL_PER_TXN: u64 = 1_000;

impl SideBySideSizes {
    /// The comparison's sizes: 1 M × 256 B saturation and consume, 10k msg/s of 100 B.
    pub fn full() -> SideBySideSizes {
        SideBySideSizes {
            reps: 3,
            saturation_records: 1_000_000,
            saturation_value_bytes: 256,
            sequential_writes: 10_000,
            sequential_value_bytes: 16,
            outstanding: 128,
            outstanding_duration: Duration::from_secs(3),
            consume_records: 1_000_000,
            consume_value_bytes: 256,
            e2e_rate_per_s: 10_000.0,
            e2e_value_bytes: 100,
            e2e_duration: Duration::from_secs(3),
            e2e_warmup: Duration::from_millis(500),
            restart_partitions: 4000,
            tcp_duration: Duration::from_secs(1),
            fio_sync_bytes: 8 << 20,
            txn_duration: Duration::from_secs(3),
            txn_value_bytes: 100,
            txn_consume_records: 200_000,
        }
    }

    /// The CI smoke run: every workload on both brokers once, small (well under a minute).
    pub fn quick() -> SideBySideSizes {
        SideBySideSizes {
            reps: 1,
            saturation_records: 20_000,
            sequential_writes: 200,
            outstanding_duration: Duration::from_millis(300),
            consume_records: 20_000,
            e2e_duration: Duration::from_millis(500),
            e2e_warmup: Duration::from_millis(100),
            restart_partitions: 100,
            tcp_duration: Duration::from_millis(200),
            fio_sync_bytes: 256 << 10,
            txn_duration: Duration::from_millis(500),
            txn_consume_records: 20_000,
            ..SideBySideSizes::full()
        }
    }
}

/// What to run, and against what.
#[derive(Clone, Debug)]
pub struct SideBySideOptions {
    /// Sizes of the runs.
    pub sizes: SideBySideSizes,
    /// Our broker (started by the harness, so flush policies can be chosen).
    pub ours: BrokerSource,
    /// The peer broker.
    pub peer: PeerCommand,
    /// Directory on the data disk for the fio baseline.
    pub scratch: PathBuf,
    /// The workloads to run (every one of [`Workload::ALL`] when empty): a profiling run
    /// picks one.
    pub workloads: Vec<Workload>,
    /// Only the durable runs (`Some(true)`), only the others (`Some(false)`), or both.
    pub durable: Option<bool>,
    /// Also run the workloads with TLS columns ([`Workload::has_tls_columns`]) on our broker
    /// over SSL and SASL_SSL.
    pub tls: bool,
}

/// Which broker a run measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// minikafka.
    Ours,
    /// The peer broker.
    Peer,
}

/// The workloads, each named by what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// librdkafka producing a fixed count of records as fast as it can, acks=all, idempotent.
    Saturation,
    /// librdkafka writing one record at a time, each waiting for its delivery report.
    Sequential,
    /// librdkafka with a window of outstanding writes.
    Outstanding,
    /// librdkafka's consumer, assigned the partition, reading it from the start.
    Consume,
    /// Our client producing at a fixed rate while a consumer long-polls: send to receipt.
    EndToEnd,
    /// Many partitions, one record each, the broker killed with SIGKILL and started again:
    /// time until Metadata answers.
    Restart,
    /// A librdkafka transactional producer committing every record.
    TxnCommit1,
    /// The same, committing every 100 records.
    TxnCommit100,
    /// The same, committing every 10,000 records.
    TxnCommit10k,
    /// librdkafka's consumer at `isolation.level=read_committed`, assigned the partition,
    /// reading transactions of [`TXN_FILL_PER_TXN`] records from the start.
    TxnReadCommitted,
}

impl Workload {
    /// Every workload, in table order.
    pub const ALL: [Workload; 6] = [
        Workload::Saturation,
        Workload::Sequential,
        Workload::Outstanding,
        Workload::Consume,
        Workload::EndToEnd,
        Workload::Restart,
    ];

    /// The transactional workloads: not in [`Workload::ALL`] (the default run and the CI
    /// smoke), chosen with `--only txn` (or one by one).
    pub const TXN: [Workload; 4] = [
        Workload::TxnCommit1,
        Workload::TxnCommit100,
        Workload::TxnCommit10k,
        Workload::TxnReadCommitted,
    ];

    /// Whether the workload also runs over our SSL and SASL_SSL listeners (issue 22 item 8:
    /// saturation and sequential p50).
    pub fn has_tls_columns(self) -> bool {
        matches!(self, Workload::Saturation | Workload::Sequential)
    }

    /// Every workload there is, in table order.
    pub fn every() -> impl Iterator<Item = Workload> {
        Workload::ALL.into_iter().chain(Workload::TXN)
    }

    /// The workload whose [`Workload::slug`] is `slug`.
    pub fn from_slug(slug: &str) -> Option<Workload> {
        Workload::every().find(|w| w.slug() == slug)
    }

    /// The workloads `slug` names: one, or every transactional one for `txn`.
    pub fn from_group_slug(slug: &str) -> Option<Vec<Workload>> {
        if slug == "txn" {
            return Some(Workload::TXN.to_vec());
        }
        Workload::from_slug(slug).map(|w| vec![w])
    }

    /// Records per transaction of a `txn_commit_*` workload.
    pub fn records_per_txn(self) -> Option<u64> {
        match self {
            Workload::TxnCommit1 => Some(1),
            Workload::TxnCommit100 => Some(100),
            Workload::TxnCommit10k => Some(10_000),
            _ => None,
        }
    }

    /// Short name for files and data directories.
    pub fn slug(self) -> &'static str {
        match self {
            Workload::Saturation => "saturation",
            Workload::Sequential => "sequential",
            Workload::Outstanding => "outstanding",
            Workload::Consume => "consume",
            Workload::EndToEnd => "end_to_end",
            Workload::Restart => "restart",
            Workload::TxnCommit1 => "txn_commit_1",
            Workload::TxnCommit100 => "txn_commit_100",
            Workload::TxnCommit10k => "txn_commit_10k",
            Workload::TxnReadCommitted => "txn_read_committed",
        }
    }

    /// What the workload is, with its sizes.
    pub fn title(self, s: &SideBySideSizes) -> String {
        match self {
            Workload::Saturation => format!(
                "librdkafka saturation, acks=all, idempotent, {} × {} B, 1 partition",
                count_label(s.saturation_records),
                s.saturation_value_bytes
            ),
            Workload::Sequential => format!(
                "sequential writes, librdkafka acks=all, idempotent, one in flight, {} × {} B",
                s.sequential_writes, s.sequential_value_bytes
            ),
            Workload::Outstanding => format!(
                "same at {} outstanding, librdkafka acks=all, idempotent",
                s.outstanding
            ),
            Workload::Consume => format!(
                "librdkafka consume {} × {} B, assigned",
                count_label(s.consume_records),
                s.consume_value_bytes
            ),
            Workload::EndToEnd => format!(
                "end to end at {} msg/s, {} B (minikafka-client producer and consumer)",
                count_label(s.e2e_rate_per_s as u64),
                s.e2e_value_bytes
            ),
            Workload::Restart => format!(
                "restart after kill -9 with {} partitions (1 record each), until Metadata answers",
                s.restart_partitions
            ),
            Workload::TxnCommit1 | Workload::TxnCommit100 | Workload::TxnCommit10k => format!(
                "librdkafka transactional producer committing every {} record(s) of {} B for {:?}",
                count_label(self.records_per_txn().unwrap_or(0)),
                s.txn_value_bytes,
                s.txn_duration
            ),
            Workload::TxnReadCommitted => format!(
                "librdkafka consume at read_committed, {} × {} B in transactions of {}, assigned",
                count_label(s.txn_consume_records),
                s.txn_value_bytes,
                count_label(TXN_FILL_PER_TXN)
            ),
        }
    }
}

/// `1 M`, `10k`, or the number itself.
fn count_label(n: u64) -> String {
    if n >= 1_000_000 && n.is_multiple_of(1_000_000) {
        format!("{} M", n / 1_000_000)
    } else if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

/// One measured figure of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metric {
    /// What it is (`p50`).
    pub name: String,
    /// Its unit (`µs`).
    pub unit: String,
    /// The figure.
    pub value: f64,
}

fn metric(name: &str, unit: &str, value: f64) -> Metric {
    Metric {
        name: name.into(),
        unit: unit.into(),
        value,
    }
}

/// Name of the derived metric: broker CPU per record.
pub const CPU_PER_RECORD: &str = "broker CPU per record";
/// Name of the saturation run's client CPU per record (this process: librdkafka and the
/// loop feeding it), which shares the machine with the broker.
pub const CLIENT_CPU_PER_RECORD: &str = "client CPU per record";
/// Name of the derived metric: broker peak RSS.
pub const PEAK_RSS: &str = "broker peak RSS";

/// One run of one workload on one broker.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunRecord {
    /// Repetition, from 1.
    pub rep: usize,
    /// Ours or the peer.
    pub side: Side,
    /// The broker (`minikafka uring`, `kfake`).
    pub broker: String,
    /// The client's `security.protocol` (`PLAINTEXT`, `SSL`, `SASL_SSL`).
    pub listener: String,
    /// Durable (ours fsync, the peer with its durable flag) or not.
    pub durable: bool,
    /// The flush setting as the broker was given it (`fsync`, `-sync`, `none`).
    pub flush: String,
    /// The workload's short name.
    pub workload: String,
    /// Whether librdkafka ran with `enable.idempotence=true` (the broker advertises
    /// InitProducerId).
    pub idempotence: bool,
    /// Records the workload moved.
    pub records: u64,
    /// The workload's figures, then broker CPU per record and peak RSS when `/proc` had them.
    pub metrics: Vec<Metric>,
    /// Broker CPU seconds (user + system) during the workload.
    pub broker_cpu_s: Option<f64>,
    /// 1-minute load average at the end of the run.
    pub load_avg_1m: Option<f64>,
}

/// The baselines of one repetition.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BaselineRun {
    /// Repetition, from 1.
    pub rep: usize,
    /// Loopback TCP stream, Gbit/s.
    pub tcp_gbit_s: f64,
    /// fio fdatasync p50 of 4 KiB writes, µs.
    pub fdatasync_p50_us: f64,
}

/// Either broker, started the same way for every run (also the scale experiment's).
pub(super) enum Contender<'a> {
    Ours(&'a BrokerSource),
    Peer(&'a PeerCommand),
}

impl Contender<'_> {
    pub(super) fn side(&self) -> Side {
        match self {
            Contender::Ours(_) => Side::Ours,
            Contender::Peer(_) => Side::Peer,
        }
    }

    pub(super) fn start(&self, durable: bool, label: &str) -> Result<BrokerHandle, BenchError> {
        self.start_with(durable, label, &[])
    }

    /// As [`Contender::start`], with `extra` broker settings (ours only).
    fn start_with(
        &self,
        durable: bool,
        label: &str,
        extra: &[String],
    ) -> Result<BrokerHandle, BenchError> {
        match self {
            Contender::Ours(source) => {
                let policy = if durable {
                    FlushPolicy::Fsync
                } else {
                    FlushPolicy::None
                };
                source.start_with(policy, label, extra)
            }
            Contender::Peer(_) if !extra.is_empty() => Err(BenchError::Broker(
                "the peer is measured over PLAINTEXT only".into(),
            )),
            Contender::Peer(peer) => peer.start(durable, label),
        }
    }

    pub(super) fn broker_name(&self, handle: &BrokerHandle) -> String {
        match self {
            Contender::Ours(_) => format!("minikafka {}", handle.backend),
            Contender::Peer(_) => handle.backend.clone(),
        }
    }
}

/// The baselines of repetition `rep`: loopback TCP stream and fio fdatasync p50.
fn baseline_run(
    opts: &SideBySideOptions,
    rep: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<BaselineRun, BenchError> {
    let s = &opts.sizes;
    let stream = tcp_stream(s.tcp_duration, 1 << 20)?;
    fs::create_dir_all(&opts.scratch)?;
    let file = opts.scratch.join("fio-sync.tmp");
    let out = fio::run(&fio::fdatasync_args(&file, s.fio_sync_bytes))?;
    let _ = fs::remove_file(&file);
    let lat = fio::parse_sync_latency(&out)?;
    let b = BaselineRun {
        rep,
        tcp_gbit_s: stream.mb_per_s() * 8.0 / 1e3,
        fdatasync_p50_us: lat.p50_ns / 1e3,
    };
    progress(&format!(
        "baselines rep {rep}: loopback TCP {:.1} Gbit/s, fdatasync p50 {:.0} µs",
        b.tcp_gbit_s, b.fdatasync_p50_us
    ));
    Ok(b)
}

/// A started broker, and what librdkafka needs to reach it over the listener measured.
struct Started {
    broker: BrokerHandle,
    /// `bootstrap.servers`: the measured listener's address.
    bootstrap: String,
    /// librdkafka's `security.protocol` and the settings that go with it.
    client_security: Vec<(&'static str, String)>,
}

/// Starts `contender` for a run over `over`: as it is for PLAINTEXT; for SSL and SASL_SSL
/// (ours only), with a PLAINTEXT listener first (the handle's address: topics are made
/// there), an SSL and a SASL_SSL one, and the keystore [`security_cost::make_pki`] wrote in
/// `pki`.
fn start_over(
    contender: &Contender<'_>,
    over: Protocol,
    pki: Option<&Path>,
    durable: bool,
    label: &str,
) -> Result<Started, BenchError> {
    if over == Protocol::Plaintext {
        let broker = contender.start(durable, label)?;
        let bootstrap = broker.bootstrap();
        return Ok(Started {
            broker,
            bootstrap,
            client_security: Vec::new(),
        });
    }
    let pki = pki.ok_or_else(|| BenchError::Broker("TLS runs need certificates".into()))?;
    let ports = [free_port()?, free_port()?, free_port()?];
    let mut extra = vec![format!(
        "listeners=PLAINTEXT://127.0.0.1:{},SSL://127.0.0.1:{},SASL_SSL://127.0.0.1:{}",
        ports[0], ports[1], ports[2]
    )];
    extra.extend(security_cost::tls_settings(pki));
    let broker = contender.start_with(durable, label, &extra)?;
    let mut client_security = vec![
        ("security.protocol", over.name().to_owned()),
        ("ssl.ca.location", pki.join("ca.crt").display().to_string()),
    ];
    let port = if over == Protocol::SaslSsl {
        client_security.extend([
            ("sasl.mechanism", "PLAIN".to_owned()),
            ("sasl.username", security_cost::SASL_USER.0.to_owned()),
            ("sasl.password", security_cost::SASL_USER.1.to_owned()),
        ]);
        ports[2]
    } else {
        ports[1]
    };
    Ok(Started {
        broker,
        bootstrap: format!("127.0.0.1:{port}"),
        client_security,
    })
}

/// Runs `workload` once on a fresh broker of `contender`, the client over `over` (`pki`:
/// the certificates of a TLS run).
fn run_one(
    contender: &Contender<'_>,
    over: Protocol,
    pki: Option<&Path>,
    workload: Workload,
    durable: bool,
    rep: usize,
    s: &SideBySideSizes,
) -> Result<RunRecord, BenchError> {
    if over != Protocol::Plaintext && !workload.has_tls_columns() {
        return Err(BenchError::Broker(format!(
            "{} runs over PLAINTEXT only",
            workload.slug()
        )));
    }
    let Started {
        mut broker,
        bootstrap,
        client_security,
    } = start_over(contender, over, pki, durable, workload.slug())?;
    let idempotence = kw::advertises_init_producer_id(broker.addr)?;
    let topic = format!("{}-{rep}", workload.slug());
    let partitions = match workload {
        Workload::Restart => s.restart_partitions,
        _ => 1,
    };
    create_topic(broker.addr, &topic, partitions)?;
    let pid = broker.pid();
    let cpu_now = || pid.and_then(proc_stats::cpu_seconds);
    let producer = RdSettings {
        idempotence,
        max_in_flight: None,
        linger_ms: None,
    };
    let one_at_a_time = RdSettings {
        max_in_flight: Some(1),
        linger_ms: Some(0),
        ..producer
    };
    let (records, mut metrics, cpu_s) = match workload {
        Workload::Saturation => {
            let client_cpu_now = || proc_stats::cpu_seconds(std::process::id());
            let (before, client_before) = (cpu_now(), client_cpu_now());
            let a = produce_values(
                &bootstrap,
                &topic,
                &[vec![b'c'; s.saturation_value_bytes]],
                s.saturation_records,
                producer,
                &client_security,
            )?;
            let cpu = cpu_delta(before, cpu_now());
            let mut metrics = vec![metric("acked", "records/s", a.per_s())];
            // The producer's connection, metadata and first write are in it too (as in
            // the broker's): noise next to a million records.
            if let Some(client) = cpu_delta(client_before, client_cpu_now()) {
                metrics.push(metric(
                    CLIENT_CPU_PER_RECORD,
                    "µs",
                    client * 1e6 / a.records.max(1) as f64,
                ));
            }
            (a.records, metrics, cpu)
        }
        Workload::Sequential => {
            let before = cpu_now();
            let samples = sequential_latency(
                &bootstrap,
                &topic,
                s.sequential_value_bytes,
                s.sequential_writes,
                SEQUENTIAL_WARMUP,
                one_at_a_time,
                &client_security,
            )?;
            let cpu = cpu_delta(before, cpu_now());
            let metrics = vec![
                metric("p50", "µs", percentile_us(&samples, 0.5, f64::NAN)),
                metric("p99", "µs", percentile_us(&samples, 0.99, f64::NAN)),
            ];
            // The broker served the warm-up writes too.
            (
                samples.len() as u64 + SEQUENTIAL_WARMUP as u64,
                metrics,
                cpu,
            )
        }
        Workload::Outstanding => {
            let before = cpu_now();
            let a = produce_acked(
                &bootstrap,
                &topic,
                s.sequential_value_bytes,
                s.outstanding_duration,
                Some(s.outstanding),
                one_at_a_time,
            )?;
            let cpu = cpu_delta(before, cpu_now());
            (
                a.records,
                vec![metric("confirmed", "writes/s", a.per_s())],
                cpu,
            )
        }
        Workload::Consume => {
            let filler = RdSettings {
                idempotence: false,
                ..producer
            };
            produce_count(
                &bootstrap,
                &topic,
                s.consume_value_bytes,
                s.consume_records,
                filler,
            )?;
            let before = cpu_now();
            // The fill's unmeasured first write makes one more record.
            let c = consume_assigned(&bootstrap, &topic, s.consume_records + 1)?;
            let cpu = cpu_delta(before, cpu_now());
            (
                c.records,
                vec![metric("consumed", "records/s", c.per_s())],
                cpu,
            )
        }
        Workload::EndToEnd => {
            let spec = LatencySpec {
                rate_per_s: s.e2e_rate_per_s,
                batch_records: 1,
                value_bytes: s.e2e_value_bytes,
                duration: s.e2e_duration,
                warmup: s.e2e_warmup,
                max_in_flight: 64,
            };
            let before = cpu_now();
            let run = latency_run(broker.addr, &topic, spec)?;
            let cpu = cpu_delta(before, cpu_now());
            let metrics = vec![
                metric("p50", "µs", percentile_us(&run.e2e_ns, 0.5, f64::NAN)),
                metric("p99", "µs", percentile_us(&run.e2e_ns, 0.99, f64::NAN)),
            ];
            (run.sent, metrics, cpu)
        }
        Workload::Restart => {
            restart::fill_every_partition(broker.addr, &topic, partitions, 100)?;
            let took = broker.kill_and_restart(
                |addr| restart::answers_with_every_partition(addr, &topic, partitions),
                RESTART_TIMEOUT,
            )?;
            // The restarted process's CPU is all startup (and the probes' Metadata answers).
            let cpu = broker.pid().and_then(proc_stats::cpu_seconds);
            restart::check_every_partition_holds(broker.addr, &topic, 1)?;
            let mut metrics = vec![metric(UNTIL_METADATA, "s", took.as_secs_f64())];
            if let Some(cpu) = cpu {
                metrics.push(metric("startup CPU", "s", cpu));
            }
            // Per-record CPU means nothing for a restart: count no records.
            (0, metrics, None)
        }
        Workload::TxnCommit1 | Workload::TxnCommit100 | Workload::TxnCommit10k => {
            let per_txn = workload.records_per_txn().unwrap_or(1);
            let before = cpu_now();
            let run = rdkafka_txn::produce_transactions(
                &bootstrap,
                &topic,
                &format!("mk-bench-{topic}"),
                s.txn_value_bytes,
                per_txn,
                s.txn_duration,
            )?;
            let cpu = cpu_delta(before, cpu_now());
            let metrics = vec![
                metric("committed", "records/s", run.per_s()),
                metric(
                    "commit p50",
                    "µs",
                    percentile_us(&run.commit_ns, 0.5, f64::NAN),
                ),
                metric(
                    "commit p99",
                    "µs",
                    percentile_us(&run.commit_ns, 0.99, f64::NAN),
                ),
            ];
            (run.records, metrics, cpu)
        }
        Workload::TxnReadCommitted => {
            rdkafka_txn::fill_transactions(
                &bootstrap,
                &topic,
                &format!("mk-bench-fill-{topic}"),
                s.txn_value_bytes,
                s.txn_consume_records,
                TXN_FILL_PER_TXN,
            )?;
            let before = cpu_now();
            let read =
                rdkafka_txn::consume_read_committed(&bootstrap, &topic, s.txn_consume_records)?;
            let cpu = cpu_delta(before, cpu_now());
            let after_first = read.records.saturating_sub(1) as f64 / read.from_first_s;
            (
                read.records,
                vec![
                    metric(
                        "consumed",
                        "records/s",
                        read.records as f64 / read.elapsed_s,
                    ),
                    metric("consumed after the first record", "records/s", after_first),
                ],
                cpu,
            )
        }
    };
    if let Some(cpu) = cpu_s.filter(|_| records > 0) {
        metrics.push(metric(CPU_PER_RECORD, "µs", cpu * 1e6 / records as f64));
    }
    if let Some(peak) = broker.pid().and_then(proc_stats::peak_rss_bytes) {
        metrics.push(metric(PEAK_RSS, "MB", peak as f64 / 1e6));
    }
    Ok(RunRecord {
        rep,
        side: contender.side(),
        broker: contender.broker_name(&broker),
        listener: over.name().into(),
        durable,
        flush: broker.flush.clone(),
        workload: workload.slug().into(),
        idempotence,
        records,
        metrics,
        broker_cpu_s: cpu_s,
        load_avg_1m: machine::load_avg_1m(),
    })
}

fn cpu_delta(before: Option<f64>, after: Option<f64>) -> Option<f64> {
    before.zip(after).map(|(a, b)| b - a)
}

/// Runs every workload on both brokers, durable and not, `reps` times; `on_run` sees each
/// run as soon as it is done.
pub fn run(
    opts: &SideBySideOptions,
    progress: &mut dyn FnMut(&str),
    on_run: &mut dyn FnMut(&RunRecord) -> Result<(), BenchError>,
) -> Result<(Vec<RunRecord>, Vec<BaselineRun>), BenchError> {
    let s = &opts.sizes;
    let (mut runs, mut baselines) = (Vec::new(), Vec::new());
    let pki = if opts.tls {
        let dir = opts.scratch.join("pki");
        security_cost::make_pki(&dir)?;
        Some(dir)
    } else {
        None
    };
    for rep in 1..=s.reps {
        baselines.push(baseline_run(opts, rep, progress)?);
        let durabilities: Vec<bool> = match opts.durable {
            Some(d) => vec![d],
            None => vec![true, false],
        };
        for durable in durabilities {
            for workload in Workload::every() {
                let chosen = if opts.workloads.is_empty() {
                    Workload::ALL.contains(&workload)
                } else {
                    opts.workloads.contains(&workload)
                };
                if !chosen {
                    continue;
                }
                let mut order = vec![
                    (Contender::Ours(&opts.ours), Protocol::Plaintext),
                    (Contender::Peer(&opts.peer), Protocol::Plaintext),
                ];
                if opts.tls && workload.has_tls_columns() {
                    order.push((Contender::Ours(&opts.ours), Protocol::Ssl));
                    order.push((Contender::Ours(&opts.ours), Protocol::SaslSsl));
                }
                if rep % 2 == 0 {
                    order.reverse();
                }
                for (contender, over) in &order {
                    let r = run_one(contender, *over, pki.as_deref(), workload, durable, rep, s)?;
                    progress(&format!(
                        "rep {rep} {} over {} flush {} {}: {}",
                        r.broker,
                        r.listener,
                        r.flush,
                        r.workload,
                        r.metrics
                            .iter()
                            .map(|m| format!("{} {} {}", m.name, fmt_figure(m.value), m.unit))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                    on_run(&r)?;
                    runs.push(r);
                }
            }
        }
    }
    Ok((runs, baselines))
}

/// The values of `metric` of `workload` over the PLAINTEXT runs of one side and durability.
pub fn values(
    runs: &[RunRecord],
    workload: &str,
    metric: &str,
    side: Side,
    durable: bool,
) -> Vec<f64> {
    values_over(runs, workload, metric, side, durable, Protocol::Plaintext)
}

/// As [`values`], over the runs whose client used `over`.
pub fn values_over(
    runs: &[RunRecord],
    workload: &str,
    metric: &str,
    side: Side,
    durable: bool,
    over: Protocol,
) -> Vec<f64> {
    runs.iter()
        .filter(|r| r.workload == workload && r.side == side && r.durable == durable)
        .filter(|r| r.listener == over.name())
        .filter_map(|r| r.metrics.iter().find(|m| m.name == metric))
        .map(|m| m.value)
        .collect()
}

/// `median (min–max)`, or the median alone for one run, `–` for none.
pub fn cell(values: &[f64]) -> String {
    match Summary::of(values) {
        None => "–".into(),
        Some(x) if x.count == 1 => fmt_figure(x.median),
        Some(x) => format!(
            "{} ({}–{})",
            fmt_figure(x.median),
            fmt_figure(x.min),
            fmt_figure(x.max)
        ),
    }
}

fn ratio_cell(ours: &[f64], peer: &[f64]) -> String {
    match (Summary::of(ours), Summary::of(peer)) {
        (Some(o), Some(p)) if p.median != 0.0 => format!("{:.2} ×", o.median / p.median),
        _ => "–".into(),
    }
}

/// The (workload, metric, unit) lines of the table, in run order.
fn table_lines(runs: &[RunRecord]) -> Vec<(String, String, String)> {
    let mut lines: Vec<(String, String, String)> = Vec::new();
    for r in runs {
        for m in &r.metrics {
            let line = (r.workload.clone(), m.name.clone(), m.unit.clone());
            if !lines.contains(&line) {
                lines.push(line);
            }
        }
    }
    lines
}

/// The column heading of one side and durability: `minikafka uring, fsync`.
fn heading(runs: &[RunRecord], side: Side, durable: bool) -> String {
    runs.iter()
        .find(|r| r.side == side && r.durable == durable)
        .map_or_else(|| "–".into(), |r| format!("{}, {}", r.broker, r.flush))
}

/// The side-by-side table: one line per workload and figure; durable then non-durable
/// columns, each ours, the peer, and ours ÷ peer (medians).
pub fn table_markdown(runs: &[RunRecord], sizes: &SideBySideSizes) -> String {
    let titles: Vec<(String, String)> = Workload::every()
        .map(|w| (w.slug().to_owned(), w.title(sizes)))
        .collect();
    let title_of = |slug: &str| {
        titles
            .iter()
            .find(|(s, _)| s == slug)
            .map_or_else(|| slug.to_owned(), |(_, t)| t.clone())
    };
    let mut md = format!(
        "| workload | figure | {} | {} | ours ÷ peer | {} | {} | ours ÷ peer |\n|---|---|---|---|---|---|---|---|\n",
        heading(runs, Side::Ours, true),
        heading(runs, Side::Peer, true),
        heading(runs, Side::Ours, false),
        heading(runs, Side::Peer, false),
    );
    for (workload, name, unit) in table_lines(runs) {
        let mut line = format!("| {} | {name} ({unit}) |", title_of(&workload));
        for durable in [true, false] {
            let ours = values(runs, &workload, &name, Side::Ours, durable);
            let peer = values(runs, &workload, &name, Side::Peer, durable);
            line.push_str(&format!(
                " {} | {} | {} |",
                cell(&ours),
                cell(&peer),
                ratio_cell(&ours, &peer)
            ));
        }
        md.push_str(&line);
        md.push('\n');
    }
    md
}

/// The cost of TLS in this run: one line per figure of the workloads measured over SSL, our
/// broker's PLAINTEXT, SSL and SASL_SSL medians (min–max) and each TLS one ÷ PLAINTEXT,
/// durable then not; `None` when no run went over TLS.
pub fn tls_table_markdown(runs: &[RunRecord], sizes: &SideBySideSizes) -> Option<String> {
    let ssl = Protocol::Ssl.name();
    let measured: Vec<&str> = Workload::every()
        .map(Workload::slug)
        .filter(|w| runs.iter().any(|r| r.workload == *w && r.listener == ssl))
        .collect();
    if measured.is_empty() {
        return None;
    }
    let flush_of = |durable: bool| {
        runs.iter()
            .find(|r| r.side == Side::Ours && r.durable == durable)
            .map_or_else(|| "–".to_owned(), |r| r.flush.clone())
    };
    let mut md = String::from("| workload | figure |");
    for durable in [true, false] {
        let flush = flush_of(durable);
        md.push_str(&format!(
            " PLAINTEXT, {flush} | SSL, {flush} | SSL ÷ PLAINTEXT | SASL_SSL, {flush} | SASL_SSL ÷ PLAINTEXT |"
        ));
    }
    md.push_str("\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (workload, name, unit) in table_lines(runs) {
        if !measured.contains(&workload.as_str()) || name == PEAK_RSS {
            continue;
        }
        let title =
            Workload::from_slug(&workload).map_or_else(|| workload.clone(), |w| w.title(sizes));
        let mut line = format!("| {title} | {name} ({unit}) |");
        for durable in [true, false] {
            let over = |p| values_over(runs, &workload, &name, Side::Ours, durable, p);
            let plain = over(Protocol::Plaintext);
            for tls in [Protocol::Ssl, Protocol::SaslSsl] {
                if tls == Protocol::Ssl {
                    line.push_str(&format!(" {} |", cell(&plain)));
                }
                let v = over(tls);
                line.push_str(&format!(" {} | {} |", cell(&v), ratio_cell(&v, &plain)));
            }
        }
        md.push_str(&line);
        md.push('\n');
    }
    Some(md)
}

/// The same-run baselines as one Markdown line.
pub fn baselines_markdown(baselines: &[BaselineRun]) -> String {
    let tcp: Vec<f64> = baselines.iter().map(|b| b.tcp_gbit_s).collect();
    let sync: Vec<f64> = baselines.iter().map(|b| b.fdatasync_p50_us).collect();
    format!(
        "Same-run baselines: loopback TCP stream {} Gbit/s; fio fdatasync of 4 KiB, p50 {} µs \
         (median (min–max) over {} repetitions).\n",
        cell(&tcp),
        cell(&sync),
        baselines.len()
    )
}

/// One chart per workload figure: each run's value by repetition, one line per broker and
/// durability (so drift of the machine shows as drift on both). CPU and RSS are charted for
/// the saturation run only.
pub fn charts(runs: &[RunRecord]) -> Vec<(String, Chart)> {
    let mut out = Vec::new();
    for (workload, name, unit) in table_lines(runs) {
        let derived = name == CPU_PER_RECORD || name == PEAK_RSS || name == CLIENT_CPU_PER_RECORD;
        if derived && workload != Workload::Saturation.slug() {
            continue;
        }
        let mut series = Vec::new();
        for durable in [true, false] {
            for side in [Side::Ours, Side::Peer] {
                let points: Vec<(f64, f64)> = runs
                    .iter()
                    .filter(|r| r.workload == workload && r.side == side && r.durable == durable)
                    .filter(|r| r.listener == Protocol::Plaintext.name())
                    .filter_map(|r| {
                        r.metrics
                            .iter()
                            .find(|m| m.name == name)
                            .map(|m| (r.rep as f64, m.value))
                    })
                    .collect();
                if !points.is_empty() {
                    series.push(Series {
                        label: heading(runs, side, durable),
                        points,
                    });
                }
            }
        }
        let file = format!("{workload}_{}", name.replace(' ', "_"));
        out.push((
            file,
            Chart {
                title: format!("{workload}: {name}"),
                x_label: "repetition".into(),
                y_label: unit,
                log_x: false,
                log_y: false,
                series,
            },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        rep: usize,
        side: Side,
        durable: bool,
        workload: &str,
        figures: &[(&str, f64)],
    ) -> RunRecord {
        RunRecord {
            rep,
            side,
            broker: if side == Side::Ours {
                "minikafka uring"
            } else {
                "kfake"
            }
            .into(),
            listener: "PLAINTEXT".into(),
            durable,
            flush: match (side, durable) {
                (Side::Ours, true) => "fsync",
                (Side::Peer, true) => "-sync",
                _ => "none",
            }
            .into(),
            workload: workload.into(),
            idempotence: true,
            records: 10,
            metrics: figures.iter().map(|&(n, v)| metric(n, "u", v)).collect(),
            broker_cpu_s: Some(1.0),
            load_avg_1m: None,
        }
    }

    #[test]
    fn table_has_medians_ranges_and_ratios_per_side_and_durability() {
        let mut runs = Vec::new();
        for (rep, ours, peer) in [(1, 100.0, 200.0), (2, 300.0, 100.0), (3, 200.0, 400.0)] {
            runs.push(run(rep, Side::Ours, true, "saturation", &[("acked", ours)]));
            runs.push(run(rep, Side::Peer, true, "saturation", &[("acked", peer)]));
        }
        runs.push(run(1, Side::Ours, false, "saturation", &[("acked", 50.0)]));
        let md = table_markdown(&runs, &SideBySideSizes::full());
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 3, "{md}");
        assert!(
            lines[0].contains("| minikafka uring, fsync | kfake, -sync |"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("| minikafka uring, none | – |"),
            "{}",
            lines[0]
        );
        assert!(lines[2].starts_with(
            "| librdkafka saturation, acks=all, idempotent, 1 M × 256 B, 1 partition | acked (u) |"
        ));
        assert!(
            lines[2].contains("| 200 (100–300) | 200 (100–400) | 1.00 × | 50.0 | – | – |"),
            "{}",
            lines[2]
        );
    }

    #[test]
    fn the_tls_table_sets_ssl_and_sasl_ssl_beside_plaintext_and_the_main_table_ignores_them() {
        let over = |rep, listener: &str, durable, acked| RunRecord {
            listener: listener.into(),
            ..run(rep, Side::Ours, durable, "saturation", &[("acked", acked)])
        };
        let mut runs = vec![
            over(1, "PLAINTEXT", true, 1000.0),
            over(1, "SSL", true, 800.0),
            over(1, "SASL_SSL", true, 700.0),
            over(2, "PLAINTEXT", true, 1200.0),
            over(2, "SSL", true, 900.0),
            over(2, "SASL_SSL", true, 900.0),
            run(1, Side::Peer, true, "saturation", &[("acked", 500.0)]),
        ];
        let md = tls_table_markdown(&runs, &SideBySideSizes::full()).expect("TLS runs");
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 3, "{md}");
        assert!(
            lines[0].starts_with("| workload | figure | PLAINTEXT, fsync | SSL, fsync | SSL ÷ PLAINTEXT | SASL_SSL, fsync |"),
            "{}",
            lines[0]
        );
        assert!(
            lines[2].contains(
                "| 1100 (1000–1200) | 850 (800–900) | 0.77 × | 800 (700–900) | 0.73 × | – | – | – | – | – |"
            ),
            "{}",
            lines[2]
        );
        // The main table and the charts stay PLAINTEXT's: ours 1100, not a mix.
        let main = table_markdown(&runs, &SideBySideSizes::full());
        assert!(
            main.contains("| 1100 (1000–1200) | 500 | 2.20 × |"),
            "{main}"
        );
        let acked = &charts(&runs)[0].1;
        assert_eq!(acked.series[0].points, vec![(1.0, 1000.0), (2.0, 1200.0)]);
        runs.retain(|r| r.listener == "PLAINTEXT");
        assert_eq!(tls_table_markdown(&runs, &SideBySideSizes::full()), None);
    }

    #[test]
    fn charts_plot_each_run_by_repetition_and_skip_derived_figures_but_saturations() {
        let runs = vec![
            run(
                1,
                Side::Ours,
                true,
                "saturation",
                &[("acked", 1.0), (CPU_PER_RECORD, 0.5)],
            ),
            run(
                1,
                Side::Peer,
                true,
                "saturation",
                &[("acked", 2.0), (CPU_PER_RECORD, 0.9)],
            ),
            run(2, Side::Peer, true, "saturation", &[("acked", 3.0)]),
            run(
                1,
                Side::Ours,
                true,
                "consume",
                &[("consumed", 4.0), (PEAK_RSS, 60.0)],
            ),
        ];
        let c = charts(&runs);
        let names: Vec<&str> = c.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "saturation_acked",
                "saturation_broker_CPU_per_record",
                "consume_consumed"
            ]
        );
        let acked = &c[0].1;
        assert_eq!(acked.series.len(), 2);
        assert_eq!(acked.series[1].label, "kfake, -sync");
        assert_eq!(acked.series[1].points, vec![(1.0, 2.0), (2.0, 3.0)]);
    }

    #[test]
    fn cells_and_counts_read_plainly() {
        assert_eq!(cell(&[]), "–");
        assert_eq!(cell(&[519_000.0]), "519000");
        assert_eq!(cell(&[3.0, 1.0, 2.0]), "2.00 (1.00–3.00)");
        assert_eq!(count_label(1_000_000), "1 M");
        assert_eq!(count_label(10_000), "10k");
        assert_eq!(count_label(1234), "1234");
        assert_eq!(Workload::from_slug("consume"), Some(Workload::Consume));
        assert_eq!(Workload::from_slug("nothing"), None);
        let b = [
            BaselineRun {
                rep: 1,
                tcp_gbit_s: 38.0,
                fdatasync_p50_us: 80.0,
            },
            BaselineRun {
                rep: 2,
                tcp_gbit_s: 40.0,
                fdatasync_p50_us: 74.0,
            },
        ];
        assert!(baselines_markdown(&b).contains("39.0 (38.0–40.0) Gbit/s"));
    }

    #[test]
    fn quick_runs_every_workload_smaller() {
        let (q, f) = (SideBySideSizes::quick(), SideBySideSizes::full());
        assert!(q.saturation_records < f.saturation_records);
        assert!(q.consume_records < f.consume_records);
        assert_eq!(f.saturation_records, 1_000_000);
        assert_eq!(f.outstanding, 128);
        assert_eq!(q.outstanding, f.outstanding);
    }
}
