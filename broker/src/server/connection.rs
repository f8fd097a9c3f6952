//! One client connection: frames in, responses out in request order.
//!
//! Contract:
//! - Input: a stream accepted by this shard. Frames are split by [`FrameDecoder`], capped by
//!   `socket.request.max.bytes` (I10), judged and decoded by [`decode_request`].
//! - Requests are handled concurrently (one shard-local task each), at most
//!   [`MAX_IN_FLIGHT_PRODUCE`] per connection of which at most [`MAX_IN_FLIGHT`] are anything
//!   but Produce, and the reader reads no further from the socket while
//!   the connection's requests read but not yet answered hold [`MAX_UNANSWERED_REQUEST_BYTES`]
//!   or more (so large requests pipeline a few deep, small ones up to the count: memory is
//!   bounded by bytes, not by a count of requests of any size);
//!   responses are written strictly in request order (clients pipeline). A produce with
//!   `acks=0` gets no response.
//! - Send-side back-pressure ([`super::send_queue`]): the socket's send buffer is
//!   `socket.send.buffer.bytes`, and while a connection's computed, unsent responses reach
//!   [`MAX_UNSENT_BYTES`] its reader dispatches nothing more and reads no further, so a client
//!   that never reads costs a bounded amount of memory and of work (I10).
//! - Closes the connection, with a log line, on: a frame-size error, an unknown API key, an
//!   unsupported version (except ApiVersions, answered with its v0 UNSUPPORTED_VERSION
//!   response), an undecodable request, an API we do not serve; on idleness longer than
//!   `connections.max.idle.ms`; at shutdown (after answering what is in flight).
//! - Quota throttling (KIP-219, [`super::throttle_gate`]): while a handler's throttle mutes
//!   the connection, the reader takes no request from its buffer and reads no further (I98).
//!   With a `request_percentage` quota configured, each charged request's time on the shard is
//!   measured and charged ([`super::request_quota`], I159): its decoding and its handler
//!   (which encodes the answer) when the handler is done, then the writing of its answer
//!   (a TLS stream's encryption included) when that is done, as Kafka charges a request
//!   thread's and a network thread's time (I179).
//! - Memory (I189): a connection waiting for its client holds no read buffer (reads land in
//!   the shard's one chunk of [`READ_CHUNK_BYTES`](super::shard::READ_CHUNK_BYTES) and are
//!   copied into the connection's buffer, which is dropped once every frame is split off) and
//!   no preallocated queue (the reader's queue to the writer is unbounded, bounded by the
//!   count of unanswered requests). Once a frame's size has arrived, the rest of it is read
//!   straight into the connection's buffer instead ([`super::read_buffer`], I194).
//! - Never: answers out of order, reads past [`MAX_IN_FLIGHT_PRODUCE`] unanswered requests
//!   or dispatches more than [`MAX_IN_FLIGHT`] handlers of other requests, reads
//!   while [`MAX_UNANSWERED_REQUEST_BYTES`] of requests wait for their answers, or dispatches
//!   a request while [`MAX_UNSENT_BYTES`] of answers wait to be sent.

use std::io::IoSlice;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::{select, Either};
use futures::io::AsyncWriteExt;
use minikafka_core::backend::{Backend, BackendListener, BackendStream};

use super::handlers::{self, Outcome};
use super::read_buffer::ReadBuffer;
use super::request_quota;
use super::sasl::{Authenticator, Inputs, Step};
use super::send_queue::{ByteBudget, MAX_UNSENT_BYTES};
use super::session::{KafkaPrincipal, RequestContext};
use super::shard::{InFlight, ShardState};
use super::stream_halves;
use super::throttle_gate::ThrottleGate;
use crate::metrics::ConnectionError;
use crate::protocol::{
    decode_request, encode_api_versions_unsupported, frame::SIZE_PREFIX_BYTES, DecodedRequest,
    FrameDecoder, RequestBody, RequestError,
};
use minikafka_core::auth::MAX_SASL_MESSAGE_BYTES;

/// Most requests other than Produce a connection may have in its handlers at once. Their
/// answers are sized by the client (a Fetch's `max_bytes`) or by the broker's state (all
/// topics' Metadata), not by the request's own bytes, so this count is what bounds the
/// answers computed while [`MAX_UNSENT_BYTES`] stops further dispatch.
pub const MAX_IN_FLIGHT: usize = 32;
/// Most requests a connection may have unanswered, Produce included. A Produce answer is
/// sized by its request (one entry per partition it names), which
/// [`MAX_UNANSWERED_REQUEST_BYTES`] bounds; a deeper pipeline of small Produce requests is
/// what fills a group commit (I9): at 32, one-record requests at depth 128 shared each sync
/// 16 to 17 at most, at 128 about 60 (docs/perf-log/2026-12-01-side-by-side-limits.md).
pub const MAX_IN_FLIGHT_PRODUCE: usize = 128;
/// The request header's first field, `request_api_key`, for Produce.
const PRODUCE_API_KEY: [u8; 2] = 0i16.to_be_bytes();
/// Bytes of requests (frames, size prefix included) read and not yet answered at or above
/// which a connection's reader stops reading its socket (I10). A request larger than this is
/// still read whole and served alone. Kafka's broker reads one request per connection at a
/// time (it mutes the channel until the answer is sent); this lets a pipelining client keep
/// a few large requests or many small ones in flight. Without it a producer's 32 pipelined
/// 1 MB requests held 32 MB of frames (the consume run's fill).
pub const MAX_UNANSWERED_REQUEST_BYTES: usize = 1 << 20;
/// The shortest time between two re-authentications of a connection (Kafka's
/// `MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS`); a SaslHandshake sooner is served as usual.
const MIN_REAUTHENTICATION_INTERVAL: Duration = Duration::from_secs(1);

/// What the writer task gets, in request order.
enum Pending<B: Backend> {
    /// A response being computed; `None` from a cancelled handler closes the connection.
    /// The quota entity its writing is charged to, when its time is measured (I179).
    Reply(
        futures::channel::oneshot::Receiver<Outcome>,
        InFlight<B>,
        Option<Box<NetworkCharge>>,
    ),
    /// Bytes ready now.
    Ready(Bytes),
    /// Close after writing everything before this.
    Close,
}

/// Whose `request_percentage` quota the writing of an answer is charged to (I179): the
/// request's user and client id.
struct NetworkCharge {
    user: String,
    client_id: String,
}

/// Decrements the broker's connection count when the connection ends.
struct ConnectionSlot<B: Backend>(Rc<ShardState<B>>);

impl<B: Backend> Drop for ConnectionSlot<B> {
    fn drop(&mut self) {
        self.0.shared.connections.release();
    }
}

type Stream<B> = <<B as Backend>::Listener as BackendListener>::Stream;

/// Serves one connection, accepted on listener `listener` (an index into
/// `config.listeners`), until it closes. The caller already counted it in
/// `Shared::connections`; this decrements the count at the end. On a TLS listener the
/// handshake ([`super::tls`]) completes before any request is read (I90).
pub async fn serve<B: Backend>(
    state: Rc<ShardState<B>>,
    stream: Stream<B>,
    peer: SocketAddr,
    listener: usize,
) {
    let slot = ConnectionSlot(Rc::clone(&state));
    #[cfg(unix)]
    if let (Some(bytes), Some(socket)) = (
        state.shared.config.socket_send_buffer_bytes,
        <B::Listener as BackendListener>::socket(&stream),
    ) {
        super::send_queue::set_send_buffer(socket, bytes);
    }
    let on = &state.shared.config.listeners[listener];
    let mut ctx = RequestContext::anonymous(on, peer);
    // A keystore altered at run time applies from the next handshake on (I145).
    let Some(tls) = state.shared.listener_tls(listener) else {
        return serve_stream(state, stream, ctx, listener, slot).await;
    };
    match super::tls::accept(&state, &tls, stream).await {
        Ok((stream, principal)) => {
            if let Some(principal) = principal {
                tracing::debug!(%peer, listener = &*ctx.listener, %principal, "client certificate verified");
                ctx.principal = Rc::new(principal);
            }
            serve_stream(state, stream, ctx, listener, slot).await
        }
        Err(e) => {
            tracing::info!(%peer, listener = &*ctx.listener, reason = %e, "closing connection");
            state.metrics.connection_error(ConnectionError::Tls);
        }
    }
}

/// Serves the Kafka request loop on `stream` (plain, or TLS after its handshake) as `ctx`.
async fn serve_stream<B: Backend, S: BackendStream>(
    state: Rc<ShardState<B>>,
    stream: S,
    ctx: RequestContext,
    listener: usize,
    slot: ConnectionSlot<B>,
) {
    let peer = ctx.client_address;
    // Our own halves: `futures::io::split`'s read half would zero each read's room (I199).
    let (reader, writer) = stream_halves::split(stream);
    // Unbounded, so that an idle connection holds no preallocated slots (a bounded channel
    // of 128 allocates them all up front, I189); the reader bounds it by `unanswered`.
    let (tx, rx) = async_channel::unbounded::<Pending<B>>();
    let unanswered = Rc::new(ByteBudget::new(MAX_IN_FLIGHT_PRODUCE));
    let unsent = Rc::new(ByteBudget::new(MAX_UNSENT_BYTES));
    // Dropped by the writer when it ends, which stops the reader too.
    let (writer_alive, writer_done) = async_channel::bounded::<()>(1);
    let writer_task = write_loop::<B, S>(
        writer,
        rx,
        Rc::clone(&unanswered),
        Rc::clone(&unsent),
        peer,
        slot,
        writer_alive,
    );
    state.backend.spawn_local(writer_task);
    let conn = Conn {
        unanswered,
        unsent,
        requests: Rc::new(ByteBudget::new(MAX_UNANSWERED_REQUEST_BYTES)),
        others_in_flight: Rc::new(ByteBudget::new(MAX_IN_FLIGHT)),
        ctx,
        listener,
        writer_done,
    };
    read_loop(&state, reader, tx, conn).await;
}

/// What the reader shares with the writer.
struct Conn {
    /// Requests read and not yet answered (a count), at most [`MAX_IN_FLIGHT_PRODUCE`].
    unanswered: Rc<ByteBudget>,
    unsent: Rc<ByteBudget>,
    /// Bytes of the requests read and not yet answered.
    requests: Rc<ByteBudget>,
    /// Handlers of requests other than Produce still working (a count of requests).
    others_in_flight: Rc<ByteBudget>,
    /// Who is on the connection, and through which listener (I45).
    ctx: RequestContext,
    /// The listener's index in `config.listeners`.
    listener: usize,
    writer_done: async_channel::Receiver<()>,
}

async fn read_loop<B: Backend, S: BackendStream>(
    state: &Rc<ShardState<B>>,
    mut reader: stream_halves::ReadHalf<S>,
    tx: async_channel::Sender<Pending<B>>,
    conn: Conn,
) {
    let Conn {
        unanswered,
        unsent,
        requests,
        others_in_flight,
        mut ctx,
        listener,
        writer_done,
    } = conn;
    let peer = ctx.client_address;
    let config = &state.shared.config;
    let sasl = &config.listeners[listener].sasl;
    // On a SASL listener nothing but ApiVersions and SASL is served until the client has
    // authenticated (I47), and frames are bounded as SASL messages until then (I40).
    let mut auth = config.listeners[listener]
        .protocol
        .uses_sasl()
        .then(Authenticator::default);
    // KIP-368 (I139): when the session ends; past it, any request but a re-authentication's
    // SaslHandshake closes the connection.
    let mut session_expiry: Option<minikafka_core::clock::MonoTime> = None;
    let mut last_reauthentication: Option<minikafka_core::clock::MonoTime> = None;
    let mut decoder = FrameDecoder::new(if auth.is_some() {
        config.socket_request_max_bytes.min(MAX_SASL_MESSAGE_BYTES)
    } else {
        config.socket_request_max_bytes
    });
    let idle = Duration::from_millis(config.connections_max_idle_ms);
    // Bytes read and not yet split into frames; the rest of a frame whose size arrived is
    // read straight into it (I194). Emptied, it is dropped before the next wait for the
    // socket, so an idle connection holds no buffer (I189).
    let mut buf = ReadBuffer::new();
    loop {
        loop {
            match buf.next_frame(&decoder) {
                Ok(Some(frame)) => {
                    if state.stopping()
                        || !until_below(state, &unsent, &writer_done).await
                        || !until_below(state, &unanswered, &writer_done).await
                    {
                        return;
                    }
                    // KIP-219: nothing more is taken from a throttled connection (I98).
                    if !until_unmuted(state, &ctx.throttle, &writer_done).await {
                        return;
                    }
                    if let Some(authenticator) = auth.as_mut().filter(|a| a.is_done()) {
                        let now = state.backend.now();
                        // As Kafka: a session without an expiry has nothing to renew (the
                        // handshake is answered ILLEGAL_SASL_STATE), and at most one
                        // re-authentication starts per second.
                        let reauthentication = session_expiry.is_some()
                            && Authenticator::api_key_of(&frame)
                                == Some(kafka_protocol::messages::ApiKey::SaslHandshake as i16)
                            && last_reauthentication.is_none_or(|at| {
                                now.saturating_duration_since(at) >= MIN_REAUTHENTICATION_INTERVAL
                            });
                        if reauthentication {
                            last_reauthentication = Some(now);
                            authenticator.begin_reauthentication();
                        } else if session_expiry.is_some_and(|at| now >= at) {
                            tracing::info!(%peer, listener = &*ctx.listener, principal = %ctx.principal, "SASL session expired without re-authentication; closing connection");
                            state
                                .metrics
                                .connection_error(ConnectionError::SessionExpired);
                            let _ = tx.send(Pending::Close).await;
                            return;
                        }
                    }
                    if let Some(authenticator) = auth.as_mut().filter(|a| !a.is_done()) {
                        fetch_keys_for_token(state, authenticator, &frame, sasl).await;
                        let step = sasl_step(state, authenticator, &frame, sasl);
                        let serve = matches!(step, Step::Serve);
                        let (answer, close) = match step {
                            Step::Serve => (None, false),
                            Step::Answer(bytes) => (Some(bytes), false),
                            Step::Authenticated(bytes, session) => {
                                let user = session.user;
                                let lifetime_ms = session.lifetime_ms;
                                if session_expiry.is_some() {
                                    tracing::info!(%peer, listener = &*ctx.listener, user, lifetime_ms, "re-authenticated");
                                } else {
                                    tracing::info!(%peer, listener = &*ctx.listener, user, lifetime_ms, "authenticated");
                                }
                                session_expiry = (lifetime_ms > 0).then(|| {
                                    state.backend.now()
                                        + Duration::from_millis(lifetime_ms.unsigned_abs())
                                });
                                ctx.principal = Rc::new(KafkaPrincipal::user(user));
                                decoder = FrameDecoder::new(config.socket_request_max_bytes);
                                (Some(bytes), false)
                            }
                            Step::Refuse(bytes, reason) => {
                                // The reason names the user and mechanism, never a secret.
                                tracing::warn!(%peer, listener = &*ctx.listener, %reason, "authentication failed; closing connection");
                                state
                                    .metrics
                                    .connection_error(ConnectionError::Authentication);
                                (bytes, true)
                            }
                        };
                        if let Some(bytes) = answer {
                            unsent.add(bytes.len());
                            unanswered.add(1);
                            if tx.send(Pending::Ready(bytes)).await.is_err() {
                                return;
                            }
                        }
                        if close {
                            let _ = tx.send(Pending::Close).await;
                            return;
                        }
                        if !serve {
                            continue;
                        }
                    }
                    let other = frame.get(..2) != Some(&PRODUCE_API_KEY[..]);
                    if other && !until_below(state, &others_in_flight, &writer_done).await {
                        return;
                    }
                    let held = HeldRequest::new(&requests, SIZE_PREFIX_BYTES + frame.len());
                    let held_other = other.then(|| HeldRequest::new(&others_in_flight, 1));
                    let Some(pending) = judge(state, frame, &ctx, &unsent, (held, held_other))
                    else {
                        let _ = tx.send(Pending::Close).await;
                        return;
                    };
                    unanswered.add(1);
                    if tx.send(pending).await.is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(%peer, reason = %e, "closing connection");
                    state.metrics.connection_error(ConnectionError::Frame);
                    let _ = tx.send(Pending::Close).await;
                    return;
                }
            }
        }
        if !until_below(state, &requests, &writer_done).await
            || !until_unmuted(state, &ctx.throttle, &writer_done).await
        {
            return;
        }
        // Frames split off share its allocation: let it go with them (I189).
        buf.release_if_empty();
        let read = {
            let read = std::pin::pin!(buf.read_from(&state.read_chunk, &mut reader, &decoder));
            let stop = std::pin::pin!(state.stop.recv());
            let done = std::pin::pin!(writer_done.recv());
            let idle_timer = std::pin::pin!(state.backend.sleep(idle));
            match select(read, select(select(stop, done), idle_timer)).await {
                Either::Left((read, _)) => Some(read),
                Either::Right((Either::Left(_), _)) => return,
                Either::Right((Either::Right(_), _)) => None,
            }
        };
        match read {
            None if unanswered.get() == 0 => {
                tracing::debug!(%peer, "closing idle connection");
                state.metrics.connection_error(ConnectionError::Idle);
                return;
            }
            None => {}
            Some(Ok(0)) => return,
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                tracing::info!(%peer, reason = %e, "connection read failed");
                state.metrics.connection_error(ConnectionError::Io);
                return;
            }
        }
    }
}

/// When `frame` carries an OAUTHBEARER token naming a `kid` its listener's JWKS endpoint
/// has not given, has the keys fetched first, as Kafka does (I187); this connection waits,
/// the shard serves on.
async fn fetch_keys_for_token<B: Backend>(
    state: &Rc<ShardState<B>>,
    authenticator: &Authenticator,
    frame: &Bytes,
    sasl: &crate::config::listeners::SaslSettings,
) {
    let Some(validator) = &sasl.oauthbearer_jwks else {
        return;
    };
    if !authenticator.awaits_oauthbearer_token() {
        return;
    }
    let kid = if authenticator.expects_raw_token() {
        Authenticator::oauthbearer_kid(frame)
    } else {
        match decode_request(frame.clone(), &state.shared.supported) {
            Ok(DecodedRequest {
                body: RequestBody::SaslAuthenticate(req),
                ..
            }) => Authenticator::oauthbearer_kid(&req.auth_bytes),
            _ => None,
        }
    };
    if let Some(kid) = kid {
        super::jwks_refresh::fetch_for_unknown_kid(state, validator, &kid).await;
    }
}

/// What to do with `frame`, read before the client authenticated.
fn sasl_step<B: Backend>(
    state: &Rc<ShardState<B>>,
    authenticator: &mut Authenticator,
    frame: &Bytes,
    sasl: &crate::config::listeners::SaslSettings,
) -> Step {
    let scram = state.shared.scram_store();
    let inputs = Inputs {
        sasl,
        scram: &scram,
        now_ms: state.backend.wall_clock_ms(),
        max_reauth_ms: state.shared.config.connections_max_reauth_ms,
    };
    if authenticator.expects_raw_token() {
        return authenticator.on_raw_token(frame, inputs);
    }
    let Some(api_key) = Authenticator::api_key_of(frame) else {
        return Step::Refuse(None, "a frame too short for a request header".into());
    };
    if !Authenticator::allowed_before_authentication(api_key) {
        return Step::Refuse(
            None,
            format!("request of API key {api_key} before authentication"),
        );
    }
    if api_key == kafka_protocol::messages::ApiKey::ApiVersions as i16 {
        return Step::Serve;
    }
    match decode_request(frame.clone(), &state.shared.supported) {
        Ok(request) => authenticator.on_request(&request, inputs),
        Err(e) => Step::Refuse(None, e.to_string()),
    }
}

/// Waits while `budget` is at its limit (unsent answers: the client is not reading them;
/// unanswered requests: their handlers are still working); `false` when the connection must
/// end meanwhile (shutdown, or the writer ended).
async fn until_below<B: Backend>(
    state: &Rc<ShardState<B>>,
    budget: &ByteBudget,
    writer_done: &async_channel::Receiver<()>,
) -> bool {
    if !budget.over_limit() {
        return true;
    }
    let below = std::pin::pin!(budget.wait_below_limit());
    let stop = std::pin::pin!(state.stop.recv());
    let done = std::pin::pin!(writer_done.recv());
    matches!(select(below, select(stop, done)).await, Either::Left(_))
}

/// Waits while a quota throttle mutes the connection ([`ThrottleGate`], KIP-219); `false`
/// when the connection must end meanwhile (shutdown, or the writer ended).
async fn until_unmuted<B: Backend>(
    state: &Rc<ShardState<B>>,
    gate: &ThrottleGate,
    writer_done: &async_channel::Receiver<()>,
) -> bool {
    if !gate.is_muted(state.backend.now()) {
        return true;
    }
    let open = std::pin::pin!(gate.wait_open(&state.backend));
    let stop = std::pin::pin!(state.stop.recv());
    let done = std::pin::pin!(writer_done.recv());
    matches!(select(open, select(stop, done)).await, Either::Left(_))
}

/// What a request holds in a connection's budgets until its handler is done (or dropped):
/// its bytes in `requests`, and one in `others_in_flight` unless it is a Produce.
struct HeldRequest {
    budget: Rc<ByteBudget>,
    bytes: usize,
}

impl HeldRequest {
    fn new(budget: &Rc<ByteBudget>, bytes: usize) -> Self {
        budget.add(bytes);
        HeldRequest {
            budget: Rc::clone(budget),
            bytes,
        }
    }
}

impl Drop for HeldRequest {
    fn drop(&mut self) {
        self.budget.release(self.bytes);
    }
}

/// Judges one frame: a pending reply, or `None` when the connection must close. A reply's
/// bytes count in `unsent` from when they are computed; what the request `held` in the
/// connection's budgets is released when its handler is done.
fn judge<B: Backend>(
    state: &Rc<ShardState<B>>,
    frame: Bytes,
    ctx: &RequestContext,
    unsent: &Rc<ByteBudget>,
    held: (HeldRequest, Option<HeldRequest>),
) -> Option<Pending<B>> {
    let peer = ctx.client_address;
    // Decoding is the shard's work for the request too (I179): timed while a request quota
    // is configured, by the backend's clock.
    let decode_started = state
        .shared
        .quotas
        .request_quota_on()
        .then(|| state.backend.now());
    match decode_request(frame, &state.shared.supported) {
        Ok(request) => {
            let decode_busy = decode_started
                .map(|at| state.backend.now().saturating_duration_since(at))
                .unwrap_or_default();
            if request.ignored_trailing_bytes > 0 {
                // Kafka ignores bytes after the body; librdkafka 2.x sends 3 after every
                // all-topics Metadata v9+ request.
                tracing::debug!(
                    %peer,
                    api_key = ?request.api_key,
                    api_version = request.api_version,
                    trailing_bytes = request.ignored_trailing_bytes,
                    "ignored trailing bytes"
                );
            }
            // Charged now, in request order, so that a mute it earns stops the next frame
            // (I98).
            let admitted = handlers::throttle::admit(state, &request, ctx);
            let (reply_tx, reply_rx) = futures::channel::oneshot::channel();
            let guard = state.begin_request();
            let st = Rc::clone(state);
            let (api_key, started) = (request.api_key as i16, state.backend.now());
            let unsent = Rc::clone(unsent);
            let ctx = ctx.clone();
            // The request quota's client id, only when its time is to be charged (I159).
            let timed = (state.shared.quotas.request_quota_on()
                && request_quota::charged(request.api_key))
            .then(|| {
                let client_id = request.header.client_id.as_deref().unwrap_or("");
                (request.api_key, request.api_version, client_id.to_string())
            });
            let network_charge = timed.as_ref().map(|(_, _, client_id)| {
                Box::new(NetworkCharge {
                    user: ctx.principal.name.clone(),
                    client_id: client_id.clone(),
                })
            });
            state.backend.spawn_local(async move {
                let outcome = match timed {
                    None => handlers::handle(&st, request, &ctx, admitted).await,
                    Some((api, version, client_id)) => {
                        let handled = handlers::handle(&st, request, &ctx, admitted);
                        let (outcome, busy) = request_quota::timed(&st.backend, handled).await;
                        let now = st.backend.now();
                        let quotas = &st.shared.quotas;
                        let busy = busy + decode_busy;
                        let ms =
                            quotas.charge_request_time(&ctx.principal.name, &client_id, busy, now);
                        ctx.throttle.mute_for(now, ms);
                        request_quota::with_throttle(api, version, outcome, ms)
                    }
                };
                drop(held);
                let took = st.backend.now().saturating_duration_since(started);
                st.metrics.request(api_key, took);
                match &outcome {
                    Outcome::Respond(bytes) => unsent.add(bytes.len()),
                    Outcome::RespondInParts(parts) => {
                        unsent.add(parts.iter().map(Bytes::len).sum())
                    }
                    _ => {}
                }
                let _ = reply_tx.send(outcome);
            });
            Some(Pending::Reply(reply_rx, guard, network_charge))
        }
        Err(RequestError::ApiVersionsUnsupportedVersion {
            api_version,
            correlation_id,
        }) => {
            tracing::debug!(%peer, api_version, "ApiVersions version unsupported; answering v0");
            match encode_api_versions_unsupported(correlation_id, &state.shared.supported) {
                Ok(bytes) => {
                    unsent.add(bytes.len());
                    Some(Pending::Ready(bytes))
                }
                Err(e) => {
                    tracing::warn!(%peer, reason = %e, "closing connection");
                    state.metrics.connection_error(ConnectionError::Request);
                    None
                }
            }
        }
        Err(e) => {
            tracing::warn!(%peer, reason = %e, "closing connection");
            state.metrics.connection_error(ConnectionError::Request);
            None
        }
    }
}

async fn write_loop<B: Backend, S: BackendStream>(
    mut writer: stream_halves::WriteHalf<S>,
    rx: async_channel::Receiver<Pending<B>>,
    unanswered: Rc<ByteBudget>,
    unsent: Rc<ByteBudget>,
    peer: SocketAddr,
    slot: ConnectionSlot<B>,
    writer_alive: async_channel::Sender<()>,
) {
    let metrics = &slot.0.metrics;
    while let Ok(pending) = rx.recv().await {
        // The in-flight guard lives until the response is written (shutdown waits for it).
        let (bytes, _in_flight, charge) = match pending {
            Pending::Ready(bytes) => (Some(Frame::Whole(bytes)), None, None),
            Pending::Close => break,
            Pending::Reply(reply, in_flight, charge) => match reply.await {
                Ok(Outcome::Respond(bytes)) => (Some(Frame::Whole(bytes)), Some(in_flight), charge),
                Ok(Outcome::RespondInParts(parts)) => {
                    (Some(Frame::Parts(parts)), Some(in_flight), charge)
                }
                Ok(Outcome::Silent) => (None, Some(in_flight), None),
                Ok(Outcome::Close(why)) => {
                    tracing::warn!(%peer, reason = %why, "closing connection");
                    metrics.connection_error(ConnectionError::Handler);
                    break;
                }
                Err(_) => break,
            },
        };
        unanswered.release(1);
        if let Some(frame) = bytes {
            // A TLS stream keeps what the socket did not take in rustls's buffer (at most
            // 64 KiB): flush it, as a plain write waits for the kernel to take every byte (a
            // no-op on a plain socket). Otherwise an answer could wait there for the next.
            let write = async {
                match write_counted(&mut writer, &frame, &unsent).await {
                    Ok(()) => writer.flush().await,
                    e => e,
                }
            };
            let written = match charge {
                None => write.await,
                Some(charge) => {
                    // The shard's time writing the answer (polls only: a full socket's wait
                    // is not charged), recorded without a throttle of its own, as Kafka
                    // records a network thread's time: it weighs on the next answers (I179).
                    let state = &slot.0;
                    let (written, busy) = request_quota::timed(&state.backend, write).await;
                    state.shared.quotas.charge_network_time(
                        &charge.user,
                        &charge.client_id,
                        busy,
                        state.backend.now(),
                    );
                    written
                }
            };
            if let Err(e) = written {
                tracing::info!(%peer, reason = %e, "connection write failed");
                metrics.connection_error(ConnectionError::Io);
                break;
            }
        }
    }
    rx.close();
    let _ = writer.flush().await;
    let _ = writer.close().await;
    drop(slot);
    drop(writer_alive);
    tracing::debug!(%peer, "connection closed");
}

/// A response to write: one buffer, or parts written as one frame.
enum Frame {
    /// A whole size-prefixed response.
    Whole(Bytes),
    /// A size-prefixed response in parts (a Fetch response whose batches are the log's bytes).
    Parts(Vec<Bytes>),
}

/// Writes all of `frame` in order with vectored writes (one `writev` where the stream supports
/// it; streams without it write one part per call), so shared parts are never copied here,
/// taking what the kernel accepts off `unsent` as it goes (so the reader resumes as soon as the
/// client drains enough, not after a whole large answer).
async fn write_counted<W: futures::io::AsyncWrite + Unpin>(
    writer: &mut W,
    frame: &Frame,
    unsent: &ByteBudget,
) -> std::io::Result<()> {
    let parts = match frame {
        Frame::Whole(bytes) => std::slice::from_ref(bytes),
        Frame::Parts(parts) => parts.as_slice(),
    };
    let mut slices: Vec<IoSlice<'_>> = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| IoSlice::new(p))
        .collect();
    let mut left = &mut slices[..];
    while !left.is_empty() {
        let n = writer.write_vectored(left).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        unsent.release(n);
        IoSlice::advance_slices(&mut left, n);
    }
    Ok(())
}
