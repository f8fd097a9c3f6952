//! Quota charges of Produce and Fetch: the bytes a request moves are charged to its
//! principal and client id, and an answer over the quota carries `throttle_time_ms` and mutes
//! the connection for that long (KIP-219, [`ThrottleGate`](crate::server::throttle_gate)).
//!
//! Contract:
//! - Produce is charged the record bytes it carries, whether or not they were appended
//!   (Kafka charges the request's size), when it is admitted ([`admit`], called by the
//!   connection's reader in request order before the next frame is looked at): a mute it
//!   earns stops the requests the client pipelined behind it, as Kafka, which reads one
//!   request at a time per connection, never sees them (I98). Its answer is sent at once.
//! - Fetch is charged the record bytes of its answer; an answer over the quota is sent
//!   empty, with no partitions (Kafka's throttled sessionless answer), and its bytes are
//!   taken back (I97): the client fetches the same offsets again once the throttle passes.
//! - A Fetch under a consumer quota asks for at most the quota's window worth of bytes
//!   (Kafka's `getMaxValueInQuotaWindow`), so that an answer can fit the quota.
//! - Every throttle time is bounded by the quota window (I81), so it fits the `i32` field.

use kafka_protocol::messages::{FetchRequest, FetchResponse, ProduceRequest};
use minikafka_core::quota::QuotaKind;

use crate::protocol::{DecodedRequest, RequestBody};
use crate::server::session::RequestContext;
use crate::server::shard_context::{QuotaLedger, ShardClock};

/// The record bytes a Produce carries.
pub fn produce_bytes(request: &ProduceRequest) -> u64 {
    request
        .topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .filter_map(|p| p.records.as_ref())
        .map(|r| r.len() as u64)
        .sum()
}

/// What was charged when a request was admitted, for its handler.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Admitted {
    /// The throttle time a Produce earned (0 for every other request).
    pub produce_throttle_ms: i32,
}

/// Charges a Produce when the reader admits it (see the module documentation); nothing for
/// other requests.
pub fn admit(
    state: &(impl ShardClock + QuotaLedger),
    request: &DecodedRequest,
    ctx: &RequestContext,
) -> Admitted {
    let RequestBody::Produce(produce) = &request.body else {
        return Admitted::default();
    };
    let client_id = request.header.client_id.as_deref().unwrap_or("");
    let bytes = produce_bytes(produce);
    Admitted {
        produce_throttle_ms: charge(state, ctx, client_id, QuotaKind::ProducerByteRate, bytes),
    }
}

/// The record bytes a Fetch answer carries.
pub fn fetch_bytes(response: &FetchResponse) -> u64 {
    response
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .filter_map(|p| p.records.as_ref())
        .map(|r| r.len() as u64)
        .sum()
}

/// Charges `bytes` of `kind` to the request's principal and `client_id`, mutes the
/// connection when throttled, and returns the throttle time for the answer.
pub fn charge(
    state: &(impl ShardClock + QuotaLedger),
    ctx: &RequestContext,
    client_id: &str,
    kind: QuotaKind,
    bytes: u64,
) -> i32 {
    let now = state.now();
    let keep = kind != QuotaKind::ConsumerByteRate;
    let throttle_ms = state
        .quotas()
        .charge(kind, &ctx.principal.name, client_id, bytes, now, keep);
    ctx.throttle.mute_for(now, throttle_ms);
    i32::try_from(throttle_ms).unwrap_or(i32::MAX)
}

/// Charges a Fetch answer; empties it when throttled (see the module documentation).
pub fn charge_fetch(
    state: &(impl ShardClock + QuotaLedger),
    ctx: &RequestContext,
    client_id: &str,
    response: &mut FetchResponse,
) {
    let bytes = fetch_bytes(response);
    let throttle_ms = charge(state, ctx, client_id, QuotaKind::ConsumerByteRate, bytes);
    if throttle_ms > 0 {
        response.responses.clear();
    }
    response.throttle_time_ms = throttle_ms;
}

/// Caps a Fetch's `max_bytes` at the bytes its consumer quota allows in one window.
pub fn cap_fetch(
    state: &impl QuotaLedger,
    ctx: &RequestContext,
    client_id: &str,
    request: &mut FetchRequest,
) {
    let kind = QuotaKind::ConsumerByteRate;
    let quotas = state.quotas();
    if let Some(cap) = quotas.max_bytes_in_window(kind, &ctx.principal.name, client_id) {
        let cap = i32::try_from(cap).unwrap_or(i32::MAX);
        request.max_bytes = request.max_bytes.min(cap);
    }
}
