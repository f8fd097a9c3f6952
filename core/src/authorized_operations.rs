//! The authorized-operations bitfields of KIP-430, as a broker without an authorizer answers
//! them.
//!
//! Contract: pure constants and functions. With no authorizer every principal may do every
//! operation a resource type supports, so the answer depends only on the resource type: bit
//! `n` is set for each supported operation whose ACL operation code is `n` (Kafka's
//! `AclOperation` codes, from its `AclEntry.supportedOperations`). A request that does not ask
//! (`include_*_authorized_operations` false, or a version without the flag) gets
//! [`OMITTED`], Kafka's sentinel for "not requested".

pub use crate::auth::acl::{Operation, ResourceType};

/// Kafka's "authorized operations not requested" value (`Integer.MIN_VALUE`).
pub const OMITTED: i32 = i32::MIN;

/// The operations Kafka supports on `resource` (its `AclEntry.supportedOperations`), in the
/// ACL module's own types: one list of Kafka's operation codes for the authorizer and for
/// these bitfields.
pub fn supported_operations(resource: ResourceType) -> &'static [Operation] {
    use Operation::*;
    match resource {
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
        ResourceType::TransactionalId => &[Describe, Write],
    }
}

/// The bitfield of every operation `resource` supports: what a broker without an authorizer
/// grants. Bit `n` is the operation whose Kafka code is `n`.
pub fn all_operations(resource: ResourceType) -> i32 {
    supported_operations(resource)
        .iter()
        .fold(0, |bits, op| bits | (1 << op.code()))
}

/// The field's value: every operation of `resource` when the client `requested` it, else
/// [`OMITTED`].
pub fn authorized_operations(resource: ResourceType, requested: bool) -> i32 {
    if requested {
        all_operations(resource)
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
            all_operations(ResourceType::Topic),
            bits(&[3, 4, 5, 6, 7, 8, 10, 11])
        );
        assert_eq!(
            all_operations(ResourceType::Group),
            bits(&[3, 6, 8, 10, 11])
        );
        assert_eq!(
            all_operations(ResourceType::Cluster),
            bits(&[5, 7, 8, 9, 10, 11, 12])
        );
        assert_eq!(all_operations(ResourceType::TransactionalId), bits(&[4, 8]));
    }

    #[test]
    fn not_requested_is_the_sentinel_and_never_a_bitfield() {
        for resource in [
            ResourceType::Topic,
            ResourceType::Group,
            ResourceType::Cluster,
            ResourceType::TransactionalId,
        ] {
            assert_eq!(authorized_operations(resource, false), i32::MIN);
            let granted = authorized_operations(resource, true);
            assert!(granted > 0);
            // No filter code (UNKNOWN, ANY, ALL) is ever granted.
            assert_eq!(granted & 0b111, 0);
        }
    }
}
