//! Harness that runs the real `minikafka` binary for integration tests.
//!
//! Contract:
//! - Input: `key=value` overrides (Kafka setting names) passed as `--override key=value`.
//! - Output: a [`Broker`] listening on `127.0.0.1` on a free port, with a fresh temporary data
//!   directory, ready (its output says `listening on` and the port accepts connections) before
//!   [`BrokerBuilder::start`] returns.
//! - Every wait is bounded: start, stop and restart panic with the broker's output after their
//!   limit instead of hanging. [`bounded`] bounds a whole test body.
//! - The child is killed when the [`Broker`] is dropped, and (Linux) when the thread that
//!   spawned it ends (`PR_SET_PDEATHSIG`), so a timed-out or panicking test leaves no broker
//!   behind. When the dropping thread is panicking, the broker's output is printed.
//! - The harness itself never talks the Kafka protocol; the clients tests use are beside it:
//!   [`librdkafka`] (helpers for the `rdkafka` crate), [`raw`] (raw framing over a `TcpStream`),
//!   [`typed`] (typed requests over it) and [`sasl`] (SASL logins over [`typed`]).

#![allow(dead_code)]

pub mod librdkafka;
pub mod raw;
pub mod sasl;
pub mod typed;

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How long a start (or restart, which may run recovery) may take before the test fails.
pub const START_LIMIT: Duration = Duration::from_secs(30);
/// How long a SIGTERM shutdown may take before the test fails.
pub const STOP_LIMIT: Duration = Duration::from_secs(20);

/// `num.shards` of every broker a test starts, unless it sets its own (a later override
/// wins): two, so the suites cross shards (partitions owned by the shard a connection did not
/// land on) on every machine, whatever the default is there (one shard on two cores).
pub const TEST_SHARDS: &str = "2";

/// Settings for a broker to start; see [`Broker::builder`].
#[derive(Debug, Default)]
pub struct BrokerBuilder {
    overrides: Vec<(String, String)>,
    properties: Option<PathBuf>,
    extra_listeners: Vec<String>,
}

impl BrokerBuilder {
    /// Adds `--override key=value` (a later value for the same key wins).
    pub fn with(mut self, key: &str, value: &str) -> Self {
        self.overrides.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Starts the broker from this `server.properties` file (the port and data directory, and
    /// any [`with`](Self::with) settings, still override it).
    pub fn properties_file(mut self, path: &Path) -> Self {
        self.properties = Some(path.to_owned());
        self
    }

    /// Adds a listener named `name` (`SASL_PLAINTEXT`, or a name given a protocol with
    /// `listener.security.protocol.map`) on another free port of 127.0.0.1, after the
    /// PLAINTEXT one; [`Broker::listener_addr`] gives its address.
    pub fn listener(mut self, name: &str) -> Self {
        self.extra_listeners.push(name.to_owned());
        self
    }

    /// Picks a free port and a fresh data directory, spawns the binary and waits until ready.
    /// Two shards unless the test says otherwise ([`TEST_SHARDS`]).
    pub fn start(self) -> Broker {
        let root = tempfile::Builder::new()
            .prefix("minikafka-it-")
            .tempdir()
            .expect("create temp dir");
        let data_dir = root.path().join("data");
        std::fs::create_dir_all(&data_dir).expect("create data dir");
        let log_path = root.path().join("broker.log");
        let port = free_port();
        let extra_listeners = self
            .extra_listeners
            .into_iter()
            .map(|name| (name, free_port()))
            .collect();
        let mut broker = Broker {
            child: None,
            port,
            extra_listeners,
            overrides: [
                ("num.shards".to_owned(), TEST_SHARDS.to_owned()),
                // No schema registry unless a test asks for one (its default port 8081 is one
                // per machine, and suites run side by side).
                ("schema.registry.listeners".to_owned(), String::new()),
            ]
            .into_iter()
            .chain(self.overrides)
            .collect(),
            properties: self.properties,
            data_dir,
            log_path,
            _root: root,
        };
        broker.spawn();
        broker
    }
}

/// A running `minikafka` child process with its own port and data directory.
#[derive(Debug)]
pub struct Broker {
    child: Option<Child>,
    port: u16,
    /// Listeners after the PLAINTEXT one: name and port.
    extra_listeners: Vec<(String, u16)>,
    overrides: Vec<(String, String)>,
    properties: Option<PathBuf>,
    data_dir: PathBuf,
    log_path: PathBuf,
    // Dropped last: removes the data directory and the log.
    _root: tempfile::TempDir,
}

impl Broker {
    /// A builder with no overrides beyond the port and data directory.
    pub fn builder() -> BrokerBuilder {
        BrokerBuilder::default()
    }

    /// Starts a broker with default settings.
    pub fn start() -> Broker {
        Broker::builder().start()
    }

    /// `127.0.0.1:PORT`, for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The socket address the broker listens on.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The address of the listener named `name` (added with [`BrokerBuilder::listener`]).
    pub fn listener_addr(&self, name: &str) -> SocketAddr {
        let port = self
            .extra_listeners
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| *p)
            .unwrap_or_else(|| panic!("no listener {name}"));
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// The listening port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory (`log.dirs`).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Everything the broker printed so far (all runs, separated by marker lines).
    pub fn output(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(&self.log_path) {
            let mut bytes = Vec::new();
            let _ = file.read_to_end(&mut bytes);
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
        text
    }

    /// The child's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The child's resident memory (`VmRSS`) in KiB, while it runs (Linux).
    pub fn resident_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// True while the child process has not exited.
    pub fn is_alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Sends SIGTERM and waits (bounded) for a clean exit; returns the exit status.
    pub fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("broker is running");
        let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
        // SAFETY: kill(2) on our own child's pid; the child has not been reaped yet (we hold
        // the Child and have not waited), so the pid cannot have been reused.
        let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
        assert_eq!(rc, 0, "kill(SIGTERM) failed");
        let status = wait_bounded(&mut child, STOP_LIMIT);
        self.note(&format!("stopped by SIGTERM: {status:?}"));
        match status {
            Some(status) => status,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "broker did not exit within {STOP_LIMIT:?} of SIGTERM\n{}",
                    self.output_banner()
                );
            }
        }
    }

    /// Kills the broker with SIGKILL (a crash: nothing is flushed) and reaps it.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("broker is running");
        child.kill().expect("SIGKILL the broker");
        let _ = child.wait();
        self.note("killed by SIGKILL");
    }

    /// Starts the broker again on the same port and data directory (after `stop` or `kill9`).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "restart() needs a stopped broker");
        self.spawn();
    }

    /// Appends a marker line to the captured output.
    fn note(&self, line: &str) {
        if let Ok(mut file) = OpenOptions::new().append(true).open(&self.log_path) {
            let _ = writeln!(file, "=== harness: {line} ===");
        }
    }

    fn output_banner(&self) -> String {
        format!(
            "----- minikafka output ({}) -----\n{}\n----- end of minikafka output -----",
            self.log_path.display(),
            self.output()
        )
    }

    fn spawn(&mut self) {
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("open broker log");
        let _ = writeln!(log, "=== harness: starting on port {} ===", self.port);
        let start_pos = log.seek(SeekFrom::End(0)).expect("seek log");
        let stderr_log = log.try_clone().expect("clone log handle");

        let mut cmd = Command::new(minikafka_bin());
        if let Some(path) = &self.properties {
            cmd.arg(path);
        }
        cmd.arg("--override")
            .arg(format!("listeners={}", self.listeners_setting()))
            .arg("--override")
            .arg(format!("log.dirs={}", self.data_dir.display()));
        for (key, value) in &self.overrides {
            cmd.arg("--override").arg(format!("{key}={value}"));
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(stderr_log))
            .env("RUST_BACKTRACE", "1");
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: the closure runs in the forked child before exec and only calls
            // prctl(2), which is async-signal-safe; it allocates nothing.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().expect("spawn minikafka binary");
        self.child = Some(child);
        self.wait_ready(start_pos);
    }

    fn listeners_setting(&self) -> String {
        std::iter::once(format!("PLAINTEXT://127.0.0.1:{}", self.port))
            .chain(
                self.extra_listeners
                    .iter()
                    .map(|(name, port)| format!("{name}://127.0.0.1:{port}")),
            )
            .collect::<Vec<_>>()
            .join(",")
    }

    fn wait_ready(&mut self, start_pos: u64) {
        let deadline = Instant::now() + START_LIMIT;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    panic!(
                        "broker exited during startup with {status}\n{}",
                        self.output_banner()
                    );
                }
            }
            let said_ready = self.output_since(start_pos).contains("listening on");
            if said_ready
                && TcpStream::connect_timeout(&self.addr(), Duration::from_millis(200)).is_ok()
            {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "broker not ready within {START_LIMIT:?} (said 'listening on': {said_ready})\n{}",
                    self.output_banner()
                );
            }
            thread::sleep(Duration::from_millis(25));
        }
    }

    fn output_since(&self, pos: u64) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(&self.log_path) {
            if file.seek(SeekFrom::Start(pos)).is_ok() {
                let mut bytes = Vec::new();
                let _ = file.read_to_end(&mut bytes);
                text = String::from_utf8_lossy(&bytes).into_owned();
            }
        }
        text
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if thread::panicking() {
            eprintln!("{}", self.output_banner());
        }
    }
}

/// Waits for `child` to exit, polling, for at most `limit`.
fn wait_bounded(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            _ => return None,
        }
    }
}

/// Path of the `minikafka` binary Cargo built for this test run.
///
/// `option_env!` rather than `env!` so the suite still compiles while the package declares no
/// `minikafka` binary; the tests then fail at run time saying so.
pub fn minikafka_bin() -> &'static str {
    match option_env!("CARGO_BIN_EXE_minikafka") {
        Some(path) => path,
        None => panic!(
            "the package declares no `minikafka` binary ([[bin]] name = \"minikafka\"), \
             so Cargo did not build one for the tests"
        ),
    }
}

/// A port that was free a moment ago (bind to port 0, read it, release it).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// Runs `body` on its own thread and fails the test if it takes longer than `limit`.
///
/// A panic in `body` is re-raised here with its original payload. On timeout the body thread is
/// abandoned; any broker it spawned dies with the test process (`PR_SET_PDEATHSIG`).
pub fn bounded<F>(limit: Duration, body: F)
where
    F: FnOnce() + Send + 'static,
{
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let handle = thread::Builder::new()
        .name("bounded-test-body".into())
        .spawn(move || {
            body();
            let _ = done_tx.send(());
        })
        .expect("spawn test body thread");
    match done_rx.recv_timeout(limit) {
        Ok(()) => {
            if let Err(payload) = handle.join() {
                std::panic::resume_unwind(payload);
            }
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Err(payload) => std::panic::resume_unwind(payload),
            Ok(()) => panic!("test body ended without reporting"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("test exceeded its time limit of {limit:?} (hung?)")
        }
    }
}
