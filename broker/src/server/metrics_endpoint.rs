//! The Prometheus endpoint (`metrics.listener`): shard 0 listens on the backend's TCP and,
//! for each `GET /metrics`, asks every shard for a snapshot of its counters and renders them.
//!
//! Contract:
//! - Every shard runs a snapshot responder: it answers scrape requests from its
//!   [`MetricsInboxes`](crate::metrics::inboxes::MetricsInboxes) slot with a [`ShardSnapshot`] built from its own counters, partition
//!   logs and group coordinators, so nothing on a hot path is shared between threads.
//! - A scrape waits at most [`SCRAPE_TIMEOUT`] (on the backend's clock) for all shards; a
//!   shard that did not answer is left out and counted in `minikafka_scrape_shards_missing`.
//! - A metrics connection serves one request and closes. Its head is bounded
//!   ([`http::MAX_HEAD_BYTES`]) and must arrive within [`HEAD_TIMEOUT`]; at most
//!   [`MAX_METRICS_CONNECTIONS`] are served at once, more are closed at accept. A hostile
//!   client costs only its own connection.
//! - Off unless `metrics.listener` is set; failing to bind it fails startup (a configured
//!   endpoint that silently is not there would hide an outage).

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use futures::channel::oneshot;
use futures::future::{select, Either};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use minikafka_core::backend::{Backend, BackendListener};

use super::shard::ShardState;
use crate::metrics::counters::no_syncs;
use crate::metrics::exposition::{self, CONTENT_TYPE};
use crate::metrics::http::{self, Head, Route};
use crate::metrics::snapshot::{
    BrokerSnapshot, CommittedOffset, PartitionSnapshot, ShardSnapshot, ThrottledEntity,
};
use minikafka_core::quota::QuotaKind;

/// Longest wait for every shard's snapshot.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for a metrics request's head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Most metrics connections served at once.
pub const MAX_METRICS_CONNECTIONS: usize = 16;

/// Starts this shard's snapshot responder.
pub fn spawn_snapshot_responder<B: Backend>(state: &Rc<ShardState<B>>) {
    let Some(requests) = state.shared.metrics.receiver(state.shard.0) else {
        return;
    };
    let st = Rc::clone(state);
    state.backend.spawn_local(async move {
        while let Ok(reply) = requests.recv().await {
            let _ = reply.send(snapshot(&st));
        }
    });
}

/// This shard's counters, partitions and committed offsets, now.
fn snapshot<B: Backend>(state: &ShardState<B>) -> ShardSnapshot {
    let traffic = state.metrics.traffic_snapshot();
    let mut syncs = state.metrics.retired_syncs().unwrap_or_else(no_syncs);
    let mut partitions = Vec::new();
    for (topic, partition, log) in state.owned_logs() {
        syncs.merge(&log.sync_stats().snapshot());
        partitions.push(PartitionSnapshot {
            traffic: traffic
                .get(&(topic.clone(), partition))
                .copied()
                .unwrap_or_default(),
            size_bytes: log.size_bytes(),
            log_start_offset: log.log_start_offset().0,
            log_end_offset: log.high_watermark().0,
            offline: log.is_offline(),
            topic,
            partition,
        });
    }
    let (connections_accepted, connections_refused) = state.metrics.connection_counts();
    let committed = state
        .groups
        .committed_offsets()
        .into_iter()
        .map(|(group, topic, partition, offset)| CommittedOffset {
            group,
            topic,
            partition,
            offset,
        })
        .collect();
    ShardSnapshot {
        shard: state.shard.0,
        partitions,
        apis: state.metrics.api_snapshot(),
        syncs,
        connections_accepted,
        connections_refused,
        connection_errors: state.metrics.connection_errors(),
        inbox_depth: state
            .shared
            .inboxes
            .get(state.shard.0)
            .map_or(0, async_channel::Sender::len),
        requests_in_flight: state.in_flight(),
        recovery_seconds: state.metrics.recovery_time().map(|d| d.as_secs_f64()),
        committed,
        transactions: state
            .txn_metrics
            .counts(state.txns.all().iter().map(|host| host.ongoing()).sum()),
    }
}

/// Asks every shard for its snapshot, waiting at most [`SCRAPE_TIMEOUT`] in all.
pub async fn gather<B: Backend>(state: &ShardState<B>) -> BrokerSnapshot {
    let deadline = state.backend.now() + SCRAPE_TIMEOUT;
    let mut answers = Vec::new();
    for sender in state.shared.metrics.senders() {
        let (reply, answer) = oneshot::channel();
        if sender.try_send(reply).is_ok() {
            answers.push(answer);
        }
    }
    let mut shards = Vec::new();
    for answer in answers {
        let timeout = std::pin::pin!(state.backend.sleep_until(deadline));
        if let Either::Left((Ok(shard), _)) = select(answer, timeout).await {
            shards.push(shard);
        }
    }
    shards.sort_by_key(|s| s.shard);
    BrokerSnapshot {
        shards_missing: state.shared.num_shards().saturating_sub(shards.len()),
        shards,
        connections_open: state.shared.connections.in_use(),
        clean_shutdown: state.shared.clean_shutdown,
        throttle_totals: state
            .shared
            .quotas
            .totals()
            .into_iter()
            .map(|(kind, ms, n)| (kind_label(kind), ms, n))
            .collect(),
        request_quota_seconds: state
            .shared
            .quotas
            .request_time_charged()
            .into_iter()
            .map(|(part, took)| (part.label(), took.as_secs_f64()))
            .collect(),
        throttled_entities: state
            .shared
            .quotas
            .throttled()
            .into_iter()
            .map(|t| ThrottledEntity {
                kind: kind_label(t.key.kind),
                user: t.key.user.unwrap_or_default(),
                client_id: t.key.client_id.unwrap_or_default(),
                throttle_ms: t.throttle_ms_total,
                throttled: t.throttled_count,
            })
            .collect(),
        schema_registry: state.shared.schema_registry_metrics.snapshot(),
    }
}

/// The `kind` label of a quota kind's throttling.
fn kind_label(kind: QuotaKind) -> &'static str {
    match kind {
        QuotaKind::ProducerByteRate => "produce",
        QuotaKind::ConsumerByteRate => "fetch",
        QuotaKind::RequestPercentage => "request",
        QuotaKind::ConnectionCreationRate => "connection",
    }
}

/// Binds `metrics.listener` (when set) and starts serving it; on shard 0 only.
pub async fn start<B: Backend>(state: &Rc<ShardState<B>>) -> std::io::Result<()> {
    let Some(addr) = state.shared.config.metrics_listener else {
        return Ok(());
    };
    let listener = state.backend.listen(addr).await?;
    let bound = listener.local_addr()?;
    let _ = state.shared.metrics.bound_addr.set(bound);
    tracing::info!("metrics on http://{bound}/metrics");
    state
        .backend
        .spawn_local(accept_loop(Rc::clone(state), listener));
    Ok(())
}

async fn accept_loop<B: Backend>(state: Rc<ShardState<B>>, listener: B::Listener) {
    let open = Rc::new(Cell::new(0usize));
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
                if open.get() >= MAX_METRICS_CONNECTIONS {
                    tracing::warn!(%peer, "too many metrics connections; closing the new one");
                    continue;
                }
                open.set(open.get() + 1);
                let (st, open) = (Rc::clone(&state), Rc::clone(&open));
                state.backend.spawn_local(async move {
                    serve(&st, stream, peer).await;
                    open.set(open.get() - 1);
                });
            }
            Err(e) => {
                tracing::warn!("metrics accept failed: {e}");
                state.backend.sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Reads the request head: the routed head, or the answer to send before closing.
async fn read_head<B: Backend, S: futures::io::AsyncRead + Unpin>(
    state: &ShardState<B>,
    stream: &mut S,
    peer: SocketAddr,
) -> Result<Route, Option<Vec<u8>>> {
    let deadline = state.backend.now() + HEAD_TIMEOUT;
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        match http::parse_head(&head) {
            Head::Complete(route) => return Ok(route),
            Head::TooLarge => return Err(Some(http::head_too_large())),
            Head::Malformed => {
                tracing::info!(%peer, reason = "not an HTTP request", "metrics connection closed");
                return Err(Some(http::bad_request()));
            }
            Head::Incomplete => {}
        }
        let read = {
            let read = std::pin::pin!(stream.read(&mut chunk));
            let timeout = std::pin::pin!(state.backend.sleep_until(deadline));
            match select(read, timeout).await {
                Either::Left((read, _)) => read,
                Either::Right(_) => {
                    tracing::info!(%peer, reason = "request head timed out", "metrics connection closed");
                    return Err(None);
                }
            }
        };
        match read {
            Ok(0) => return Err(None),
            // Never more than MAX_HEAD_BYTES plus one chunk is kept.
            Ok(n) => head.extend_from_slice(&chunk[..n]),
            Err(e) => {
                tracing::info!(%peer, reason = %e, "metrics connection read failed");
                return Err(None);
            }
        }
    }
}

async fn serve<B: Backend, S>(state: &ShardState<B>, mut stream: S, peer: SocketAddr)
where
    S: futures::io::AsyncRead + futures::io::AsyncWrite + Unpin,
{
    let response = match read_head(state, &mut stream, peer).await {
        Ok(Route::Metrics) => {
            let page = exposition::render(&gather(state).await);
            http::response(200, "OK", CONTENT_TYPE, page.as_bytes())
        }
        Ok(Route::NotFound) => http::not_found(),
        Err(Some(answer)) => answer,
        Err(None) => return,
    };
    if let Err(e) = stream.write_all(&response).await {
        tracing::info!(%peer, reason = %e, "metrics connection write failed");
        return;
    }
    let _ = stream.flush().await;
    let _ = stream.close().await;
}
