//! Who asks, and whether they may: the authorizer as the handlers call it.
//!
//! Contract:
//! - A request is checked for its [`Caller`] (principal and client host), taken from the
//!   connection's [`RequestContext`] when the request was read (I45): `User:ANONYMOUS` until
//!   authentication, as Kafka's PLAINTEXT listener makes it.
//! - With no authorizer (`authorizer.class.name` empty) every check allows and the KIP-430
//!   bitfields are every supported operation; with one, each check is
//!   [`minikafka_core::auth::acl::authorize`] over the ACLs in force and the configured
//!   `super.users` / `allow.everyone.if.no.acl.found` (I48).
//! - Every handler checks before it acts (I48): a denied element is answered with Kafka's
//!   code (TOPIC_/GROUP_/CLUSTER_/TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and nothing of it
//!   is done. Denials are logged at debug level with the principal, never with request data.
//! - Never: reads the disk or blocks; a check is a scan of an immutable snapshot.

use std::net::SocketAddr;

use minikafka_core::auth::acl::{
    authorize, authorize_by_resource_type, Action, Operation, ResourceType,
};
use minikafka_core::authorized_operations::{all_operations, supported_operations, OMITTED};

use super::session::RequestContext;
use super::shared::Shared;

/// The name of the one CLUSTER resource, as Kafka names it.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// The principal of a connection nobody authenticated on.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// Who sent a request: the principal (`User:alice`) and the client's host (its IP as text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The principal, `Type:name`.
    pub principal: String,
    /// The client's IP address as text, as ACL hosts name it.
    pub host: String,
}

impl Caller {
    /// The principal and host of the connection a request came on.
    pub fn from_context(ctx: &RequestContext) -> Caller {
        Caller {
            principal: ctx.principal.to_string(),
            host: ctx.client_host(),
        }
    }

    /// `User:ANONYMOUS` connected from `peer`.
    pub fn anonymous(peer: SocketAddr) -> Caller {
        Caller {
            principal: ANONYMOUS.to_string(),
            host: peer.ip().to_string(),
        }
    }
}

/// Whether `caller` may do `operation` on the resource (always, with no authorizer).
pub fn allowed(
    shared: &Shared,
    caller: &Caller,
    resource_type: ResourceType,
    name: &str,
    operation: Operation,
) -> bool {
    let settings = &shared.config.authorizer;
    if !settings.enabled() {
        return true;
    }
    let acls = shared.acls();
    let action = Action {
        principal: &caller.principal,
        host: &caller.host,
        resource_type,
        resource_name: name,
        operation,
    };
    let decision = authorize(&settings.acl, acls.bindings(), &action);
    if !decision.is_allowed() {
        tracing::debug!(
            principal = %caller.principal,
            host = %caller.host,
            ?resource_type,
            resource = name,
            ?operation,
            ?decision,
            "denied"
        );
    }
    decision.is_allowed()
}

/// Whether `caller` may do `operation` on some topic (KIP-679's idempotent-write grant).
pub fn any_topic_allowed(shared: &Shared, caller: &Caller, operation: Operation) -> bool {
    let settings = &shared.config.authorizer;
    !settings.enabled()
        || authorize_by_resource_type(
            &settings.acl,
            shared.acls().bindings(),
            &caller.principal,
            &caller.host,
            ResourceType::Topic,
            operation,
        )
}

/// Whether `caller` may do `operation` on the topic `topic`.
pub fn topic_allowed(shared: &Shared, caller: &Caller, topic: &str, operation: Operation) -> bool {
    allowed(shared, caller, ResourceType::Topic, topic, operation)
}

/// Whether `caller` may do `operation` on the group `group`.
pub fn group_allowed(shared: &Shared, caller: &Caller, group: &str, operation: Operation) -> bool {
    allowed(shared, caller, ResourceType::Group, group, operation)
}

/// Whether `caller` may do `operation` on the cluster.
pub fn cluster_allowed(shared: &Shared, caller: &Caller, operation: Operation) -> bool {
    allowed(
        shared,
        caller,
        ResourceType::Cluster,
        CLUSTER_NAME,
        operation,
    )
}

/// Whether `caller` may do `operation` (WRITE for InitProducerId, AddPartitionsToTxn,
/// AddOffsetsToTxn, EndTxn, TxnOffsetCommit; DESCRIBE for DescribeTransactions) on the
/// transactional id `transactional_id`. The transactions handlers call this and answer
/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) when it is false.
pub fn transactional_id_allowed(
    shared: &Shared,
    caller: &Caller,
    transactional_id: &str,
    operation: Operation,
) -> bool {
    allowed(
        shared,
        caller,
        ResourceType::TransactionalId,
        transactional_id,
        operation,
    )
}

/// The KIP-430 bitfield for `caller` on the resource: [`OMITTED`] when not `requested`; with
/// no authorizer every supported operation; else those the ACLs allow.
pub fn authorized_operations(
    shared: &Shared,
    caller: &Caller,
    resource_type: ResourceType,
    name: &str,
    requested: bool,
) -> i32 {
    if !requested {
        return OMITTED;
    }
    if !shared.config.authorizer.enabled() {
        return all_operations(resource_type);
    }
    supported_operations(resource_type)
        .iter()
        .filter(|op| allowed(shared, caller, resource_type, name, **op))
        .fold(0, |bits, op| bits | (1 << op.code()))
}
