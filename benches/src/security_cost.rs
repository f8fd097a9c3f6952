//! What security costs on the wire: one broker with a PLAINTEXT, an SSL and a SASL_SSL
//! (PLAIN) listener, driven by our client (rustls, like the broker), the three measured in
//! the same run, alternating, on the same topic and the same disk.
//!
//! Contract:
//! - Inputs: [`SecurityOptions`]: the `minikafka` executable, a scratch directory, rounds and
//!   the size of each measurement.
//! - Each round measures every protocol once, in an order rotated per round (so no protocol
//!   always runs first on a cold page cache or last on a full one), each on a fresh topic
//!   deleted after it (the disk holds one measurement's records at a time): saturation, a
//!   producer on one fresh connection with [`SATURATION_DEPTH`] requests in flight for
//!   `saturation_s` or [`SATURATION_MAX_BYTES`], in MB/s of record values; then sequential
//!   latency, one one-record
//!   Produce (acks=1) at a time on a fresh connection, `sequential_requests` of them, each
//!   timed from send to answer.
//! - Output: per protocol the median, min and max over rounds of saturation MB/s and of the
//!   round's sequential p50, and the CPU seconds the broker and this process (the client)
//!   spent per GB of record values during each saturation measurement (`proc_stats::cpu_seconds`,
//!   fixed work, so a load that slows the clock hardly moves it); the ratio of each median to PLAINTEXT's, and the median (min–max)
//!   of the per-round ratios (each protocol against PLAINTEXT measured in the same round,
//!   which a load that drifts between rounds affects less). Connecting (TCP, the
//!   TLS handshake, SASL) is outside every clock: these are steady-state costs.
//! - The certificates are made in the scratch directory with the `openssl` commands
//!   docs/SECURITY.md gives; no key material leaves it.
//! - Never: asserts a timing, or reads a figure from anywhere but this run.

use std::net::{SocketAddr, TcpListener, TcpStream as StdTcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use minikafka_client::sasl::SaslConfig;
use minikafka_client::tls::{MaybeTls, TlsConfig, TlsConnector};
use minikafka_client::{Connection, ConnectionConfig};
use smol::net::TcpStream;

use crate::error::BenchError;
use crate::kafka_workloads::{
    check_produce, create_topic, delete_topic, pre_encode, produce_loop, Limits,
};
use crate::proc_stats::cpu_seconds;
use crate::stats::{percentile, Summary};

/// Requests in flight in the saturation producer.
pub const SATURATION_DEPTH: usize = 32;
/// Records per saturation request, and their value size: 100 KB requests.
const SATURATION_BATCH: (usize, usize) = (100, 1000);
/// Most record bytes one saturation measurement writes (bounds the disk it uses).
pub const SATURATION_MAX_BYTES: u64 = 1_000_000_000;
/// The SASL_SSL listener's one PLAIN user, in Kafka's JAAS syntax.
pub const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";"#;
/// That user's name and password, as a client gives them.
pub const SASL_USER: (&str, &str) = ("bench", "bench-secret");

/// The listeners measured, in the table's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// No TLS, no SASL.
    Plaintext,
    /// TLS (rustls on both ends).
    Ssl,
    /// TLS, then SASL PLAIN.
    SaslSsl,
}

impl Protocol {
    /// Every protocol, PLAINTEXT first (the baseline).
    pub const ALL: [Protocol; 3] = [Protocol::Plaintext, Protocol::Ssl, Protocol::SaslSsl];

    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Plaintext => "PLAINTEXT",
            Protocol::Ssl => "SSL",
            Protocol::SaslSsl => "SASL_SSL",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct SecurityOptions {
    /// The `minikafka` executable.
    pub bin: PathBuf,
    /// Where the broker's data, its log and the certificates go.
    pub scratch: PathBuf,
    /// Rounds (each measures every protocol once).
    pub rounds: usize,
    /// Seconds of each saturation measurement.
    pub saturation_s: f64,
    /// One-record Produce requests per sequential measurement.
    pub sequential_requests: usize,
    /// Further `server.properties` lines for the broker (after the benchmark's own, so they
    /// win), e.g. `ssl.cipher.suites=TLS_AES_128_GCM_SHA256`.
    pub broker_settings: Vec<String>,
}

/// One protocol's figures over the rounds.
#[derive(Clone, Debug)]
pub struct ProtocolFigures {
    /// Which listener.
    pub protocol: Protocol,
    /// Saturation, MB/s of record values, per round.
    pub saturation_mb_s: Vec<f64>,
    /// The sequential p50 in microseconds, per round.
    pub sequential_p50_us: Vec<f64>,
    /// Broker CPU seconds per GB of record values in the saturation measurement, per round.
    pub broker_cpu_s_per_gb: Vec<f64>,
    /// Client (this process) CPU seconds per GB of record values, per round.
    pub client_cpu_s_per_gb: Vec<f64>,
    /// The TLS version and cipher suite the saturation connection negotiated (TLS listeners).
    pub negotiated: Option<String>,
}

/// One saturation measurement: its rate and what it cost each side.
struct Saturation {
    mb_s: f64,
    negotiated: Option<String>,
    broker_cpu_s_per_gb: f64,
    client_cpu_s_per_gb: f64,
}

/// A broker process with the three listeners; killed on drop.
struct SecureBroker {
    child: Child,
    addrs: [SocketAddr; 3],
}

impl Drop for SecureBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16, BenchError> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn openssl(dir: &Path, args: &[&str]) -> Result<(), BenchError> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| BenchError::Broker(format!("cannot run openssl: {e}")))?;
    if !out.status.success() {
        return Err(BenchError::Broker(format!(
            "openssl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// A CA and the broker's key and certificate for 127.0.0.1 (`broker.pem`: key then chain;
/// `ca.crt`: what a client trusts).
pub fn make_pki(dir: &Path) -> Result<(), BenchError> {
    std::fs::create_dir_all(dir)?;
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=mk-bench CA",
    ]);
    openssl(dir, &ca)?;
    let mut req = vec!["req"];
    req.extend(ec);
    req.extend([
        "-keyout",
        "broker.key",
        "-out",
        "broker.csr",
        "-subj",
        "/CN=localhost",
    ]);
    openssl(dir, &req)?;
    std::fs::write(
        dir.join("broker.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "broker.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            "broker.crt",
            "-extfile",
            "broker.ext",
        ],
    )?;
    let pem = std::fs::read_to_string(dir.join("broker.key"))?
        + &std::fs::read_to_string(dir.join("broker.crt"))?;
    std::fs::write(dir.join("broker.pem"), pem)?;
    Ok(())
}

/// The broker settings of the TLS listeners (named `SSL` and `SASL_SSL`, as in `listeners`):
/// the keystore [`make_pki`] wrote in `pki`, and PLAIN with [`JAAS`] on SASL_SSL.
pub fn tls_settings(pki: &Path) -> Vec<String> {
    vec![
        "ssl.keystore.type=PEM".into(),
        format!("ssl.keystore.location={}", pki.join("broker.pem").display()),
        "listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN".into(),
        format!("listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}"),
    ]
}

fn start_broker(opts: &SecurityOptions, pki: &Path) -> Result<SecureBroker, BenchError> {
    let ports = [free_port()?, free_port()?, free_port()?];
    let data = opts.scratch.join("data");
    std::fs::create_dir_all(&data)?;
    let log = std::fs::File::create(opts.scratch.join("broker.log"))?;
    let settings = [
        format!(
            "listeners=PLAINTEXT://127.0.0.1:{},SSL://127.0.0.1:{},SASL_SSL://127.0.0.1:{}",
            ports[0], ports[1], ports[2]
        ),
        format!("log.dirs={}", data.display()),
        "auto.create.topics.enable=false".into(),
        "schema.registry.listeners=".into(),
    ]
    .into_iter()
    .chain(tls_settings(pki))
    .collect::<Vec<String>>();
    let mut cmd = Command::new(&opts.bin);
    for s in settings.iter().chain(&opts.broker_settings) {
        cmd.arg("--override").arg(s);
    }
    let child = cmd
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .map_err(|e| BenchError::Broker(format!("cannot start {}: {e}", opts.bin.display())))?;
    let addrs = ports.map(|p| SocketAddr::from(([127, 0, 0, 1], p)));
    let broker = SecureBroker { child, addrs };
    let deadline = Instant::now() + Duration::from_secs(30);
    while addrs
        .iter()
        .any(|a| StdTcpStream::connect_timeout(a, Duration::from_millis(200)).is_err())
    {
        if Instant::now() > deadline {
            return Err(BenchError::Broker(format!(
                "the broker did not listen on {addrs:?} within 30 s (see {})",
                opts.scratch.join("broker.log").display()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(broker)
}

/// A negotiated connection over `protocol` (TCP, TLS handshake, SASL: all before any clock).
async fn connect(
    protocol: Protocol,
    addr: SocketAddr,
    tls: &TlsConnector,
    max_in_flight: usize,
) -> Result<(Connection<MaybeTls<TcpStream>>, Option<String>), BenchError> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let stream = match protocol {
        Protocol::Plaintext => MaybeTls::Plain(stream),
        Protocol::Ssl | Protocol::SaslSsl => tls.connect("127.0.0.1", stream).await?,
    };
    let negotiated = match &stream {
        MaybeTls::Plain(_) => None,
        MaybeTls::Tls(s) => {
            let session = s.get_ref().1;
            let version = session
                .protocol_version()
                .map_or("?".to_string(), |v| format!("{v:?}"));
            let suite = session
                .negotiated_cipher_suite()
                .map_or("?".to_string(), |c| format!("{:?}", c.suite()));
            Some(format!("{version} {suite}"))
        }
    };
    let config = ConnectionConfig {
        client_id: "mk-bench-security".into(),
        max_in_flight: max_in_flight.max(1),
        sasl: (protocol == Protocol::SaslSsl).then(|| SaslConfig {
            mechanism: "PLAIN".into(),
            username: SASL_USER.0.into(),
            password: SASL_USER.1.into(),
        }),
        ..ConnectionConfig::default()
    };
    Ok((Connection::connect(stream, config).await?, negotiated))
}

fn saturation(
    protocol: Protocol,
    addr: SocketAddr,
    tls: &TlsConnector,
    topic: &str,
    seconds: f64,
    broker_pid: u32,
) -> Result<Saturation, BenchError> {
    let (records, value_bytes) = SATURATION_BATCH;
    let pre = pre_encode(topic, 0, value_bytes, records);
    let cpu = || {
        (
            cpu_seconds(broker_pid).unwrap_or(f64::NAN),
            cpu_seconds(std::process::id()).unwrap_or(f64::NAN),
        )
    };
    smol::block_on(async {
        let (mut conn, negotiated) = connect(protocol, addr, tls, SATURATION_DEPTH).await?;
        let limits = Limits {
            duration: Duration::from_secs_f64(seconds),
            max_payload_bytes: SATURATION_MAX_BYTES,
        };
        let before = cpu();
        let m = produce_loop(&mut conn, &pre, SATURATION_DEPTH, limits).await?;
        let after = cpu();
        let gb = (m.payload_bytes as f64 / 1e9).max(f64::MIN_POSITIVE);
        Ok(Saturation {
            mb_s: m.mb_per_s(),
            negotiated,
            broker_cpu_s_per_gb: (after.0 - before.0) / gb,
            client_cpu_s_per_gb: (after.1 - before.1) / gb,
        })
    })
}

fn sequential_p50_us(
    protocol: Protocol,
    addr: SocketAddr,
    tls: &TlsConnector,
    topic: &str,
    requests: usize,
) -> Result<f64, BenchError> {
    let pre = pre_encode(topic, 0, 100, 1);
    smol::block_on(async {
        let (mut conn, _) = connect(protocol, addr, tls, 1).await?;
        let mut samples = Vec::with_capacity(requests);
        for _ in 0..requests {
            let started = Instant::now();
            let ticket = conn.send(&pre.request).await?;
            check_produce(&conn.receive(ticket).await?)?;
            samples.push(started.elapsed().as_nanos() as f64 / 1000.0);
        }
        samples.sort_by(f64::total_cmp);
        percentile(&samples, 0.5).ok_or_else(|| BenchError::Check("no sequential samples".into()))
    })
}

/// Runs the rounds; the figures per protocol, in [`Protocol::ALL`]'s order.
pub fn run(opts: &SecurityOptions) -> Result<Vec<ProtocolFigures>, BenchError> {
    let pki = opts.scratch.join("pki");
    make_pki(&pki)?;
    let tls = TlsConnector::new(&TlsConfig::from_files(
        &pki.join("ca.crt").display().to_string(),
        None,
        None,
    )?)?;
    let broker = start_broker(opts, &pki)?;
    let mut figures: Vec<ProtocolFigures> = Protocol::ALL
        .iter()
        .map(|&protocol| ProtocolFigures {
            protocol,
            saturation_mb_s: Vec::new(),
            sequential_p50_us: Vec::new(),
            broker_cpu_s_per_gb: Vec::new(),
            client_cpu_s_per_gb: Vec::new(),
            negotiated: None,
        })
        .collect();
    let broker_pid = broker.child.id();
    for round in 0..opts.rounds.max(1) {
        for k in 0..Protocol::ALL.len() {
            let i = (round + k) % Protocol::ALL.len();
            let (protocol, addr) = (Protocol::ALL[i], broker.addrs[i]);
            let topic = format!("security-cost-{round}-{i}");
            create_topic(broker.addrs[0], &topic, 1)?;
            let sat = saturation(protocol, addr, &tls, &topic, opts.saturation_s, broker_pid)?;
            let p50 = sequential_p50_us(protocol, addr, &tls, &topic, opts.sequential_requests)?;
            delete_topic(broker.addrs[0], &topic)?;
            eprintln!(
                "round {round} {}: saturation {:.1} MB/s (CPU s/GB: broker {:.2}, client {:.2}), sequential p50 {p50:.0} µs",
                protocol.name(),
                sat.mb_s,
                sat.broker_cpu_s_per_gb,
                sat.client_cpu_s_per_gb,
            );
            figures[i].saturation_mb_s.push(sat.mb_s);
            figures[i].broker_cpu_s_per_gb.push(sat.broker_cpu_s_per_gb);
            figures[i].client_cpu_s_per_gb.push(sat.client_cpu_s_per_gb);
            figures[i].sequential_p50_us.push(p50);
            figures[i].negotiated = sat.negotiated;
        }
    }
    Ok(figures)
}

/// The Markdown table: per protocol, medians with min–max, and each median's ratio to
/// PLAINTEXT's.
pub fn table(figures: &[ProtocolFigures]) -> String {
    let summary = |v: &[f64]| Summary::of(v);
    let base = figures.first();
    let base_sat = base
        .and_then(|b| summary(&b.saturation_mb_s))
        .map(|s| s.median);
    let base_p50 = base
        .and_then(|b| summary(&b.sequential_p50_us))
        .map(|s| s.median);
    let mut out = String::from(
        "| Listener | Saturation MB/s (median, min–max) | × PLAINTEXT | per round × PLAINTEXT (median, min–max) | Sequential p50 µs (median, min–max) | × PLAINTEXT | per round × PLAINTEXT |\n|---|---|---|---|---|---|---|\n",
    );
    // Each round's value over PLAINTEXT's in the same round.
    let per_round = |mine: &[f64], base: Option<&[f64]>| {
        let ratios: Vec<f64> = base
            .map(|b| {
                mine.iter()
                    .zip(b)
                    .filter(|(_, b)| **b > 0.0)
                    .map(|(m, b)| m / b)
                    .collect()
            })
            .unwrap_or_default();
        Summary::of(&ratios).map_or("—".to_string(), |s| {
            format!("{:.2} ({:.2}–{:.2})", s.median, s.min, s.max)
        })
    };
    for f in figures {
        let (Some(sat), Some(p50)) = (summary(&f.saturation_mb_s), summary(&f.sequential_p50_us))
        else {
            continue;
        };
        let ratio = |x: f64, base: Option<f64>| {
            base.filter(|b| *b > 0.0)
                .map_or("—".to_string(), |b| format!("{:.2}", x / b))
        };
        out.push_str(&format!(
            "| {} | {:.1} ({:.1}–{:.1}) | {} | {} | {:.0} ({:.0}–{:.0}) | {} | {} |\n",
            f.protocol.name(),
            sat.median,
            sat.min,
            sat.max,
            ratio(sat.median, base_sat),
            per_round(
                &f.saturation_mb_s,
                base.map(|b| b.saturation_mb_s.as_slice())
            ),
            p50.median,
            p50.min,
            p50.max,
            ratio(p50.median, base_p50),
            per_round(
                &f.sequential_p50_us,
                base.map(|b| b.sequential_p50_us.as_slice())
            ),
        ));
    }
    out
}

/// The Markdown table of what saturation cost: per protocol, broker, client and total CPU
/// seconds per GB of record values (median, min–max over rounds) and the total's ratio to
/// PLAINTEXT's (medians).
pub fn cpu_table(figures: &[ProtocolFigures]) -> String {
    let totals = |f: &ProtocolFigures| -> Vec<f64> {
        f.broker_cpu_s_per_gb
            .iter()
            .zip(&f.client_cpu_s_per_gb)
            .map(|(b, c)| b + c)
            .collect()
    };
    let cell = |v: &[f64]| {
        Summary::of(v).map_or("—".to_string(), |s| {
            format!("{:.2} ({:.2}–{:.2})", s.median, s.min, s.max)
        })
    };
    let base = figures
        .first()
        .and_then(|b| Summary::of(&totals(b)))
        .map(|s| s.median);
    let mut out = String::from(
        "| Listener | Negotiated | Broker CPU s/GB (median, min–max) | Client CPU s/GB | Total CPU s/GB | Total × PLAINTEXT |\n|---|---|---|---|---|---|\n",
    );
    for f in figures {
        let total = totals(f);
        let ratio = match (Summary::of(&total), base) {
            (Some(t), Some(b)) if b > 0.0 => format!("{:.2}", t.median / b),
            _ => "—".to_string(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            f.protocol.name(),
            f.negotiated.as_deref().unwrap_or("—"),
            cell(&f.broker_cpu_s_per_gb),
            cell(&f.client_cpu_s_per_gb),
            cell(&total),
            ratio,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_gives_medians_and_ratios_to_plaintext() {
        let figures = vec![
            ProtocolFigures {
                protocol: Protocol::Plaintext,
                saturation_mb_s: vec![100.0, 90.0, 110.0],
                sequential_p50_us: vec![50.0, 40.0, 60.0],
                broker_cpu_s_per_gb: vec![1.0, 1.2, 0.8],
                client_cpu_s_per_gb: vec![1.0, 1.0, 1.0],
                negotiated: None,
            },
            ProtocolFigures {
                protocol: Protocol::Ssl,
                saturation_mb_s: vec![80.0, 70.0, 85.0],
                sequential_p50_us: vec![60.0, 55.0, 65.0],
                broker_cpu_s_per_gb: vec![1.5, 1.5, 1.5],
                client_cpu_s_per_gb: vec![1.5, 1.0, 2.0],
                negotiated: Some("TLSv1_3 TLS13_AES_256_GCM_SHA384".into()),
            },
        ];
        let cpu = cpu_table(&figures);
        assert!(
            cpu.contains(
                "| PLAINTEXT | — | 1.00 (0.80–1.20) | 1.00 (1.00–1.00) | 2.00 (1.80–2.20) | 1.00 |"
            ),
            "{cpu}"
        );
        assert!(
            cpu.contains("| SSL | TLSv1_3 TLS13_AES_256_GCM_SHA384 | 1.50 (1.50–1.50) | 1.50 (1.00–2.00) | 3.00 (2.50–3.50) | 1.50 |"),
            "{cpu}"
        );
        let table = table(&figures);
        assert!(
            table.contains("| PLAINTEXT | 100.0 (90.0–110.0) | 1.00 | 1.00 (1.00–1.00) | 50 (40–60) | 1.00 | 1.00 (1.00–1.00) |"),
            "{table}"
        );
        assert!(
            // Per round: 80/100, 70/90, 85/110 and 60/50, 55/40, 65/60.
            table.contains("| SSL | 80.0 (70.0–85.0) | 0.80 | 0.78 (0.77–0.80) | 60 (55–65) | 1.20 | 1.20 (1.08–1.38) |"),
            "{table}"
        );
    }
}
