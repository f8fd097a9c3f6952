//! A Kafka client of `kafka-protocol`'s typed requests over a plain `TcpStream`, for the APIs
//! no client library the tests use exposes: each call encodes one request with a real
//! request header, reads its response (bounded by the stream's timeouts) and decodes it,
//! checking the correlation id and that nothing is left over.

use std::io::Write;
use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

use super::raw::{connect, frame, read_frame};

/// One connection making typed calls.
pub struct TypedClient {
    stream: std::net::TcpStream,
    next_correlation_id: i32,
}

impl TypedClient {
    /// Connects to `addr` (bounded).
    pub fn connect(addr: SocketAddr) -> TypedClient {
        TypedClient {
            stream: connect(addr),
            next_correlation_id: 1,
        }
    }

    /// Waits up to `timeout` (not the default bound) for each answer: for a long-poll
    /// whose wake-up, not its own deadline, must end it.
    #[allow(dead_code)]
    pub fn set_read_timeout(&mut self, timeout: std::time::Duration) {
        self.stream
            .set_read_timeout(Some(timeout))
            .expect("set the read timeout");
    }

    /// Sends `request` as `api_key` v`version` and returns the decoded response.
    pub fn call<Q: Encodable, R: Decodable + HeaderVersion>(
        &mut self,
        api_key: ApiKey,
        version: i16,
        request: &Q,
    ) -> R {
        self.try_call(api_key, version, request)
            .unwrap_or_else(|| panic!("{api_key:?} v{version}: no response"))
    }

    /// As [`call`](Self::call), but `None` when the broker closed the connection (or sent
    /// nothing within the stream's timeout) instead of answering.
    #[allow(dead_code)]
    pub fn try_call<Q: Encodable, R: Decodable + HeaderVersion>(
        &mut self,
        api_key: ApiKey,
        version: i16,
        request: &Q,
    ) -> Option<R> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = api_key as i16;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(StrBytes::from_static_str("typed-test"));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, api_key.request_header_version(version))
            .expect("header encodes");
        request.encode(&mut body, version).expect("body encodes");
        // The broker may already have closed: a failed write reads as no answer.
        self.stream.write_all(&frame(&body)).ok()?;
        let response = read_frame(&mut self.stream)?;
        let mut bytes = Bytes::from(response);
        let header = ResponseHeader::decode(&mut bytes, R::header_version(version))
            .expect("response header");
        assert_eq!(header.correlation_id, correlation_id, "correlation id");
        let decoded = R::decode(&mut bytes, version).expect("response decodes");
        assert!(
            bytes.is_empty(),
            "{api_key:?} v{version}: trailing response bytes"
        );
        Some(decoded)
    }

    /// Whether the broker has closed the connection: a read sees end of stream (or a reset)
    /// within the stream's timeout, with no bytes before it.
    #[allow(dead_code)]
    pub fn is_closed_by_broker(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match std::io::Read::read(&mut self.stream, &mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ),
        }
    }
}
