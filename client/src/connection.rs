//! One Kafka connection: framing, correlation ids, version negotiation, pipelining.
//!
//! Contract:
//! - Inputs: any `futures_io::AsyncRead + AsyncWrite + Unpin` stream the caller connected
//!   (smol's `TcpStream`, a backend's stream such as the monoio shard's), and requests built with
//!   kafka-protocol's message types.
//! - Outputs: decoded responses, matched to their requests by correlation id.
//! - Pipelining: [`Connection::send`] writes a request and returns an [`InFlight`] ticket at
//!   once; up to `max_in_flight` requests may await responses. Kafka answers the requests of one
//!   connection in the order they were sent (and processes them in that order, which is what
//!   keeps a partition's batches in order); a response that arrives for a ticket the caller has
//!   not asked for yet is kept until it is (at most `max_in_flight` of them).
//! - Versions: [`Connection::connect`] asks the broker for its ApiVersions and every later
//!   request goes at the highest version both sides support, capped at what this client speaks
//!   (Produce and Fetch at most 12 so topics go by name, Metadata at most 12, the transaction
//!   APIs at their transaction-version-1 versions).
//! - Reading is cancellation-safe: partial frames live in the connection, not in the future, so
//!   [`Connection::poll_receive`] can sit in a select with other events. Writing is not: a
//!   dropped `send` future may leave half a request on the wire (the connection is then unusable).
//! - Never: allocates for a frame whose announced size exceeds `max_frame_bytes` (I10), spawns
//!   tasks, or reads a clock.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::poll_fn;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use futures::AsyncWriteExt;
use futures_io::{AsyncRead, AsyncWrite};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use crate::error::{Error, Result};
use crate::sasl::{plain_message, SaslConfig, ScramClient};
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use minikafka_core::auth::scram::ScramMechanism;

/// Settings of one connection.
#[derive(Clone, Debug)]
pub struct ConnectionConfig {
    /// The client id sent in every request header.
    pub client_id: String,
    /// Most requests awaiting a response at once (Kafka clients default to 5).
    pub max_in_flight: usize,
    /// Largest response frame accepted (announced size, header included).
    pub max_frame_bytes: usize,
    /// SASL credentials (`security.protocol=SASL_PLAINTEXT`): the connection authenticates
    /// right after ApiVersions, before any other request.
    pub sasl: Option<SaslConfig>,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            client_id: "minikafka-client".to_string(),
            max_in_flight: 5,
            max_frame_bytes: 128 * 1024 * 1024,
            sasl: None,
        }
    }
}

/// The highest version of each API this client speaks (lowest is kafka-protocol's minimum).
/// Produce and Fetch stop at 12: from 13 on they name topics by id.
fn client_max_version(api_key: i16) -> i16 {
    match ApiKey::try_from(api_key) {
        Ok(ApiKey::Produce) => 12,
        Ok(ApiKey::Fetch) => 12,
        Ok(ApiKey::Metadata) => 12,
        Ok(ApiKey::ApiVersions) => 3,
        Ok(ApiKey::ListOffsets) => 10,
        Ok(ApiKey::CreateTopics) => 7,
        Ok(ApiKey::DeleteTopics) => 6,
        Ok(ApiKey::DescribeConfigs) => 4,
        Ok(ApiKey::CreatePartitions) => 3,
        // Transactions as KIP-98 runs them (transaction version 1): v4+ of AddPartitionsToTxn
        // is broker-to-broker, and EndTxn v5, AddOffsetsToTxn v4 and TxnOffsetCommit v5 belong
        // to KIP-890's transaction version 2 (implicit adds, an epoch bump per transaction).
        Ok(ApiKey::AddPartitionsToTxn) => 3,
        Ok(ApiKey::EndTxn) => 4,
        Ok(ApiKey::AddOffsetsToTxn) => 3,
        Ok(ApiKey::TxnOffsetCommit) => 4,
        _ => i16::MAX,
    }
}

/// A request written to the connection whose response has not been taken yet.
#[derive(Debug)]
#[must_use = "a sent request's response must be received, or the connection stalls"]
pub struct InFlight<R> {
    correlation_id: i32,
    version: i16,
    _request: PhantomData<fn() -> R>,
}

impl<R> InFlight<R> {
    /// The correlation id the request was sent with.
    pub fn correlation_id(&self) -> i32 {
        self.correlation_id
    }

    /// The API version the request was encoded at.
    pub fn version(&self) -> i16 {
        self.version
    }
}

/// A request sent and awaiting its response frame.
#[derive(Debug)]
struct Pending {
    correlation_id: i32,
    header_version: i16,
}

/// A Kafka connection over a caller-provided stream.
pub struct Connection<S> {
    stream: S,
    config: ConnectionConfig,
    client_id: StrBytes,
    next_correlation_id: i32,
    /// The broker's supported (min, max) version per API key.
    broker_versions: BTreeMap<i16, (i16, i16)>,
    /// Requests sent whose response frame has not arrived, in send order.
    pending: VecDeque<Pending>,
    /// Response bodies (header stripped) that arrived before their ticket was claimed.
    arrived: HashMap<i32, Bytes>,
    read_buf: BytesMut,
}

impl<S> std::fmt::Debug for Connection<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("next_correlation_id", &self.next_correlation_id)
            .field("pending", &self.pending.len())
            .field("arrived", &self.arrived.len())
            .finish()
    }
}

/// Bytes read from the socket per read call when no larger frame is being assembled.
const READ_CHUNK_BYTES: usize = 64 * 1024;

impl<S: AsyncRead + AsyncWrite + Unpin> Connection<S> {
    /// Wraps `stream` and negotiates API versions with the broker (ApiVersions v3, falling back
    /// to v0 when the broker does not speak v3).
    pub async fn connect(stream: S, config: ConnectionConfig) -> Result<Self> {
        let mut conn = Connection::new_unnegotiated(stream, config)?;
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("minikafka-client"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut response = None;
        for version in [3, 0] {
            let ticket = conn.send_at(&request, version, true).await?;
            match conn.receive(ticket).await {
                Ok(r) if r.error_code == 0 => {
                    response = Some(r);
                    break;
                }
                // UNSUPPORTED_VERSION (35) or a v0 body we could not read as v3: retry at v0.
                Ok(_) | Err(Error::Protocol(_)) if version != 0 => continue,
                Ok(r) => {
                    Error::check(r.error_code, || "ApiVersions".to_string())?;
                }
                Err(e) => return Err(e),
            }
        }
        let response =
            response.ok_or_else(|| Error::Protocol("ApiVersions negotiation failed".into()))?;
        for key in response.api_keys {
            conn.broker_versions
                .insert(key.api_key, (key.min_version, key.max_version));
        }
        if let Some(sasl) = conn.config.sasl.clone() {
            conn.authenticate(&sasl).await?;
        }
        Ok(conn)
    }

    /// SaslHandshake v1 for `sasl.mechanism`, then SaslAuthenticate with its messages.
    async fn authenticate(&mut self, sasl: &SaslConfig) -> Result<()> {
        let handshake = SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_string(sasl.mechanism.clone()));
        let ticket = self.send_at(&handshake, 1, true).await?;
        let answer = self.receive(ticket).await?;
        Error::check(answer.error_code, || {
            format!(
                "SASL mechanism {} (broker offers {:?})",
                sasl.mechanism, answer.mechanisms
            )
        })?;
        if sasl.mechanism == "PLAIN" {
            self.sasl_step(plain_message(&sasl.username, &sasl.password))
                .await?;
            return Ok(());
        }
        let mechanism = ScramMechanism::from_name(&sasl.mechanism).ok_or_else(|| {
            Error::InvalidArgument(format!("unsupported sasl.mechanism {}", sasl.mechanism))
        })?;
        let (mut client, first) = ScramClient::start(mechanism, &sasl.username)?;
        let server_first = self.sasl_step(first).await?;
        let last = client.client_final(&server_first, &sasl.password)?;
        let server_final = self.sasl_step(last).await?;
        client.verify_server_final(&server_final)
    }

    /// One SaslAuthenticate: these bytes out, the broker's bytes back (an error code fails).
    async fn sasl_step(&mut self, bytes: Vec<u8>) -> Result<Bytes> {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
        let answer = self.request(&request).await?;
        let message = answer.error_message.as_deref().unwrap_or("").to_string();
        Error::check(answer.error_code, || {
            format!("SASL authentication: {message}")
        })?;
        Ok(answer.auth_bytes)
    }

    /// Wraps `stream` without asking the broker for its versions: every request is sent at the
    /// highest version this client speaks. For tests and for brokers known in advance.
    pub fn new_unnegotiated(stream: S, config: ConnectionConfig) -> Result<Self> {
        if config.max_in_flight == 0 {
            return Err(Error::InvalidArgument(
                "max_in_flight must be at least 1".into(),
            ));
        }
        Ok(Connection {
            stream,
            client_id: StrBytes::from_string(config.client_id.clone()),
            config,
            next_correlation_id: 1,
            broker_versions: BTreeMap::new(),
            pending: VecDeque::new(),
            arrived: HashMap::new(),
            read_buf: BytesMut::new(),
        })
    }

    /// The broker's supported (min, max) versions, by API key, as negotiated.
    pub fn broker_versions(&self) -> &BTreeMap<i16, (i16, i16)> {
        &self.broker_versions
    }

    /// Requests sent whose response frame has not arrived yet.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// The version `R` will be sent at: the highest both sides support.
    pub fn version_of<R: Request>(&self) -> Result<i16> {
        let ours_min = R::VERSIONS.min;
        let ours_max = R::VERSIONS.max.min(client_max_version(R::KEY));
        let (min, max) = match self.broker_versions.get(&R::KEY) {
            Some(&(bmin, bmax)) => (ours_min.max(bmin), ours_max.min(bmax)),
            None if self.broker_versions.is_empty() => (ours_min, ours_max),
            None => return Err(Error::UnsupportedApi { api_key: R::KEY }),
        };
        if min > max {
            return Err(Error::UnsupportedApi { api_key: R::KEY });
        }
        Ok(max)
    }

    /// Writes `request` at the negotiated version and returns the ticket for its response.
    /// Waits first for a response frame if `max_in_flight` requests are already outstanding.
    pub async fn send<R: Request>(&mut self, request: &R) -> Result<InFlight<R>> {
        let version = self.version_of::<R>()?;
        self.send_at(request, version, true).await
    }

    /// Writes `request` for which the broker sends no response (Produce with acks=0).
    pub async fn send_without_response<R: Request>(&mut self, request: &R) -> Result<()> {
        let version = self.version_of::<R>()?;
        self.send_at(request, version, false).await.map(|_| ())
    }

    /// Sends `request` and waits for its response.
    pub async fn request<R: Request>(&mut self, request: &R) -> Result<R::Response> {
        let ticket = self.send(request).await?;
        self.receive(ticket).await
    }

    async fn send_at<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        expect_response: bool,
    ) -> Result<InFlight<R>> {
        while expect_response && self.pending.len() >= self.config.max_in_flight {
            poll_fn(|cx| self.poll_frame(cx)).await?;
        }
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1).max(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let header_version = R::header_version(version);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&[0u8; 4]);
        header
            .encode(&mut buf, header_version)
            .map_err(Error::protocol)?;
        request.encode(&mut buf, version).map_err(Error::protocol)?;
        let size = i32::try_from(buf.len() - 4)
            .map_err(|_| Error::InvalidArgument("request too large".into()))?;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        self.stream.write_all(&buf).await?;
        self.stream.flush().await?;
        if expect_response {
            self.pending.push_back(Pending {
                correlation_id,
                header_version: <R::Response as HeaderVersion>::header_version(version),
            });
        }
        Ok(InFlight {
            correlation_id,
            version,
            _request: PhantomData,
        })
    }

    /// Waits for the response to `ticket`.
    pub async fn receive<R: Request>(&mut self, ticket: InFlight<R>) -> Result<R::Response> {
        poll_fn(|cx| self.poll_receive(cx, &ticket)).await
    }

    /// Polls for the response to `ticket`. Cancellation-safe: frames read are kept in the
    /// connection. Do not poll a ticket again after it returned `Ready`.
    pub fn poll_receive<R: Request>(
        &mut self,
        cx: &mut Context<'_>,
        ticket: &InFlight<R>,
    ) -> Poll<Result<R::Response>> {
        loop {
            if let Some(mut body) = self.arrived.remove(&ticket.correlation_id) {
                let response = R::Response::decode(&mut body, ticket.version)
                    .map_err(|e| Error::Protocol(format!("decoding API {} response: {e}", R::KEY)));
                return Poll::Ready(response);
            }
            if !self
                .pending
                .iter()
                .any(|p| p.correlation_id == ticket.correlation_id)
            {
                return Poll::Ready(Err(Error::Protocol(format!(
                    "no request with correlation id {} is awaiting a response",
                    ticket.correlation_id
                ))));
            }
            match self.poll_frame(cx) {
                Poll::Ready(Ok(())) => continue,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Reads until one whole response frame has arrived and files it under its correlation id.
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Result<()>> {
        loop {
            if let Some(frame) = self.take_frame()? {
                return Poll::Ready(self.on_frame(frame));
            }
            let have = self.read_buf.len();
            let want = match self.announced_size()? {
                Some(size) => (4 + size - have).max(READ_CHUNK_BYTES),
                None => READ_CHUNK_BYTES,
            };
            self.read_buf.resize(have + want, 0);
            let polled = Pin::new(&mut self.stream).poll_read(cx, &mut self.read_buf[have..]);
            match polled {
                Poll::Ready(Ok(0)) => {
                    self.read_buf.truncate(have);
                    return Poll::Ready(Err(Error::ConnectionClosed));
                }
                Poll::Ready(Ok(n)) => self.read_buf.truncate(have + n),
                Poll::Ready(Err(e)) => {
                    self.read_buf.truncate(have);
                    return Poll::Ready(Err(e.into()));
                }
                Poll::Pending => {
                    self.read_buf.truncate(have);
                    return Poll::Pending;
                }
            }
        }
    }

    /// The size announced by the frame at the head of the read buffer, checked (I10).
    fn announced_size(&self) -> Result<Option<usize>> {
        if self.read_buf.len() < 4 {
            return Ok(None);
        }
        let size = i32::from_be_bytes([
            self.read_buf[0],
            self.read_buf[1],
            self.read_buf[2],
            self.read_buf[3],
        ]);
        if size < 4 {
            return Err(Error::Protocol(format!(
                "response frame size {size} is too small"
            )));
        }
        if size as usize > self.config.max_frame_bytes {
            return Err(Error::FrameTooLarge {
                size_bytes: i64::from(size),
                limit_bytes: self.config.max_frame_bytes,
            });
        }
        Ok(Some(size as usize))
    }

    fn take_frame(&mut self) -> Result<Option<Bytes>> {
        let Some(size) = self.announced_size()? else {
            return Ok(None);
        };
        if self.read_buf.len() < 4 + size {
            return Ok(None);
        }
        let mut frame = self.read_buf.split_to(4 + size);
        frame.advance(4);
        Ok(Some(frame.freeze()))
    }

    fn on_frame(&mut self, mut frame: Bytes) -> Result<()> {
        if frame.len() < 4 {
            return Err(Error::Protocol(
                "response frame shorter than its header".into(),
            ));
        }
        let correlation_id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        let index = self
            .pending
            .iter()
            .position(|p| p.correlation_id == correlation_id)
            .ok_or_else(|| {
                Error::Protocol(format!(
                    "response with unknown correlation id {correlation_id}"
                ))
            })?;
        if index != 0 {
            tracing::warn!(correlation_id, "response arrived out of request order");
        }
        let pending = self
            .pending
            .remove(index)
            .ok_or_else(|| Error::Protocol("pending queue changed".into()))?;
        ResponseHeader::decode(&mut frame, pending.header_version).map_err(Error::protocol)?;
        self.arrived.insert(correlation_id, frame);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::io::Cursor;
    use kafka_protocol::messages::{ApiVersionsResponse, MetadataRequest, MetadataResponse};

    /// A stream whose reads come from a script and whose writes are recorded.
    struct Scripted {
        input: Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl AsyncRead for Scripted {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut [u8],
        ) -> Poll<std::io::Result<usize>> {
            // Three bytes at a time: frames arrive split across reads.
            let n = buf.len().min(3);
            Pin::new(&mut self.input).poll_read(cx, &mut buf[..n])
        }
    }

    impl AsyncWrite for Scripted {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            self.output.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn frame<M: Encodable>(
        correlation_id: i32,
        header_version: i16,
        body: &M,
        version: i16,
    ) -> Vec<u8> {
        let mut buf = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut buf, header_version)
            .expect("header");
        body.encode(&mut buf, version).expect("body");
        let mut out = (buf.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&buf);
        out
    }

    fn metadata_response(cluster: &'static str) -> MetadataResponse {
        MetadataResponse::default().with_cluster_id(Some(StrBytes::from_static_str(cluster)))
    }

    #[test]
    fn pipelined_responses_match_their_requests_in_any_claim_order() {
        let version = 12;
        let hv = MetadataResponse::header_version(version);
        let mut input = frame(1, hv, &metadata_response("first"), version);
        input.extend(frame(2, hv, &metadata_response("second"), version));
        input.extend(frame(3, hv, &metadata_response("third"), version));
        let stream = Scripted {
            input: Cursor::new(input),
            output: Vec::new(),
        };
        let mut conn = Connection::new_unnegotiated(
            stream,
            ConnectionConfig {
                max_in_flight: 2,
                ..ConnectionConfig::default()
            },
        )
        .expect("conn");
        futures::executor::block_on(async {
            let req = MetadataRequest::default();
            let a = conn.send(&req).await.expect("send a");
            let b = conn.send(&req).await.expect("send b");
            assert_eq!(conn.in_flight(), 2);
            // The third send must first read a response to stay within max_in_flight.
            let c = conn.send(&req).await.expect("send c");
            assert_eq!(conn.in_flight(), 2);
            assert_eq!(
                (a.correlation_id(), b.correlation_id(), c.correlation_id()),
                (1, 2, 3)
            );
            // Claim out of order: the connection keeps early arrivals.
            let rc = conn.receive(c).await.expect("c");
            let ra = conn.receive(a).await.expect("a");
            let rb = conn.receive(b).await.expect("b");
            assert_eq!(ra.cluster_id.as_deref(), Some("first"));
            assert_eq!(rb.cluster_id.as_deref(), Some("second"));
            assert_eq!(rc.cluster_id.as_deref(), Some("third"));
            assert_eq!(conn.in_flight(), 0);
        });
        // Three requests went out, each framed with its size.
        let out = &conn.stream.output;
        let mut pos = 0;
        let mut frames = 0;
        while pos < out.len() {
            let size = i32::from_be_bytes([out[pos], out[pos + 1], out[pos + 2], out[pos + 3]]);
            pos += 4 + size as usize;
            frames += 1;
        }
        assert_eq!((pos, frames), (out.len(), 3));
    }

    #[test]
    fn negotiation_picks_the_highest_common_version() {
        let mut keys = Vec::new();
        for (key, min, max) in [(0i16, 0i16, 11i16), (1, 4, 17), (3, 0, 13), (18, 0, 4)] {
            keys.push(
                kafka_protocol::messages::api_versions_response::ApiVersion::default()
                    .with_api_key(key)
                    .with_min_version(min)
                    .with_max_version(max),
            );
        }
        let response = ApiVersionsResponse::default().with_api_keys(keys);
        let input = frame(1, 0, &response, 3);
        let stream = Scripted {
            input: Cursor::new(input),
            output: Vec::new(),
        };
        let conn =
            futures::executor::block_on(Connection::connect(stream, ConnectionConfig::default()))
                .expect("connect");
        use kafka_protocol::messages::{FetchRequest, ProduceRequest};
        assert_eq!(conn.version_of::<ProduceRequest>().expect("produce"), 11);
        assert_eq!(conn.version_of::<FetchRequest>().expect("fetch"), 12);
        assert_eq!(conn.version_of::<MetadataRequest>().expect("metadata"), 12);
        assert!(matches!(
            conn.version_of::<kafka_protocol::messages::ListOffsetsRequest>(),
            Err(Error::UnsupportedApi { api_key: 2 })
        ));
    }

    #[test]
    fn oversized_frames_are_refused_before_allocation() {
        let mut input = (i32::MAX).to_be_bytes().to_vec();
        input.extend_from_slice(&[0; 16]);
        let stream = Scripted {
            input: Cursor::new(input),
            output: Vec::new(),
        };
        let mut conn =
            Connection::new_unnegotiated(stream, ConnectionConfig::default()).expect("conn");
        let result = futures::executor::block_on(conn.request(&MetadataRequest::default()));
        assert!(
            matches!(result, Err(Error::FrameTooLarge { .. })),
            "{result:?}"
        );
    }

    #[test]
    fn a_closed_stream_is_reported() {
        let stream = Scripted {
            input: Cursor::new(Vec::new()),
            output: Vec::new(),
        };
        let mut conn =
            Connection::new_unnegotiated(stream, ConnectionConfig::default()).expect("conn");
        let result = futures::executor::block_on(conn.request(&MetadataRequest::default()));
        assert!(matches!(result, Err(Error::ConnectionClosed)), "{result:?}");
    }
}
