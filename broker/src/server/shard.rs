//! One shard: the partition logs it owns, its inbox, its timers, its listener, and its part
//! of startup and shutdown.
//!
//! Contract:
//! - A shard is the only writer of the partitions [`super::routing::owner_shard`] gives it
//!   (I1). Their [`PartitionLog`]s are `Rc`s in [`ShardState`], never sent to other threads;
//!   other shards reach them through [`ShardState::call_on`], which ships a `Send` closure
//!   through the owner's inbox and gets the answer back on a oneshot.
//! - After an append becomes visible the owner calls the partition's
//!   [`PartitionSignal::notify_append`] (I7), waking long-polling fetches on any shard.
//! - Startup: shard 0 loads the topic registry; every shard opens its partitions (passing the
//!   previous run's clean-shutdown flag); every shard binds the listener (`SO_REUSEPORT`);
//!   only then are connections accepted.
//! - Shutdown (signal flag polled every [`SIGNAL_POLL`]): stop accepting and reading
//!   requests, answer those in flight (at most [`DRAIN_TIMEOUT`]), then flush and close every
//!   partition; shard 0 writes the clean-shutdown marker when every close succeeded.
//! - Never: holds a `RefCell` borrow across an `.await`.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use minikafka_core::backend::{Backend, BackendFile, BackendListener, OpenMode};
use minikafka_core::types::Offset;
use minikafka_core::wakeup::PartitionSignal;

use super::gate::FifoGate;
use super::shared::{Barrier, Job, Shared};
use super::{connection, routing, topics, CLEAN_SHUTDOWN_MARKER};
use crate::log::segment::partition_dir;
use crate::log::{AppendInfo, LogConfig, LogError, PartitionLog};
use minikafka_core::error_code::ErrorCode;

/// How often every shard looks at the signal flag.
pub const SIGNAL_POLL: Duration = Duration::from_millis(50);
/// Longest wait for in-flight requests at shutdown.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A partition this shard owns.
pub struct OwnedPartition<B: Backend> {
    /// Its log.
    pub log: Rc<PartitionLog<B>>,
    /// Its wakeup signal (the same `Arc` the registry holds).
    pub signal: Arc<PartitionSignal>,
    /// Orders its appends by arrival on this shard (pipelined produces keep their order).
    pub gate: Rc<FifoGate>,
}

impl<B: Backend> Clone for OwnedPartition<B> {
    fn clone(&self) -> Self {
        OwnedPartition {
            log: Rc::clone(&self.log),
            signal: Arc::clone(&self.signal),
            gate: Rc::clone(&self.gate),
        }
    }
}

/// The answer of a partition read.
#[derive(Debug, Clone, Default)]
pub struct PartitionRead {
    /// Kafka error code ([`ErrorCode::NONE`] = none).
    pub error_code: ErrorCode,
    /// The high watermark (-1 when unknown).
    pub high_watermark: i64,
    /// The log start offset (-1 when unknown).
    pub log_start_offset: i64,
    /// Whole record batches.
    pub bytes: Vec<u8>,
}

/// A successful produce to one partition.
#[derive(Debug, Clone, Copy)]
pub struct Appended {
    /// Offset of the batch's first record.
    pub base_offset: i64,
    /// The log start offset after the append.
    pub log_start_offset: i64,
}

/// One shard's state, shared by its tasks through `Rc`.
pub struct ShardState<B: Backend> {
    /// This shard's backend.
    pub backend: B,
    /// State shared with the other shards.
    pub shared: Arc<Shared<B>>,
    /// This shard's index.
    pub shard: usize,
    partitions: RefCell<HashMap<(String, i32), OwnedPartition<B>>>,
    in_flight: Cell<usize>,
    /// Completes (with an error) once shutdown began: every long wait selects on it.
    pub stop: async_channel::Receiver<()>,
    stop_tx: async_channel::Sender<()>,
}

/// Counts one request in flight on a shard until dropped.
pub struct InFlight<B: Backend>(Rc<ShardState<B>>);

impl<B: Backend> Drop for InFlight<B> {
    fn drop(&mut self) {
        let n = self.0.in_flight.get();
        self.0.in_flight.set(n.saturating_sub(1));
    }
}

impl<B: Backend> ShardState<B> {
    /// Counts a request in flight until the returned guard drops.
    pub fn begin_request(self: &Rc<Self>) -> InFlight<B> {
        self.in_flight.set(self.in_flight.get() + 1);
        InFlight(Rc::clone(self))
    }

    /// Whether shutdown began on this shard.
    pub fn stopping(&self) -> bool {
        self.stop_tx.is_closed()
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.shared.config.log_dir.clone()
    }

    /// Runs `f` on shard `target` (directly when it is this shard) and returns its output;
    /// `None` when the target shard no longer takes jobs.
    pub async fn call_on<T, F>(self: &Rc<Self>, target: usize, f: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce(Rc<ShardState<B>>) -> Pin<Box<dyn Future<Output = T>>> + Send + 'static,
    {
        if target == self.shard {
            return Some(f(Rc::clone(self)).await);
        }
        let (tx, rx) = futures::channel::oneshot::channel();
        let job: Job<B> = Box::new(move |state| {
            Box::pin(async move {
                let out = f(state).await;
                let _ = tx.send(out);
            })
        });
        self.shared.inboxes.get(target)?.send(job).await.ok()?;
        rx.await.ok()
    }

    fn owned(&self, topic: &str, partition: i32) -> Option<OwnedPartition<B>> {
        self.partitions
            .borrow()
            .get(&(topic.to_string(), partition))
            .cloned()
    }

    fn owner(&self, topic: &str, partition: i32) -> usize {
        routing::owner_shard(topic, partition, self.shared.num_shards())
    }

    /// Appends `batch` to `topic`/`partition` on its owner and wakes its waiters.
    pub async fn append(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
        batch: Vec<u8>,
    ) -> Result<Appended, ErrorCode> {
        let target = self.owner(&topic, partition);
        self.call_on(target, move |state| {
            Box::pin(async move { state.append_local(&topic, partition, batch).await })
        })
        .await
        .unwrap_or(Err(ErrorCode::UNKNOWN_SERVER_ERROR))
    }

    async fn append_local(
        &self,
        topic: &str,
        partition: i32,
        batch: Vec<u8>,
    ) -> Result<Appended, ErrorCode> {
        let owned = self
            .owned(topic, partition)
            .ok_or(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION)?;
        // Arrival order on this shard decides the order of offsets: the gate is held until
        // this append's write is published (the high watermark moved) or it ended, so
        // appends still share syncs afterwards (group commit).
        let pass = owned.gate.enter().await;
        let before = owned.log.high_watermark();
        let mut pass = Some(pass);
        let mut append = std::pin::pin!(owned.log.append(batch, self.backend.wall_clock_ms()));
        let result = std::future::poll_fn(|cx| {
            let polled = append.as_mut().poll(cx);
            if polled.is_pending() && owned.log.high_watermark() != before {
                pass = None;
            }
            polled
        })
        .await;
        drop(pass);
        match result {
            Ok(AppendInfo { base_offset, .. }) => {
                // The bytes are visible (the log published its high watermark): wake (I7).
                owned.signal.notify_append();
                Ok(Appended {
                    base_offset: base_offset.0,
                    log_start_offset: owned.log.log_start_offset().0,
                })
            }
            Err(e) => Err(log_error_code(topic, partition, "append", &e)),
        }
    }

    /// Reads from `topic`/`partition` on its owner.
    pub async fn read(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
        fetch_offset: i64,
        max_bytes: usize,
    ) -> PartitionRead {
        let target = self.owner(&topic, partition);
        self.call_on(target, move |state| {
            Box::pin(async move {
                state
                    .read_local(&topic, partition, fetch_offset, max_bytes)
                    .await
            })
        })
        .await
        .unwrap_or(PartitionRead {
            error_code: ErrorCode::UNKNOWN_SERVER_ERROR,
            high_watermark: -1,
            log_start_offset: -1,
            bytes: Vec::new(),
        })
    }

    async fn read_local(
        &self,
        topic: &str,
        partition: i32,
        fetch_offset: i64,
        max_bytes: usize,
    ) -> PartitionRead {
        let mut out = PartitionRead {
            error_code: ErrorCode::NONE,
            high_watermark: -1,
            log_start_offset: -1,
            bytes: Vec::new(),
        };
        let Some(owned) = self.owned(topic, partition) else {
            out.error_code = ErrorCode::UNKNOWN_TOPIC_OR_PARTITION;
            return out;
        };
        out.high_watermark = owned.log.high_watermark().0;
        out.log_start_offset = owned.log.log_start_offset().0;
        match owned.log.read(Offset(fetch_offset), max_bytes).await {
            Ok(read) => {
                out.high_watermark = read.high_watermark.0;
                out.log_start_offset = read.log_start_offset.0;
                out.bytes = read.bytes;
            }
            Err(e) => out.error_code = log_error_code(topic, partition, "read", &e),
        }
        out
    }

    /// Answers a ListOffsets query on the owner: `(error code, offset, timestamp)`.
    /// `timestamp` -2 (earliest) and -4 (earliest local) give the log start, -1 (latest)
    /// the high watermark, -3 (max timestamp) [`PartitionLog::max_timestamp_offset`], and
    /// any other value [`PartitionLog::offset_for_timestamp`] (the first record whose
    /// timestamp is at least it); no such record: offset -1, timestamp -1.
    pub async fn list_offset(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
        timestamp: i64,
    ) -> (ErrorCode, i64, i64) {
        let target = self.owner(&topic, partition);
        self.call_on(target, move |state| {
            Box::pin(async move { state.list_offset_local(&topic, partition, timestamp).await })
        })
        .await
        .unwrap_or((ErrorCode::UNKNOWN_SERVER_ERROR, -1, -1))
    }

    async fn list_offset_local(
        &self,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> (ErrorCode, i64, i64) {
        let Some(owned) = self.owned(topic, partition) else {
            return (ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, -1, -1);
        };
        let log = owned.log;
        // Timestamp lookups go through the partition log's time index.
        let found = match timestamp {
            -2 | -4 => return (ErrorCode::NONE, log.log_start_offset().0, -1),
            -1 => return (ErrorCode::NONE, log.high_watermark().0, -1),
            -3 => log.max_timestamp_offset().await,
            ts if ts < 0 => return (ErrorCode::INVALID_REQUEST, -1, -1),
            ts => log.offset_for_timestamp(ts).await,
        };
        match found {
            Ok(Some((offset, found_ms))) => (ErrorCode::NONE, offset.0, found_ms),
            // No record has a timestamp at or after the target (Kafka: -1, -1, no error).
            Ok(None) => (ErrorCode::NONE, -1, -1),
            Err(e) => (log_error_code(topic, partition, "list offsets", &e), -1, -1),
        }
    }

    /// Opens `topic`/`partition` on its owner (creating its directory).
    pub async fn open_partition(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
        config: LogConfig,
        signal: Arc<PartitionSignal>,
        clean_shutdown: bool,
    ) -> Result<(), String> {
        let target = self.owner(&topic, partition);
        self.call_on(target, move |state| {
            Box::pin(async move {
                state
                    .open_local(topic, partition, config, signal, clean_shutdown)
                    .await
            })
        })
        .await
        .unwrap_or_else(|| Err("shard unavailable".into()))
    }

    async fn open_local(
        &self,
        topic: String,
        partition: i32,
        config: LogConfig,
        signal: Arc<PartitionSignal>,
        clean_shutdown: bool,
    ) -> Result<(), String> {
        let dir = partition_dir(&self.shared.config.log_dir, &topic, partition);
        let log = PartitionLog::open(
            self.backend.clone(),
            &dir,
            config,
            clean_shutdown,
            self.backend.wall_clock_ms(),
        )
        .await
        .map_err(|e| format!("opening {}: {e}", dir.display()))?;
        tracing::debug!(shard = self.shard, topic, partition, "partition open");
        let old = self.partitions.borrow_mut().insert(
            (topic, partition),
            OwnedPartition {
                log: Rc::new(log),
                signal,
                gate: Rc::new(FifoGate::new()),
            },
        );
        if let Some(old) = old {
            let _ = old.log.close().await;
        }
        Ok(())
    }

    /// Closes `topic`/`partition` on its owner and deletes its directory.
    pub async fn remove_partition(
        self: &Rc<Self>,
        topic: String,
        partition: i32,
    ) -> Result<(), String> {
        let target = self.owner(&topic, partition);
        self.call_on(target, move |state| {
            Box::pin(async move { state.remove_local(&topic, partition).await })
        })
        .await
        .unwrap_or_else(|| Err("shard unavailable".into()))
    }

    async fn remove_local(&self, topic: &str, partition: i32) -> Result<(), String> {
        let owned = self
            .partitions
            .borrow_mut()
            .remove(&(topic.to_string(), partition));
        if let Some(owned) = owned {
            if let Err(e) = owned.log.close().await {
                tracing::warn!(topic, partition, "closing a deleted partition: {e}");
            }
            owned.signal.notify_append();
        }
        let data_dir = self.data_dir();
        let dir = partition_dir(&data_dir, topic, partition);
        match self.backend.remove_dir_all(&dir).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("removing {}: {e}", dir.display()))
            }
            _ => {}
        }
        self.backend
            .sync_dir(&data_dir)
            .await
            .map_err(|e| format!("syncing {}: {e}", data_dir.display()))
    }

    fn owned_logs(&self) -> Vec<(String, i32, Rc<PartitionLog<B>>)> {
        self.partitions
            .borrow()
            .iter()
            .map(|((t, p), o)| (t.clone(), *p, Rc::clone(&o.log)))
            .collect()
    }

    async fn open_owned_partitions(&self) -> Result<usize, String> {
        let mut opened = 0;
        for topic in self.shared.all_topics() {
            let config = topics::log_config(&self.shared.config, &topic.config)
                .map_err(|e| format!("topic {}: {e}", topic.name))?;
            for (p, signal) in topic.signals.iter().enumerate() {
                let p = p as i32;
                if self.owner(&topic.name, p) != self.shard {
                    continue;
                }
                self.open_local(
                    topic.name.clone(),
                    p,
                    config.clone(),
                    Arc::clone(signal),
                    self.shared.clean_shutdown,
                )
                .await?;
                opened += 1;
            }
        }
        Ok(opened)
    }

    /// Flushes and closes every owned partition; `false` if any failed.
    async fn close_all(&self) -> bool {
        let mut ok = true;
        let logs: Vec<_> = self.partitions.borrow_mut().drain().collect();
        for ((topic, p), owned) in logs {
            if let Err(e) = owned.log.flush().await {
                tracing::error!(topic, partition = p, "flush at shutdown failed: {e}");
                ok = false;
            }
            if let Err(e) = owned.log.close().await {
                tracing::error!(topic, partition = p, "close at shutdown failed: {e}");
                ok = false;
            }
        }
        ok
    }
}

/// Maps a log error to its Kafka code, logging storage failures.
fn log_error_code(topic: &str, partition: i32, what: &str, e: &LogError) -> ErrorCode {
    let code = e.kafka_error_code();
    if code == ErrorCode::KAFKA_STORAGE_ERROR {
        tracing::error!(topic, partition, "{what} failed: {e}");
    } else {
        tracing::debug!(topic, partition, "{what} refused: {e}");
    }
    code
}

/// The body every shard runs (see the module documentation).
pub async fn shard_main<B: Backend>(backend: B, shared: Arc<Shared<B>>) {
    let shard = backend.shard().0;
    let (stop_tx, stop) = async_channel::bounded(1);
    let state = Rc::new(ShardState {
        backend: backend.clone(),
        shared: Arc::clone(&shared),
        shard,
        partitions: RefCell::new(HashMap::new()),
        in_flight: Cell::new(0),
        stop,
        stop_tx,
    });
    spawn_inbox_loop(&state);

    if shard == 0 {
        if let Err(e) = topics::load_registry(&state).await {
            shared.fail(format!("loading topics: {e}"));
        }
    }
    if shared.barrier(&backend, Barrier::TopicsLoaded).await {
        match state.open_owned_partitions().await {
            Ok(n) => tracing::info!(shard, partitions = n, "partitions open"),
            Err(e) => shared.fail(format!("shard {shard}: {e}")),
        }
    }
    if shared.barrier(&backend, Barrier::PartitionsOpen).await {
        match listen(&state).await {
            Ok(listener) => {
                let accept_state = Rc::clone(&state);
                backend.spawn_local(accept_loop(accept_state, listener));
            }
            Err(e) => shared.fail(format!("shard {shard}: listening: {e}")),
        }
    }
    if shared.barrier(&backend, Barrier::Listening).await {
        spawn_timers(&state);
        if shard == 0 {
            announce(&state);
        }
    }

    while !shared.shutting_down() {
        backend.sleep(SIGNAL_POLL).await;
    }
    tracing::info!(shard, "shutting down");
    state.stop_tx.close();
    let drain_deadline = backend.now() + DRAIN_TIMEOUT;
    while state.in_flight.get() > 0 && backend.now() < drain_deadline {
        backend.sleep(Duration::from_millis(5)).await;
    }
    if state.in_flight.get() > 0 {
        tracing::warn!(
            shard,
            left = state.in_flight.get(),
            "requests still in flight"
        );
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

fn announce<B: Backend>(state: &Rc<ShardState<B>>) {
    use std::io::Write;
    let shared = &state.shared;
    let addr = shared
        .bound_addr
        .get()
        .copied()
        .unwrap_or(shared.config.listener);
    tracing::info!(
        backend = state.backend.name(),
        shards = shared.num_shards(),
        "listening on {addr}"
    );
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "minikafka: listening on {addr} (backend {}, {} shards, data {})",
        state.backend.name(),
        shared.num_shards(),
        shared.config.log_dir.display()
    );
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

/// Shard 0 binds the configured address first (port 0 picks a free one); the others bind
/// the address it got.
async fn listen<B: Backend>(state: &Rc<ShardState<B>>) -> std::io::Result<B::Listener> {
    let shared = &state.shared;
    if state.shard == 0 {
        let listener = state.backend.listen(shared.config.listener).await?;
        let addr = listener.local_addr()?;
        let _ = shared.bound_addr.set(addr);
        return Ok(listener);
    }
    loop {
        if let Some(addr) = shared.bound_addr.get() {
            return state.backend.listen(*addr).await;
        }
        if shared.fatal_error().is_some() {
            return Err(std::io::Error::other("shard 0 failed to listen"));
        }
        state.backend.sleep(Duration::from_millis(2)).await;
    }
}

async fn accept_loop<B: Backend>(state: Rc<ShardState<B>>, listener: B::Listener) {
    let shared = Arc::clone(&state.shared);
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
                if !shared.connections.try_acquire() {
                    tracing::warn!(%peer, "max.connections reached; closing the new connection");
                    drop(stream);
                    continue;
                }
                tracing::debug!(shard = state.shard, %peer, "connection accepted");
                let conn_state = Rc::clone(&state);
                state
                    .backend
                    .spawn_local(connection::serve(conn_state, stream, peer));
            }
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                state.backend.sleep(Duration::from_millis(10)).await;
            }
        }
    }
    tracing::debug!(shard = state.shard, "stopped accepting");
}

fn spawn_inbox_loop<B: Backend>(state: &Rc<ShardState<B>>) {
    let inbox = state.shared.inbox_receivers[state.shard].clone();
    let st = Rc::clone(state);
    state.backend.spawn_local(async move {
        while let Ok(job) = inbox.recv().await {
            let fut = job(Rc::clone(&st));
            st.backend.spawn_local(fut);
        }
    });
}

fn spawn_timers<B: Backend>(state: &Rc<ShardState<B>>) {
    let config = &state.shared.config;
    let retention_every = Duration::from_millis(config.retention_check_interval_ms);
    let st = Rc::clone(state);
    state.backend.spawn_local(async move {
        while sleep_or_stop(&st, retention_every).await {
            for (topic, p, log) in st.owned_logs() {
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
    // a topic may override the policy, so every shard ticks.
    let tick_every = match config.flush_policy {
        crate::log::FlushPolicy::Interval { ms } => Duration::from_millis(ms.min(1000)),
        _ => Duration::from_millis(1000),
    };
    let st = Rc::clone(state);
    state.backend.spawn_local(async move {
        while sleep_or_stop(&st, tick_every).await {
            for (topic, p, log) in st.owned_logs() {
                if let Err(e) = log.tick(st.backend.wall_clock_ms()).await {
                    tracing::error!(topic, partition = p, "interval flush failed: {e}");
                }
            }
        }
    });
}

/// Sleeps `duration`; `false` when shutdown began instead.
pub async fn sleep_or_stop<B: Backend>(state: &ShardState<B>, duration: Duration) -> bool {
    let sleep = std::pin::pin!(state.backend.sleep(duration));
    let stop = std::pin::pin!(state.stop.recv());
    matches!(
        futures::future::select(sleep, stop).await,
        futures::future::Either::Left(_)
    )
}

/// The overrides of a topic as a map (helper for handlers).
pub fn topic_overrides(config: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    config
        .iter()
        .filter(|(k, _)| !k.starts_with(super::shared::RESERVED_CONFIG_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
