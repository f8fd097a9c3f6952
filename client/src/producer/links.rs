//! The producer's connections to the brokers of a cluster: the bootstrap connection it was
//! built on and, when a [`Connector`] was given, one connection per broker it must reach (each
//! partition's leader for Produce, the transaction coordinator, the group coordinator), found
//! with Metadata and FindCoordinator and opened on first use (I162).
//!
//! Contract:
//! - Without a connector ("one node"), every request goes over the bootstrap connection, which
//!   must lead every partition and be both coordinators (the behaviour before I162).
//! - With one ("routed"), Metadata answers (asked on the bootstrap connection) say each
//!   partition's leader and every broker's address, FindCoordinator answers say the
//!   coordinators'; both are cached until [`Links::forget_leaders`] /
//!   [`Links::forget_coordinator`], which the driver calls on NOT_LEADER_OR_FOLLOWER,
//!   LEADER_NOT_AVAILABLE and NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE.
//! - A lost connection (reset, closed, refused) on one node ends the producer's driver. A routed
//!   producer instead forgets it ([`Links::lose`]) and opens a new one when the broker is next
//!   needed; each connection has a generation, so a request sent over a lost one is known as
//!   lost even after its replacement opened (the driver re-sends its batches, I182). A lost
//!   bootstrap connection is replaced by one to a broker the last Metadata named.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;

use futures_io::{AsyncRead, AsyncWrite};
use kafka_protocol::protocol::Request;
use kafka_protocol::ResponseError;

use crate::admin::metadata_request;
use crate::connection::Connection;
use crate::error::{Error, Result};
use crate::group::admin::find_coordinator_of;

/// Opens (and negotiates) a connection to a broker's `host:port`, with the same settings as
/// the bootstrap connection (TLS, SASL). Boxed so the driver's type does not change; `Send` so
/// a driver over `Send` streams can still be spawned on a work-stealing executor.
pub type Connector<S> =
    Box<dyn FnMut(String) -> Pin<Box<dyn Future<Output = Result<Connection<S>>> + Send>> + Send>;

/// Which connection a request goes over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Link {
    /// The connection the producer was built on.
    Bootstrap,
    /// The connection to this broker id (routed producers only).
    Node(i32),
}

/// The producer's broker connections and what it knows of the cluster.
pub(super) struct Links<S> {
    bootstrap: Connection<S>,
    connector: Option<Connector<S>>,
    /// Open connections by broker id, each with its generation.
    nodes: BTreeMap<i32, (u64, Connection<S>)>,
    /// The generation of the bootstrap connection, and the last one given out.
    bootstrap_generation: u64,
    last_generation: u64,
    /// Broker id to `host:port`, from Metadata and FindCoordinator answers.
    addrs: BTreeMap<i32, String>,
    /// Each partition's leader by topic and partition, from the last Metadata answer that
    /// named it (looked up by `&str`: the dispatch loop asks once per ready batch).
    leaders: HashMap<String, HashMap<i32, i32>>,
    /// (key type, key) to the coordinator's broker id.
    coordinators: BTreeMap<(i8, String), i32>,
}

fn not_available(context: String) -> Error {
    Error::Kafka {
        error: ResponseError::LeaderNotAvailable,
        code: ResponseError::LeaderNotAvailable.code(),
        context,
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Links<S> {
    pub(super) fn new(bootstrap: Connection<S>, connector: Option<Connector<S>>) -> Self {
        Links {
            bootstrap,
            connector,
            nodes: BTreeMap::new(),
            bootstrap_generation: 0,
            last_generation: 0,
            addrs: BTreeMap::new(),
            leaders: HashMap::new(),
            coordinators: BTreeMap::new(),
        }
    }

    /// True when requests go to the broker that should answer them (a connector was given).
    pub(super) fn routed(&self) -> bool {
        self.connector.is_some()
    }

    /// The bootstrap connection (Metadata and FindCoordinator; everything on one node).
    pub(super) fn bootstrap(&mut self) -> &mut Connection<S> {
        &mut self.bootstrap
    }

    /// The connection of `link`, which must be open (links come from this type's lookups).
    pub(super) fn conn(&mut self, link: Link) -> Result<&mut Connection<S>> {
        match link {
            Link::Bootstrap => Ok(&mut self.bootstrap),
            Link::Node(id) => self
                .nodes
                .get_mut(&id)
                .map(|(_, conn)| conn)
                .ok_or_else(|| Error::Protocol(format!("no connection to broker {id}"))),
        }
    }

    /// The generation of `link`'s open connection (`None`: none is open): a request sent at
    /// another generation went over a connection since lost.
    pub(super) fn generation(&self, link: Link) -> Option<u64> {
        match link {
            Link::Bootstrap => Some(self.bootstrap_generation),
            Link::Node(id) => self.nodes.get(&id).map(|(g, _)| *g),
        }
    }

    /// `link`'s connection at `generation` was lost: forget it (routed producers), so the next
    /// request to that broker opens a new one. The bootstrap is replaced when next asked.
    pub(super) fn lose(&mut self, link: Link, generation: u64) {
        if let Link::Node(id) = link {
            if self.generation(link) == Some(generation) {
                tracing::debug!(broker = id, "connection lost; a new one opens when needed");
                self.nodes.remove(&id);
            }
        }
    }

    /// Sends `request` over `link` and waits for the answer. A routed producer forgets a
    /// connection lost on the way (the caller decides whether to try again).
    pub(super) async fn request<Req: Request>(
        &mut self,
        link: Link,
        request: &Req,
    ) -> Result<Req::Response> {
        if link == Link::Bootstrap {
            return self.bootstrap_request(request).await;
        }
        let generation = self.generation(link);
        let result = self.conn(link)?.request(request).await;
        if let (Err(err), Some(generation)) = (&result, generation) {
            if self.routed() && err.is_connection_lost() {
                self.lose(link, generation);
            }
        }
        result
    }

    /// Sends `request` to the bootstrap broker; a routed producer whose bootstrap connection
    /// was lost replaces it with one to a broker the last Metadata named and asks once more.
    pub(super) async fn bootstrap_request<Req: Request>(
        &mut self,
        request: &Req,
    ) -> Result<Req::Response> {
        match self.bootstrap.request(request).await {
            Err(err) if self.routed() && err.is_connection_lost() => {
                self.reopen_bootstrap(err).await?;
                self.bootstrap.request(request).await
            }
            answer => answer,
        }
    }

    /// Replaces the lost bootstrap connection (`lost` says why) with a new one to the first
    /// known broker that accepts it; `lost` comes back when none does.
    async fn reopen_bootstrap(&mut self, lost: Error) -> Result<()> {
        let addrs: Vec<String> = self.addrs.values().cloned().collect();
        let Some(connector) = self.connector.as_mut() else {
            return Err(lost);
        };
        let mut last = lost;
        for addr in addrs {
            match connector(addr.clone()).await {
                Ok(conn) => {
                    tracing::debug!(%addr, "bootstrap connection lost; asking {addr} instead");
                    self.bootstrap = conn;
                    self.last_generation += 1;
                    self.bootstrap_generation = self.last_generation;
                    return Ok(());
                }
                Err(err) => last = err,
            }
        }
        Err(last)
    }

    /// Opens the connection to broker `id` unless it is open.
    async fn open(&mut self, id: i32) -> Result<Link> {
        if !self.nodes.contains_key(&id) {
            let addr = self
                .addrs
                .get(&id)
                .cloned()
                .ok_or_else(|| not_available(format!("broker {id} has no known address")))?;
            let connector = self
                .connector
                .as_mut()
                .ok_or_else(|| Error::IllegalState("a one-node producer opens nothing".into()))?;
            let conn = connector(addr).await?;
            self.last_generation += 1;
            self.nodes.insert(id, (self.last_generation, conn));
        }
        Ok(Link::Node(id))
    }

    /// Remembers broker `id` at `addr`; a broker that moved loses its old connection.
    fn learn(&mut self, id: i32, addr: String) {
        if self.addrs.get(&id) != Some(&addr) {
            self.nodes.remove(&id);
            self.addrs.insert(id, addr);
        }
    }

    /// Asks the bootstrap broker for `topics`' metadata, remembers the brokers and leaders, and
    /// returns each topic's partition count (an error for a topic that has an error).
    pub(super) async fn refresh_metadata(
        &mut self,
        topics: &[&str],
        allow_auto_topic_creation: bool,
    ) -> Result<Vec<i32>> {
        let request = metadata_request(Some(topics), allow_auto_topic_creation);
        let response = self.bootstrap_request(&request).await?;
        for b in &response.brokers {
            self.learn(b.node_id.0, format!("{}:{}", b.host, b.port));
        }
        let mut counts = Vec::with_capacity(topics.len());
        for topic in topics {
            let t = response
                .topics
                .iter()
                .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == *topic))
                .ok_or_else(|| Error::UnknownTopicOrPartition(topic.to_string()))?;
            Error::check(t.error_code, || format!("metadata for topic {topic}"))?;
            if t.partitions.is_empty() {
                return Err(Error::UnknownTopicOrPartition(topic.to_string()));
            }
            let leaders = self.leaders.entry(topic.to_string()).or_default();
            leaders.clear();
            for p in &t.partitions {
                if p.leader_id.0 >= 0 {
                    leaders.insert(p.partition_index, p.leader_id.0);
                }
            }
            counts.push(t.partitions.len() as i32);
        }
        Ok(counts)
    }

    /// The link to `topic`/`partition`'s leader, opening it if needed: the bootstrap on one
    /// node; `None` when the last Metadata named no leader (ask again).
    pub(super) async fn leader(&mut self, topic: &str, partition: i32) -> Result<Option<Link>> {
        if !self.routed() {
            return Ok(Some(Link::Bootstrap));
        }
        match self.leader_id(topic, partition) {
            Some(id) => self.open(id).await.map(Some),
            None => Ok(None),
        }
    }

    /// The leader already opened for `topic`/`partition`, if any (the bootstrap on one node).
    pub(super) fn leader_now(&self, topic: &str, partition: i32) -> Option<Link> {
        if !self.routed() {
            return Some(Link::Bootstrap);
        }
        let id = self.leader_id(topic, partition)?;
        self.nodes.contains_key(&id).then_some(Link::Node(id))
    }

    fn leader_id(&self, topic: &str, partition: i32) -> Option<i32> {
        self.leaders.get(topic)?.get(&partition).copied()
    }

    /// Forgets every leader: the next dispatch asks Metadata again.
    pub(super) fn forget_leaders(&mut self) {
        self.leaders.clear();
    }

    /// Looks the coordinator of `key` (`key_type` 0 group, 1 transactional id) up on the
    /// bootstrap broker and returns its link (the bootstrap on one node, which must be it).
    pub(super) async fn find_coordinator(&mut self, key: &str, key_type: i8) -> Result<Link> {
        let found = match find_coordinator_of(&mut self.bootstrap, key, key_type).await {
            Err(err) if self.routed() && err.is_connection_lost() => {
                self.reopen_bootstrap(err).await?;
                find_coordinator_of(&mut self.bootstrap, key, key_type).await?
            }
            found => found?,
        };
        if !self.routed() {
            return Ok(Link::Bootstrap);
        }
        self.learn(found.node_id, format!("{}:{}", found.host, found.port));
        self.coordinators
            .insert((key_type, key.to_string()), found.node_id);
        self.open(found.node_id).await
    }

    /// The coordinator of `key` as last found (the bootstrap on one node), or `None` when it
    /// must be looked up.
    pub(super) async fn coordinator(&mut self, key: &str, key_type: i8) -> Result<Option<Link>> {
        if !self.routed() {
            return Ok(Some(Link::Bootstrap));
        }
        match self.coordinators.get(&(key_type, key.to_string())) {
            Some(&id) => self.open(id).await.map(Some),
            None => Ok(None),
        }
    }

    /// The coordinator of `key` moved: look it up again before the next request.
    pub(super) fn forget_coordinator(&mut self, key: &str, key_type: i8) {
        self.coordinators.remove(&(key_type, key.to_string()));
    }
}
