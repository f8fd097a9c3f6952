//! Metadata (key 3), v0–13: one broker that leads every partition.
//!
//! Contract:
//! - Brokers: this node (`node.id`) at the advertised host and port; controller = this node;
//!   cluster id from the data directory (v2+).
//! - Topics: all of them when the request names none (`null`, or an empty list in v0);
//!   otherwise the named ones (by name, or by id from v10 on). A missing topic is created
//!   with `num.partitions` when `auto.create.topics.enable` and the request allow it (v4+
//!   carries the flag), else UNKNOWN_TOPIC_OR_PARTITION (3) / UNKNOWN_TOPIC_ID (100); an
//!   illegal name gets INVALID_TOPIC_EXCEPTION (17).
//! - `__consumer_offsets` is listed like any topic, with `is_internal` set (v1+).
//! - Partitions: leader = replicas = ISR = this node, leader epoch 0.
//! - Authorized operations (KIP-430): when the request asks (v8+ for topics, v8–10 for the
//!   cluster), every operation of the resource type, as Kafka grants with no authorizer;
//!   otherwise Kafka's "not requested" sentinel (`authorized_operations`).

use std::collections::BTreeMap;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};
use uuid::Uuid;

use super::str_bytes;
use crate::server::authz::{Caller, CLUSTER_NAME};
use crate::server::groups::offsets_topic;
use crate::server::session::RequestContext;
use crate::server::shard_context::{
    Authorizer, BrokerIdentity, ConfigLookup, TopicAdmin, TopicCatalogue,
};
use crate::server::shared::TopicInfo;
use minikafka_core::auth::acl::{Operation, ResourceType};
use minikafka_core::error_code::ErrorCode;

/// One topic's entry.
pub fn topic_entry(info: &TopicInfo, node_id: i32, version: i16) -> MetadataResponseTopic {
    let mut topic = MetadataResponseTopic::default();
    topic.name = Some(TopicName(str_bytes(&info.name)));
    topic.is_internal = offsets_topic::is_internal(&info.name);
    if version >= 10 {
        topic.topic_id = info.id;
    }
    topic.partitions = (0..info.partition_count())
        .map(|p| {
            let mut partition = MetadataResponsePartition::default();
            partition.partition_index = p;
            partition.leader_id = node_id.into();
            partition.leader_epoch = 0;
            partition.replica_nodes = vec![node_id.into()];
            partition.isr_nodes = vec![node_id.into()];
            partition
        })
        .collect();
    topic
}

fn error_entry(
    name: Option<&str>,
    id: Uuid,
    code: ErrorCode,
    version: i16,
) -> MetadataResponseTopic {
    let mut topic = MetadataResponseTopic::default();
    topic.error_code = code.code();
    // Names are nullable only from v12 on.
    topic.name = match name {
        Some(n) => Some(TopicName(str_bytes(n))),
        None if version < 12 => Some(TopicName::default()),
        None => None,
    };
    if version >= 10 {
        topic.topic_id = id;
    }
    topic
}

/// Builds the response, auto-creating topics where allowed.
pub async fn handle(
    state: &(impl TopicCatalogue + BrokerIdentity + ConfigLookup + TopicAdmin + Authorizer),
    request: MetadataRequest,
    version: i16,
    ctx: &RequestContext,
) -> MetadataResponse {
    let with_topic_ops = version >= 8 && request.include_topic_authorized_operations;
    let with_cluster_ops =
        (8..=10).contains(&version) && request.include_cluster_authorized_operations;
    let caller = &Caller::from_context(ctx);
    let mut response = topics_and_brokers(state, request, version, ctx).await;
    for topic in &mut response.topics {
        let name = topic.name.as_ref().map_or("", |n| n.as_str());
        topic.topic_authorized_operations =
            state.authorized_operations(caller, ResourceType::Topic, name, with_topic_ops);
    }
    response.cluster_authorized_operations = state.authorized_operations(
        caller,
        ResourceType::Cluster,
        CLUSTER_NAME,
        with_cluster_ops,
    );
    response
}

async fn topics_and_brokers(
    state: &(impl TopicCatalogue + BrokerIdentity + ConfigLookup + TopicAdmin + Authorizer),
    request: MetadataRequest,
    version: i16,
    ctx: &RequestContext,
) -> MetadataResponse {
    let config = state.settings();
    let caller = &Caller::from_context(ctx);
    let describe = |name: &str| state.topic_allowed(caller, name, Operation::Describe);
    let node_id = state.node_id();
    let (host, port) = state.advertised_address(&ctx.listener);
    let mut response = MetadataResponse::default();
    let mut broker = MetadataResponseBroker::default();
    broker.node_id = node_id.into();
    broker.host = str_bytes(&host);
    broker.port = i32::from(port);
    response.brokers = vec![broker];
    if version >= 2 {
        response.cluster_id = Some(str_bytes(state.cluster_id()));
    }
    if version >= 1 {
        response.controller_id = node_id.into();
    }
    let all = match &request.topics {
        None => true,
        Some(list) => version == 0 && list.is_empty(),
    };
    if all {
        response.topics = state
            .all_topics()
            .iter()
            .filter(|t| describe(&t.name))
            .map(|t| topic_entry(t, node_id, version))
            .collect();
        return response;
    }
    let allow_create =
        config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
    for wanted in request.topics.unwrap_or_default() {
        let entry = match wanted.name {
            Some(name) => {
                let name = name.0.as_str().to_string();
                let exists = state.topic(&name);
                match exists {
                    _ if !describe(&name) => error_entry(
                        Some(&name),
                        Uuid::nil(),
                        ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                        version,
                    ),
                    Some(info) => topic_entry(&info, node_id, version),
                    // Auto-creation needs CREATE on the cluster or the topic (Kafka's
                    // `KafkaApis.handleTopicMetadataRequest`).
                    None if allow_create
                        && !state.cluster_allowed(caller, Operation::Create)
                        && !state.topic_allowed(caller, &name, Operation::Create) =>
                    {
                        error_entry(
                            Some(&name),
                            Uuid::nil(),
                            ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                            version,
                        )
                    }
                    None if allow_create => {
                        match state
                            .create_topic(&name, config.num_partitions, BTreeMap::new(), false)
                            .await
                        {
                            Ok(info) => topic_entry(&info, node_id, version),
                            // Another request created it meanwhile.
                            Err((ErrorCode::TOPIC_ALREADY_EXISTS, _)) => match state.topic(&name) {
                                Some(info) => topic_entry(&info, node_id, version),
                                None => error_entry(
                                    Some(&name),
                                    Uuid::nil(),
                                    ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                                    version,
                                ),
                            },
                            Err((code, message)) => {
                                tracing::debug!(topic = name, "auto-create refused: {message}");
                                error_entry(Some(&name), Uuid::nil(), code, version)
                            }
                        }
                    }
                    None => {
                        let code = if crate::log::topics::validate_topic_name(&name).is_err() {
                            ErrorCode::INVALID_TOPIC_EXCEPTION
                        } else {
                            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
                        };
                        error_entry(Some(&name), Uuid::nil(), code, version)
                    }
                }
            }
            None => match state.topic_by_id(wanted.topic_id) {
                Some(info) if !describe(&info.name) => error_entry(
                    None,
                    wanted.topic_id,
                    ErrorCode::TOPIC_AUTHORIZATION_FAILED,
                    version,
                ),
                Some(info) => topic_entry(&info, node_id, version),
                None => error_entry(None, wanted.topic_id, ErrorCode::UNKNOWN_TOPIC_ID, version),
            },
        };
        response.topics.push(entry);
    }
    response
}
