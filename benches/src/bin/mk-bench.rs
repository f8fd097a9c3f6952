//! `mk-bench`: the minikafka benchmark harness.
//!
//! Subcommands, one per experiment:
//! - `mk-bench log [--quick] [--out DIR] [--backend monoio|portable|both] [--data-dir PATH]`:
//!   partition-log workloads on the backends against fio baselines
//!   (see `minikafka_benches::log_experiment` and docs/BENCHMARKS.md).
//! - `mk-bench kafka [--quick] [--out DIR] [--broker external:HOST:PORT | --backend
//!   monoio|portable] [--minikafka-bin PATH] [--idempotence]`: the Kafka-level experiments
//!   against TCP and fio baselines (see `minikafka_benches::kafka_experiment`).
//! - `mk-bench side-by-side [--quick] [--out DIR] [--peer CMD] [--peer-durable-flag FLAG]
//!   [--minikafka-bin PATH] [--shards N] [--reps N] [--data-dir PATH] [--only W,..]
//!   [--flush fsync|none] [--no-tls]`: the librdkafka workloads on our broker and a peer broker (kfake
//!   by default), alternating, with broker CPU and peak RSS per run (see `minikafka_benches::kafka_experiment::side_by_side`);
//!   `--doc docs/BENCHMARKS.md` also writes the goals, table and plots into the document.
//! - `mk-bench scale [--quick] [--out DIR] [--peer auto|none|CMD] [--minikafka-bin PATH]
//!   [--shards N] [--partitions LIST] [--connections LIST] [--batch-records N]
//!   [--value-bytes N] [--data-dir PATH] [--doc docs/BENCHMARKS.md]`: partitions × connections on
//!   fresh brokers: produce, consume, p99, RSS and restart as curves (see
//!   `minikafka_benches::kafka_experiment::scale`).
//! - `mk-bench security [--quick] [--out DIR] [--minikafka-bin PATH] [--rounds N]
//!   [--saturation-s S] [--sequential N] [--broker-setting K=V]...`: PLAINTEXT, SSL and
//!   SASL_SSL listeners of one broker, alternating: saturation, the CPU it cost each side per
//!   GB, and sequential p50 with our client (see
//!   `minikafka_benches::security_cost`).
//! - `mk-bench recompress [--quick] [--out DIR] [--minikafka-bin PATH] [--producer-codec C]
//!   [--topic-codecs producer,gzip,..] [--records N] [--value-bytes N] [--reps N]`: what a
//!   topic's `compression.type` costs when the broker must recompress the producer's batches,
//!   against the copy-free append (see `minikafka_benches::kafka_experiment::recompress`).
//!
//! Writes CSV, JSON Lines, Markdown and `meta.json` under `--out`, prints the Markdown table
//! to stdout and progress to stderr. Exits 2 when fio is missing (with how to install it),
//! 1 on any other failure.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand, ValueEnum};
use minikafka_benches::broker_proc::{self, BrokerSource, PeerCommand};
use minikafka_benches::error::BenchError;
use minikafka_benches::fio::{self, FioError};
use minikafka_benches::kafka_experiment::goals;
use minikafka_benches::kafka_experiment::recompress::{self, RecompressOptions};
use minikafka_benches::kafka_experiment::scale::{self, ScaleOptions, ScaleSizes};
use minikafka_benches::kafka_experiment::side_by_side::{
    self, SideBySideOptions, SideBySideSizes, Workload,
};
use minikafka_benches::kafka_experiment::{self, KafkaOptions, KafkaSizes};
use minikafka_benches::log_experiment::{self, BackendKind, LogOptions, LogSizes};
use minikafka_benches::{doc_section, machine, plots, report};

#[derive(Debug, Parser)]
#[command(name = "mk-bench", about = "minikafka benchmark harness", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Partition-log workloads (append, durable append, read) on the backends, against fio
    /// baselines measured in the same run on the same filesystem.
    Log(LogArgs),
    /// Kafka-level experiments (produce, consume, latency, durability, scaling, librdkafka
    /// clients) against a broker, with TCP and fio baselines measured in the same run.
    Kafka(KafkaArgs),
    /// The librdkafka workloads on our broker and a peer broker, alternating over
    /// repetitions, with each run's broker CPU and peak RSS and the same-run baselines.
    SideBySide(SideBySideArgs),
    /// PLAINTEXT, SSL and SASL_SSL listeners of one broker, measured alternating in the same
    /// run with our client: producer saturation and sequential p50, and their ratios.
    Security(SecurityArgs),
    /// Partitions (1–4,000) × connections (1–1,000), each point on a fresh broker: produce
    /// and consume throughput, p99 latency, broker CPU per record, peak RSS and the restart
    /// after kill -9, as curves.
    Scale(ScaleArgs),
    /// A topic `compression.type` other than the producer's codec (the broker recompresses)
    /// against `producer` (copy-free): records/s, broker CPU and log bytes per record.
    Recompress(RecompressArgs),
}

#[derive(Debug, Args)]
struct RecompressArgs {
    /// Few records, one repetition (a smoke test; seconds).
    #[arg(long)]
    quick: bool,
    /// Directory for the results (default: target/mk-bench/recompress).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The `minikafka` executable (default: the one next to mk-bench).
    #[arg(long)]
    minikafka_bin: Option<PathBuf>,
    /// The producer's `compression.type` (none, gzip, snappy, lz4, zstd).
    #[arg(long, default_value = "none")]
    producer_codec: String,
    /// The topics' `compression.type`s (comma-separated; `producer` is the copy-free
    /// baseline the others are compared with).
    #[arg(long, value_delimiter = ',')]
    topic_codecs: Vec<String>,
    /// Records per run (default 200,000; 5,000 with --quick).
    #[arg(long)]
    records: Option<u64>,
    /// Value size of every record (default 200 B).
    #[arg(long, default_value_t = 200)]
    value_bytes: usize,
    /// Repetitions of every case (default 3; 1 with --quick).
    #[arg(long)]
    reps: Option<usize>,
}

#[derive(Debug, Args)]
struct SecurityArgs {
    /// One short round (a smoke test; seconds).
    #[arg(long)]
    quick: bool,
    /// Directory for the broker's data, its log, the certificates and `security.md`
    /// (default: target/mk-bench/security).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The `minikafka` executable (default: the one next to mk-bench).
    #[arg(long)]
    minikafka_bin: Option<PathBuf>,
    /// Rounds, each measuring every listener once in a rotated order (default 5).
    #[arg(long)]
    rounds: Option<usize>,
    /// Seconds of each saturation measurement (default 3).
    #[arg(long)]
    saturation_s: Option<f64>,
    /// One-record Produce requests per sequential measurement (default 2000).
    #[arg(long)]
    sequential: Option<usize>,
    /// A further `server.properties` line for the broker, e.g.
    /// `ssl.cipher.suites=TLS_AES_128_GCM_SHA256` (repeatable; after the benchmark's own).
    #[arg(long = "broker-setting")]
    broker_settings: Vec<String>,
}

#[derive(Debug, Args)]
struct ScaleArgs {
    /// Four small points on our broker alone (the CI smoke test; seconds).
    #[arg(long)]
    quick: bool,
    /// Directory for the results (default: target/mk-bench/scale, or scale-quick).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The peer broker: `auto` (kfake when ../shared/peers/kfake/kfake-runner exists, none
    /// with --quick), `none`, or its command (the harness appends `-port N -data-dir DIR`).
    #[arg(long, default_value = "auto")]
    peer: String,
    /// The `minikafka` executable (default: the one next to mk-bench).
    #[arg(long)]
    minikafka_bin: Option<PathBuf>,
    /// `num.shards` of our broker (default: the broker's own default).
    #[arg(long)]
    shards: Option<usize>,
    /// Partition counts instead of the default grid (comma-separated).
    #[arg(long, value_delimiter = ',')]
    partitions: Vec<i32>,
    /// Connection counts instead of the default grid (comma-separated).
    #[arg(long, value_delimiter = ',')]
    connections: Vec<usize>,
    /// Records per Produce request (default 10).
    #[arg(long)]
    batch_records: Option<usize>,
    /// Value size of every record (default 100 B).
    #[arg(long)]
    value_bytes: Option<usize>,
    /// Directory on the disk to measure (the brokers' data; default: the system temporary
    /// directory).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Also write the table and the plots (linked from `--out`, which should then be a
    /// committed folder such as `results/scale`) into this Markdown document, between its
    /// `scale results` markers, with the command that reproduces them.
    #[arg(long)]
    doc: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct SideBySideArgs {
    /// Small runs, one repetition (the CI smoke test; well under a minute).
    #[arg(long)]
    quick: bool,
    /// Directory for the results (default: target/mk-bench/side-by-side, or
    /// side-by-side-quick).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The peer broker's command; the harness appends `-port N -data-dir DIR` and, for the
    /// durable runs, the durable flag (default: ../shared/peers/kfake/kfake-runner when it
    /// exists).
    #[arg(long)]
    peer: Option<String>,
    /// The peer's argument for durable runs, paired with our `flush.policy=fsync`.
    #[arg(long, default_value = "-sync", allow_hyphen_values = true)]
    peer_durable_flag: String,
    /// The `minikafka` executable (default: the one next to mk-bench).
    #[arg(long)]
    minikafka_bin: Option<PathBuf>,
    /// `num.shards` of our broker (default: the broker's own default).
    #[arg(long)]
    shards: Option<usize>,
    /// Repetitions on each broker (default: 3, or 1 with --quick).
    #[arg(long)]
    reps: Option<usize>,
    /// Directory on the disk to measure (brokers' data and the fio file; default: the
    /// system temporary directory).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Run only these workloads (comma-separated: saturation, sequential, outstanding,
    /// consume, end_to_end, restart; and, never by default, txn_commit_1, txn_commit_100,
    /// txn_commit_10k, txn_read_committed, or `txn` for those four), e.g. to profile one;
    /// default every one but the transactional ones.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Run only the durable runs (`fsync`) or only the others (`none`); default both.
    #[arg(long, value_parser = ["fsync", "none"])]
    flush: Option<String>,
    /// Skip the SSL and SASL_SSL runs of our broker (saturation and sequential; by default
    /// they run beside PLAINTEXT, with certificates made by the `openssl` command).
    #[arg(long)]
    no_tls: bool,
    /// Also write the goals, the table and the plots (linked from `--out`, which should then
    /// be a committed folder such as `results/side-by-side`) into this Markdown document,
    /// between its `side-by-side results` markers, with the command that reproduces them.
    #[arg(long)]
    doc: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BrokerBackendArg {
    /// A broker built with the io_uring backend on monoio (the default build on Linux);
    /// `uring` is accepted for it too.
    #[value(alias = "uring")]
    Monoio,
    /// A broker built with `--no-default-features --features portable`.
    Portable,
}

#[derive(Debug, Args)]
struct KafkaArgs {
    /// Short points and one repetition (the CI smoke test; under 2 minutes).
    #[arg(long)]
    quick: bool,
    /// Directory for the results (default: target/mk-bench/kafka, or kafka-quick).
    #[arg(long)]
    out: Option<PathBuf>,
    /// `external:HOST:PORT` to measure a running broker (flush policies cannot be chosen
    /// then: each per-policy experiment runs once, labelled `external`).
    #[arg(long, conflicts_with_all = ["backend", "minikafka_bin"])]
    broker: Option<String>,
    /// Backend the started broker must run (checked against its `listening on` line).
    #[arg(long, value_enum)]
    backend: Option<BrokerBackendArg>,
    /// The `minikafka` executable (default: the one next to mk-bench).
    #[arg(long)]
    minikafka_bin: Option<PathBuf>,
    /// Ask librdkafka for `enable.idempotence=true` (used only when the broker advertises
    /// InitProducerId; the rows say `idempotence=unavailable` otherwise).
    #[arg(long)]
    idempotence: bool,
    /// `num.shards` of the started brokers (default: the broker's own default).
    #[arg(long)]
    shards: Option<usize>,
    /// Directory on the disk to measure (brokers' data and the fio file; default: the
    /// system temporary directory).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendArg {
    /// The io_uring backend on monoio; `uring` is accepted for it too.
    #[value(alias = "uring")]
    Monoio,
    /// The portable (smol) backend.
    Portable,
    /// Both, side by side.
    Both,
}

#[derive(Debug, Args)]
struct LogArgs {
    /// Small sizes and one repetition (a smoke test of well under a minute).
    #[arg(long)]
    quick: bool,
    /// Directory for the results (default: target/mk-bench/log, or log-quick with --quick).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Backends to measure.
    #[arg(long, value_enum, default_value_t = BackendArg::Both)]
    backend: BackendArg,
    /// Directory on the filesystem to measure (a scratch folder is made inside and removed
    /// afterwards; default: the system temporary directory).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (name, result) = match cli.command {
        Command::Kafka(args) => ("kafka", run_kafka(&args)),
        Command::SideBySide(args) => ("side-by-side", run_side_by_side(&args)),
        Command::Scale(args) => ("scale", run_scale(&args)),
        Command::Security(args) => ("security", run_security(&args)),
        Command::Log(args) => ("log", run_log(&args)),
        Command::Recompress(args) => ("recompress", run_recompress(&args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(BenchError::Fio(FioError::Missing)) => {
            eprintln!(
                "mk-bench: fio is required for the same-run baselines but is not installed; \
                 install it with `{}` (Debian/Ubuntu)",
                fio::INSTALL_HINT
            );
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("mk-bench {name}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn backends(arg: BackendArg) -> Vec<BackendKind> {
    match arg {
        BackendArg::Monoio => vec![BackendKind::Monoio],
        BackendArg::Portable => vec![BackendKind::Portable],
        BackendArg::Both => vec![BackendKind::Monoio, BackendKind::Portable],
    }
}

fn run_log(args: &LogArgs) -> Result<(), BenchError> {
    let fio_version = fio::version()?;
    let sizes = if args.quick {
        LogSizes::quick()
    } else {
        LogSizes::full()
    };
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("target/mk-bench").join(if args.quick { "log-quick" } else { "log" })
    });
    let root = args.data_dir.clone().unwrap_or_else(std::env::temp_dir);
    let data_dir = root.join(format!("mk-bench-{}", std::process::id()));
    std::fs::create_dir_all(&data_dir)?;
    let filesystem = machine::filesystem_of(&data_dir);
    let opts = LogOptions {
        sizes,
        backends: backends(args.backend),
        data_dir: data_dir.clone(),
    };
    let meta = serde_json::json!({
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "unix_time_s": SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        "kernel": machine::kernel_release(),
        "cpus": machine::cpu_count(),
        "load_avg_1m_at_start": machine::load_avg_1m(),
        "data_dir": data_dir,
        "filesystem": filesystem.as_ref().map(|(dev, mount, fs)| serde_json::json!({"device": dev, "mount": mount, "type": fs})),
        "fio": fio_version,
        "sizes": opts.sizes,
        "backends": opts.backends,
    });
    eprintln!(
        "mk-bench log: {} on {} ({}), {fio_version}, {} CPUs, results to {}",
        if args.quick { "quick" } else { "full" },
        data_dir.display(),
        filesystem
            .as_ref()
            .map_or("unknown filesystem", |f| f.2.as_str()),
        machine::cpu_count().unwrap_or(0),
        out.display()
    );
    let result = log_experiment::run(&opts, &mut |line| eprintln!("  {line}"));
    // Remove the scratch folder whatever happened (the workloads remove their own on success).
    let _ = std::fs::remove_dir_all(&data_dir);
    let rows = result?;

    let mut written = report::write_files(&out, log_experiment::EXPERIMENT, &rows)?;
    let meta_path = out.join("meta.json");
    std::fs::write(&meta_path, serde_json::to_string_pretty(&meta)? + "\n")?;
    written.push(meta_path);

    println!("{}", report::to_markdown(&rows));
    eprintln!("wrote {}", list(&written));
    Ok(())
}

fn run_kafka(args: &KafkaArgs) -> Result<(), BenchError> {
    let fio_version = fio::version()?;
    let started = std::time::Instant::now();
    let sizes = if args.quick {
        KafkaSizes::quick()
    } else {
        KafkaSizes::full()
    };
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("target/mk-bench").join(if args.quick { "kafka-quick" } else { "kafka" })
    });
    let root = args.data_dir.clone().unwrap_or_else(std::env::temp_dir);
    let scratch = root.join(format!("mk-bench-kafka-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let filesystem = machine::filesystem_of(&scratch);
    let broker = match &args.broker {
        Some(spec) => {
            let addr = spec.strip_prefix("external:").ok_or_else(|| {
                BenchError::Broker(format!("--broker expects external:HOST:PORT, got `{spec}`"))
            })?;
            BrokerSource::External(addr.to_owned())
        }
        None => {
            let bin = match &args.minikafka_bin {
                Some(bin) => bin.clone(),
                None => broker_proc::default_broker_bin().ok_or_else(|| {
                    BenchError::Broker(
                        "no `minikafka` next to mk-bench: build it with `cargo build --release \
                         -p minikafka-broker` or pass --minikafka-bin"
                            .into(),
                    )
                })?,
            };
            BrokerSource::Spawn {
                bin,
                scratch: scratch.clone(),
                expect_backend: args.backend.map(|b| match b {
                    BrokerBackendArg::Monoio => "monoio".to_owned(),
                    BrokerBackendArg::Portable => "portable".to_owned(),
                }),
                shards: args.shards,
            }
        }
    };
    let opts = KafkaOptions {
        sizes,
        broker,
        idempotence: args.idempotence,
        scratch: scratch.clone(),
        device: filesystem.as_ref().map(|f| f.0.clone()),
    };
    eprintln!(
        "mk-bench kafka: {} on {} ({}), {fio_version}, {} CPUs, results to {}",
        if args.quick { "quick" } else { "full" },
        scratch.display(),
        filesystem
            .as_ref()
            .map_or("unknown filesystem", |f| f.2.as_str()),
        machine::cpu_count().unwrap_or(0),
        out.display()
    );
    let load_at_start = machine::load_avg_1m();
    let mut written = Vec::new();
    let result = kafka_experiment::run(&opts, &mut |line| eprintln!("  {line}"), &mut |section| {
        written.extend(report::write_files(&out, &section.name, &section.rows)?);
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&scratch);
    let (sections, targets) = result?;
    let mut written = kafka_experiment::write_outputs(&out, &sections, &targets)?;
    let meta = serde_json::json!({
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "unix_time_s": SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        "kernel": machine::kernel_release(),
        "cpus": machine::cpu_count(),
        "load_avg_1m_at_start": load_at_start,
        "load_avg_1m_at_end": machine::load_avg_1m(),
        "runtime_s": started.elapsed().as_secs_f64(),
        "mk_bench_build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "filesystem": filesystem.as_ref().map(|(dev, mount, fs)| serde_json::json!({"device": dev, "mount": mount, "type": fs})),
        "fio": fio_version,
        "broker": format!("{:?}", opts.broker),
        "idempotence_requested": opts.idempotence,
        "sizes": opts.sizes,
        "targets": targets,
    });
    let meta_path = out.join("meta.json");
    std::fs::write(&meta_path, serde_json::to_string_pretty(&meta)? + "\n")?;
    written.push(meta_path);
    println!("{}", kafka_experiment::targets_markdown(&targets));
    eprintln!(
        "mk-bench kafka: done in {:.0} s; wrote {}",
        started.elapsed().as_secs_f64(),
        list(&written)
    );
    Ok(())
}

fn our_broker_bin(given: &Option<PathBuf>) -> Result<PathBuf, BenchError> {
    match given {
        Some(bin) => Ok(bin.clone()),
        None => broker_proc::default_broker_bin().ok_or_else(|| {
            BenchError::Broker(
                "no `minikafka` next to mk-bench: build it with `cargo build --release \
                 -p minikafka-broker` or pass --minikafka-bin"
                    .into(),
            )
        }),
    }
}

fn run_security(args: &SecurityArgs) -> Result<(), BenchError> {
    use minikafka_benches::security_cost::{cpu_table, run, table, SecurityOptions};
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("target/mk-bench/security"));
    if out.join("data").exists() {
        std::fs::remove_dir_all(out.join("data"))?;
    }
    let (rounds, saturation_s, sequential) = if args.quick {
        (1, 0.5, 200)
    } else {
        (5, 3.0, 2000)
    };
    let opts = SecurityOptions {
        bin: our_broker_bin(&args.minikafka_bin)?,
        scratch: out.clone(),
        rounds: args.rounds.unwrap_or(rounds),
        saturation_s: args.saturation_s.unwrap_or(saturation_s),
        sequential_requests: args.sequential.unwrap_or(sequential),
        broker_settings: args.broker_settings.clone(),
    };
    let load_at_start = machine::load_avg_1m();
    let figures = run(&opts);
    // The broker's data is scratch: up to a measurement's records (see security_cost).
    let _ = std::fs::remove_dir_all(out.join("data"));
    let figures = figures?;
    let load_at_end = machine::load_avg_1m();
    let report = format!(
        "{}\nCPU during saturation, per GB of record values (fixed work: load slows the clock, hardly this):\n\n{}\n{} rounds; saturation: one producer, {} requests of 100 × 1000 B records in flight, {} s or 1 GB, whichever comes first, on a fresh topic; sequential: {} one-record Produce requests (acks=1) one at a time.{} Load average at start {}, at end {}.\n",
        table(&figures),
        cpu_table(&figures),
        opts.rounds,
        minikafka_benches::security_cost::SATURATION_DEPTH,
        opts.saturation_s,
        opts.sequential_requests,
        if opts.broker_settings.is_empty() {
            String::new()
        } else {
            format!(" Broker settings added: `{}`.", opts.broker_settings.join("`, `"))
        },
        load_at_start.map_or("unknown".into(), |l| format!("{l:.2}")),
        load_at_end.map_or("unknown".into(), |l| format!("{l:.2}")),
    );
    std::fs::write(out.join("security.md"), &report)?;
    print!("{report}");
    Ok(())
}

fn run_side_by_side(args: &SideBySideArgs) -> Result<(), BenchError> {
    let fio_version = fio::version()?;
    let started = std::time::Instant::now();
    let mut sizes = if args.quick {
        SideBySideSizes::quick()
    } else {
        SideBySideSizes::full()
    };
    if let Some(reps) = args.reps {
        sizes.reps = reps.max(1);
    }
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("target/mk-bench").join(if args.quick {
            "side-by-side-quick"
        } else {
            "side-by-side"
        })
    });
    let root = args.data_dir.clone().unwrap_or_else(std::env::temp_dir);
    let scratch = root.join(format!("mk-bench-sbs-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let peer_command = match &args.peer {
        Some(cmd) => cmd.clone(),
        None => broker_proc::default_peer_bin()
            .map(|p| p.display().to_string())
            .ok_or_else(|| {
                BenchError::Broker(
                    "no peer broker: ../shared/peers/kfake/kfake-runner does not exist here; \
                     pass --peer CMD"
                        .into(),
                )
            })?,
    };
    let opts = SideBySideOptions {
        ours: BrokerSource::Spawn {
            bin: our_broker_bin(&args.minikafka_bin)?,
            scratch: scratch.clone(),
            expect_backend: None,
            shards: args.shards,
        },
        peer: PeerCommand::parse(&peer_command, &args.peer_durable_flag, &scratch)?,
        scratch: scratch.clone(),
        sizes,
        workloads: args
            .only
            .iter()
            .map(|slug| {
                Workload::from_group_slug(slug)
                    .ok_or_else(|| BenchError::Broker(format!("--only: no workload `{slug}`")))
            })
            .collect::<Result<Vec<Vec<Workload>>, _>>()?
            .into_iter()
            .flatten()
            .collect(),
        durable: args.flush.as_deref().map(|f| f == "fsync"),
        tls: !args.no_tls,
    };
    let filesystem = machine::filesystem_of(&scratch);
    eprintln!(
        "mk-bench side-by-side: {} on {} ({}), peer `{peer_command}`, {} repetitions, results to {}",
        if args.quick { "quick" } else { "full" },
        scratch.display(),
        filesystem.as_ref().map_or("unknown filesystem", |f| f.2.as_str()),
        opts.sizes.reps,
        out.display()
    );
    std::fs::create_dir_all(&out)?;
    let load_at_start = machine::load_avg_1m();
    let runs_path = out.join("side_by_side_runs.jsonl");
    let mut runs_file = std::fs::File::create(&runs_path)?;
    let result = side_by_side::run(&opts, &mut |line| eprintln!("  {line}"), &mut |r| {
        use std::io::Write;
        writeln!(runs_file, "{}", serde_json::to_string(r)?)?;
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&scratch);
    let (runs, baselines) = result?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let load_at_end = machine::load_avg_1m();
    let mut md = format!(
        "# Side by side: minikafka vs {}\n\n`{command}` — {} CPUs, load average (1 min) {} at the start, {} at the end{}.\n\n",
        opts.peer.name(),
        machine::cpu_count().unwrap_or(0),
        load_at_start.map_or("unknown".into(), |l| format!("{l:.1}")),
        load_at_end.map_or("unknown".into(), |l| format!("{l:.1}")),
        conditions_warning(load_at_start, "figures"),
    );
    let judged = goals::evaluate(&runs, &baselines);
    md.push_str(&goals::markdown(&judged));
    md.push('\n');
    md.push_str(&side_by_side::table_markdown(&runs, &opts.sizes));
    md.push('\n');
    if let Some(tls) = side_by_side::tls_table_markdown(&runs, &opts.sizes) {
        md.push_str(
            "The cost of TLS: our broker over its SSL and SASL_SSL (PLAIN) listeners beside \
             PLAINTEXT, the same librdkafka client (OpenSSL) and runs alternating:\n\n",
        );
        md.push_str(&tls);
        md.push('\n');
    }
    md.push_str(&side_by_side::baselines_markdown(&baselines));
    if runs
        .iter()
        .any(|r| !r.idempotence && r.workload != "consume")
    {
        md.push_str("\nSome runs went without idempotence (the broker does not advertise InitProducerId): see `side_by_side_runs.jsonl`.\n");
    }
    let mut written = vec![runs_path];
    let md_path = out.join("side_by_side.md");
    std::fs::write(&md_path, &md)?;
    written.push(md_path);
    let baselines_path = out.join("side_by_side_baselines.json");
    std::fs::write(
        &baselines_path,
        serde_json::to_string_pretty(&baselines)? + "\n",
    )?;
    written.push(baselines_path);
    let plot_dir = out.join("plots");
    std::fs::create_dir_all(&plot_dir)?;
    let mut plot_paths = Vec::new();
    for (name, chart) in side_by_side::charts(&runs) {
        let path = plot_dir.join(format!("{name}.svg"));
        plots::render_svg(&chart, &path)?;
        plot_paths.push((chart.title.clone(), path.clone()));
        written.push(path);
    }
    if let Some(doc) = &args.doc {
        let body = md.replacen("# Side by side", "### Results: side by side", 1);
        write_doc_section(doc, SIDE_BY_SIDE_SECTION, &body, &plot_paths)?;
        written.push(doc.clone());
    }
    written.push(write_meta(
        &out,
        &command,
        (load_at_start, load_at_end),
        &filesystem,
        started,
        serde_json::json!({ "fio": fio_version, "peer": peer_command, "sizes": opts.sizes }),
    )?);
    println!("{md}");
    eprintln!(
        "mk-bench side-by-side: done in {:.0} s; wrote {}",
        started.elapsed().as_secs_f64(),
        list(&written)
    );
    Ok(())
}

/// Name of the document section `--doc` writes.
const SIDE_BY_SIDE_SECTION: &str = "side-by-side results";

/// Name of the document section `mk-bench scale --doc` writes.
const SCALE_SECTION: &str = "scale results";

/// Writes `body` (a run's Markdown, its heading already at the document's level) and its
/// plots, linked relative to the document, between the document's markers of `section`.
fn write_doc_section(
    doc: &Path,
    section: &str,
    body: &str,
    plots: &[(String, PathBuf)],
) -> Result<(), BenchError> {
    let text = std::fs::read_to_string(doc)?;
    let doc_dir = std::fs::canonicalize(doc)?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut body = body.to_owned();
    body.push_str("\n#### Plots\n\n");
    for (title, path) in plots {
        let link = doc_section::relative_path(&doc_dir, &std::fs::canonicalize(path)?);
        body.push_str(&format!("![{title}]({link})\n"));
    }
    let new = doc_section::replace_section(&text, section, &body).ok_or_else(|| {
        BenchError::Broker(format!(
            "{} has no `{}` / `{}` markers: add them where the results belong",
            doc.display(),
            doc_section::begin_marker(section),
            doc_section::end_marker(section)
        ))
    })?;
    std::fs::write(doc, new)?;
    Ok(())
}

fn run_recompress(args: &RecompressArgs) -> Result<(), BenchError> {
    let mut topic_codecs = args.topic_codecs.clone();
    if topic_codecs.is_empty() {
        topic_codecs = recompress::DEFAULT_TOPIC_CODECS
            .iter()
            .map(|c| (*c).to_owned())
            .collect();
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("target/mk-bench/recompress"));
    let scratch = std::env::temp_dir().join(format!("mk-bench-recompress-{}", std::process::id()));
    let opts = RecompressOptions {
        broker_bin: our_broker_bin(&args.minikafka_bin)?,
        scratch: scratch.clone(),
        producer_codec: args.producer_codec.clone(),
        topic_codecs,
        records: args
            .records
            .unwrap_or(if args.quick { 5_000 } else { 200_000 })
            .max(1),
        value_bytes: args.value_bytes.max(1),
        reps: args.reps.unwrap_or(if args.quick { 1 } else { 3 }).max(1),
    };
    eprintln!(
        "mk-bench recompress: producer codec {}, topics {}, {} records × {} reps, results to {}",
        opts.producer_codec,
        opts.topic_codecs.join(","),
        opts.records,
        opts.reps,
        out.display()
    );
    let result = recompress::run(&opts, &mut |line| eprintln!("  {line}"));
    let _ = std::fs::remove_dir_all(&scratch);
    let runs = result?;
    std::fs::create_dir_all(&out)?;
    let mut jsonl = String::new();
    for run in &runs {
        jsonl.push_str(&serde_json::to_string(run)?);
        jsonl.push('\n');
    }
    std::fs::write(out.join("recompress_runs.jsonl"), jsonl)?;
    let table = recompress::table_markdown(&runs, &opts);
    std::fs::write(out.join("recompress.md"), &table)?;
    print!("{table}");
    Ok(())
}

fn run_scale(args: &ScaleArgs) -> Result<(), BenchError> {
    let started = std::time::Instant::now();
    let mut sizes = if args.quick {
        ScaleSizes::quick()
    } else {
        ScaleSizes::full()
    };
    if !args.partitions.is_empty() {
        sizes.partitions = args.partitions.iter().map(|&p| p.max(1)).collect();
    }
    if !args.connections.is_empty() {
        sizes.connections = args.connections.iter().map(|&c| c.max(1)).collect();
    }
    sizes.batch_records = args.batch_records.unwrap_or(sizes.batch_records).max(1);
    sizes.value_bytes = args.value_bytes.unwrap_or(sizes.value_bytes);
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("target/mk-bench").join(if args.quick { "scale-quick" } else { "scale" })
    });
    let root = args.data_dir.clone().unwrap_or_else(std::env::temp_dir);
    let scratch = root.join(format!("mk-bench-scale-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let peer_command = match args.peer.as_str() {
        "none" => None,
        "auto" if args.quick => None,
        "auto" => broker_proc::default_peer_bin().map(|p| p.display().to_string()),
        cmd => Some(cmd.to_owned()),
    };
    let peer = peer_command
        .as_deref()
        .map(|cmd| PeerCommand::parse(cmd, "-sync", &scratch))
        .transpose()?;
    let opts = ScaleOptions {
        sizes,
        ours: BrokerSource::Spawn {
            bin: our_broker_bin(&args.minikafka_bin)?,
            scratch: scratch.clone(),
            expect_backend: None,
            shards: args.shards,
        },
        peer,
    };
    let filesystem = machine::filesystem_of(&scratch);
    eprintln!(
        "mk-bench scale: {} on {} ({}), peer {}, results to {}",
        if args.quick { "quick" } else { "full" },
        scratch.display(),
        filesystem
            .as_ref()
            .map_or("unknown filesystem", |f| f.2.as_str()),
        peer_command.as_deref().unwrap_or("none"),
        out.display()
    );
    std::fs::create_dir_all(&out)?;
    let load_at_start = machine::load_avg_1m();
    let runs_path = out.join("scale_runs.jsonl");
    let mut runs_file = std::fs::File::create(&runs_path)?;
    let result = scale::run(&opts, &mut |line| eprintln!("  {line}"), &mut |r| {
        use std::io::Write;
        writeln!(runs_file, "{}", serde_json::to_string(r)?)?;
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&scratch);
    let runs = result?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let load_at_end = machine::load_avg_1m();
    let s = &opts.sizes;
    let mut md = format!(
        "### Results: scale\n\n`{command}` — {} CPUs, load average (1 min) {} at the start, {} \
         at the end{}. Flush policy `none` on both brokers; {} records of {} B per Produce \
         request, one request in flight per connection, {} s of produce per point.\n\n",
        machine::cpu_count().unwrap_or(0),
        load_at_start.map_or("unknown".into(), |l| format!("{l:.1}")),
        load_at_end.map_or("unknown".into(), |l| format!("{l:.1}")),
        conditions_warning(load_at_start, "wall-clock figures"),
        s.batch_records,
        s.value_bytes,
        s.produce_duration.as_secs_f64(),
    );
    md.push_str(&scale::table_markdown(&runs));
    let mut written = vec![runs_path];
    let md_path = out.join("scale.md");
    std::fs::write(&md_path, &md)?;
    written.push(md_path);
    let plot_dir = out.join("plots");
    std::fs::create_dir_all(&plot_dir)?;
    let mut plot_paths = Vec::new();
    for (name, chart) in scale::charts(&runs) {
        let path = plot_dir.join(format!("{name}.svg"));
        plots::render_svg(&chart, &path)?;
        plot_paths.push((chart.title.clone(), path.clone()));
        written.push(path);
    }
    if let Some(doc) = &args.doc {
        write_doc_section(doc, SCALE_SECTION, &md, &plot_paths)?;
        written.push(doc.clone());
    }
    written.push(write_meta(
        &out,
        &command,
        (load_at_start, load_at_end),
        &filesystem,
        started,
        serde_json::json!({ "peer": peer_command, "sizes": opts.sizes }),
    )?);
    println!("{md}");
    eprintln!(
        "mk-bench scale: done in {:.0} s; wrote {}",
        started.elapsed().as_secs_f64(),
        list(&written)
    );
    Ok(())
}

/// Writes an experiment's `meta.json` in `out`: what every run records (the command, when,
/// the machine, the load average at start and end, how long it ran, the scratch filesystem)
/// and the experiment's own `fields`. Gives the file's path.
/// What a results headline says of the conditions that make its `figures` indicative only: a
/// loaded machine (1-minute load above half the CPUs at the start), a debug build of mk-bench
/// (its own client unoptimized, as in CI's smoke step).
fn conditions_warning(load_at_start: Option<f64>, figures: &str) -> String {
    let mut warning = String::new();
    if load_at_start
        .zip(machine::cpu_count())
        .is_some_and(|(l, n)| l > n as f64 * 0.5)
    {
        warning.push_str(&format!(
            " (**a loaded machine**: read the {figures} as indicative only)"
        ));
    }
    if cfg!(debug_assertions) {
        warning.push_str(" (**a debug build of mk-bench**: figures belong to release builds)");
    }
    warning
}

fn write_meta(
    out: &Path,
    command: &str,
    (load_at_start, load_at_end): (Option<f64>, Option<f64>),
    filesystem: &Option<(String, String, String)>,
    started: std::time::Instant,
    fields: serde_json::Value,
) -> Result<PathBuf, BenchError> {
    let mut meta = serde_json::json!({
        "command": command,
        "unix_time_s": SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        "kernel": machine::kernel_release(),
        "cpus": machine::cpu_count(),
        "load_avg_1m_at_start": load_at_start,
        "load_avg_1m_at_end": load_at_end,
        "runtime_s": started.elapsed().as_secs_f64(),
        "mk_bench_build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "filesystem": filesystem.as_ref().map(|(dev, mount, fs)| serde_json::json!({"device": dev, "mount": mount, "type": fs})),
    });
    if let (Some(meta), serde_json::Value::Object(fields)) = (meta.as_object_mut(), fields) {
        meta.extend(fields);
    }
    let path = out.join("meta.json");
    std::fs::write(&path, serde_json::to_string_pretty(&meta)? + "\n")?;
    Ok(path)
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p: &PathBuf| Path::display(p).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
