//! A shard's life: startup, the listener and accept loop, the inbox loop, the timers, and
//! shutdown. The top of `server/`: it starts connections and runs what the lower layers
//! (connection → handlers → shard operations → log) offer.
//!
//! Contract:
//! - Startup: shard 0 writes `__consumer_offsets`'s and `__transaction_state`'s metadata if missing and loads the topic
//!   registry; every shard opens its partitions (passing the previous run's clean-shutdown
//!   flag) while shard 0 also syncs the log directory (so every directory in it is durable
//!   before anything is served), makes what
//!   they recovered durable with one sync for all of them (I8) before registering any, and replays
//!   the group and transaction coordinators it hosts (and, on the shard owning `_schemas`-0,
//!   the schema registry replays); every shard binds every listener (the registry's shard
//!   also its HTTP listener) (`SO_REUSEPORT`); only
//!   then are connections accepted. Each step ends at a phase barrier (I11).
//! - The inbox loop runs every [`PartitionCall`](super::partition_ops::PartitionCall) another
//!   shard sends as its own task, spawned in arrival order.
//! - Shutdown (signal flag polled every [`SIGNAL_POLL`]): stop accepting and reading
//!   requests, answer those in flight (at most [`DRAIN_TIMEOUT`], on the backend's clock),
//!   then flush and close every partition; shard 0 writes the clean-shutdown marker when
//!   every close succeeded.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use minikafka_core::accept::AcceptBackoff;
use minikafka_core::backend::{Backend, BackendFile, BackendListener, OpenMode, ShardId};
use minikafka_core::wakeup::PartitionSignal;

use super::data_dir::CLEAN_SHUTDOWN_MARKER;
use super::partition_ops::PartitionKey;
use super::schema_registry::host::RegistryHost;
use super::schema_registry::topic::{SCHEMAS_PARTITION, SCHEMAS_TOPIC};
use super::shard::{sleep_or_stop, ShardState};
use super::shared::{Barrier, Shared};
use super::{connection, groups, metrics_endpoint, schema_registry, topics, txns};
use crate::log::{sync_recovered, PartitionLog, UnsyncedLog};

/// How often every shard looks at the signal flag.
pub const SIGNAL_POLL: Duration = Duration::from_millis(50);
/// Longest wait for in-flight requests at shutdown.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Partitions a shard opens at once at startup.
const PARALLEL_OPENS: usize = 16;

/// Opens every partition of the registry this shard owns; how many it opened. A few at a
/// time: many small partitions (the 50 of `__consumer_offsets`) open in the time of a few,
/// while recovery of big ones stays bounded in memory. What they recovered is made durable
/// by one sync for all of them before any is registered (I8, `log::sync_recovered`), so the
/// start waits for one filesystem sync instead of one synced file per partition.
async fn open_owned_partitions<B: Backend>(state: &Rc<ShardState<B>>) -> Result<usize, String> {
    use futures::stream::{StreamExt, TryStreamExt};
    let mut owned = Vec::new();
    for topic in state.shared.all_topics() {
        let config = topic.config.log().clone();
        for (p, signal) in topic.signals.iter().enumerate() {
            let p = p as i32;
            if state.owner(&topic.name, p) == state.shard {
                let key = PartitionKey {
                    topic: topic.name.clone(),
                    partition: p,
                };
                owned.push((key, config.clone(), Arc::clone(signal)));
            }
        }
    }
    let clean_shutdown = state.shared.clean_shutdown;
    let opened: Vec<(
        PartitionKey,
        Arc<PartitionSignal>,
        UnsyncedLog<PartitionLog<B>>,
    )> = futures::stream::iter(owned)
        .map(|(key, config, signal)| async move {
            let log = state
                .open_owned_unsynced(&key, config, clean_shutdown)
                .await?;
            Ok::<_, String>((key, signal, log))
        })
        .buffer_unordered(PARALLEL_OPENS)
        .try_collect()
        .await?;
    let count = opened.len();
    let (registered, unsynced): (Vec<_>, Vec<_>) = opened
        .into_iter()
        .map(|(key, signal, log)| ((key, signal), log))
        .unzip();
    let logs = sync_recovered(&state.backend, &state.shared.config.log_dir, unsynced)
        .await
        .map_err(|e| format!("syncing the recovered partitions: {e}"))?;
    for ((key, signal), log) in registered.into_iter().zip(logs) {
        state.install_owned(key, log, signal).await;
    }
    Ok(count)
}

/// The body every shard runs (see the module documentation).
pub async fn shard_main<B: Backend>(backend: B, shared: Arc<Shared>) {
    let shard = backend.shard().0;
    let state = Rc::new(ShardState::new(backend.clone(), Arc::clone(&shared)));
    spawn_inbox_loop(&state);
    metrics_endpoint::spawn_snapshot_responder(&state);
    // The schema registry, on the shard that owns `_schemas`-0, once it has replayed.
    let mut registry = None;

    if shard == 0 {
        if let Err(e) =
            groups::offsets_topic::ensure_stored(&state.backend, &state.shared.config).await
        {
            shared.fail(format!("creating the offsets topic: {e}"));
        } else if let Err(e) =
            txns::state_topic::ensure_stored(&state.backend, &state.shared.config).await
        {
            shared.fail(format!("creating the transaction state topic: {e}"));
        } else if let Err(e) =
            schema_registry::topic::ensure_stored(&state.backend, &state.shared.config).await
        {
            shared.fail(format!("creating the {SCHEMAS_TOPIC} topic: {e}"));
        } else if let Err(e) = topics::load_registry(&state).await {
            shared.fail(format!("loading topics: {e}"));
        } else {
            // Durable before any shard's coordinators load, after the barrier (I175).
            match txns::coordinator_epoch::next_epoch(&state.backend, &shared.config.log_dir).await
            {
                Ok(epoch) => {
                    let _ = shared.txn_coordinator_epoch.set(epoch);
                }
                Err(e) => shared.fail(format!("taking the transaction coordinator epoch: {e}")),
            }
        }
    }
    if shared.barrier(&backend, Barrier::TopicsLoaded).await {
        let recovery_started = backend.now();
        // Shard 0 makes every partition directory an earlier run left durable in one sync,
        // so opening a partition need not sync its parent (`log::create_dir_durably`). It
        // runs beside the opens (a directory sync is a journal commit, tens of ms here) and
        // is done before the `PartitionsOpen` barrier, so before anything is served.
        let log_dir_synced = async {
            if shard == 0 {
                backend.sync_dir(&shared.config.log_dir).await
            } else {
                Ok(())
            }
        };
        let (opened, synced) = futures::join!(open_owned_partitions(&state), log_dir_synced);
        if let Err(e) = synced {
            shared.fail(format!("syncing the log directory: {e}"));
        }
        match opened {
            Ok(n) => {
                tracing::info!(shard, partitions = n, "partitions open");
                // Coordinators replay before any shard accepts a connection.
                if let Err(e) = state.load_group_hosts().await {
                    shared.fail(format!("shard {shard}: loading group coordinators: {e}"));
                }
                if let Err(e) = txns::shard_io::load(&state).await {
                    shared.fail(format!(
                        "shard {shard}: loading transaction coordinators: {e}"
                    ));
                }
                // The registry replays `_schemas` before any shard accepts a connection (I58).
                if hosts_schema_registry(&state) {
                    match RegistryHost::load(&state).await {
                        Ok(host) => registry = Some(host),
                        Err(e) => shared.fail(format!("shard {shard}: schema registry: {e}")),
                    }
                }
                let took = backend.now().saturating_duration_since(recovery_started);
                state.metrics.recovered(took);
            }
            Err(e) => shared.fail(format!("shard {shard}: {e}")),
        }
    }
    if shared.barrier(&backend, Barrier::PartitionsOpen).await {
        for index in 0..shared.config.listeners.len() {
            match listen(&state, index).await {
                Ok(listener) => {
                    let accept_state = Rc::clone(&state);
                    backend.spawn_local(accept_loop(accept_state, listener, index));
                }
                Err(e) => {
                    let name = &shared.config.listeners[index].name;
                    shared.fail(format!("shard {shard}: listening ({name}): {e}"));
                    break;
                }
            }
        }
        if shard == 0 {
            if let Err(e) = metrics_endpoint::start(&state).await {
                shared.fail(format!("metrics.listener: {e}"));
            }
        }
        if let Some(host) = registry.take() {
            if let Err(e) = schema_registry::listener::start(&state, host).await {
                shared.fail(format!("schema.registry.listeners: {e}"));
            }
        }
    }
    if shared.barrier(&backend, Barrier::Listening).await {
        spawn_timers(&state);
        if shard == 0 {
            super::jwks_refresh::spawn(&state);
            announce(&state);
        }
    }

    while !shared.shutting_down() {
        backend.sleep(SIGNAL_POLL).await;
    }
    tracing::info!(shard, "shutting down");
    state.begin_stop();
    let drain_deadline = backend.now() + DRAIN_TIMEOUT;
    while state.in_flight() > 0 && backend.now() < drain_deadline {
        backend.sleep(Duration::from_millis(5)).await;
    }
    if state.in_flight() > 0 {
        tracing::warn!(shard, left = state.in_flight(), "requests still in flight");
    }
    shared.barrier(&backend, Barrier::Drained).await;
    if !state.close_all().await {
        shared.unclean.store(true, Ordering::SeqCst);
    }
    shared.barrier(&backend, Barrier::Closed).await;
    if shard == 0 {
        if shared.unclean.load(Ordering::SeqCst) || shared.fatal_error().is_some() {
            tracing::warn!("not writing the clean-shutdown marker: the next start recovers");
        } else if let Err(e) = write_marker(&state).await {
            tracing::error!("writing the clean-shutdown marker: {e}");
        } else {
            tracing::info!("clean shutdown");
        }
    }
}

/// Whether this shard hosts the schema registry: it is on, `_schemas` exists, and this shard
/// owns its partition.
fn hosts_schema_registry<B: Backend>(state: &ShardState<B>) -> bool {
    state.shared.config.schema_registry_listener.is_some()
        && state.shared.topic(SCHEMAS_TOPIC).is_some()
        && state.owner(SCHEMAS_TOPIC, SCHEMAS_PARTITION) == state.shard
}

fn announce<B: Backend>(state: &Rc<ShardState<B>>) {
    use std::io::Write;
    let shared = &state.shared;
    let bound = |index: usize| {
        shared.bound_addrs[index]
            .get()
            .copied()
            .unwrap_or(shared.config.listeners[index].bind)
    };
    for (index, listener) in shared.config.listeners.iter().enumerate() {
        tracing::info!(
            listener = &*listener.name,
            protocol = %listener.protocol,
            "listener on {}",
            bound(index)
        );
    }
    let addr = bound(0);
    tracing::info!(
        backend = state.backend.name(),
        shards = shared.num_shards(),
        "listening on {addr}"
    );
    // One write, so a reader that saw the first line sees the registry's too.
    let mut text = format!(
        "minikafka: listening on {addr} (backend {}, {} shards, data {})\n",
        state.backend.name(),
        shared.num_shards(),
        shared.config.log_dir.display()
    );
    // One line per further listener: the first line stays what scripts wait for.
    for (index, listener) in shared.config.listeners.iter().enumerate().skip(1) {
        text.push_str(&format!(
            "minikafka: listener {} ({}) on {}\n",
            listener.name,
            listener.protocol,
            bound(index)
        ));
    }
    if let Some(registry) = shared.schema_registry_addr.get() {
        text.push_str(&format!(
            "minikafka: schema registry on http://{registry}\n"
        ));
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

async fn write_marker<B: Backend>(state: &ShardState<B>) -> std::io::Result<()> {
    let dir = state.data_dir();
    let path = dir.join(CLEAN_SHUTDOWN_MARKER);
    let file = state.backend.open(&path, OpenMode::ReadWriteCreate).await?;
    file.truncate(0).await?;
    let (written, _) = file.write_at(b"clean\n".to_vec(), 0).await;
    written?;
    file.sync_data().await?;
    file.close().await?;
    state.backend.sync_dir(&dir).await
}

/// Listener `index`: shard 0 binds the configured address first (port 0 picks a free one);
/// the others bind the address it got.
async fn listen<B: Backend>(
    state: &Rc<ShardState<B>>,
    index: usize,
) -> std::io::Result<B::Listener> {
    let shared = &state.shared;
    if state.shard == ShardId(0) {
        let listener = state
            .backend
            .listen(shared.config.listeners[index].bind)
            .await?;
        let addr = listener.local_addr()?;
        let _ = shared.bound_addrs[index].set(addr);
        return Ok(listener);
    }
    loop {
        if let Some(addr) = shared.bound_addrs[index].get() {
            return state.backend.listen(*addr).await;
        }
        if shared.fatal_error().is_some() {
            return Err(std::io::Error::other("shard 0 failed to listen"));
        }
        state.backend.sleep(Duration::from_millis(2)).await;
    }
}

/// Accepts connections on listener `index` (of `config.listeners`) until shutdown.
async fn accept_loop<B: Backend>(state: Rc<ShardState<B>>, listener: B::Listener, index: usize) {
    let shared = Arc::clone(&state.shared);
    // Out of descriptors, accept fails at once until one is freed: back off, log a streak once.
    let mut backoff = AcceptBackoff::default();
    loop {
        let accepted = {
            let accept = std::pin::pin!(listener.accept());
            let stop = std::pin::pin!(state.stop.recv());
            match futures::future::select(accept, stop).await {
                futures::future::Either::Left((accepted, _)) => accepted,
                futures::future::Either::Right(_) => break,
            }
        };
        match accepted {
            Ok((stream, peer)) => {
                let failed = backoff.on_success();
                if failed > 1 {
                    tracing::warn!(failed, "accepting again after failed accepts");
                }
                if !shared.connections.try_acquire() {
                    state.metrics.connection_refused();
                    tracing::warn!(%peer, "max.connections reached; closing the new connection");
                    drop(stream);
                    continue;
                }
                // Connection creation rates (I160): over the broker's or the listener's,
                // this accept loop waits, as Kafka's acceptor does; over the IP's, the
                // connection is closed after the throttle time.
                let wait_ms = shared
                    .quotas
                    .charge_listener_connection(index, state.backend.now());
                // The wait ends at shutdown (I160): the connection is then closed unserved.
                if wait_ms > 0 {
                    tracing::debug!(%peer, wait_ms, "max.connection.creation.rate reached; waiting");
                    if !sleep_or_stop(&state, Duration::from_millis(wait_ms)).await {
                        drop(stream);
                        shared.connections.release();
                        break;
                    }
                }
                let now = state.backend.now();
                if let Some(ms) = shared.quotas.charge_ip_connection(peer.ip(), now) {
                    state.metrics.connection_refused();
                    tracing::debug!(%peer, throttle_ms = ms, "connection_creation_rate of the IP reached; closing the new connection after the throttle time");
                    let st = Rc::clone(&state);
                    state.backend.spawn_local(async move {
                        sleep_or_stop(&st, Duration::from_millis(ms)).await;
                        drop(stream);
                        st.shared.connections.release();
                    });
                    continue;
                }
                state.metrics.connection_accepted();
                tracing::debug!(shard = state.shard.0, %peer, "connection accepted");
                let conn_state = Rc::clone(&state);
                state
                    .backend
                    .spawn_local(connection::serve(conn_state, stream, peer, index));
            }
            Err(e) => {
                let after = backoff.on_failure();
                if let Some(failures) = after.log {
                    tracing::warn!(failures, "accept failed: {e}; backing off");
                }
                if !sleep_or_stop(&state, after.wait).await {
                    break;
                }
            }
        }
    }
    // Once per listener and shard at shutdown: every accept loop has ended, none is left
    // waiting (I160).
    let listener = &*shared.config.listeners[index].name;
    tracing::info!(shard = state.shard.0, listener, "stopped accepting");
}

fn spawn_inbox_loop<B: Backend>(state: &Rc<ShardState<B>>) {
    let inbox = state.shared.inbox_receivers[state.shard.0].clone();
    let st = Rc::clone(state);
    state.backend.spawn_local(async move {
        while let Ok(call) = inbox.recv().await {
            let owner = Rc::clone(&st);
            st.backend
                .spawn_local(async move { (call.run)(&*owner).await });
        }
    });
}

/// How long the interval-flush timer sleeps: the shortest `flush.ms` among this shard's
/// partitions under the interval policy, at most a second.
fn shortest_flush_interval<B: Backend>(state: &ShardState<B>) -> Duration {
    let ms = state
        .owned_logs()
        .iter()
        .filter_map(|(_, _, log)| match log.config().flush {
            crate::log::FlushPolicy::Interval { ms } => Some(ms),
            _ => None,
        })
        .fold(1000, u64::min);
    Duration::from_millis(ms.max(1))
}

fn spawn_timers<B: Backend>(state: &Rc<ShardState<B>>) {
    super::cleaner::spawn(state);
    let config = &state.shared.config;
    let retention_every = Duration::from_millis(config.retention_check_interval_ms);
    let st = Rc::clone(state);
    state.backend.spawn_local(async move {
        while sleep_or_stop(&st, retention_every).await {
            for (topic, p, log) in st.owned_logs() {
                // The cleaner task applies retention to the topics it compacts.
                if groups::offsets_topic::is_internal(&topic)
                    || (st.shared.config.cleaner.enable
                        && super::cleaner::is_compacted(&topic, &log))
                {
                    continue;
                }
                match log.apply_retention(st.backend.wall_clock_ms()).await {
                    Ok(outcome) if !outcome.deleted_base_offsets.is_empty() => tracing::info!(
                        topic,
                        partition = p,
                        segments = outcome.deleted_base_offsets.len(),
                        log_start_offset = outcome.log_start_offset.0,
                        "retention deleted segments"
                    ),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(topic, partition = p, "retention failed: {e}"),
                }
            }
        }
    });
    // `tick` syncs only partitions under the interval policy, when their period has passed;
    // a topic may override the policy, and AlterConfigs may change it at run time, so every
    // shard ticks, at the shortest interval among its partitions now (at most every second).
    let st = Rc::clone(state);
    state.backend.spawn_local(async move {
        while sleep_or_stop(&st, shortest_flush_interval(&st)).await {
            for (topic, p, log) in st.owned_logs() {
                if let Err(e) = log.tick(st.backend.wall_clock_ms()).await {
                    tracing::error!(topic, partition = p, "interval flush failed: {e}");
                }
            }
        }
    });
}
