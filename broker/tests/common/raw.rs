//! Raw Kafka framing over a plain `TcpStream`, for tests that send bytes no client would:
//! framing, a v1 request header, a bounded connect and reading one response frame.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

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
