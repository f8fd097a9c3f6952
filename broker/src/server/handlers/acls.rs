//! The ACL APIs, v1–3: DescribeAcls (key 29), CreateAcls (key 30), DeleteAcls (key 31).
//!
//! Contract:
//! - With no authorizer (`authorizer.class.name` unset), every answer is SECURITY_DISABLED
//!   (54) with Kafka's message, in the place each API carries it: DescribeAcls at the top
//!   level (no resources); CreateAcls once per creation, in request order; DeleteAcls once
//!   per filter, in request order, with no matching ACLs (I44). Listed in ApiVersions either
//!   way, so that tools asking "is security on?" get Kafka's answer.
//! - With an authorizer (I48, I49): DescribeAcls needs DESCRIBE on the cluster, CreateAcls
//!   and DeleteAcls ALTER (else CLUSTER_AUTHORIZATION_FAILED, per element). Each creation and
//!   filter is checked on its own (INVALID_REQUEST with the reason for a bad one, the others
//!   still done). Changes are serialized by the admin lock, stored durably, then put in
//!   force; a failed write answers UNKNOWN_SERVER_ERROR for every element and changes
//!   nothing. DescribeAcls groups the matching ACLs by resource pattern.
//! - The requests' arrays are bounded by the pre-check before decoding (I10), so each
//!   answer's size is bounded by the request's and the ACL count.

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use minikafka_core::auth::acl::{AclBinding, Operation};
use minikafka_core::auth::acl_filter::{new_binding, AclFilter};
use minikafka_core::error_code::ErrorCode;

use super::str_bytes;
use crate::server::acl_store::AclSet;
use crate::server::authz::Caller;
use crate::server::shard_context::{Authorizer, SecurityStores};

/// Apache Kafka's message for SECURITY_DISABLED when no authorizer is configured.
pub const NO_AUTHORIZER_MESSAGE: &str = "No Authorizer is configured.";

/// Kafka's message when the principal may not manage ACLs.
const CLUSTER_DENIED_MESSAGE: &str = "Cluster authorization failed.";

fn filter_of(
    f: &kafka_protocol::messages::delete_acls_request::DeleteAclsFilter,
) -> Result<AclFilter, String> {
    AclFilter::from_wire(
        f.resource_type_filter,
        f.resource_name_filter.as_deref(),
        f.pattern_type_filter,
        f.principal_filter.as_deref(),
        f.host_filter.as_deref(),
        f.operation,
        f.permission_type,
    )
}

/// DescribeAcls: SECURITY_DISABLED without an authorizer, else the ACLs the filter selects,
/// grouped by resource pattern.
pub fn handle_describe(
    state: &(impl SecurityStores + Authorizer),
    caller: &Caller,
    request: &DescribeAclsRequest,
) -> DescribeAclsResponse {
    if !state.authorizer_enabled() {
        return describe();
    }
    let mut response = DescribeAclsResponse::default();
    if !state.cluster_allowed(caller, Operation::Describe) {
        response.error_code = ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code();
        response.error_message = Some(str_bytes(CLUSTER_DENIED_MESSAGE));
        return response;
    }
    let filter = match AclFilter::from_wire(
        request.resource_type_filter,
        request.resource_name_filter.as_deref(),
        request.pattern_type_filter,
        request.principal_filter.as_deref(),
        request.host_filter.as_deref(),
        request.operation,
        request.permission_type,
    ) {
        Ok(filter) => filter,
        Err(why) => {
            response.error_code = ErrorCode::INVALID_REQUEST.code();
            response.error_message = Some(str_bytes(&why));
            return response;
        }
    };
    let acls = state.acls();
    // The set is sorted by resource type, pattern type and name first: equal patterns are
    // adjacent.
    for acl in acls.matching(&filter) {
        let description = {
            let mut d = AclDescription::default();
            d.principal = str_bytes(&acl.principal);
            d.host = str_bytes(&acl.host);
            d.operation = acl.operation.code();
            d.permission_type = acl.permission.code();
            d
        };
        match response.resources.last_mut() {
            Some(r)
                if r.resource_type == acl.resource_type.code()
                    && r.pattern_type == acl.pattern_type.code()
                    && r.resource_name.as_str() == acl.resource_name =>
            {
                r.acls.push(description)
            }
            _ => {
                let mut r = DescribeAclsResource::default();
                r.resource_type = acl.resource_type.code();
                r.resource_name = str_bytes(&acl.resource_name);
                r.pattern_type = acl.pattern_type.code();
                r.acls.push(description);
                response.resources.push(r);
            }
        }
    }
    response
}

/// Stores `next` as the broker's ACLs (durable first, then in force on every shard; the
/// caller holds the admin lock); the reason, for the answer, when it could not be stored.
async fn store(state: &impl SecurityStores, next: AclSet) -> Result<(), String> {
    match state.replace_acls(next).await {
        Ok(()) => Ok(()),
        Err(e) => {
            tracing::error!("storing the ACLs failed: {e}");
            Err(e.to_string())
        }
    }
}

fn creation_result(code: ErrorCode, message: Option<&str>) -> AclCreationResult {
    let mut result = AclCreationResult::default();
    result.error_code = code.code();
    result.error_message = message.map(str_bytes);
    result
}

/// CreateAcls: SECURITY_DISABLED without an authorizer, else each valid creation stored.
pub async fn handle_create(
    state: &(impl SecurityStores + Authorizer),
    caller: &Caller,
    request: &CreateAclsRequest,
) -> CreateAclsResponse {
    if !state.authorizer_enabled() {
        return create(request);
    }
    let mut response = CreateAclsResponse::default();
    if !state.cluster_allowed(caller, Operation::Alter) {
        response.results = vec![
            creation_result(
                ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
                Some(CLUSTER_DENIED_MESSAGE)
            );
            request.creations.len()
        ];
        return response;
    }
    let checked: Vec<Result<AclBinding, String>> = request
        .creations
        .iter()
        .map(|c| {
            new_binding(
                c.resource_type,
                &c.resource_name,
                c.resource_pattern_type,
                &c.principal,
                &c.host,
                c.operation,
                c.permission_type,
            )
        })
        .collect();
    let added: Vec<AclBinding> = checked
        .iter()
        .filter_map(|c| c.as_ref().ok().cloned())
        .collect();
    let stored = if added.is_empty() {
        Ok(())
    } else {
        let _admin = state.lock_admin().await;
        store(state, state.acls().with(added)).await
    };
    response.results = checked
        .iter()
        .map(|c| match (c, &stored) {
            (Err(why), _) => creation_result(ErrorCode::INVALID_REQUEST, Some(why)),
            (Ok(_), Err(why)) => creation_result(ErrorCode::UNKNOWN_SERVER_ERROR, Some(why)),
            (Ok(_), Ok(())) => creation_result(ErrorCode::NONE, None),
        })
        .collect();
    response
}

fn filter_result(code: ErrorCode, message: Option<&str>) -> DeleteAclsFilterResult {
    let mut result = DeleteAclsFilterResult::default();
    result.error_code = code.code();
    result.error_message = message.map(str_bytes);
    result
}

fn matching_acl(acl: &AclBinding) -> DeleteAclsMatchingAcl {
    let mut m = DeleteAclsMatchingAcl::default();
    m.resource_type = acl.resource_type.code();
    m.resource_name = str_bytes(&acl.resource_name);
    m.pattern_type = acl.pattern_type.code();
    m.principal = str_bytes(&acl.principal);
    m.host = str_bytes(&acl.host);
    m.operation = acl.operation.code();
    m.permission_type = acl.permission.code();
    m
}

/// DeleteAcls: SECURITY_DISABLED without an authorizer, else every ACL a valid filter
/// selects removed, and listed under each filter that selected it.
pub async fn handle_delete(
    state: &(impl SecurityStores + Authorizer),
    caller: &Caller,
    request: &DeleteAclsRequest,
) -> DeleteAclsResponse {
    if !state.authorizer_enabled() {
        return delete(request);
    }
    let mut response = DeleteAclsResponse::default();
    if !state.cluster_allowed(caller, Operation::Alter) {
        response.filter_results = vec![
            filter_result(
                ErrorCode::CLUSTER_AUTHORIZATION_FAILED,
                Some(CLUSTER_DENIED_MESSAGE)
            );
            request.filters.len()
        ];
        return response;
    }
    let filters: Vec<Result<AclFilter, String>> = request.filters.iter().map(filter_of).collect();
    let valid: Vec<AclFilter> = filters
        .iter()
        .filter_map(|f| f.as_ref().ok().cloned())
        .collect();
    let _admin = state.lock_admin().await;
    let before = state.acls();
    let next = before.without(&valid);
    let stored = if next == *before {
        Ok(())
    } else {
        store(state, next).await
    };
    response.filter_results = filters
        .iter()
        .map(|f| match (f, &stored) {
            (Err(why), _) => filter_result(ErrorCode::INVALID_REQUEST, Some(why)),
            (Ok(_), Err(why)) => filter_result(ErrorCode::UNKNOWN_SERVER_ERROR, Some(why)),
            (Ok(filter), Ok(())) => {
                let mut result = filter_result(ErrorCode::NONE, None);
                result.matching_acls = before.matching(filter).map(matching_acl).collect();
                result
            }
        })
        .collect();
    response
}

/// DescribeAcls without an authorizer: the top-level error, no resources.
pub fn describe() -> DescribeAclsResponse {
    let mut response = DescribeAclsResponse::default();
    response.error_code = ErrorCode::SECURITY_DISABLED.code();
    response.error_message = Some(str_bytes(NO_AUTHORIZER_MESSAGE));
    response
}

/// CreateAcls: one SECURITY_DISABLED result per requested creation.
pub fn create(request: &CreateAclsRequest) -> CreateAclsResponse {
    let result = creation_result(ErrorCode::SECURITY_DISABLED, Some(NO_AUTHORIZER_MESSAGE));
    let mut response = CreateAclsResponse::default();
    response.results = vec![result; request.creations.len()];
    response
}

/// DeleteAcls: one SECURITY_DISABLED result per filter, none matching.
pub fn delete(request: &DeleteAclsRequest) -> DeleteAclsResponse {
    let result = filter_result(ErrorCode::SECURITY_DISABLED, Some(NO_AUTHORIZER_MESSAGE));
    let mut response = DeleteAclsResponse::default();
    response.filter_results = vec![result; request.filters.len()];
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;

    const DISABLED: i16 = ErrorCode::SECURITY_DISABLED.code();

    /// ACLs in memory, whose durable write fails when `fail` is set, and an authorizer that
    /// allows everything: the handler sees only these two traits (I150).
    struct FakeStores {
        acls: std::cell::RefCell<std::sync::Arc<AclSet>>,
        fail: bool,
        admin: futures::lock::Mutex<()>,
    }

    impl SecurityStores for FakeStores {
        async fn lock_admin(&self) -> futures::lock::MutexGuard<'_, ()> {
            self.admin.lock().await
        }
        fn acls(&self) -> std::sync::Arc<AclSet> {
            self.acls.borrow().clone()
        }
        async fn replace_acls(&self, next: AclSet) -> std::io::Result<()> {
            if self.fail {
                return Err(std::io::Error::other("disk full"));
            }
            *self.acls.borrow_mut() = std::sync::Arc::new(next);
            Ok(())
        }
        fn scram_credentials(&self) -> std::sync::Arc<crate::server::scram_store::ScramStore> {
            unreachable!("the ACL APIs read no credentials")
        }
        async fn replace_scram_credentials(
            &self,
            _: crate::server::scram_store::ScramStore,
        ) -> std::io::Result<()> {
            unreachable!("the ACL APIs write no credentials")
        }
        fn quota_configs(&self) -> std::sync::Arc<minikafka_core::quota::QuotaConfigs> {
            unreachable!("the ACL APIs read no quotas")
        }
        async fn replace_quota_configs(
            &self,
            _: minikafka_core::quota::QuotaConfigs,
        ) -> std::io::Result<()> {
            unreachable!("the ACL APIs write no quotas")
        }
    }

    impl Authorizer for FakeStores {
        fn authorizer_enabled(&self) -> bool {
            true
        }
        fn allowed(
            &self,
            _: &Caller,
            _: minikafka_core::auth::acl::ResourceType,
            _: &str,
            _: Operation,
        ) -> bool {
            true
        }
        fn authorized_operations(
            &self,
            _: &Caller,
            _: minikafka_core::auth::acl::ResourceType,
            _: &str,
            _: bool,
        ) -> i32 {
            unreachable!("the ACL APIs answer no bitfields")
        }
        fn any_topic_allowed(&self, _: &Caller, _: Operation) -> bool {
            true
        }
    }

    fn read_on_topic(principal: &str) -> AclCreation {
        let mut c = AclCreation::default();
        c.resource_type = 2; // TOPIC
        c.resource_name = str_bytes("orders");
        c.resource_pattern_type = 3; // LITERAL
        c.principal = str_bytes(principal);
        c.host = str_bytes("*");
        c.operation = 3; // READ
        c.permission_type = 3; // ALLOW
        c
    }

    /// I152: a failed write answers UNKNOWN_SERVER_ERROR and changes nothing.
    #[test]
    fn a_creation_is_in_force_only_once_stored() {
        let caller = Caller::anonymous("127.0.0.1:9".parse().expect("an address"));
        let mut request = CreateAclsRequest::default();
        request.creations = vec![read_on_topic("User:alice"), AclCreation::default()];
        for fail in [true, false] {
            let stores = FakeStores {
                acls: Default::default(),
                fail,
                admin: futures::lock::Mutex::new(()),
            };
            let response = futures::executor::block_on(handle_create(&stores, &caller, &request));
            let codes: Vec<i16> = response.results.iter().map(|r| r.error_code).collect();
            let invalid = ErrorCode::INVALID_REQUEST.code();
            if fail {
                let failed = ErrorCode::UNKNOWN_SERVER_ERROR.code();
                assert_eq!(codes, [failed, invalid]);
                assert!(
                    stores.acls().bindings().is_empty(),
                    "a failed write changed ACLs"
                );
            } else {
                assert_eq!(codes, [ErrorCode::NONE.code(), invalid]);
                assert_eq!(stores.acls().bindings().len(), 1);
            }
        }
    }

    #[test]
    fn every_creation_and_every_filter_gets_its_own_security_disabled_result() {
        let mut create_request = CreateAclsRequest::default();
        create_request.creations = vec![AclCreation::default(); 3];
        let created = create(&create_request);
        assert_eq!(created.results.len(), 3);
        assert!(created.results.iter().all(|r| r.error_code == DISABLED
            && r.error_message.as_deref() == Some(NO_AUTHORIZER_MESSAGE)));

        let mut delete_request = DeleteAclsRequest::default();
        delete_request.filters = vec![DeleteAclsFilter::default(); 2];
        let deleted = delete(&delete_request);
        assert_eq!(deleted.filter_results.len(), 2);
        assert!(deleted
            .filter_results
            .iter()
            .all(|r| r.error_code == DISABLED && r.matching_acls.is_empty()));

        let described = describe();
        assert_eq!(described.error_code, DISABLED);
        assert!(described.resources.is_empty());
    }
}
