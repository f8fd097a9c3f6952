//! The registry's HTTP listener (`schema.registry.listeners`): accepts on the backend of the
//! shard that hosts the registry (no second runtime, as the metrics endpoint), reads
//! requests with `minikafka_schema::http` and answers them with `minikafka_schema::rest`.
//!
//! Contract:
//! - HTTP/1.1 with keep-alive; requests on one connection are answered in order.
//! - Bounds, so hostile HTTP costs only its own connection (I59): a head of at most
//!   `http::HEAD_BYTES_MAX` bytes (431), a body of at most `http::BODY_BYTES_MAX` (413),
//!   whether sized by `Content-Length` or chunked (I128), at
//!   most [`BODY_BUDGET_BYTES`] of bodies held by all connections together (503 past it), at
//!   most [`CONNECTIONS_MAX`] connections (more are closed at accept), each request read
//!   within [`REQUEST_TIMEOUT`] of its first byte (slowloris), an idle keep-alive connection
//!   closed after [`IDLE_TIMEOUT`], a response written within [`WRITE_TIMEOUT`].
//! - With `schema.registry.authentication.method=BASIC` a request without a SCRAM user's
//!   user and password is answered 401 (`WWW-Authenticate: Basic`) and the connection
//!   closed, before its body is read ([`super::auth`], I127).
//! - Binding: a bind failure of the default address (`127.0.0.1:8081`, which another
//!   registry or broker on the machine may hold) is logged and the broker runs without a
//!   registry; of any other configured address it fails startup, as `metrics.listener`.
//! - The bound address is logged, and printed on stdout right after the `listening on` line
//!   (`minikafka: schema registry on http://ADDR`, in the same write), so a broker told port
//!   0 can be found and the first line stays the Kafka listener's.
//! - Every answer is counted in `minikafka_schema_registry_requests_total` by method, route
//!   template and status (I126); a head refused before it parsed counts as `other`.
//! - A write keeps the shard's request count up until it is answered, so shutdown's drain
//!   waits for it.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use futures::future::{select, Either};
use futures::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use minikafka_core::backend::{Backend, BackendListener};
use minikafka_schema::http::{self, ChunkedBody, HeadParse, Response};
use minikafka_schema::rest::{self, Routed};

use super::auth::authenticated;
use super::host::RegistryHost;
use crate::config::SCHEMA_REGISTRY_DEFAULT_LISTENER;
use crate::metrics::registry_counters::method_label;
use crate::server::shard::ShardState;

/// Most registry connections served at once.
pub const CONNECTIONS_MAX: usize = 64;
/// Most request-body bytes all connections together hold at once.
pub const BODY_BUDGET_BYTES: usize = 64 * 1024 * 1024;
/// Longest time from a request's first byte to its last.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for the next request on a kept-alive connection.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest time to write one response.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes read from the socket at a time.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// What the accept loop and the connections share.
struct Listening<B: Backend> {
    state: Rc<ShardState<B>>,
    host: Rc<RegistryHost<B>>,
    open: Cell<usize>,
    body_bytes: Cell<usize>,
}

/// Binds `schema.registry.listeners` and starts serving it (see the module documentation).
pub async fn start<B: Backend>(
    state: &Rc<ShardState<B>>,
    host: Rc<RegistryHost<B>>,
) -> Result<(), String> {
    let Some(addr) = state.shared.config.schema_registry_listener else {
        return Ok(());
    };
    let listener = match state.backend.listen(addr).await {
        Ok(listener) => listener,
        Err(e) if format!("http://{addr}") == SCHEMA_REGISTRY_DEFAULT_LISTENER => {
            tracing::error!(
                "schema registry not started: binding the default {addr} failed: {e} \
                 (set schema.registry.listeners to another address, or empty to turn it off)"
            );
            return Ok(());
        }
        Err(e) => return Err(format!("binding {addr}: {e}")),
    };
    let bound = listener
        .local_addr()
        .map_err(|e| format!("the bound address: {e}"))?;
    tracing::info!("schema registry on http://{bound}");
    // Printed by the startup announcement, after the Kafka listener's line.
    let _ = state.shared.schema_registry_addr.set(bound);
    let listening = Rc::new(Listening {
        state: Rc::clone(state),
        host,
        open: Cell::new(0),
        body_bytes: Cell::new(0),
    });
    state.backend.spawn_local(accept_loop(listening, listener));
    Ok(())
}

async fn accept_loop<B: Backend>(listening: Rc<Listening<B>>, listener: B::Listener) {
    let state = Rc::clone(&listening.state);
    loop {
        let accepted = {
            let accept = std::pin::pin!(listener.accept());
            let stop = std::pin::pin!(state.stop.recv());
            match select(accept, stop).await {
                Either::Left((accepted, _)) => accepted,
                Either::Right(_) => break,
            }
        };
        match accepted {
            Ok((stream, peer)) => {
                if listening.open.get() >= CONNECTIONS_MAX {
                    tracing::warn!(%peer, "too many schema registry connections; closing the new one");
                    continue;
                }
                listening.open.set(listening.open.get() + 1);
                let conn = Rc::clone(&listening);
                state.backend.spawn_local(async move {
                    serve(&conn, stream, peer).await;
                    conn.open.set(conn.open.get() - 1);
                });
            }
            Err(e) => {
                tracing::warn!("schema registry accept failed: {e}");
                state.backend.sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Why reading stopped.
enum ReadEnd {
    /// The peer closed, the deadline passed or shutdown began: close without an answer.
    Close,
    /// Send this and close.
    Answer(Response),
}

/// Reads more bytes into `buf` before `deadline`; `Ok(false)` when the peer closed.
async fn read_some<B: Backend, S: AsyncRead + Unpin>(
    state: &ShardState<B>,
    stream: &mut S,
    buf: &mut Vec<u8>,
    deadline: minikafka_core::clock::MonoTime,
    peer: SocketAddr,
) -> Result<(), ReadEnd> {
    let mut chunk = [0u8; READ_CHUNK_BYTES];
    let read = {
        let read = std::pin::pin!(stream.read(&mut chunk));
        let timeout = std::pin::pin!(state.backend.sleep_until(deadline));
        let stop = std::pin::pin!(state.stop.recv());
        match select(read, select(timeout, stop)).await {
            Either::Left((read, _)) => read,
            Either::Right((Either::Left(_), _)) => {
                if !buf.is_empty() {
                    tracing::info!(%peer, reason = "request timed out", "schema registry connection closed");
                }
                return Err(ReadEnd::Close);
            }
            Either::Right((Either::Right(_), _)) => return Err(ReadEnd::Close),
        }
    };
    match read {
        Ok(0) => Err(ReadEnd::Close),
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(())
        }
        Err(e) => {
            tracing::info!(%peer, reason = %e, "schema registry connection read failed");
            Err(ReadEnd::Close)
        }
    }
}

/// Writes `bytes` within [`WRITE_TIMEOUT`]; `false` when the connection is done for.
async fn write_bounded<B: Backend, S: AsyncWrite + Unpin>(
    state: &ShardState<B>,
    stream: &mut S,
    bytes: &[u8],
) -> bool {
    let deadline = state.backend.now() + WRITE_TIMEOUT;
    let write = std::pin::pin!(async {
        stream.write_all(bytes).await?;
        stream.flush().await
    });
    let timeout = std::pin::pin!(state.backend.sleep_until(deadline));
    matches!(select(write, timeout).await, Either::Left((Ok(()), _)))
}

/// Holds part of [`BODY_BUDGET_BYTES`] until dropped.
struct BodyBytes<'a>(&'a Cell<usize>, usize);

impl Drop for BodyBytes<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(self.1));
    }
}

/// Serves one connection's requests (see the module documentation).
async fn serve<B: Backend, S>(listening: &Listening<B>, mut stream: S, peer: SocketAddr)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let state = &listening.state;
    // Bytes read past the previous request (pipelining), never more than one chunk.
    let mut buf: Vec<u8> = Vec::new();
    loop {
        // The request's metric labels, once its head is read (I126).
        let mut labels = ("other", "other");
        let answer = serve_one(listening, &mut stream, &mut buf, peer, &mut labels).await;
        let (response, keep_alive) = match answer {
            Ok(answer) => answer,
            Err(ReadEnd::Close) => break,
            Err(ReadEnd::Answer(response)) => (response, false),
        };
        state
            .shared
            .schema_registry_metrics
            .request(labels.0, labels.1, response.status);
        let keep_alive = keep_alive && !state.stopping();
        if !write_bounded(
            state,
            &mut stream,
            &http::encode_response(&response, keep_alive),
        )
        .await
            || !keep_alive
        {
            break;
        }
    }
    let _ = stream.close().await;
}

/// Reads one request from `stream` (bytes already read in `buf`) and answers it.
async fn serve_one<B: Backend, S>(
    listening: &Listening<B>,
    stream: &mut S,
    buf: &mut Vec<u8>,
    peer: SocketAddr,
    labels: &mut (&'static str, &'static str),
) -> Result<(Response, bool), ReadEnd>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let state = &listening.state;
    // The head: idle until its first byte, then bounded from there.
    let mut deadline = state.backend.now() + IDLE_TIMEOUT;
    let mut started = !buf.is_empty();
    if started {
        deadline = state.backend.now() + REQUEST_TIMEOUT;
    }
    let head = loop {
        match http::parse_head(buf) {
            HeadParse::Complete(head) => break head,
            HeadParse::Refused(response) => {
                tracing::info!(%peer, status = response.status, "schema registry request refused");
                return Err(ReadEnd::Answer(response));
            }
            HeadParse::Incomplete => {}
        }
        read_some(state, stream, buf, deadline, peer).await?;
        if !started {
            started = true;
            deadline = state.backend.now() + REQUEST_TIMEOUT;
        }
    };
    *labels = (
        method_label(&head.method),
        rest::endpoint_template(&head.target),
    );
    if state.shared.config.schema_registry_basic_auth
        && !authenticated(&state.shared.scram_store(), head.authorization.as_deref())
    {
        // Before the body is read: an unauthenticated client holds no body budget (I127).
        tracing::info!(%peer, "schema registry request refused: not authenticated");
        return Err(ReadEnd::Answer(Response::unauthorized()));
    }
    // The body, within the connections' shared budget: a chunked body reserves the most a
    // body may be (its length is not known before its end, I128).
    let length = if head.chunked {
        http::BODY_BYTES_MAX
    } else {
        head.content_length
    };
    let held = listening.body_bytes.get();
    if held.saturating_add(length) > BODY_BUDGET_BYTES {
        return Err(ReadEnd::Answer(Response::error(
            503,
            50302,
            "the schema registry is busy; retry",
        )));
    }
    listening.body_bytes.set(held + length);
    let _reserved = BodyBytes(&listening.body_bytes, length);
    let mut body = buf.split_off(head.head_bytes);
    buf.clear();
    let complete = |body: &[u8]| !head.chunked && body.len() >= length;
    if head.expect_continue
        && !complete(&body)
        && !write_bounded(state, stream, http::CONTINUE).await
    {
        return Err(ReadEnd::Close);
    }
    if head.chunked {
        let mut chunks = ChunkedBody::new(http::BODY_BYTES_MAX);
        loop {
            let (used, done) = chunks.feed(&body).map_err(ReadEnd::Answer)?;
            body.drain(..used);
            if done {
                break;
            }
            read_some(state, stream, &mut body, deadline, peer).await?;
        }
        // Pipelined bytes past the last chunk start the next request.
        *buf = body;
        body = chunks.into_body();
    } else {
        while body.len() < length {
            read_some(state, stream, &mut body, deadline, peer).await?;
        }
        // Pipelined bytes past this body start the next request.
        *buf = body.split_off(length);
    }
    let routed = rest::route(
        &listening.host.registry(),
        &head.method,
        &head.target,
        &body,
    );
    drop(body);
    let response = match routed {
        Routed::Done(response) => response,
        Routed::Write(write) => {
            let _in_flight = state.begin_request();
            rest::write_response(listening.host.write(write).await)
        }
    };
    Ok((response, head.keep_alive))
}
