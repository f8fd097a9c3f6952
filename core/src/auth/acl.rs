//! The ACL decision as a pure function, with Apache Kafka's `StandardAuthorizer` semantics.
//!
//! Contract:
//! - Input: the authorizer's configuration ([`AuthorizerConfig`]: `super.users`,
//!   `allow.everyone.if.no.acl.found`), the ACLs ([`AclBinding`]s, in any order: order never
//!   changes a decision), and one [`Action`] (principal, host, resource, operation).
//! - Output: a [`Decision`], allowed or denied, with the [`Reason`] (the deciding ACL's index,
//!   for audit logs). Never a panic, never an allocation.
//! - Rules, in order (I43):
//!   1. a super user (`User:alice` listed in `super.users`) is allowed everything;
//!   2. an ACL concerns the action's resource when its resource type is the action's and its
//!      pattern matches the name: LITERAL equal, LITERAL `*` (any name), PREFIXED a prefix;
//!   3. it applies to the action when its principal is the action's or `User:*`, its host is
//!      the action's or `*`, and its operation matches: ALL matches every operation; an
//!      ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and an ALLOW of
//!      ALTER_CONFIGS also allows DESCRIBE_CONFIGS; a DENY denies only its own operation
//!      (or ALL);
//!   4. any applying DENY denies (DENY over ALLOW); else any applying ALLOW allows;
//!   5. no applying ACL: if no ACL concerns the resource at all, the answer is
//!      `allow.everyone.if.no.acl.found` (default false); otherwise denied.
//! - An action for the operations ALL or ANY (which only ACLs and filters may name) is
//!   denied, where Kafka throws.

use std::collections::BTreeSet;

/// The principal every `User` principal matches in an ACL.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The host (and LITERAL resource name) that matches every host (name).
pub const WILDCARD: &str = "*";

macro_rules! kafka_enum {
    ($(#[doc = $doc:literal])* $name:ident { $($(#[doc = $vdoc:literal])* $variant:ident = $code:literal,)* }) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[doc = $vdoc])* $variant,)*
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL_VALUES: &'static [$name] = &[$($name::$variant,)*];

            /// Kafka's wire code (an `int8` in the ACL APIs).
            pub const fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code,)*
                }
            }

            /// The value of a wire code, if it is one of these (UNKNOWN and ANY are not).
            pub fn from_code(code: i8) -> Option<$name> {
                match code {
                    $($code => Some($name::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

kafka_enum!(
    /// The kinds of resource an ACL protects (Kafka's `ResourceType`).
    ResourceType {
        /// A topic.
        Topic = 2,
        /// A consumer group.
        Group = 3,
        /// The cluster (named `kafka-cluster`).
        Cluster = 4,
        /// A transactional id.
        TransactionalId = 5,
    }
);

kafka_enum!(
    /// How an ACL's resource name matches (Kafka's `PatternType`).
    PatternType {
        /// The name exactly, or every name when it is `*`.
        Literal = 3,
        /// Every name starting with it.
        Prefixed = 4,
    }
);

kafka_enum!(
    /// Operations (Kafka's `AclOperation`, without UNKNOWN and ANY).
    Operation {
        /// Every operation (in an ACL only).
        All = 2,
        /// Read (consume, fetch offsets).
        Read = 3,
        /// Write (produce).
        Write = 4,
        /// Create.
        Create = 5,
        /// Delete.
        Delete = 6,
        /// Alter.
        Alter = 7,
        /// Describe.
        Describe = 8,
        /// Cluster-internal actions.
        ClusterAction = 9,
        /// Describe configs.
        DescribeConfigs = 10,
        /// Alter configs.
        AlterConfigs = 11,
        /// Idempotent write.
        IdempotentWrite = 12,
        /// Create delegation tokens.
        CreateTokens = 13,
        /// Describe delegation tokens.
        DescribeTokens = 14,
    }
);

kafka_enum!(
    /// Whether an ACL allows or denies (Kafka's `AclPermissionType`).
    Permission {
        /// Deny.
        Deny = 2,
        /// Allow.
        Allow = 3,
    }
);

/// One ACL: who may (or may not) do what, from where, on which resources.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AclBinding {
    /// The resource type.
    pub resource_type: ResourceType,
    /// How `resource_name` matches.
    pub pattern_type: PatternType,
    /// The resource name, prefix, or `*`.
    pub resource_name: String,
    /// The principal, `Type:name` (`User:alice`), or `User:*`.
    pub principal: String,
    /// The client host (an IP address as text), or `*`.
    pub host: String,
    /// The operation.
    pub operation: Operation,
    /// Allow or deny.
    pub permission: Permission,
}

impl AclBinding {
    /// Whether this ACL's resource pattern covers `resource_type`/`name` (rule 2).
    pub fn concerns(&self, resource_type: ResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern_type {
                PatternType::Literal => {
                    self.resource_name == WILDCARD || self.resource_name == name
                }
                PatternType::Prefixed => name.starts_with(self.resource_name.as_str()),
            }
    }

    /// Whether this ACL's operation covers `operation` (rule 3's implications).
    pub fn covers_operation(&self, operation: Operation) -> bool {
        if self.operation == Operation::All || self.operation == operation {
            return true;
        }
        // Implications widen ALLOWs only: a DENY of READ does not deny DESCRIBE.
        self.permission == Permission::Allow
            && match operation {
                Operation::Describe => matches!(
                    self.operation,
                    Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
                ),
                Operation::DescribeConfigs => self.operation == Operation::AlterConfigs,
                _ => false,
            }
    }

    /// Whether this ACL applies to `action` (rules 2 and 3).
    pub fn applies_to(&self, action: &Action<'_>) -> bool {
        self.concerns(action.resource_type, action.resource_name)
            && (self.principal == action.principal || self.principal == WILDCARD_PRINCIPAL)
            && (self.host == WILDCARD || self.host == action.host)
            && self.covers_operation(action.operation)
    }
}

/// What is asked: may `principal`, connected from `host`, do `operation` on the resource?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action<'a> {
    /// The authenticated principal, `User:alice` (`User:ANONYMOUS` on PLAINTEXT).
    pub principal: &'a str,
    /// The client's address as text.
    pub host: &'a str,
    /// The resource type.
    pub resource_type: ResourceType,
    /// The resource name.
    pub resource_name: &'a str,
    /// The operation (never ALL).
    pub operation: Operation,
}

/// The authorizer's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// `super.users`: principals allowed everything.
    pub super_users: BTreeSet<String>,
    /// `allow.everyone.if.no.acl.found`: the answer for a resource no ACL concerns.
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerConfig {
    /// Reads `super.users` as Kafka writes it: principals separated by `;`
    /// (`User:alice;User:bob`), blanks around them ignored.
    pub fn parse_super_users(value: &str) -> BTreeSet<String> {
        value
            .split(';')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect()
    }
}

/// Why a decision came out as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The principal is a super user.
    SuperUser,
    /// The ACL at this index (in the slice given) applies and allows.
    AllowAcl(usize),
    /// The ACL at this index applies and denies.
    DenyAcl(usize),
    /// No ACL concerns the resource: `allow.everyone.if.no.acl.found` decided.
    NoAclFound,
    /// ACLs concern the resource, but none allows this action.
    NoMatchingAllow,
    /// The action asked for ALL, which only an ACL may name.
    InvalidOperation,
}

/// The authorizer's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Allowed, and why.
    Allowed(Reason),
    /// Denied, and why.
    Denied(Reason),
}

impl Decision {
    /// Whether the action is allowed.
    pub fn is_allowed(self) -> bool {
        matches!(self, Decision::Allowed(_))
    }
}

/// Decides `action` under `config` and `acls` (the module's rules 1–5; I43).
pub fn authorize(config: &AuthorizerConfig, acls: &[AclBinding], action: &Action<'_>) -> Decision {
    if action.operation == Operation::All {
        return Decision::Denied(Reason::InvalidOperation);
    }
    if config.super_users.contains(action.principal) {
        return Decision::Allowed(Reason::SuperUser);
    }
    let mut resource_has_acls = false;
    let mut allow = None;
    for (index, acl) in acls.iter().enumerate() {
        if !acl.concerns(action.resource_type, action.resource_name) {
            continue;
        }
        resource_has_acls = true;
        if !acl.applies_to(action) {
            continue;
        }
        match acl.permission {
            Permission::Deny => return Decision::Denied(Reason::DenyAcl(index)),
            Permission::Allow => {
                allow.get_or_insert(index);
            }
        }
    }
    match allow {
        Some(index) => Decision::Allowed(Reason::AllowAcl(index)),
        None if !resource_has_acls && config.allow_everyone_if_no_acl_found => {
            Decision::Allowed(Reason::NoAclFound)
        }
        None if !resource_has_acls => Decision::Denied(Reason::NoAclFound),
        None => Decision::Denied(Reason::NoMatchingAllow),
    }
}

/// Whether `principal` from `host` may do `operation` on at least one resource of
/// `resource_type` (Kafka's `Authorizer.authorizeByResourceType`, which KIP-679 uses to grant
/// idempotent writes to whoever may write some topic): a super user may; a DENY of every name
/// (LITERAL `*`) refuses; else any applying ALLOW whose pattern no applying DENY covers
/// (a LITERAL name or a PREFIXED prefix of it) allows. With no ACL on the resource type at
/// all, `allow.everyone.if.no.acl.found` decides.
pub fn authorize_by_resource_type(
    config: &AuthorizerConfig,
    acls: &[AclBinding],
    principal: &str,
    host: &str,
    resource_type: ResourceType,
    operation: Operation,
) -> bool {
    if operation == Operation::All {
        return false;
    }
    if config.super_users.contains(principal) {
        return true;
    }
    let of_type = || acls.iter().filter(|a| a.resource_type == resource_type);
    if of_type().next().is_none() {
        return config.allow_everyone_if_no_acl_found;
    }
    let applying = |a: &&AclBinding| {
        (a.principal == principal || a.principal == WILDCARD_PRINCIPAL)
            && (a.host == WILDCARD || a.host == host)
            && a.covers_operation(operation)
    };
    let denies: Vec<&AclBinding> = of_type()
        .filter(applying)
        .filter(|a| a.permission == Permission::Deny)
        .collect();
    if denies
        .iter()
        .any(|d| d.pattern_type == PatternType::Literal && d.resource_name == WILDCARD)
    {
        return false;
    }
    let covered = |allow: &AclBinding| {
        denies
            .iter()
            .any(|d| match (d.pattern_type, allow.pattern_type) {
                (PatternType::Literal, PatternType::Literal) => {
                    d.resource_name == allow.resource_name
                }
                (PatternType::Prefixed, _) => {
                    allow.resource_name.starts_with(d.resource_name.as_str())
                }
                (PatternType::Literal, PatternType::Prefixed) => false,
            })
    };
    of_type()
        .filter(applying)
        .filter(|a| a.permission == Permission::Allow)
        .any(|a| !covered(a))
}

#[cfg(test)]
mod tests;
