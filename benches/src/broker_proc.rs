//! The broker under test: a `minikafka` child process on a fresh data directory, or an
//! external broker given by address.
//!
//! Contract:
//! - Inputs: the `minikafka` binary (by default next to the running executable, so a
//!   `cargo build --release` of the workspace puts both in `target/release`), a scratch
//!   directory, a flush policy and extra `--override`s.
//! - Outputs: a [`BrokerHandle`] with the address to connect to, the backend the broker
//!   announced (`monoio`, `portable`; `external` for a broker this harness did not start) and
//!   the child's pid. Dropping the handle kills the child and removes its data directory.
//! - Readiness is the broker's own stdout line `minikafka: listening on <addr> (backend …)`;
//!   no port is probed. Its stderr goes to `broker.log` next to the data directory.
//! - [`BrokerHandle::kill_and_restart`] kills the child with SIGKILL (no shutdown, so the next
//!   start recovers) and starts the same command again on the same data directory and port.
//! - Never: reuses a data directory (each start gets a new one, restarts aside), or leaves a
//!   child running.

use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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
    /// The command that started the child (for [`BrokerHandle::kill_and_restart`]).
    respawn: Option<Respawn>,
}

/// How a child broker was started: program, arguments, environment, and its log.
#[derive(Clone, Debug)]
struct Respawn {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(String, String)>,
    log_path: PathBuf,
}

impl Respawn {
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }
}

impl BrokerHandle {
    /// Process id of the child broker (`None` for an external one).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The data directory of a child broker (`None` for an external one).
    pub fn data_dir(&self) -> Option<&Path> {
        self.data_dir.as_deref()
    }

    /// The `host:port` text librdkafka's `bootstrap.servers` takes.
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    /// Kills the broker with SIGKILL (it gets no chance to shut down: the next start
    /// recovers), starts the same command on the same data directory and port, and returns
    /// the time from the new process's start until `answers(addr)` first returns true (the
    /// probe is retried every millisecond until `timeout`).
    pub fn kill_and_restart(
        &mut self,
        mut answers: impl FnMut(SocketAddr) -> bool,
        timeout: Duration,
    ) -> Result<Duration, BenchError> {
        let respawn = self
            .respawn
            .clone()
            .ok_or_else(|| BenchError::Broker("an external broker cannot be restarted".into()))?;
        if let Some(child) = self.child.as_mut() {
            child.kill()?;
            child.wait()?;
        }
        let log = fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&respawn.log_path)?;
        let start = Instant::now();
        let child = respawn
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| {
                BenchError::Broker(format!("cannot restart {}: {e}", respawn.program.display()))
            })?;
        self.child = Some(child);
        while !answers(self.addr) {
            if start.elapsed() > timeout {
                return Err(BenchError::Broker(format!(
                    "{} did not answer within {}s of a restart",
                    respawn.program.display(),
                    timeout.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(start.elapsed())
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
pub fn free_port() -> Result<u16, BenchError> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl BrokerSource {
    /// Starts (or, for an external broker, resolves) a broker with `flush`; `label` names the
    /// data directory (`<scratch>/<label>-<n>`).
    pub fn start(&self, flush: FlushPolicy, label: &str) -> Result<BrokerHandle, BenchError> {
        self.start_with(flush, label, &[])
    }

    /// As [`BrokerSource::start`], with `extra` `server.properties` lines after the harness's
    /// own (so they win: e.g. a `listeners=` whose first listener is a PLAINTEXT one, which
    /// the handle's address then is). An external broker cannot take them.
    pub fn start_with(
        &self,
        flush: FlushPolicy,
        label: &str,
        extra: &[String],
    ) -> Result<BrokerHandle, BenchError> {
        if !extra.is_empty() && matches!(self, BrokerSource::External(_)) {
            return Err(BenchError::Broker(
                "an external broker cannot be given settings".into(),
            ));
        }
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
                    respawn: None,
                })
            }
            BrokerSource::Spawn {
                bin,
                scratch,
                expect_backend,
                shards,
            } => {
                let data_dir = fresh_dir(scratch, label)?;
                let handle = spawn(bin, &data_dir, flush, *shards, extra)?;
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
    extra: &[String],
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
        // Kafka only: no schema registry on the machine-wide port 8081.
        .arg("--override")
        .arg("schema.registry.listeners=")
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
    for line in extra {
        cmd.arg("--override").arg(line);
    }
    let env = vec![("RUST_LOG".to_owned(), "warn".to_owned())];
    let respawn = Respawn {
        program: bin.to_path_buf(),
        args: cmd.get_args().map(|a| a.to_owned()).collect(),
        env: env.clone(),
        log_path: log_path.clone(),
    };
    let child = cmd
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .spawn()
        .map_err(|e| BenchError::Broker(format!("cannot start {}: {e}", bin.display())))?;
    let handle = BrokerHandle {
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        backend: String::new(),
        flush: flush.name().into(),
        child: Some(child),
        data_dir: Some(data_dir.to_path_buf()),
        respawn: Some(respawn),
    };
    await_ready(handle, bin, &log_path, parse_listening_line)
}

/// Waits for the child of `handle` to print a line `ready` parses as `(address, backend)`,
/// then fills those in; on a timeout, the error quotes the end of its log.
fn await_ready(
    mut handle: BrokerHandle,
    bin: &Path,
    log_path: &Path,
    ready: fn(&str) -> Option<(SocketAddr, String)>,
) -> Result<BrokerHandle, BenchError> {
    let stdout = handle
        .child
        .as_mut()
        .and_then(|c| c.stdout.take())
        .ok_or_else(|| BenchError::Broker("broker stdout not captured".into()))?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(found) = ready(&line) {
                let _ = tx.send(found);
            }
        }
    });
    match rx.recv_timeout(START_TIMEOUT) {
        Ok((addr, backend)) => {
            handle.addr = addr;
            handle.backend = backend;
            Ok(handle)
        }
        Err(_) => {
            let log = fs::read_to_string(log_path).unwrap_or_default();
            Err(BenchError::Broker(format!(
                "{} did not report `listening on` within {}s; its log:\n{}",
                bin.display(),
                START_TIMEOUT.as_secs(),
                log.lines().rev().take(20).collect::<Vec<_>>().join("\n")
            )))
        }
    }
}

/// The default peer: kfake, when `../shared/peers/kfake/kfake-runner` exists (relative to the
/// working directory, as from a worktree or a CI checkout).
pub fn default_peer_bin() -> Option<PathBuf> {
    let bin = PathBuf::from("../shared/peers/kfake/kfake-runner");
    bin.is_file().then_some(bin)
}

/// A peer broker started by command for the side-by-side runs:
/// `<program> <args…> -port N -data-dir DIR`, plus `durable_flag` for the durable runs
/// (kfake-runner's interface: `-sync` fsyncs every batch, like our `flush.policy=fsync`).
#[derive(Clone, Debug)]
pub struct PeerCommand {
    /// The executable.
    pub program: PathBuf,
    /// Arguments before the ones the harness adds.
    pub args: Vec<String>,
    /// The argument that makes the peer durable (`-sync`).
    pub durable_flag: String,
    /// Parent of the per-start data directories.
    pub scratch: PathBuf,
}

impl PeerCommand {
    /// Splits `command` on whitespace: the program, then its own arguments.
    pub fn parse(
        command: &str,
        durable_flag: &str,
        scratch: &Path,
    ) -> Result<PeerCommand, BenchError> {
        let mut words = command.split_whitespace().map(str::to_owned);
        let program = words
            .next()
            .ok_or_else(|| BenchError::Broker("the peer command is empty".into()))?;
        Ok(PeerCommand {
            program: PathBuf::from(program),
            args: words.collect(),
            durable_flag: durable_flag.to_owned(),
            scratch: scratch.to_path_buf(),
        })
    }

    /// The peer's name in results: its program's file name (`kfake-runner` → `kfake`).
    pub fn name(&self) -> String {
        let file = self
            .program
            .file_name()
            .map_or_else(|| "peer".into(), |f| f.to_string_lossy().into_owned());
        file.strip_suffix("-runner").unwrap_or(&file).to_owned()
    }

    /// The flush label of a start: the durable flag, or `none`.
    pub fn flush_label(&self, durable: bool) -> String {
        if durable {
            self.durable_flag.clone()
        } else {
            "none".into()
        }
    }

    /// Starts the peer on a free loopback port and a fresh data directory under `scratch`;
    /// ready once it prints its address (a line that is a socket address, or our
    /// `listening on` line).
    pub fn start(&self, durable: bool, label: &str) -> Result<BrokerHandle, BenchError> {
        let data_dir = fresh_dir(&self.scratch, label)?;
        let port = free_port()?;
        let log_path = data_dir.with_extension("log");
        let log = fs::File::create(&log_path)?;
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .arg("-port")
            .arg(port.to_string())
            .arg("-data-dir")
            .arg(&data_dir);
        if durable {
            cmd.arg(&self.durable_flag);
        }
        let respawn = Respawn {
            program: self.program.clone(),
            args: cmd.get_args().map(|a| a.to_owned()).collect(),
            env: Vec::new(),
            log_path: log_path.clone(),
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| {
                BenchError::Broker(format!("cannot start {}: {e}", self.program.display()))
            })?;
        let handle = BrokerHandle {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            backend: String::new(),
            flush: self.flush_label(durable),
            child: Some(child),
            data_dir: Some(data_dir),
            respawn: Some(respawn),
        };
        let mut handle = await_ready(handle, &self.program, &log_path, parse_peer_ready)?;
        handle.backend = self.name();
        Ok(handle)
    }
}

/// A peer's readiness line: a bare socket address (`127.0.0.1:19602`, as kfake-runner prints
/// it) or our own `listening on` line.
pub fn parse_peer_ready(line: &str) -> Option<(SocketAddr, String)> {
    match line.trim().parse::<SocketAddr>() {
        Ok(addr) => Some((addr, "peer".into())),
        Err(_) => parse_listening_line(line),
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
    fn a_peer_is_ready_at_its_printed_address() {
        let (addr, _) = parse_peer_ready("127.0.0.1:19602\n").expect("bare address");
        assert_eq!(addr.port(), 19602);
        assert!(parse_peer_ready("starting kfake").is_none());
        let peer = PeerCommand::parse(
            "../shared/peers/kfake/kfake-runner -partitions 1",
            "-sync",
            Path::new("/tmp"),
        )
        .expect("parsed");
        assert_eq!(peer.name(), "kfake");
        assert_eq!(peer.args, vec!["-partitions", "1"]);
        assert_eq!(peer.flush_label(true), "-sync");
        assert_eq!(peer.flush_label(false), "none");
        assert!(PeerCommand::parse("  ", "-sync", Path::new("/tmp")).is_err());
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
