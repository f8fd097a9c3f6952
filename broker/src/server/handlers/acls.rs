//! The ACL APIs, v1–3: DescribeAcls (key 29), CreateAcls (key 30), DeleteAcls (key 31), as
//! Apache Kafka answers them with no authorizer configured (`authorizer.class.name` unset).
//!
//! Contract:
//! - The broker has no authorizer yet, so every answer is SECURITY_DISABLED (54) with Kafka's
//!   message, in the place each API carries it: DescribeAcls at the top level (no resources);
//!   CreateAcls once per creation, in request order; DeleteAcls once per filter, in request
//!   order, with no matching ACLs. Kafka builds the last two with the request's
//!   `getErrorResponse`, one result per element, so clients pair results with their inputs.
//! - Listed in ApiVersions so that tools asking "is security on?" (MirrorMaker 2's ACL sync,
//!   UI tools' ACL pages, `kafka-acls.sh`) get the answer Kafka gives instead of
//!   UNSUPPORTED_VERSION. The requests' arrays are bounded by the pre-check before decoding
//!   (I10), so the answer's size is bounded by the request's.
//! - Never: stores, checks or lists an ACL (`core::auth::acl` holds the decision; the broker
//!   does not serve it yet).

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsResponse,
};
use minikafka_core::error_code::ErrorCode;

use super::str_bytes;

/// Apache Kafka's message for SECURITY_DISABLED when no authorizer is configured.
pub const NO_AUTHORIZER_MESSAGE: &str = "No Authorizer is configured.";

/// DescribeAcls: the top-level error, no resources.
pub fn describe() -> DescribeAclsResponse {
    let mut response = DescribeAclsResponse::default();
    response.error_code = ErrorCode::SECURITY_DISABLED.code();
    response.error_message = Some(str_bytes(NO_AUTHORIZER_MESSAGE));
    response
}

/// CreateAcls: one SECURITY_DISABLED result per requested creation.
pub fn create(request: &CreateAclsRequest) -> CreateAclsResponse {
    let mut result = AclCreationResult::default();
    result.error_code = ErrorCode::SECURITY_DISABLED.code();
    result.error_message = Some(str_bytes(NO_AUTHORIZER_MESSAGE));
    let mut response = CreateAclsResponse::default();
    response.results = vec![result; request.creations.len()];
    response
}

/// DeleteAcls: one SECURITY_DISABLED result per filter, none matching.
pub fn delete(request: &DeleteAclsRequest) -> DeleteAclsResponse {
    let mut result = DeleteAclsFilterResult::default();
    result.error_code = ErrorCode::SECURITY_DISABLED.code();
    result.error_message = Some(str_bytes(NO_AUTHORIZER_MESSAGE));
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
