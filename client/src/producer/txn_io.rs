//! The transactional requests a producer sends to its coordinators (InitProducerId,
//! AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn), each retried after
//! `txn_retry_backoff` while the coordinator answers a retriable error
//! ([`is_retriable_coordinator_code`]), for at most `max_block`. NOT_COORDINATOR and
//! COORDINATOR_NOT_AVAILABLE look the coordinator up again first. On a routed producer a lost
//! connection is retried the same way over a new one (I182): each of these requests may be
//! asked twice (EndTxn v4 and below answers a repeated commit or abort of the transaction just
//! completed with success). Errors come back raw: the caller classifies them through
//! [`TxnManager`].

use std::collections::BTreeMap;
use std::time::Instant;

use futures_io::{AsyncRead, AsyncWrite};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId,
    InitProducerIdRequest, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use minikafka_core::types::Offset;

use super::links::{Link, Links};
use super::txn::{is_retriable_coordinator_code, ConsumerGroupMetadata, TxnManager};
use super::ProducerConfig;
use crate::consumer::TopicPartition;
use crate::error::{Error, Result};
use crate::runtime::Runtime;

fn txn_id(m: &TxnManager) -> TransactionalId {
    TransactionalId(StrBytes::from_string(m.transactional_id().to_string()))
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// Retries of one transactional call: a backoff between tries and a deadline for them all.
pub(super) struct Retry<'a, R> {
    runtime: &'a R,
    config: &'a ProducerConfig,
    deadline: Instant,
}

impl<'a, R: Runtime> Retry<'a, R> {
    pub(super) fn new(runtime: &'a R, config: &'a ProducerConfig) -> Self {
        Retry {
            runtime,
            config,
            deadline: Instant::now() + config.max_block,
        }
    }

    /// Handles the error `code` of a try: `Ok(true)` to try again (after the backoff and, for a
    /// moved coordinator, a new lookup of `key`), `Ok(false)` when `code` is 0, the error
    /// otherwise or once `max_block` has passed.
    async fn again<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        links: &mut Links<S>,
        code: i16,
        key: (&str, i8),
        context: impl Fn() -> String,
    ) -> Result<bool> {
        if code == 0 {
            return Ok(false);
        }
        let err = Error::check(code, &context)
            .err()
            .unwrap_or(Error::Protocol(context()));
        if !is_retriable_coordinator_code(code) || Instant::now() >= self.deadline {
            return Err(err);
        }
        tracing::debug!(%err, "transactional request retrying");
        self.runtime.sleep(self.config.txn_retry_backoff).await;
        if code == ResponseError::NotCoordinator.code()
            || code == ResponseError::CoordinatorNotAvailable.code()
        {
            if links.routed() {
                // The next try looks it up again (I162).
                links.forget_coordinator(key.0, key.1);
            } else {
                self.find_coordinator(links, key.0, key.1).await?;
            }
        }
        Ok(true)
    }

    /// Looks the coordinator of `key` up until it is known and returns its link (on one node
    /// the bootstrap broker, which must be that coordinator).
    pub(super) async fn find_coordinator<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        links: &mut Links<S>,
        key: &str,
        key_type: i8,
    ) -> Result<Link> {
        loop {
            match links.find_coordinator(key, key_type).await {
                Ok(link) => return Ok(link),
                Err(err)
                    if err.kafka_code().is_some_and(is_retriable_coordinator_code)
                        && Instant::now() < self.deadline =>
                {
                    self.runtime.sleep(self.config.txn_retry_backoff).await;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// The coordinator of `key`: as last found, or looked up now; a routed producer that cannot
    /// connect to it tries again after the backoff until `max_block`.
    async fn coordinator<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        links: &mut Links<S>,
        key: &str,
        key_type: i8,
    ) -> Result<Link> {
        loop {
            let found = match links.coordinator(key, key_type).await {
                Ok(Some(link)) => Ok(link),
                Ok(None) => self.find_coordinator(links, key, key_type).await,
                Err(err) => Err(err),
            };
            match found {
                Err(err) => self.lost(links, err, (key, key_type)).await?,
                found => return found,
            }
        }
    }

    /// A try of a request to the coordinator of `key` failed with `err`: `Ok` to try again
    /// (routed producers, a lost connection, before `max_block`: after the backoff, the
    /// coordinator looked up again), `err` otherwise (I182).
    async fn lost<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        links: &mut Links<S>,
        err: Error,
        key: (&str, i8),
    ) -> Result<()> {
        if !links.routed() || !err.is_connection_lost() || Instant::now() >= self.deadline {
            return Err(err);
        }
        tracing::debug!(%err, "transactional request retrying over a new connection");
        self.runtime.sleep(self.config.txn_retry_backoff).await;
        links.forget_coordinator(key.0, key.1);
        Ok(())
    }
}

/// InitProducerId for the transactional id: a new producer id and epoch, or (KIP-360, `bump`)
/// the current id with the next epoch. Returns `(producer_id, epoch)`.
pub(super) async fn init_producer_id<S: AsyncRead + AsyncWrite + Unpin, R: Runtime>(
    links: &mut Links<S>,
    retry: &Retry<'_, R>,
    m: &TxnManager,
    bump: bool,
) -> Result<(i64, i16)> {
    let (mut pid, mut epoch) = if bump { m.producer() } else { (-1, -1) };
    let link = retry.coordinator(links, m.transactional_id(), 1).await?;
    if bump && links.conn(link)?.version_of::<InitProducerIdRequest>()? < 3 {
        // Without KIP-360 the bump is a fresh InitProducerId, which fences nobody but us.
        (pid, epoch) = (-1, -1);
    }
    loop {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(txn_id(m)))
            .with_transaction_timeout_ms(retry.config.transaction_timeout_ms)
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch);
        let link = retry.coordinator(links, m.transactional_id(), 1).await?;
        let response = match links.request(link, &request).await {
            Ok(response) => response,
            Err(err) => {
                retry.lost(links, err, (m.transactional_id(), 1)).await?;
                continue;
            }
        };
        let context = || format!("InitProducerId for {}", m.transactional_id());
        if !retry
            .again(
                links,
                response.error_code,
                (m.transactional_id(), 1),
                context,
            )
            .await?
        {
            return Ok((response.producer_id.0, response.producer_epoch));
        }
        if bump {
            (pid, epoch) = m.producer();
        }
    }
}

/// AddPartitionsToTxn for `partitions`; fails with the first partition's error.
pub(super) async fn add_partitions<S: AsyncRead + AsyncWrite + Unpin, R: Runtime>(
    links: &mut Links<S>,
    retry: &Retry<'_, R>,
    m: &TxnManager,
    partitions: &[(String, i32)],
) -> Result<()> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        by_topic.entry(t).or_default().push(*p);
    }
    let (pid, epoch) = m.producer();
    loop {
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(txn_id(m))
            .with_v3_and_below_producer_id(ProducerId(pid))
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(
                by_topic
                    .iter()
                    .map(|(t, ps)| {
                        AddPartitionsToTxnTopic::default()
                            .with_name(topic_name(t))
                            .with_partitions(ps.clone())
                    })
                    .collect(),
            );
        let link = retry.coordinator(links, m.transactional_id(), 1).await?;
        let response = match links.request(link, &request).await {
            Ok(response) => response,
            Err(err) => {
                retry.lost(links, err, (m.transactional_id(), 1)).await?;
                continue;
            }
        };
        // The first real failure; OPERATION_NOT_ATTEMPTED only says another partition failed.
        let mut failed = (0i16, String::new());
        for t in &response.results_by_topic_v3_and_below {
            for p in &t.results_by_partition {
                let code = p.partition_error_code;
                if code != 0
                    && (failed.0 == 0 || failed.0 == ResponseError::OperationNotAttempted.code())
                {
                    failed = (code, format!("{}-{}", t.name.0.as_str(), p.partition_index));
                }
            }
        }
        let (code, where_) = failed;
        let context = || format!("AddPartitionsToTxn {where_}");
        if !retry
            .again(links, code, (m.transactional_id(), 1), context)
            .await?
        {
            return Ok(());
        }
    }
}

/// AddOffsetsToTxn for `group`, then TxnOffsetCommit of `offsets` to the group coordinator.
pub(super) async fn send_offsets<S: AsyncRead + AsyncWrite + Unpin, R: Runtime>(
    links: &mut Links<S>,
    retry: &Retry<'_, R>,
    m: &mut TxnManager,
    offsets: &BTreeMap<TopicPartition, Offset>,
    group: &ConsumerGroupMetadata,
) -> Result<()> {
    let (pid, epoch) = m.producer();
    let group_id = GroupId(StrBytes::from_string(group.group_id.clone()));
    loop {
        let request = AddOffsetsToTxnRequest::default()
            .with_transactional_id(txn_id(m))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_group_id(group_id.clone());
        let link = retry.coordinator(links, m.transactional_id(), 1).await?;
        let response = match links.request(link, &request).await {
            Ok(response) => response,
            Err(err) => {
                retry.lost(links, err, (m.transactional_id(), 1)).await?;
                continue;
            }
        };
        let context = || format!("AddOffsetsToTxn for group {}", group.group_id);
        if !retry
            .again(
                links,
                response.error_code,
                (m.transactional_id(), 1),
                context,
            )
            .await?
        {
            break;
        }
    }
    m.on_offsets_added();
    retry.find_coordinator(links, &group.group_id, 0).await?;
    let mut by_topic: BTreeMap<&str, Vec<TxnOffsetCommitRequestPartition>> = BTreeMap::new();
    for (tp, offset) in offsets {
        by_topic.entry(&tp.topic).or_default().push(
            TxnOffsetCommitRequestPartition::default()
                .with_partition_index(tp.partition)
                .with_committed_offset(offset.0)
                .with_committed_leader_epoch(-1),
        );
    }
    loop {
        let request = TxnOffsetCommitRequest::default()
            .with_transactional_id(txn_id(m))
            .with_group_id(group_id.clone())
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_generation_id(group.generation_id)
            .with_member_id(StrBytes::from_string(group.member_id.clone()))
            .with_group_instance_id(group.group_instance_id.clone().map(StrBytes::from_string))
            .with_topics(
                by_topic
                    .iter()
                    .map(|(t, ps)| {
                        TxnOffsetCommitRequestTopic::default()
                            .with_name(topic_name(t))
                            .with_partitions(ps.clone())
                    })
                    .collect(),
            );
        let link = retry.coordinator(links, &group.group_id, 0).await?;
        let response = match links.request(link, &request).await {
            Ok(response) => response,
            Err(err) => {
                retry.lost(links, err, (&group.group_id, 0)).await?;
                continue;
            }
        };
        let mut failed = (0i16, String::new());
        for t in &response.topics {
            for p in &t.partitions {
                if p.error_code != 0 && failed.0 == 0 {
                    failed = (
                        p.error_code,
                        format!("{}-{}", t.name.0.as_str(), p.partition_index),
                    );
                }
            }
        }
        let (code, where_) = failed;
        let context = || format!("TxnOffsetCommit of {where_} for group {}", group.group_id);
        if !retry
            .again(links, code, (&group.group_id, 0), context)
            .await?
        {
            return Ok(());
        }
    }
}

/// EndTxn: commit (`committed`) or abort the open transaction.
pub(super) async fn end_txn<S: AsyncRead + AsyncWrite + Unpin, R: Runtime>(
    links: &mut Links<S>,
    retry: &Retry<'_, R>,
    m: &TxnManager,
    committed: bool,
) -> Result<()> {
    let (pid, epoch) = m.producer();
    loop {
        let request = EndTxnRequest::default()
            .with_transactional_id(txn_id(m))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(committed);
        let link = retry.coordinator(links, m.transactional_id(), 1).await?;
        let response = match links.request(link, &request).await {
            Ok(response) => response,
            Err(err) => {
                retry.lost(links, err, (m.transactional_id(), 1)).await?;
                continue;
            }
        };
        let context = || {
            format!(
                "EndTxn ({}) for {}",
                if committed { "commit" } else { "abort" },
                m.transactional_id()
            )
        };
        if !retry
            .again(
                links,
                response.error_code,
                (m.transactional_id(), 1),
                context,
            )
            .await?
        {
            return Ok(());
        }
    }
}

/// InitProducerId without a transactional id, for an idempotent producer (module
/// `idempotence`): any broker answers it, so the bootstrap broker is asked. Retried like the
/// coordinator requests while the broker answers a retriable coordinator error.
pub(super) async fn init_idempotent<S: AsyncRead + AsyncWrite + Unpin, R: Runtime>(
    links: &mut Links<S>,
    retry: &Retry<'_, R>,
) -> Result<(i64, i16)> {
    loop {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(-1)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let response = links.bootstrap_request(&request).await?;
        let code = response.error_code;
        if code == 0 {
            return Ok((response.producer_id.0, response.producer_epoch));
        }
        let context = || "InitProducerId for an idempotent producer".to_string();
        if !is_retriable_coordinator_code(code) || Instant::now() >= retry.deadline {
            return Err(Error::check(code, context)
                .err()
                .unwrap_or(Error::Protocol(context())));
        }
        retry.runtime.sleep(retry.config.txn_retry_backoff).await;
    }
}
