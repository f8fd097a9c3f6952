//! Several listeners, as Kafka configures them (`listeners`, `listener.security.protocol.map`,
//! `advertised.listeners`), over real TCP against the `minikafka` binary: Metadata,
//! FindCoordinator and DescribeCluster answer each client with the address of the listener
//! it connected to.
//!
//! Contract: every test starts its own broker ([`common::Broker`]) inside [`common::bounded`].

mod common;

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use common::typed::TypedClient;
use common::{bounded, Broker};

const LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

fn metadata_broker(client: &mut TypedClient) -> (String, i32) {
    let mut request = MetadataRequest::default();
    request.topics = Some(Vec::new());
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &request);
    assert_eq!(response.brokers.len(), 1);
    let b = &response.brokers[0];
    (b.host.to_string(), b.port)
}

fn coordinator(client: &mut TypedClient) -> (String, i32) {
    let mut request = FindCoordinatorRequest::default();
    request.key_type = 0;
    request.coordinator_keys = vec![StrBytes::from_static_str("g")];
    let response: FindCoordinatorResponse = client.call(ApiKey::FindCoordinator, 4, &request);
    let c = &response.coordinators[0];
    assert_eq!(c.error_code, 0);
    (c.host.to_string(), c.port)
}

fn cluster_broker(client: &mut TypedClient) -> (String, i32) {
    let mut request = DescribeClusterRequest::default();
    request.endpoint_type = 1;
    let response: DescribeClusterResponse = client.call(ApiKey::DescribeCluster, 1, &request);
    let b = &response.brokers[0];
    (b.host.to_string(), b.port)
}

/// A named listener mapped to a protocol, one advertised elsewhere, one at its own address:
/// each client is told the address of the listener it came through.
#[test]
fn each_listener_advertises_its_own_address() {
    bounded(LIMIT, || {
        let broker = Broker::builder()
            .listener("INTERNAL")
            .with(
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            )
            .with("advertised.listeners", "INTERNAL://internal.example:19093")
            .start();
        let own = ("127.0.0.1".to_string(), i32::from(broker.port()));
        let mut plain = TypedClient::connect(broker.addr());
        assert_eq!(metadata_broker(&mut plain), own);
        assert_eq!(coordinator(&mut plain), own);
        assert_eq!(cluster_broker(&mut plain), own);

        let internal = ("internal.example".to_string(), 19093);
        let mut other = TypedClient::connect(broker.listener_addr("INTERNAL"));
        assert_eq!(metadata_broker(&mut other), internal);
        assert_eq!(coordinator(&mut other), internal);
        assert_eq!(cluster_broker(&mut other), internal);
    });
}

/// A listener whose name the protocol map lacks stops the broker at startup, naming it.
#[test]
fn an_unmapped_listener_name_is_refused_at_startup() {
    let out = std::process::Command::new(common::minikafka_bin())
        .args([
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        ])
        .output()
        .expect("run minikafka");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("EXTERNAL") && stderr.contains("listener.security.protocol.map"),
        "{stderr}"
    );
}
