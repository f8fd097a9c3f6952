//! The broker under test: a `minikafka` child process on a fresh data directory, or an
//! external broker given by address.
//!
//! Contract:
//! - Inputs: the `minikafka` binary (by default next to the running executable, so a
//!   `cargo build --release` of the workspace puts both in `target/release`), a scratch
//!   directory, a flush policy and extra `--override`s.
//! - Outputs: a [`BrokerHandle`] with the address to connect to, the backend the broker
//!   announced (`uring`, `portable`; `external` for a broker this harness did not start) and
//!   the child's pid. Dropping the handle kills the child and removes its data directory.
//! - Readiness is the broker's own stdout line `minikafka: listening on <addr> (backend …)`;
//!   no port is probed. Its stderr goes to `broker.log` next to the data directory.
//! - Never: reuses a data directory (each start gets a new one), or leaves a child running.

use std::fs;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::error::BenchError;

/// How long a broker may take to print its `listening on` line.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// `message.max.bytes` of the started brokers (32 MiB).
pub const MESSAGE_MAX_BYTES: usize = 32 << 20;

/// The broker's `flush.policy` (the broker's own enum: `name()` is its configuration value,
/// and `Interval { ms }` is passed as `flush.interval.ms`).
pub use minikafka_broker::log::FlushPolicy;

/// Where the broker under test comes from.
#[derive(Clone, Debug)]
pub enum BrokerSource {
    /// Start `bin` per experiment, with data directories under `scratch`.
    Spawn {
        /// The `minikafka` executable.
        bin: PathBuf,
        /// Parent of the per-start data directories.
        scratch: PathBuf,
        /// The backend the broker must announce (`uring`, `portable`), if one was asked for.
        expect_backend: Option<String>,
        /// `num.shards`, when set.
        shards: Option<usize>,
    },
    /// A broker someone else started (`host:port`); flush policies cannot be chosen.
    External(String),
}

/// A broker ready for connections.
#[derive(Debug)]
pub struct BrokerHandle {
    /// Address to connect to.
    pub addr: SocketAddr,
    /// Backend the broker announced (`external` for an external broker).
    pub backend: String,
    /// The flush policy it runs with (`external` when unknown).
    pub flush: String,
    child: Option<Child>,
    data_dir: Option<PathBuf>,
}

impl BrokerHandle {
    /// Process id of the child broker (`None` for an external one).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The `host:port` text librdkafka's `bootstrap.servers` takes.
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for BrokerHandle {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(dir) = self.data_dir.take() {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

/// The `minikafka` executable next to the running one (`target/<profile>/minikafka`).
pub fn default_broker_bin() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.join("minikafka");
    bin.is_file().then_some(bin)
}

/// Parses the broker's readiness line: `(address, backend)` from
/// `minikafka: listening on 127.0.0.1:9092 (backend uring, 2 shards, data /d)`.
pub fn parse_listening_line(line: &str) -> Option<(SocketAddr, String)> {
    let rest = line.split("listening on ").nth(1)?;
    let mut parts = rest.splitn(2, ' ');
    let addr: SocketAddr = parts.next()?.parse().ok()?;
    let backend = parts
        .next()
        .and_then(|tail| tail.strip_prefix("(backend "))
        .and_then(|tail| tail.split([',', ')']).next())
        .unwrap_or("unknown")
        .to_owned();
    Some((addr, backend))
}

/// A loopback port free right now (bound, read, released).
fn free_port() -> Result<u16, BenchError> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl BrokerSource {
    /// Starts (or, for an external broker, resolves) a broker with `flush`; `label` names the
    /// data directory (`<scratch>/<label>-<n>`).
    pub fn start(&self, flush: FlushPolicy, label: &str) -> Result<BrokerHandle, BenchError> {
        match self {
            BrokerSource::External(addr) => {
                let addr = addr.to_socket_addrs()?.next().ok_or_else(|| {
                    BenchError::Broker(format!("external broker {addr} does not resolve"))
                })?;
                Ok(BrokerHandle {
                    addr,
                    backend: "external".into(),
                    flush: "external".into(),
                    child: None,
                    data_dir: None,
                })
            }
            BrokerSource::Spawn {
                bin,
                scratch,
                expect_backend,
                shards,
            } => {
                let data_dir = fresh_dir(scratch, label)?;
                let handle = spawn(bin, &data_dir, flush, *shards)?;
                if let Some(want) = expect_backend {
                    if &handle.backend != want {
                        return Err(BenchError::Broker(format!(
                            "{} runs the {} backend, not {want}: build one with \
                             `cargo build --release -p minikafka-broker --no-default-features \
                             --features {want} --target-dir target/{want}` and pass it with \
                             --minikafka-bin",
                            bin.display(),
                            handle.backend
                        )));
                    }
                }
                Ok(handle)
            }
        }
    }

    /// True when flush policies can be chosen (the harness starts the broker).
    pub fn can_choose_flush(&self) -> bool {
        matches!(self, BrokerSource::Spawn { .. })
    }
}

fn fresh_dir(scratch: &Path, label: &str) -> Result<PathBuf, BenchError> {
    fs::create_dir_all(scratch)?;
    for n in 0.. {
        let dir = scratch.join(format!("{label}-{n}"));
        if !dir.exists() {
            fs::create_dir_all(&dir)?;
            return Ok(dir);
        }
    }
    unreachable!("the loop returns or runs forever")
}

/// `flush.interval.ms` for `flush`: its period under `Interval`, the broker's default otherwise.
fn flush_interval_ms(flush: FlushPolicy) -> u64 {
    match flush {
        FlushPolicy::Interval { ms } => ms,
        _ => DEFAULT_FLUSH_INTERVAL_MS,
    }
}

/// The broker's default `flush.interval.ms`, and the period of the interval experiments.
pub const DEFAULT_FLUSH_INTERVAL_MS: u64 = 1000;

fn spawn(
    bin: &Path,
    data_dir: &Path,
    flush: FlushPolicy,
    shards: Option<usize>,
) -> Result<BrokerHandle, BenchError> {
    let port = free_port()?;
    let log_path = data_dir.with_extension("log");
    let log = fs::File::create(&log_path)?;
    let mut cmd = Command::new(bin);
    cmd.arg("--override")
        .arg(format!("listeners=PLAINTEXT://127.0.0.1:{port}"))
        .arg("--override")
        .arg(format!("log.dirs={}", data_dir.display()))
        .arg("--override")
        .arg(format!("flush.policy={}", flush.name()))
        .arg("--override")
        .arg(format!("flush.interval.ms={}", flush_interval_ms(flush)))
        .arg("--override")
        .arg("auto.create.topics.enable=false")
        // The sweep's largest request is 1000 records of 10 KB (~10 MB):
        // above Kafka's 1 MiB default batch limit, so both limits are raised.
        .arg("--override")
        .arg(format!("message.max.bytes={MESSAGE_MAX_BYTES}"))
        .arg("--override")
        .arg(format!(
            "socket.request.max.bytes={}",
            2 * MESSAGE_MAX_BYTES
        ));
    if let Some(n) = shards {
        cmd.arg("--override").arg(format!("num.shards={n}"));
    }
    let mut child = cmd
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .spawn()
        .map_err(|e| BenchError::Broker(format!("cannot start {}: {e}", bin.display())))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| BenchError::Broker("broker stdout not captured".into()))?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(found) = parse_listening_line(&line) {
                let _ = tx.send(found);
            }
        }
    });
    let mut handle = BrokerHandle {
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        backend: String::new(),
        flush: flush.name().into(),
        child: Some(child),
        data_dir: Some(data_dir.to_path_buf()),
    };
    match rx.recv_timeout(START_TIMEOUT) {
        Ok((addr, backend)) => {
            handle.addr = addr;
            handle.backend = backend;
            Ok(handle)
        }
        Err(_) => {
            let log = fs::read_to_string(&log_path).unwrap_or_default();
            Err(BenchError::Broker(format!(
                "{} did not report `listening on` within {}s; its log:\n{}",
                bin.display(),
                START_TIMEOUT.as_secs(),
                log.lines().rev().take(20).collect::<Vec<_>>().join("\n")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_readiness_line() {
        let line = "minikafka: listening on 127.0.0.1:40123 (backend uring, 2 shards, data /tmp/d)";
        let (addr, backend) = parse_listening_line(line).expect("parsed");
        assert_eq!(addr, "127.0.0.1:40123".parse::<SocketAddr>().expect("addr"));
        assert_eq!(backend, "uring");
    }

    #[test]
    fn other_lines_are_not_readiness() {
        assert_eq!(parse_listening_line("INFO starting shards=2"), None);
        assert_eq!(parse_listening_line("listening on nowhere"), None);
        let (_, backend) =
            parse_listening_line("listening on [::1]:9092").expect("address alone parses");
        assert_eq!(backend, "unknown");
    }
}
