//! Raw Kafka framing over a plain `TcpStream`, for tests that send bytes no client would:
//! framing, a v1 request header, a bounded connect, reading one response frame, and requiring
//! the broker to close a connection.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

pub fn frame(body: &[u8]) -> Vec<u8> {
    let len = i32::try_from(body.len()).expect("frame len");
    let mut out = len.to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

/// A request header v1 (api key, version, correlation id, client id "t") followed by `body`.
pub fn request(api_key: i16, api_version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&api_key.to_be_bytes());
    out.extend_from_slice(&api_version.to_be_bytes());
    out.extend_from_slice(&correlation_id.to_be_bytes());
    out.extend_from_slice(&1_i16.to_be_bytes());
    out.push(b't');
    out.extend_from_slice(body);
    frame(&out)
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .expect("write timeout");
    stream
}

/// Reads one response frame; None if the connection closed or timed out first.
pub fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0_u8; 4];
    stream.read_exact(&mut len).ok()?;
    let len = usize::try_from(i32::from_be_bytes(len)).ok()?;
    assert!(len < 16 * 1024 * 1024, "absurd response size {len}");
    let mut body = vec![0_u8; len];
    stream.read_exact(&mut body).ok()?;
    Some(body)
}

/// Sends `bytes` (write errors ignored: the broker may close early), optionally half-closes,
/// then requires the broker to close the connection within 5 s, answering at most a small
/// error response (under 64 KiB) meanwhile.
pub fn assert_closed_after(addr: SocketAddr, what: &str, bytes: &[u8], half_close: bool) {
    let mut stream = connect(addr);
    let _ = stream.write_all(bytes);
    if half_close {
        let _ = stream.shutdown(Shutdown::Write);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = [0_u8; 4096];
    let mut received = 0_usize;
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                received += n;
                assert!(
                    received < 64 * 1024,
                    "{what}: a large answer to a refused request"
                );
            }
            Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {
                return
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("{what}: unexpected read error {e}"),
        }
        assert!(
            Instant::now() < deadline,
            "{what}: connection still open 5 s later"
        );
    }
}
