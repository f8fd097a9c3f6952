//! The authorized-operations bitfields of KIP-430, as a broker without an authorizer answers
//! them.
//!
//! Contract: pure constants and functions. With no authorizer every principal may do every
//! operation a resource type supports, so the answer depends only on the resource type: bit
//! `n` is set for each supported operation whose ACL operation code is `n` (Kafka's
//! `AclOperation` codes, from its `AclEntry.supportedOperations`). A request that does not ask
//! (`include_*_authorized_operations` false, or a version without the flag) gets
//! [`OMITTED`], Kafka's sentinel for "not requested".

/// Kafka's "authorized operations not requested" value (`Integer.MIN_VALUE`).
pub const OMITTED: i32 = i32::MIN;

/// Kafka's ACL operation codes (`org.apache.kafka.common.acl.AclOperation`) that resources
/// support (UNKNOWN = 0, ANY = 1 and ALL = 2 are filters, never granted bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum AclOperation {
    /// READ (3).
    Read = 3,
    /// WRITE (4).
    Write = 4,
    /// CREATE (5).
    Create = 5,
    /// DELETE (6).
    Delete = 6,
    /// ALTER (7).
    Alter = 7,
    /// DESCRIBE (8).
    Describe = 8,
    /// CLUSTER_ACTION (9).
    ClusterAction = 9,
    /// DESCRIBE_CONFIGS (10).
    DescribeConfigs = 10,
    /// ALTER_CONFIGS (11).
    AlterConfigs = 11,
    /// IDEMPOTENT_WRITE (12).
    IdempotentWrite = 12,
}

/// The resource types whose authorized operations a response can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceType {
    /// A topic (Metadata, DescribeTopicPartitions).
    Topic,
    /// A consumer group (DescribeGroups, ConsumerGroupDescribe).
    Group,
    /// The cluster (Metadata v8–10, DescribeCluster).
    Cluster,
}

impl ResourceType {
    /// The operations Kafka supports on this resource type.
    pub fn supported_operations(self) -> &'static [AclOperation] {
        use AclOperation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            // Kafka 4.0 added the group configuration operations (group configs, KIP-848).
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
        }
    }

    /// The bitfield of every supported operation: what a broker without an authorizer grants.
    pub fn all_operations(self) -> i32 {
        self.supported_operations()
            .iter()
            .fold(0, |bits, op| bits | (1 << *op as u8))
    }
}

/// The field's value: every operation of `resource` when the client `requested` it, else
/// [`OMITTED`].
pub fn authorized_operations(resource: ResourceType, requested: bool) -> i32 {
    if requested {
        resource.all_operations()
    } else {
        OMITTED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(codes: &[u8]) -> i32 {
        codes.iter().fold(0, |b, c| b | (1 << c))
    }

    #[test]
    fn the_bitfields_are_kafkas_without_an_authorizer() {
        // The sets librdkafka's test 0081 expects from Apache Kafka 4.0 with no ACLs.
        assert_eq!(
            ResourceType::Topic.all_operations(),
            bits(&[3, 4, 5, 6, 7, 8, 10, 11])
        );
        assert_eq!(
            ResourceType::Group.all_operations(),
            bits(&[3, 6, 8, 10, 11])
        );
        assert_eq!(
            ResourceType::Cluster.all_operations(),
            bits(&[5, 7, 8, 9, 10, 11, 12])
        );
    }

    #[test]
    fn not_requested_is_the_sentinel_and_never_a_bitfield() {
        for resource in [
            ResourceType::Topic,
            ResourceType::Group,
            ResourceType::Cluster,
        ] {
            assert_eq!(authorized_operations(resource, false), i32::MIN);
            let granted = authorized_operations(resource, true);
            assert!(granted > 0);
            // No filter code (UNKNOWN, ANY, ALL) is ever granted.
            assert_eq!(granted & 0b111, 0);
        }
    }
}
