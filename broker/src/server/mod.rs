//! The Kafka-protocol broker: shards, connections, request handlers.
//!
//! Contract:
//! - Input: a validated [`BrokerConfig`] and a shutdown flag (set by SIGINT/SIGTERM).
//! - Output: [`run`] serves Kafka clients on `listeners` until the flag is set, then shuts
//!   down cleanly (answers in-flight requests, flushes and closes every partition, writes
//!   the clean-shutdown marker) and returns.
//! - Startup reads the clean-shutdown marker, passes it to every `PartitionLog::open`, and
//!   deletes it (syncing the directory) before any write is accepted: a later `kill -9`
//!   is then recovered, not trusted.
//! - Never: shares a partition log between threads (each shard owns its partitions, I1).
//!
//! Modules, a concept each. No two of them import each other, directly or through others
//! (I60, checked for every crate by `core/tests/no_import_cycles.rs`); broadly `lifecycle` →
//! `connection` → `handlers` → `topics`, `config_entries` → `shard` → `groups::host`,
//! `partition_ops`, `shared`, `routing` → `crate::log`.
//!
//! - [`shared`]: state every shard sees (config, topic registry, signals, inboxes).
//! - [`routing`]: which shard owns a partition.
//! - [`lifecycle`]: a shard's startup, listener, inbox loop, timers and shutdown.
//! - [`cleaner`]: the shard's log cleaner task (compacted topics).
//! - [`partition_ops`]: the operations on a partition (one typed method each) and the message
//!   that carries one to the shard owning the partition.
//! - [`shard`]: one shard's state and its partitions' operations (one routing).
//! - [`connection`]: framing, ordered responses, connection limits.
//! - [`data_dir`]: the broker's own files in the data directory (clean-shutdown marker,
//!   cluster id, lock).
//! - [`sasl`]: SASL authentication of a connection on a SASL listener.
//! - [`scram_store`]: the SCRAM credentials, stored in the data directory.
//! - [`session`]: who is on a connection (principal, listener), handed to every handler.
//! - [`read_buffer`]: a connection's bytes read and not yet framed; a frame's rest read straight into it.
//! - [`send_queue`]: send-side back-pressure: what a connection may hold unsent.
//! - [`topics`]: topic creation, deletion, partition addition.
//! - [`alter_configs`]: configuration changes of topics and of the broker, applied live and
//!   stored (AlterConfigs, IncrementalAlterConfigs).
//! - [`broker_loggers`]: the log level of each target (resource type BROKER_LOGGER).
//! - [`dynamic_config`]: the broker settings that may change at run time, and their store.
//! - [`acl_store`]: the ACLs, durable in the data directory, shared by every shard.
//! - [`quota_store`]: the client quota configuration, durable in the data directory.
//! - [`quotas`]: client quotas at run time: the measured rates and the throttle they earn.
//! - [`throttle_gate`]: a connection's mute while a quota throttles it (KIP-219).
//! - [`authz`]: who asks (principal, host) and the authorizer's checks for the handlers.
//! - [`group_configs`]: per-group settings (resource type GROUP), and their store.
//! - [`config_entries`]: effective topic and broker configuration as Kafka config entries.
//! - [`handlers`]: one module per Kafka API.
//! - [`internal_topic`]: creating the internal topics (`__consumer_offsets`,
//!   `__transaction_state`, `_schemas`) and keeping them as created.
//! - [`coordinator_host`]: hosting a coordinator machine on the shard that owns its
//!   internal-topic partition (the drain, the writer, the timer), for groups and transactions.
//! - [`groups`]: consumer groups: the internal offsets topic and the coordinator hosts.
//! - [`txns`]: transactions: the internal `__transaction_state` topic and the transaction
//!   coordinator hosts (marker writes included).
//! - [`jwks_refresh`]: the background refresh of OAUTHBEARER's `http(s):` JWKS (I178), and
//!   the fetch a token's unknown `kid` asks for (I187).
//! - [`metrics_endpoint`]: the Prometheus endpoint: gathers every shard's counters on a scrape.

pub mod acl_store;
pub mod alter_configs;
pub mod authz;
pub mod broker_loggers;
pub mod byte_budget;
pub mod cleaner;
pub mod config_entries;
pub mod connection;
pub mod coordinator_host;
pub mod data_dir;
pub mod dynamic_config;
pub mod group_configs;
pub mod groups;
pub mod handlers;
pub mod internal_topic;
pub mod jwks_refresh;
pub mod keystore_reload;
pub mod lifecycle;
pub mod metrics_endpoint;
pub mod partition_ops;
pub mod quota_store;
pub mod quotas;
pub mod read_buffer;
pub mod request_quota;
pub mod routing;
pub mod sasl;
pub mod schema_registry;
pub mod scram_store;
pub mod send_queue;
pub mod session;
pub mod shard;
pub mod shard_context;
pub mod shared;
pub mod stream_halves;
pub mod throttle_gate;
pub mod tls;
pub mod tls_stream;
pub mod topics;
pub mod txns;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use minikafka_core::backend::Backend;

use crate::config::BrokerConfig;
pub use data_dir::{
    load_or_create_cluster_id, take_clean_shutdown_marker, CLEAN_SHUTDOWN_MARKER, CLUSTER_ID_FILE,
    LOCK_FILE,
};
use shared::Shared;

/// The backend the `minikafka` binary runs on: io_uring on monoio on Linux with the `monoio`
/// feature (the default), smol everywhere else or with `--features portable` (which wins).
#[cfg(all(target_os = "linux", feature = "monoio", not(feature = "portable")))]
pub type DefaultBackend = minikafka_backend_monoio::MonoioBackend;
/// The backend the `minikafka` binary runs on (see the `monoio` variant's documentation).
#[cfg(not(all(target_os = "linux", feature = "monoio", not(feature = "portable"))))]
pub type DefaultBackend = minikafka_backend_portable::PortableBackend;

/// How long startup's probe of the listener address waits for a connection.
pub const LISTEN_PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);
/// How many times startup probes the listener address before refusing to start because
/// something accepts connections there. A broker killed by SIGKILL keeps accepting there for a
/// few milliseconds after it was reaped (io_uring releases the ring's files after the process
/// exits), so a supervisor's immediate restart must not take it for another broker.
pub const LISTEN_PROBE_ATTEMPTS: u32 = 20;
/// How long each successful probe waits on its connection for data (none comes: a live broker
/// waits for a request) before the next probe: the pause between probes, taken without
/// reading a clock or sleeping a thread. `LISTEN_PROBE_ATTEMPTS` of them give ~2 s of patience.
pub const LISTEN_PROBE_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// Why the broker could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The data directory could not be prepared.
    #[error("data directory {dir}: {source}")]
    DataDir {
        /// The directory.
        dir: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Another process holds the data directory's lock.
    #[error("data directory {dir} is in use by another broker")]
    DataDirInUse {
        /// The directory.
        dir: String,
    },
    /// The listener address is taken by another process.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The configured address.
        addr: std::net::SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The shards could not be started (or one panicked).
    #[error("starting shards: {0}")]
    Runtime(std::io::Error),
    /// A shard met a fatal error (recorded in the shared state).
    #[error("{0}")]
    Fatal(String),
}

fn data_dir_error(dir: &Path) -> impl FnOnce(std::io::Error) -> ServerError + '_ {
    move |source| ServerError::DataDir {
        dir: dir.display().to_string(),
        source,
    }
}

/// Fails with [`ServerError::Listen`] when something keeps accepting connections on `addr`
/// through [`LISTEN_PROBE_ATTEMPTS`] probes (port 0 is never probed).
fn refuse_if_accepting(addr: std::net::SocketAddr) -> Result<(), ServerError> {
    if addr.port() != 0 {
        let mut probe = addr;
        if probe.ip().is_unspecified() {
            probe.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let mut attempts = 0;
        while let Ok(mut stream) =
            std::net::TcpStream::connect_timeout(&probe, LISTEN_PROBE_TIMEOUT)
        {
            attempts += 1;
            if attempts >= LISTEN_PROBE_ATTEMPTS {
                return Err(ServerError::Listen {
                    addr,
                    source: std::io::Error::new(
                        std::io::ErrorKind::AddrInUse,
                        "another process is accepting connections there",
                    ),
                });
            }
            // Wait for the lingering listener to go: the read returns after the pause (a live
            // listener sends nothing) or at once when the dead one resets the connection.
            let _ = stream.set_read_timeout(Some(LISTEN_PROBE_PAUSE));
            let _ = std::io::Read::read(&mut stream, &mut [0u8; 1]);
        }
    }
    Ok(())
}

/// Runs the broker on backend `B` until `shutdown` is set; see the module documentation.
pub fn run<B: Backend>(config: BrokerConfig, shutdown: Arc<AtomicBool>) -> Result<(), ServerError> {
    let dir = config.log_dir.clone();
    std::fs::create_dir_all(&dir).map_err(data_dir_error(&dir))?;
    // Held (open and locked) until `run` returns: two brokers on one directory would both
    // write its partitions.
    let lock = std::fs::File::create(dir.join(LOCK_FILE)).map_err(data_dir_error(&dir))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(ServerError::DataDirInUse {
                dir: dir.display().to_string(),
            })
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(data_dir_error(&dir)(e)),
    }
    // The shards bind with SO_REUSEPORT, which would silently share the port with another
    // broker of the same user: refuse to start if something already accepts connections
    // there. (A plain bind would be the wrong probe: after a `kill -9` the old broker's
    // connections linger with SO_REUSEPORT set and make it fail, while ours may share.)
    // Only a listener that is still accepting after LISTEN_PROBE_ATTEMPTS probes counts: a killed
    // broker's lingers for milliseconds.
    for listener in &config.listeners {
        refuse_if_accepting(listener.bind)?;
    }
    if let Some(metrics) = config.metrics_listener {
        // The metrics listener binds with SO_REUSEPORT too: two brokers sharing it would
        // answer scrapes at random.
        refuse_if_accepting(metrics)?;
    }
    let clean_shutdown = take_clean_shutdown_marker(&dir).map_err(data_dir_error(&dir))?;
    let cluster_id = load_or_create_cluster_id(&dir).map_err(data_dir_error(&dir))?;
    let served = serve::<B>(config, shutdown, cluster_id, clean_shutdown);
    drop(lock);
    served
}

/// Runs the broker's shards on backend `B` until `shutdown` is set, with the data directory
/// already prepared: `cluster_id` loaded and the clean-shutdown marker taken (`clean_shutdown`
/// says whether it was there). [`run`] prepares the directory on the host file system first;
/// a simulated backend, whose disk is not the host's, prepares it on its own disk and calls
/// this directly.
pub fn serve<B: Backend>(
    config: BrokerConfig,
    shutdown: Arc<AtomicBool>,
    cluster_id: String,
    clean_shutdown: bool,
) -> Result<(), ServerError> {
    tracing::info!(
        shards = config.num_shards,
        clean_shutdown,
        data = %config.log_dir.display(),
        "starting"
    );
    let num_shards = config.num_shards;
    let shared = Arc::new(Shared::new(
        config,
        handlers::served_versions(),
        cluster_id,
        clean_shutdown,
        shutdown,
    ));
    let for_shards = Arc::clone(&shared);
    B::run_shards_for_data(num_shards, &shared.config.log_dir, move |backend| {
        lifecycle::shard_main(backend, Arc::clone(&for_shards))
    })
    .map_err(ServerError::Runtime)?;
    match shared.fatal_error() {
        Some(e) => Err(ServerError::Fatal(e)),
        None => Ok(()),
    }
}
