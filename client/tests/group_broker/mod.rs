//! The broker the consumer-group tests run against, chosen in ONE place.
//!
//! `MK_GROUP_BROKER` selects it: `minikafka` (the default: the real binary, see `common`) or
//! `kfake` (the peer broker, a reference for what Kafka does). kfake is found at
//! `../shared/peers/kfake/kfake-runner` relative to the workspace root (CI has `shared/` beside
//! the checkout), or at `$KFAKE_RUNNER`. A missing broker FAILS the test: these tests never skip.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use minikafka_client::{Admin, Connection, ConnectionConfig};
use smol::net::TcpStream;

use crate::common::Broker;

/// Which broker serves the group tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerKind {
    /// franz-go's kfake, the peer broker.
    Kfake,
    /// The real minikafka binary.
    Minikafka,
}

/// The broker kind from `MK_GROUP_BROKER` (minikafka unless it says `kfake`).
pub fn broker_kind() -> BrokerKind {
    match std::env::var("MK_GROUP_BROKER").as_deref() {
        Ok("minikafka") | Err(_) => BrokerKind::Minikafka,
        Ok("kfake") => BrokerKind::Kfake,
        Ok(other) => panic!("MK_GROUP_BROKER={other:?}: expected kfake or minikafka"),
    }
}

/// A running broker of the chosen kind; stopped on drop.
pub enum GroupBroker {
    /// kfake-runner as a child process.
    Kfake {
        /// The process.
        child: Child,
        /// `127.0.0.1:PORT`.
        addr: String,
        /// Its data directory.
        _dir: tempfile::TempDir,
    },
    /// The minikafka binary.
    Minikafka(Broker),
}

fn kfake_runner() -> PathBuf {
    if let Some(path) = std::env::var_os("KFAKE_RUNNER") {
        return PathBuf::from(path);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/peers/kfake/kfake-runner")
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

fn start_kfake() -> GroupBroker {
    let bin = kfake_runner();
    assert!(
        bin.exists(),
        "kfake-runner not found at {} (the group tests need the peer broker beside the \
         checkout: ../shared/peers/kfake/kfake-runner)",
        bin.display()
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(&bin)
        .arg("-port")
        .arg(port.to_string())
        .arg("-data-dir")
        .arg(dir.path().join("data"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    // kfake prints its listen address once it accepts connections.
    let ready = rx.recv_timeout(Duration::from_secs(30));
    if ready.is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("kfake-runner on {addr} did not come up");
    }
    GroupBroker::Kfake {
        child,
        addr,
        _dir: dir,
    }
}

impl GroupBroker {
    /// Starts the broker `MK_GROUP_BROKER` names.
    pub fn start() -> GroupBroker {
        match broker_kind() {
            BrokerKind::Kfake => start_kfake(),
            BrokerKind::Minikafka => GroupBroker::Minikafka(Broker::start()),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> &str {
        match self {
            GroupBroker::Kfake { addr, .. } => addr,
            GroupBroker::Minikafka(b) => &b.addr,
        }
    }

    /// A TCP connection to the broker.
    pub async fn stream(&self) -> TcpStream {
        let stream = TcpStream::connect(self.addr())
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.addr()));
        stream.set_nodelay(true).expect("nodelay");
        stream
    }

    /// A negotiated connection.
    pub async fn connection(&self) -> Connection<TcpStream> {
        Connection::connect(self.stream().await, ConnectionConfig::default())
            .await
            .expect("ApiVersions negotiation")
    }

    /// Creates `topic` with `partitions` partitions.
    pub async fn create_topic(&self, topic: &str, partitions: i32) {
        Admin::new(self.connection().await)
            .create_topic(topic, partitions, &[])
            .await
            .unwrap_or_else(|e| panic!("create topic {topic}: {e}"));
    }
}

impl Drop for GroupBroker {
    fn drop(&mut self) {
        if let GroupBroker::Kfake { child, .. } = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits (bounded, generous) until `check` holds; fails with `what` otherwise.
pub fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
