//! ACL administration on [`Admin`]: create, describe and delete ACLs (CreateAcls,
//! DescribeAcls, DeleteAcls v3), with names parsed as `kafka-acls.sh` writes them.
//!
//! Contract:
//! - Inputs: [`AclBinding`]s to create, [`AclFilter`]s to list or delete (the core's types,
//!   so the client and the broker share one list of Kafka's codes); outputs: bindings.
//! - Every Kafka error code becomes an [`Error`] with the broker's message (SECURITY_DISABLED
//!   when the broker has no authorizer; CLUSTER_AUTHORIZATION_FAILED when the principal may
//!   not manage ACLs).
//! - Never: retries.

use futures_io::{AsyncRead, AsyncWrite};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;
pub use minikafka_core::auth::acl::{AclBinding, Operation, PatternType, Permission, ResourceType};
use minikafka_core::auth::acl_filter::{new_binding, ANY_CODE, MATCH_CODE};
pub use minikafka_core::auth::acl_filter::{AclFilter, PatternFilter};

use crate::admin::Admin;
use crate::error::{Error, Result};

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// `name` without case, `-` or `_` (so `describe-configs`, `DESCRIBE_CONFIGS` and
/// `DescribeConfigs` are one name).
fn folded(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// An operation by its Kafka name (`read`, `describe-configs`, `all`, …).
pub fn parse_operation(name: &str) -> Option<Operation> {
    Operation::ALL_VALUES
        .iter()
        .copied()
        .find(|op| folded(&format!("{op:?}")) == folded(name))
}

/// A permission by name (`allow`, `deny`).
pub fn parse_permission(name: &str) -> Option<Permission> {
    match folded(name).as_str() {
        "allow" => Some(Permission::Allow),
        "deny" => Some(Permission::Deny),
        _ => None,
    }
}

/// How a binding reads on one line, as `kafka-acls.sh --list` prints it.
pub fn describe(acl: &AclBinding) -> String {
    format!(
        "{:?}:{:?}:{} {} {:?} {:?} from {}",
        acl.resource_type,
        acl.pattern_type,
        acl.resource_name,
        acl.principal,
        acl.permission,
        acl.operation,
        acl.host
    )
    .replace('"', "")
}

fn filter_codes(filter: &AclFilter) -> (i8, i8, i8, i8) {
    (
        filter.resource_type.map_or(ANY_CODE, |t| t.code()),
        match filter.pattern {
            PatternFilter::Any => ANY_CODE,
            PatternFilter::Match => MATCH_CODE,
            PatternFilter::Exactly(p) => p.code(),
        },
        filter.operation.map_or(ANY_CODE, |o| o.code()),
        filter.permission.map_or(ANY_CODE, |p| p.code()),
    )
}

fn binding_of(
    resource_type: i8,
    name: &str,
    pattern: i8,
    principal: &str,
    host: &str,
    operation: i8,
    permission: i8,
) -> Result<AclBinding> {
    new_binding(
        resource_type,
        name,
        pattern,
        principal,
        host,
        operation,
        permission,
    )
    .map_err(|e| Error::Protocol(format!("the broker listed an ACL that is not one: {e}")))
}

impl<S: AsyncRead + AsyncWrite + Unpin> Admin<S> {
    /// Creates `acls` (CreateAcls); the first refused one is the error.
    pub async fn create_acls(&mut self, acls: &[AclBinding]) -> Result<()> {
        let creations = acls
            .iter()
            .map(|a| {
                AclCreation::default()
                    .with_resource_type(a.resource_type.code())
                    .with_resource_name(str_bytes(&a.resource_name))
                    .with_resource_pattern_type(a.pattern_type.code())
                    .with_principal(str_bytes(&a.principal))
                    .with_host(str_bytes(&a.host))
                    .with_operation(a.operation.code())
                    .with_permission_type(a.permission.code())
            })
            .collect();
        let request = CreateAclsRequest::default().with_creations(creations);
        let response = self.connection().request(&request).await?;
        for (acl, result) in acls.iter().zip(response.results.iter()) {
            Error::check(result.error_code, || {
                let message = result.error_message.as_deref().unwrap_or("");
                format!("create ACL {}: {message}", describe(acl))
            })?;
        }
        Ok(())
    }

    /// The ACLs `filter` selects (DescribeAcls).
    pub async fn describe_acls(&mut self, filter: &AclFilter) -> Result<Vec<AclBinding>> {
        let (resource_type, pattern, operation, permission) = filter_codes(filter);
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(resource_type)
            .with_resource_name_filter(filter.resource_name.as_deref().map(str_bytes))
            .with_pattern_type_filter(pattern)
            .with_principal_filter(filter.principal.as_deref().map(str_bytes))
            .with_host_filter(filter.host.as_deref().map(str_bytes))
            .with_operation(operation)
            .with_permission_type(permission);
        let response = self.connection().request(&request).await?;
        Error::check(response.error_code, || {
            let message = response.error_message.as_deref().unwrap_or("");
            format!("describe ACLs: {message}")
        })?;
        let mut out = Vec::new();
        for resource in &response.resources {
            for acl in &resource.acls {
                out.push(binding_of(
                    resource.resource_type,
                    &resource.resource_name,
                    resource.pattern_type,
                    &acl.principal,
                    &acl.host,
                    acl.operation,
                    acl.permission_type,
                )?);
            }
        }
        Ok(out)
    }

    /// Deletes the ACLs `filter` selects (DeleteAcls); those deleted.
    pub async fn delete_acls(&mut self, filter: &AclFilter) -> Result<Vec<AclBinding>> {
        let (resource_type, pattern, operation, permission) = filter_codes(filter);
        let request = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
            .with_resource_type_filter(resource_type)
            .with_resource_name_filter(filter.resource_name.as_deref().map(str_bytes))
            .with_pattern_type_filter(pattern)
            .with_principal_filter(filter.principal.as_deref().map(str_bytes))
            .with_host_filter(filter.host.as_deref().map(str_bytes))
            .with_operation(operation)
            .with_permission_type(permission)]);
        let response = self.connection().request(&request).await?;
        let result = response
            .filter_results
            .first()
            .ok_or_else(|| Error::Protocol("DeleteAcls answered no filter".into()))?;
        Error::check(result.error_code, || {
            let message = result.error_message.as_deref().unwrap_or("");
            format!("delete ACLs: {message}")
        })?;
        result
            .matching_acls
            .iter()
            .map(|m| {
                Error::check(m.error_code, || format!("delete ACL {}", m.resource_name))?;
                binding_of(
                    m.resource_type,
                    &m.resource_name,
                    m.pattern_type,
                    &m.principal,
                    &m.host,
                    m.operation,
                    m.permission_type,
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_as_kafka_acls_writes_them() {
        assert_eq!(parse_operation("read"), Some(Operation::Read));
        assert_eq!(
            parse_operation("DESCRIBE_CONFIGS"),
            Some(Operation::DescribeConfigs)
        );
        assert_eq!(
            parse_operation("describe-configs"),
            Some(Operation::DescribeConfigs)
        );
        assert_eq!(
            parse_operation("IdempotentWrite"),
            Some(Operation::IdempotentWrite)
        );
        assert_eq!(parse_operation("all"), Some(Operation::All));
        assert_eq!(parse_operation("any"), None);
        assert_eq!(parse_permission("Deny"), Some(Permission::Deny));
        assert_eq!(parse_permission("maybe"), None);
    }
}
