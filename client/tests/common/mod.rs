//! Starts the REAL `minikafka` broker binary for integration tests.
//!
//! The binary is `target/debug/minikafka` under the workspace root (or `$CARGO_TARGET_DIR`, or
//! `$MINIKAFKA_BIN`; `minikafka-broker`, cargo's default name for the broker package's binary,
//! is taken when `minikafka` is absent); build it first with `cargo build --bin minikafka`. A missing binary or a
//! broker that does not come up FAILS the test: these tests never skip.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use minikafka_client::{
    Admin, Connection, ConnectionConfig, Consumer, ConsumerConfig, ConsumerRecord, OffsetReset,
};
use smol::net::TcpStream;

/// A running broker on a free port with a temporary data directory; killed on drop.
pub struct Broker {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// The schema registry's URL (`http://127.0.0.1:PORT`, an ephemeral port).
    pub registry: String,
    dir: tempfile::TempDir,
}

pub fn broker_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("MINIKAFKA_BIN") {
        return PathBuf::from(bin);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let bin = target.join("debug").join("minikafka");
    // Until the broker package names its binary `minikafka`, cargo calls it after the package.
    let by_package = target.join("debug").join("minikafka-broker");
    if !bin.exists() && by_package.exists() {
        return by_package;
    }
    bin
}

/// A free port of 127.0.0.1 (for a second listener).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

impl Broker {
    /// The broker's data directory (`log.dirs`).
    #[allow(dead_code)]
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Starts the broker and waits for its `listening on` line.
    pub fn start() -> Broker {
        Broker::start_with(&[])
    }

    /// Starts the broker with these `--override key=value` settings after its own (a
    /// `{port}` in a value is the PLAINTEXT listener's port).
    #[allow(dead_code)]
    pub fn start_with(overrides: &[(&str, &str)]) -> Broker {
        // The free port is chosen before the broker binds it, so another process on this
        // machine can take it in between: then the broker exits with "Address already in
        // use" and a new port is tried. Any other failure to come up fails the test.
        let mut attempts = 0;
        loop {
            match Broker::try_start_with(overrides) {
                Ok(broker) => return broker,
                Err(err) if err.contains("Address already in use") && attempts < 4 => {
                    attempts += 1;
                }
                Err(err) => panic!("{err}"),
            }
        }
    }

    fn try_start_with(overrides: &[(&str, &str)]) -> Result<Broker, String> {
        let bin = broker_binary();
        assert!(
            bin.exists(),
            "broker binary {} not found: build it with `cargo build --bin minikafka`",
            bin.display()
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let stderr_path = dir.path().join("broker.stderr");
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let mut child = Command::new(&bin)
            .arg("--override")
            .arg(format!("listeners=PLAINTEXT://{addr}"))
            .arg("--override")
            .arg(format!("log.dirs={}", data.display()))
            // The registry on an ephemeral port (its default 8081 is one per machine).
            .arg("--override")
            .arg("schema.registry.listeners=http://127.0.0.1:0")
            .args(overrides.iter().flat_map(|(k, v)| {
                [
                    "--override".to_string(),
                    format!("{k}={}", v.replace("{port}", &port.to_string())),
                ]
            }))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let ready = line.contains("listening on");
                let _ = tx.send(line);
                if ready {
                    // Keep draining so the broker never blocks on a full pipe.
                    continue;
                }
            }
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        let mut listening = false;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                // The registry's line follows the Kafka listener's.
                Ok(line) if line.contains("schema registry on") && listening => {
                    seen.push(line);
                    break;
                }
                Ok(line) if line.contains("listening on") => {
                    listening = true;
                    seen.push(line);
                }
                Ok(line) => seen.push(line),
                Err(_) => {
                    let status = child.try_wait().ok().flatten();
                    let _ = child.kill();
                    let _ = child.wait();
                    let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                    return Err(format!(
                        "broker {} did not print `listening on` (exit status {status:?})\n\
                         stdout: {seen:?}\nstderr:\n{err}",
                        bin.display()
                    ));
                }
            }
        }
        let registry = seen
            .iter()
            .find_map(|l| l.strip_prefix("minikafka: schema registry on "))
            .unwrap_or_default()
            .trim()
            .to_owned();
        Ok(Broker {
            child,
            addr,
            registry,
            dir,
        })
    }

    /// The broker's stderr so far (for failure messages).
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("broker.stderr")).unwrap_or_default()
    }

    /// A TCP connection to the broker.
    pub async fn stream(&self) -> TcpStream {
        let stream = TcpStream::connect(&self.addr)
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.addr));
        stream.set_nodelay(true).expect("nodelay");
        stream
    }

    /// A negotiated connection.
    pub async fn connection(&self) -> Connection<TcpStream> {
        Connection::connect(self.stream().await, ConnectionConfig::default())
            .await
            .expect("ApiVersions negotiation")
    }

    /// An admin client.
    pub async fn admin(&self) -> Admin<TcpStream> {
        Admin::new(self.connection().await)
    }

    /// Creates `topic` with `partitions` partitions.
    pub async fn create_topic(&self, topic: &str, partitions: i32) {
        self.admin()
            .await
            .create_topic(topic, partitions, &[])
            .await
            .unwrap_or_else(|e| panic!("create topic {topic}: {e}"));
    }

    /// A consumer that starts at the earliest offset and waits at most 200 ms per poll.
    pub async fn consumer(&self) -> Consumer<TcpStream> {
        let config = ConsumerConfig {
            auto_offset_reset: OffsetReset::Earliest,
            max_wait: Duration::from_millis(200),
            ..ConsumerConfig::default()
        };
        Consumer::connect(self.stream().await, config)
            .await
            .expect("consumer connect")
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls until `want` records arrived (failing after 20 s).
pub async fn poll_until(consumer: &mut Consumer<TcpStream>, want: usize) -> Vec<ConsumerRecord> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut out = Vec::new();
    while out.len() < want {
        assert!(
            std::time::Instant::now() < deadline,
            "only {} of {want} records arrived",
            out.len()
        );
        out.extend(consumer.poll().await.expect("poll"));
    }
    out
}
