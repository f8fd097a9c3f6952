//! Loopback TCP baselines for the Kafka experiments: stream throughput and request/response
//! round trips, measured in the same run as the broker figures they divide.
//!
//! Contract:
//! - [`tcp_stream`]: a sender on the calling thread writes `chunk_bytes` chunks for
//!   `duration` to a receiver thread of this process (the same layout as the benchmark: the
//!   client in mk-bench, the broker in another process, so this is if anything generous).
//!   Output: bytes received and the time until the receiver saw the end of the stream.
//! - [`tcp_echo`]: a server thread answers each `request_bytes` request with
//!   `response_bytes`; the caller sends one request at a time (TCP_NODELAY on both ends) for
//!   `duration`. Output: every round trip's time, sorted, and the rate.
//! - Never: touches anything but loopback sockets it opened, or runs past `duration` plus the
//!   time to drain one chunk.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

/// What a stream run moved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StreamResult {
    /// Bytes the receiver read.
    pub bytes: u64,
    /// Seconds from the first write to the receiver's end of stream.
    pub elapsed_s: f64,
}

impl StreamResult {
    /// Decimal megabytes per second.
    pub fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.elapsed_s
    }
}

/// Round trips of one echo run.
#[derive(Clone, Debug, PartialEq)]
pub struct EchoResult {
    /// Every round trip in nanoseconds, ascending.
    pub rtt_ns: Vec<u64>,
    /// Seconds the round trips took in all.
    pub elapsed_s: f64,
}

impl EchoResult {
    /// Round trips per second.
    pub fn per_s(&self) -> f64 {
        self.rtt_ns.len() as f64 / self.elapsed_s
    }
}

fn listener() -> io::Result<TcpListener> {
    TcpListener::bind("127.0.0.1:0")
}

/// Streams `chunk_bytes` writes for `duration` over loopback; see the module contract.
pub fn tcp_stream(duration: Duration, chunk_bytes: usize) -> io::Result<StreamResult> {
    let listener = listener()?;
    let addr = listener.local_addr()?;
    let receiver = thread::spawn(move || -> io::Result<(u64, Instant)> {
        let (mut conn, _) = listener.accept()?;
        let mut buf = vec![0u8; chunk_bytes.max(64 * 1024)];
        let mut total = 0u64;
        loop {
            match conn.read(&mut buf)? {
                0 => return Ok((total, Instant::now())),
                n => total += n as u64,
            }
        }
    });
    let mut conn = TcpStream::connect(addr)?;
    conn.set_nodelay(true)?;
    let chunk = vec![0x5au8; chunk_bytes];
    let start = Instant::now();
    while start.elapsed() < duration {
        conn.write_all(&chunk)?;
    }
    conn.shutdown(Shutdown::Write)?;
    let (bytes, end) = receiver
        .join()
        .map_err(|_| io::Error::other("stream receiver panicked"))??;
    Ok(StreamResult {
        bytes,
        elapsed_s: end.duration_since(start).as_secs_f64(),
    })
}

/// Request/response round trips over loopback; see the module contract.
pub fn tcp_echo(
    request_bytes: usize,
    response_bytes: usize,
    duration: Duration,
) -> io::Result<EchoResult> {
    let listener = listener()?;
    let addr = listener.local_addr()?;
    let server = thread::spawn(move || -> io::Result<()> {
        let (mut conn, _) = listener.accept()?;
        conn.set_nodelay(true)?;
        let mut request = vec![0u8; request_bytes];
        let response = vec![0xa5u8; response_bytes];
        loop {
            match conn.read_exact(&mut request) {
                Ok(()) => conn.write_all(&response)?,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    });
    let mut conn = TcpStream::connect(addr)?;
    conn.set_nodelay(true)?;
    let request = vec![0x3cu8; request_bytes];
    let mut response = vec![0u8; response_bytes];
    let mut rtt_ns = Vec::new();
    let start = Instant::now();
    while start.elapsed() < duration {
        let t = Instant::now();
        conn.write_all(&request)?;
        conn.read_exact(&mut response)?;
        rtt_ns.push(t.elapsed().as_nanos() as u64);
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    conn.shutdown(Shutdown::Write)?;
    server
        .join()
        .map_err(|_| io::Error::other("echo server panicked"))??;
    rtt_ns.sort_unstable();
    Ok(EchoResult { rtt_ns, elapsed_s })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_delivers_every_byte_written() {
        let r = tcp_stream(Duration::from_millis(20), 4096).expect("stream");
        assert!(
            r.bytes > 0 && r.bytes.is_multiple_of(4096),
            "whole chunks: {}",
            r.bytes
        );
        assert!(r.elapsed_s > 0.0);
    }

    #[test]
    fn echo_counts_round_trips_sorted() {
        let r = tcp_echo(300, 64, Duration::from_millis(20)).expect("echo");
        assert!(!r.rtt_ns.is_empty());
        assert!(r.rtt_ns.windows(2).all(|w| w[0] <= w[1]));
        assert!(r.per_s() > 0.0);
    }
}
