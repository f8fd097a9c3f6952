//! Leaders on the target: which broker leads each partition, so that the mirror reads its
//! progress and the stable offsets from the leaders. (The mirror's producer follows the
//! leaders itself and survives lost connections, I162, I163, I182; a leader that moves
//! between this lookup and a read answers NOT_LEADER_OR_FOLLOWER and the session restarts and
//! asks again.)

use std::collections::BTreeMap;

use super::Stream as TcpStream;
use kafka_protocol::ResponseError;

use crate::connection::Connection;
use crate::consumer::TopicPartition;
use crate::error::{Error, Result};

/// Who leads what on the target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Leaders {
    /// Broker id to `host:port`, as the target advertises it.
    pub brokers: BTreeMap<i32, String>,
    /// Each partition's leader.
    pub leader: BTreeMap<TopicPartition, i32>,
}

impl Leaders {
    /// `host:port` of `tp`'s leader, or `fallback` when Metadata named none.
    pub fn addr_of(&self, tp: &TopicPartition, fallback: &str) -> String {
        self.leader
            .get(tp)
            .and_then(|node| self.brokers.get(node))
            .cloned()
            .unwrap_or_else(|| fallback.to_string())
    }
}

/// Asks the target for the leaders of every partition of `topics`; a partition without a
/// leader is LEADER_NOT_AVAILABLE (retriable: the session restarts).
pub async fn leaders(conn: &mut Connection<TcpStream>, topics: &[&str]) -> Result<Leaders> {
    let request = crate::admin::metadata_request(Some(topics), false);
    let response = conn.request(&request).await?;
    let mut out = Leaders::default();
    for b in response.brokers {
        out.brokers
            .insert(b.node_id.0, format!("{}:{}", b.host, b.port));
    }
    for t in response.topics {
        let name = t.name.map(|n| n.0.to_string()).unwrap_or_default();
        Error::check(t.error_code, || format!("metadata of {name} on the target"))?;
        for p in t.partitions {
            let tp = TopicPartition::new(name.as_str(), p.partition_index);
            if p.leader_id.0 < 0 || !out.brokers.contains_key(&p.leader_id.0) {
                return Err(Error::Kafka {
                    error: ResponseError::LeaderNotAvailable,
                    code: ResponseError::LeaderNotAvailable.code(),
                    context: format!("{tp} has no leader on the target"),
                });
            }
            out.leader.insert(tp, p.leader_id.0);
        }
    }
    Ok(out)
}
