//! `mk-rtt`: the fixed cost of one request in the broker, beside a raw TCP echo.
//!
//! Contract:
//! - Input: `mk-rtt HOST:PORT [SECONDS] [VALUE_BYTES] [TOPIC]` against a running broker.
//! - Creates `TOPIC` (one partition; an existing one is reused), then sends one pre-encoded
//!   1-record Produce (acks=1) at a time over a blocking socket (TCP_NODELAY) for `SECONDS`,
//!   then the same through mk-bench's async client ([`produce_run`], depth 1), then runs
//!   [`tcp_echo`] with the same request and response sizes in this process.
//! - Output: one line per run on stdout: requests/s, mean, p50, p99 in µs, and the broker's
//!   excess over the echo (mean and p50).
//! - Never: pipelines (depth 1), or retries a failed request.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ProduceRequest, RequestHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};
use minikafka_benches::kafka_workloads::{create_topic, pre_encode, produce_run, Limits};
use minikafka_benches::net_baselines::tcp_echo;

const PRODUCE_VERSION: i16 = 7;

/// ApiVersions v0 (no file I/O in the broker): the executor's and protocol's share alone.
fn api_versions_frame() -> Vec<u8> {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::ApiVersions as i16)
        .with_request_api_version(0)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("mk-rtt")))
        .encode(&mut buf, ApiVersionsRequest::header_version(0))
        .expect("header encodes");
    ApiVersionsRequest::default()
        .encode(&mut buf, 0)
        .expect("request encodes");
    let mut out = (buf.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&buf);
    out
}

fn frame(request: &ProduceRequest) -> Vec<u8> {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::Produce as i16)
        .with_request_api_version(PRODUCE_VERSION)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("mk-rtt")))
        .encode(&mut buf, ProduceRequest::header_version(PRODUCE_VERSION))
        .expect("header encodes");
    request
        .encode(&mut buf, PRODUCE_VERSION)
        .expect("request encodes");
    let mut out = (buf.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&buf);
    out
}

fn summary(label: &str, mut rtt_ns: Vec<u64>, elapsed_s: f64) -> (f64, f64) {
    rtt_ns.sort_unstable();
    let n = rtt_ns.len().max(1);
    let mean_us = rtt_ns.iter().sum::<u64>() as f64 / n as f64 / 1e3;
    let p50_us = rtt_ns[n / 2] as f64 / 1e3;
    let p99_us = rtt_ns[(n * 99 / 100).min(n - 1)] as f64 / 1e3;
    println!(
        "{label:>8}: {:>9.0} req/s  mean {mean_us:>7.1} µs  p50 {p50_us:>7.1} µs  p99 {p99_us:>7.1} µs",
        rtt_ns.len() as f64 / elapsed_s
    );
    (mean_us, p50_us)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let addr: SocketAddr = args
        .get(1)
        .ok_or("usage: mk-rtt HOST:PORT [SECONDS] [VALUE_BYTES] [TOPIC]")?
        .parse()?;
    let seconds: f64 = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(2.0);
    let value_bytes: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(100);
    let topic = args.get(4).cloned().unwrap_or_else(|| "rtt".to_string());
    let duration = Duration::from_secs_f64(seconds);

    if let Err(e) = create_topic(addr, &topic, 1) {
        eprintln!("create topic {topic}: {e} (reusing it)");
    }
    let pre = pre_encode(&topic, 0, value_bytes, 1);
    // MK_RTT_API=1: ApiVersions v0 instead of Produce (no file write, no partition).
    let api_only = std::env::var_os("MK_RTT_API").is_some();
    let request = if api_only {
        api_versions_frame()
    } else {
        frame(&pre.request)
    };
    // MK_RTT_CONNS=N: N connections one after another, each for SECONDS / N (with several
    // shards each lands on a shard of the kernel's choosing: same-shard and cross-shard
    // requests show as two modes).
    let conns: u32 = std::env::var("MK_RTT_CONNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut header = [0u8; 4];
    let mut body = Vec::new();
    let mut round_trip = |conn: &mut TcpStream| -> std::io::Result<usize> {
        conn.write_all(&request)?;
        conn.read_exact(&mut header)?;
        let len = i32::from_be_bytes(header).max(0) as usize;
        body.resize(len, 0);
        conn.read_exact(&mut body)?;
        Ok(len + 4)
    };
    let mut response_bytes = 0;
    let mut rtt_ns = Vec::new();
    let mut elapsed_s = 0.0;
    for i in 0..conns {
        let mut conn = TcpStream::connect(addr)?;
        conn.set_nodelay(true)?;
        for _ in 0..200 {
            response_bytes = round_trip(&mut conn)?;
        }
        let mut one_ns = Vec::new();
        let start = Instant::now();
        while start.elapsed() < duration / conns {
            let t = Instant::now();
            round_trip(&mut conn)?;
            one_ns.push(t.elapsed().as_nanos() as u64);
        }
        let one_s = start.elapsed().as_secs_f64();
        if conns > 1 {
            summary(&format!("conn {i}"), one_ns.clone(), one_s);
        }
        rtt_ns.extend(one_ns);
        elapsed_s += one_s;
    }
    let (broker_mean, broker_p50) = summary("produce", rtt_ns, elapsed_s);
    let limits = Limits {
        duration,
        max_payload_bytes: u64::MAX,
    };
    let m = if api_only {
        None
    } else {
        Some(produce_run(addr, &pre, 1, limits)?)
    };
    if let Some(m) = m {
        println!(
            "{:>8}: {:>9.0} req/s  mean {:>7.1} µs (mk-bench's async client, depth 1)",
            "client",
            m.requests_per_s(),
            1e6 / m.requests_per_s()
        );
    }
    let echo = tcp_echo(request.len(), response_bytes, duration)?;
    let (echo_mean, echo_p50) = summary("echo", echo.rtt_ns, echo.elapsed_s);
    println!(
        "  excess: mean {:.1} µs  p50 {:.1} µs  (request {} B, response {} B)",
        broker_mean - echo_mean,
        broker_p50 - echo_p50,
        request.len(),
        response_bytes
    );
    Ok(())
}
