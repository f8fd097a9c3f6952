//! The ACL APIs with no authorizer, over real TCP against the `minikafka` binary: ApiVersions
//! lists DescribeAcls, CreateAcls and DeleteAcls v1–3, and each answers SECURITY_DISABLED (54)
//! where Kafka puts it (DescribeAcls: top level; CreateAcls: one result per creation;
//! DeleteAcls: one result per filter, none matching) at every version, on a connection that
//! keeps serving afterwards. Real clients (confluent-kafka, kafka-python) are in
//! `tests/interop/test_acls.py`.
//!
//! Contract: every test starts its own broker ([`common::Broker`]) inside [`common::bounded`].

mod common;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use minikafka_core::error_code::ErrorCode;

use common::librdkafka::TEST_LIMIT;
use common::typed::TypedClient;
use common::{bounded, Broker};

const DISABLED: i16 = ErrorCode::SECURITY_DISABLED.code();
const MESSAGE: &str = "No Authorizer is configured.";

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_string())
}

fn creation(name: &str, operation: i8) -> create_acls_request::AclCreation {
    let mut c = create_acls_request::AclCreation::default();
    c.resource_type = 2; // TOPIC
    c.resource_name = s(name);
    c.resource_pattern_type = 3; // LITERAL
    c.principal = s("User:alice");
    c.host = s("*");
    c.operation = operation;
    c.permission_type = 3; // ALLOW
    c
}

fn any_filter() -> delete_acls_request::DeleteAclsFilter {
    let mut f = delete_acls_request::DeleteAclsFilter::default();
    f.resource_type_filter = 1; // ANY
    f.pattern_type_filter = 1; // ANY
    f.operation = 1; // ANY
    f.permission_type = 1; // ANY
    f
}

#[test]
fn api_versions_lists_the_acl_apis_v1_to_v3() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        let mut client = TypedClient::connect(broker.addr());
        let response: ApiVersionsResponse =
            client.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        let listed = |key: ApiKey| {
            response
                .api_keys
                .iter()
                .find(|k| k.api_key == key as i16)
                .map(|k| (k.min_version, k.max_version))
        };
        assert_eq!(listed(ApiKey::DescribeAcls), Some((1, 3)));
        assert_eq!(listed(ApiKey::CreateAcls), Some((1, 3)));
        assert_eq!(listed(ApiKey::DeleteAcls), Some((1, 3)));
    });
}

#[test]
fn every_acl_api_answers_security_disabled_where_kafka_does_at_every_version() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        let mut client = TypedClient::connect(broker.addr());
        for version in 1..=3 {
            let mut describe = DescribeAclsRequest::default();
            describe.resource_type_filter = 1;
            describe.pattern_type_filter = 1;
            describe.operation = 1;
            describe.permission_type = 1;
            let described: DescribeAclsResponse =
                client.call(ApiKey::DescribeAcls, version, &describe);
            assert_eq!(described.error_code, DISABLED, "v{version}");
            assert_eq!(described.error_message.as_deref(), Some(MESSAGE));
            assert!(described.resources.is_empty());

            let mut create = CreateAclsRequest::default();
            create.creations = vec![creation("a", 3), creation("b", 4), creation("c", 8)];
            let created: CreateAclsResponse = client.call(ApiKey::CreateAcls, version, &create);
            assert_eq!(
                created.results.len(),
                3,
                "v{version}: one result per creation"
            );
            for result in &created.results {
                assert_eq!(result.error_code, DISABLED, "v{version}");
                assert_eq!(result.error_message.as_deref(), Some(MESSAGE));
            }

            let mut delete = DeleteAclsRequest::default();
            delete.filters = vec![any_filter(), any_filter()];
            let deleted: DeleteAclsResponse = client.call(ApiKey::DeleteAcls, version, &delete);
            assert_eq!(
                deleted.filter_results.len(),
                2,
                "v{version}: one per filter"
            );
            for result in &deleted.filter_results {
                assert_eq!(result.error_code, DISABLED, "v{version}");
                assert_eq!(result.error_message.as_deref(), Some(MESSAGE));
                assert!(result.matching_acls.is_empty());
            }

            // Empty requests get empty answers (Kafka's `nCopies(0, …)`).
            let created: CreateAclsResponse =
                client.call(ApiKey::CreateAcls, version, &CreateAclsRequest::default());
            assert!(created.results.is_empty());
        }
        // The connection still serves other APIs.
        let response: ApiVersionsResponse =
            client.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        assert_eq!(response.error_code, 0);
    });
}
