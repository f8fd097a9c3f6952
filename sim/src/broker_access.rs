//! How the simulated clients reach the broker: its address, a connection (retried while the
//! broker starts), and the topics every run keeps. Shared by the workload and the group
//! members (`groups`), which both depend on it and not on each other's modules.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::time::Duration;

use minikafka_backend_sim::{SimBackend, SimStream};
use minikafka_client::tls::{MaybeTls, TlsConnector};
use minikafka_client::{Connection, ConnectionConfig};
use minikafka_core::backend::Backend;

use crate::model::TopicPartition;

/// A topic the workload keeps: name, partition count, configuration overrides.
pub type TopicSpec = (&'static str, i32, &'static [(&'static str, &'static str)]);

/// The topics every run keeps, with their partition counts and configuration overrides.
/// `logs` is under retention (small segments, few bytes kept): its old segments go.
pub const TOPICS: [TopicSpec; 3] = [
    ("events", 2, &[]),
    ("orders", 3, &[]),
    (
        RETAINED_TOPIC,
        2,
        &[("segment.bytes", "1024"), ("retention.bytes", "2048")],
    ),
];

/// The topic only transactional producers write (`txns`), created when a run has them
/// (`SimOptions::txn_producers`), so runs without them keep their schedules.
pub const TXN_TOPIC: TopicSpec = ("txns", 3, &[]);

/// The partitions of [`TXN_TOPIC`].
pub(crate) fn txn_partitions() -> Vec<TopicPartition> {
    (0..TXN_TOPIC.1)
        .map(|p| (TXN_TOPIC.0.to_string(), p))
        .collect()
}

/// The topic under retention.
pub const RETAINED_TOPIC: &str = "logs";

/// The address the simulated broker listens on.
fn broker_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 9092))
}

/// A simulated client's connection: plain, or TLS when the run's listener speaks SSL.
pub(crate) type SimConnection = Connection<MaybeTls<SimStream>>;

thread_local! {
    /// The handshake the run's clients make (`SimOptions::tls`), or none for PLAINTEXT.
    static TLS: RefCell<Option<TlsConnector>> = const { RefCell::new(None) };
    /// TLS handshakes completed since [`set_tls`].
    static HANDSHAKES: Cell<u64> = const { Cell::new(0) };
}

/// Sets how this thread's simulated clients connect, for the run about to start, and counts
/// its handshakes from zero.
pub(crate) fn set_tls(connector: Option<TlsConnector>) {
    TLS.with(|t| *t.borrow_mut() = connector);
    HANDSHAKES.with(|h| h.set(0));
}

/// TLS handshakes the run's clients completed.
pub(crate) fn tls_handshakes() -> u64 {
    HANDSHAKES.with(Cell::get)
}

/// A connection to the broker, retried for a while; `None` when it stays unreachable.
pub(crate) async fn connect(backend: &SimBackend) -> Option<SimConnection> {
    let tls = TLS.with(|t| t.borrow().clone());
    for _ in 0..50 {
        if let Ok(stream) = backend.connect(broker_addr()).await {
            let stream = match &tls {
                None => Some(MaybeTls::Plain(stream)),
                // The certificate names 127.0.0.1, the address connected to.
                Some(connector) => {
                    let tls = connector.connect("127.0.0.1", stream).await.ok();
                    if tls.is_some() {
                        HANDSHAKES.with(|h| h.set(h.get() + 1));
                    }
                    tls
                }
            };
            let config = ConnectionConfig {
                client_id: "mk-sim".into(),
                ..ConnectionConfig::default()
            };
            if let Some(stream) = stream {
                if let Ok(conn) = Connection::connect(stream, config).await {
                    return Some(conn);
                }
            }
        }
        backend.sleep(Duration::from_millis(20)).await;
    }
    None
}

/// Every partition of [`TOPICS`].
pub(crate) fn all_partitions() -> Vec<TopicPartition> {
    TOPICS
        .iter()
        .flat_map(|(t, n, _)| (0..*n).map(move |p| (t.to_string(), p)))
        .collect()
}

/// The partitions the groups divide among their members.
pub(crate) fn group_partitions() -> Vec<TopicPartition> {
    all_partitions()
}
