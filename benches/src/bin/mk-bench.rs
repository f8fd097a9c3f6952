//! `mk-bench`: the minikafka benchmark harness.
//!
//! Subcommands, one per experiment:
//! - `mk-bench log [--quick] [--out DIR] [--backend uring|portable|both] [--data-dir PATH]`:
//!   partition-log workloads on the backends against fio baselines
//!   (see `minikafka_benches::log_experiment` and docs/BENCHMARKS.md).
//! - `mk-bench kafka [--quick] [--out DIR] [--broker external:HOST:PORT | --backend
//!   uring|portable] [--minikafka-bin PATH] [--idempotence]`: the Kafka-level experiments
//!   against TCP and fio baselines (see `minikafka_benches::kafka_experiment`).
//!
//! Writes CSV, JSON Lines, Markdown and `meta.json` under `--out`, prints the Markdown table
//! to stdout and progress to stderr. Exits 2 when fio is missing (with how to install it),
//! 1 on any other failure.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand, ValueEnum};
use minikafka_benches::broker_proc::{self, BrokerSource};
use minikafka_benches::error::BenchError;
use minikafka_benches::fio::{self, FioError};
use minikafka_benches::kafka_experiment::{self, KafkaOptions, KafkaSizes};
use minikafka_benches::log_experiment::{self, BackendKind, LogOptions, LogSizes};
use minikafka_benches::{machine, report};

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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BrokerBackendArg {
    /// A broker built with the io_uring backend (the default build on Linux).
    Uring,
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
    /// The io_uring (glommio) backend.
    Uring,
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
    match cli.command {
        Command::Kafka(args) => match run_kafka(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(BenchError::Fio(FioError::Missing)) => {
                eprintln!(
                    "mk-bench: fio is required for the fdatasync baseline but is not installed; \
                     install it with `{}` (Debian/Ubuntu)",
                    fio::INSTALL_HINT
                );
                ExitCode::from(2)
            }
            Err(e) => {
                eprintln!("mk-bench kafka: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Log(args) => match run_log(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(BenchError::Fio(FioError::Missing)) => {
                eprintln!(
                    "mk-bench: fio is required for the baselines but is not installed; \
                     install it with `{}` (Debian/Ubuntu)",
                    fio::INSTALL_HINT
                );
                ExitCode::from(2)
            }
            Err(e) => {
                eprintln!("mk-bench log: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn backends(arg: BackendArg) -> Vec<BackendKind> {
    match arg {
        BackendArg::Uring => vec![BackendKind::Uring],
        BackendArg::Portable => vec![BackendKind::Portable],
        BackendArg::Both => vec![BackendKind::Uring, BackendKind::Portable],
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
                    BrokerBackendArg::Uring => "uring".to_owned(),
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

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p: &PathBuf| Path::display(p).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
