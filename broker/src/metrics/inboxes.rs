//! Each shard's scrape-request channel: how a scrape (`server::metrics_endpoint`) asks every
//! shard for its [`ShardSnapshot`]. Data only, held in the state every shard shares; its own
//! module so that shared state does not import the endpoint that serves the page.

use std::net::SocketAddr;
use std::sync::OnceLock;

use futures::channel::oneshot;

use super::snapshot::ShardSnapshot;

/// A scrape's question to one shard: where to send its snapshot.
pub type SnapshotRequest = oneshot::Sender<ShardSnapshot>;

/// Each shard's scrape-request channel, and the endpoint's bound address.
pub struct MetricsInboxes {
    senders: Vec<async_channel::Sender<SnapshotRequest>>,
    receivers: Vec<async_channel::Receiver<SnapshotRequest>>,
    /// The address the endpoint listens on, once it does.
    pub bound_addr: OnceLock<SocketAddr>,
}

impl MetricsInboxes {
    /// Channels for `shards` shards (a few requests each: scrapes past that are refused).
    pub fn new(shards: usize) -> Self {
        let (senders, receivers) = (0..shards).map(|_| async_channel::bounded(4)).unzip();
        MetricsInboxes {
            senders,
            receivers,
            bound_addr: OnceLock::new(),
        }
    }

    /// Where shard `shard` takes scrape requests (`None` past the shard count).
    pub fn receiver(&self, shard: usize) -> Option<async_channel::Receiver<SnapshotRequest>> {
        self.receivers.get(shard).cloned()
    }

    /// Where to ask each shard, index = shard.
    pub fn senders(&self) -> &[async_channel::Sender<SnapshotRequest>] {
        &self.senders
    }
}
