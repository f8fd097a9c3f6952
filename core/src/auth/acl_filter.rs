//! ACL filters (DescribeAcls, DeleteAcls) and the checks of a new ACL (CreateAcls), from the
//! wire codes, with Apache Kafka's `AclBindingFilter` semantics.
//!
//! Contract:
//! - Input: the codes and strings of one request element, as the client sent them.
//! - Output: an [`AclFilter`] (or a checked [`AclBinding`]), or why the element is invalid
//!   (the broker answers INVALID_REQUEST with it, for that element only). Never a panic.
//! - Filter codes: ANY (1) matches every value; `null` strings match every value; pattern
//!   type MATCH (2) selects every ACL that would concern a resource of that name (LITERAL
//!   equal, LITERAL `*`, PREFIXED a prefix of it), LITERAL/PREFIXED select that pattern type
//!   and the exact name. UNKNOWN (0) is invalid everywhere (I49).

use super::acl::{AclBinding, Operation, PatternType, Permission, ResourceType, WILDCARD};

/// Kafka's ANY code, shared by every filter enum.
pub const ANY_CODE: i8 = 1;
/// Kafka's `PatternType.MATCH`.
pub const MATCH_CODE: i8 = 2;

/// How a filter selects pattern types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternFilter {
    /// Every pattern type, names compared exactly.
    Any,
    /// The ACLs that would concern a resource with the filter's name.
    Match,
    /// One pattern type, names compared exactly.
    Exactly(PatternType),
}

/// One DescribeAcls / DeleteAcls filter; `None` is "any".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    /// The resource type, or any.
    pub resource_type: Option<ResourceType>,
    /// The resource name, or any.
    pub resource_name: Option<String>,
    /// Which pattern types.
    pub pattern: PatternFilter,
    /// The principal, or any.
    pub principal: Option<String>,
    /// The host, or any.
    pub host: Option<String>,
    /// The operation, or any.
    pub operation: Option<Operation>,
    /// The permission, or any.
    pub permission: Option<Permission>,
}

fn any_or<T>(code: i8, what: &str, parse: fn(i8) -> Option<T>) -> Result<Option<T>, String> {
    if code == ANY_CODE {
        return Ok(None);
    }
    parse(code)
        .map(Some)
        .ok_or_else(|| format!("invalid {what} code {code}"))
}

impl AclFilter {
    /// The filter of a request element, or why it is invalid.
    pub fn from_wire(
        resource_type: i8,
        resource_name: Option<&str>,
        pattern_type: i8,
        principal: Option<&str>,
        host: Option<&str>,
        operation: i8,
        permission: i8,
    ) -> Result<AclFilter, String> {
        let pattern = match pattern_type {
            ANY_CODE => PatternFilter::Any,
            MATCH_CODE => PatternFilter::Match,
            code => PatternFilter::Exactly(
                PatternType::from_code(code)
                    .ok_or_else(|| format!("invalid pattern type code {code}"))?,
            ),
        };
        Ok(AclFilter {
            resource_type: any_or(resource_type, "resource type", ResourceType::from_code)?,
            resource_name: resource_name.map(str::to_string),
            pattern,
            principal: principal.map(str::to_string),
            host: host.map(str::to_string),
            operation: any_or(operation, "operation", Operation::from_code)?,
            permission: any_or(permission, "permission type", Permission::from_code)?,
        })
    }

    /// The filter that selects every ACL.
    pub fn everything() -> AclFilter {
        AclFilter {
            resource_type: None,
            resource_name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        }
    }

    /// Whether `acl` is selected.
    pub fn matches(&self, acl: &AclBinding) -> bool {
        fn eq<T: PartialEq>(filter: &Option<T>, value: &T) -> bool {
            filter.as_ref().is_none_or(|f| f == value)
        }
        let name_ok = match (self.pattern, &self.resource_name) {
            (PatternFilter::Match, Some(name)) => match acl.pattern_type {
                PatternType::Literal => acl.resource_name == *name || acl.resource_name == WILDCARD,
                PatternType::Prefixed => name.starts_with(acl.resource_name.as_str()),
            },
            (PatternFilter::Exactly(p), name) => {
                acl.pattern_type == p && name.as_ref().is_none_or(|n| *n == acl.resource_name)
            }
            (_, name) => name.as_ref().is_none_or(|n| *n == acl.resource_name),
        };
        name_ok
            && eq(&self.resource_type, &acl.resource_type)
            && eq(&self.principal, &acl.principal)
            && eq(&self.host, &acl.host)
            && eq(&self.operation, &acl.operation)
            && eq(&self.permission, &acl.permission)
    }
}

/// A CreateAcls element checked as Kafka's `AclControlManager.validateNewAcl` does: known
/// resource type, LITERAL or PREFIXED, a non-empty name, a `Type:name` principal, a host, a
/// concrete operation (ALL allowed) and permission.
pub fn new_binding(
    resource_type: i8,
    resource_name: &str,
    pattern_type: i8,
    principal: &str,
    host: &str,
    operation: i8,
    permission: i8,
) -> Result<AclBinding, String> {
    let resource_type = ResourceType::from_code(resource_type)
        .ok_or_else(|| format!("invalid resource type code {resource_type}"))?;
    let pattern_type = PatternType::from_code(pattern_type)
        .ok_or_else(|| format!("invalid pattern type code {pattern_type} (LITERAL or PREFIXED)"))?;
    if resource_name.is_empty() {
        return Err("resource name must not be empty".into());
    }
    match principal.split_once(':') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
        _ => return Err(format!("invalid principal {principal:?} (Type:name)")),
    }
    if host.is_empty() {
        return Err("host must not be empty".into());
    }
    Ok(AclBinding {
        resource_type,
        pattern_type,
        resource_name: resource_name.to_string(),
        principal: principal.to_string(),
        host: host.to_string(),
        operation: Operation::from_code(operation)
            .ok_or_else(|| format!("invalid operation code {operation}"))?,
        permission: Permission::from_code(permission)
            .ok_or_else(|| format!("invalid permission type code {permission}"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(pattern: PatternType, name: &str) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            pattern_type: pattern,
            resource_name: name.into(),
            principal: "User:alice".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }
    }

    fn filter(pattern: i8, name: Option<&str>) -> AclFilter {
        AclFilter::from_wire(2, name, pattern, None, None, 1, 1).expect("valid")
    }

    #[test]
    fn match_selects_what_concerns_the_name_and_exact_patterns_the_name_itself() {
        let literal = topic(PatternType::Literal, "orders");
        let wildcard = topic(PatternType::Literal, "*");
        let prefix = topic(PatternType::Prefixed, "ord");
        let other = topic(PatternType::Prefixed, "pay");
        let m = filter(MATCH_CODE, Some("orders"));
        assert!(m.matches(&literal) && m.matches(&wildcard) && m.matches(&prefix));
        assert!(!m.matches(&other));
        let exact = filter(3, Some("orders"));
        assert!(exact.matches(&literal) && !exact.matches(&wildcard) && !exact.matches(&prefix));
        let any = filter(ANY_CODE, None);
        assert!([&literal, &wildcard, &prefix, &other]
            .iter()
            .all(|a| any.matches(a)));
        let any_named = filter(ANY_CODE, Some("ord"));
        assert!(any_named.matches(&prefix) && !any_named.matches(&literal));
        assert!(AclFilter::everything().matches(&other));
    }

    #[test]
    fn unknown_codes_are_invalid_and_any_is_not_an_acl() {
        assert!(AclFilter::from_wire(0, None, 1, None, None, 1, 1).is_err());
        assert!(AclFilter::from_wire(1, None, 0, None, None, 1, 1).is_err());
        assert!(AclFilter::from_wire(1, None, 1, None, None, 0, 1).is_err());
        assert!(new_binding(2, "t", 3, "User:a", "*", 3, 3).is_ok());
        assert!(
            new_binding(1, "t", 3, "User:a", "*", 3, 3).is_err(),
            "ANY type"
        );
        assert!(
            new_binding(2, "t", 2, "User:a", "*", 3, 3).is_err(),
            "MATCH"
        );
        assert!(
            new_binding(2, "", 3, "User:a", "*", 3, 3).is_err(),
            "empty name"
        );
        assert!(
            new_binding(2, "t", 3, "alice", "*", 3, 3).is_err(),
            "no type"
        );
        assert!(
            new_binding(2, "t", 3, "User:a", "*", 1, 3).is_err(),
            "ANY op"
        );
        assert!(
            new_binding(2, "t", 3, "User:a", "*", 3, 1).is_err(),
            "ANY permission"
        );
        assert!(
            new_binding(2, "t", 3, "User:a", "", 3, 3).is_err(),
            "empty host"
        );
    }
}
