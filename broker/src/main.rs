//! The `minikafka` binary: `minikafka [server.properties] [--override key=value]...`.
//!
//! Contract:
//! - Settings: the properties file (optional), then each `--override` in order. Without
//!   arguments: `127.0.0.1:9092`, data in `./data`. An invalid or unknown setting prints one
//!   error line and exits with code 2.
//! - Logs go to stderr, as text or (`log.format=json`) one JSON object per line, filtered by
//!   `RUST_LOG` (default `info`: no line per request), changed at run time through
//!   IncrementalAlterConfigs of BROKER_LOGGER resources (`server::broker_loggers`); once every
//!   shard listens, one line
//!   `minikafka: listening on <addr> (backend <name>, <n> shards, data <dir>)` goes to
//!   stdout.
//! - SIGINT/SIGTERM start a clean shutdown (exit 0); a second one exits at once (code 1).
//!   A failure to start or a fatal error exits with code 1.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::Parser;
use minikafka_broker::config::{BrokerConfig, LogFormat};
use minikafka_broker::server::{self, broker_loggers, DefaultBackend};

/// A single-node broker speaking the Kafka wire protocol.
#[derive(Parser, Debug)]
#[command(name = "minikafka", version, about)]
struct Args {
    /// A Kafka-style `server.properties` file.
    config: Option<PathBuf>,
    /// Overrides one setting (`key=value`); may be repeated; applied after the file.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
}

fn usage_error(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("minikafka: {message}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let text = match &args.config {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => Some(text),
            Err(e) => return usage_error(format_args!("cannot read {}: {e}", path.display())),
        },
        None => None,
    };
    let mut overrides = Vec::with_capacity(args.overrides.len());
    for item in &args.overrides {
        match item.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                overrides.push((key.trim().to_string(), value.trim().to_string()))
            }
            _ => return usage_error(format_args!("--override expects key=value, got `{item}`")),
        }
    }
    let config = match BrokerConfig::from_sources(text.as_deref(), &overrides) {
        Ok(config) => config,
        Err(e) => return usage_error(e),
    };

    // The filter is reloadable: BROKER_LOGGER alterations change levels at run time.
    let (filter, directives) = match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(filter) => (filter, std::env::var("RUST_LOG").unwrap_or_default()),
        Err(_) => (
            tracing_subscriber::EnvFilter::new("info"),
            "info".to_string(),
        ),
    };
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    let reload_with = |directives: &str| {
        tracing_subscriber::EnvFilter::try_new(directives).map_err(|e| e.to_string())
    };
    match config.log_format {
        LogFormat::Text => {
            let logs = logs
                .with_ansi(std::io::stderr().is_terminal())
                .with_filter_reloading();
            let handle = logs.reload_handle();
            logs.init();
            let reload = move |d: &str| handle.reload(reload_with(d)?).map_err(|e| e.to_string());
            broker_loggers::install(&directives, Box::new(reload));
        }
        // One JSON object per line; span context is left out (the broker logs events).
        LogFormat::Json => {
            let logs = logs.json().with_current_span(false).with_filter_reloading();
            let handle = logs.reload_handle();
            logs.init();
            let reload = move |d: &str| handle.reload(reload_with(d)?).map_err(|e| e.to_string());
            broker_loggers::install(&directives, Box::new(reload));
        }
    }

    let shutdown = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while shutting down exits at once; the first sets the flag.
        let registered =
            signal_hook::flag::register_conditional_shutdown(signal, 1, Arc::clone(&shutdown))
                .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&shutdown)));
        if let Err(e) = registered {
            eprintln!("minikafka: cannot install signal handlers: {e}");
            return ExitCode::from(1);
        }
    }

    match server::run::<DefaultBackend>(config, shutdown) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("minikafka: {e}");
            ExitCode::from(1)
        }
    }
}
