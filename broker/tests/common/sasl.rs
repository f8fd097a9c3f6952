//! SASL as Kafka's clients speak it, over a [`TypedClient`]: SaslHandshake v1, then
//! SaslAuthenticate v2 with the mechanism's bytes (PLAIN's `\0user\0password` here; SCRAM and
//! OAUTHBEARER messages are built by their tests). Each call is `None` when the broker
//! closed the connection or sent nothing instead of answering.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::typed::TypedClient;

pub fn handshake(client: &mut TypedClient, mechanism: &str) -> Option<SaslHandshakeResponse> {
    let mut request = SaslHandshakeRequest::default();
    request.mechanism = StrBytes::from_string(mechanism.to_string());
    client.try_call(ApiKey::SaslHandshake, 1, &request)
}

pub fn authenticate(client: &mut TypedClient, bytes: &[u8]) -> Option<SaslAuthenticateResponse> {
    let mut request = SaslAuthenticateRequest::default();
    request.auth_bytes = Bytes::copy_from_slice(bytes);
    client.try_call(ApiKey::SaslAuthenticate, 2, &request)
}

/// A Metadata request (no topics): answered only on a connection allowed to make requests.
pub fn metadata(client: &mut TypedClient) -> Option<MetadataResponse> {
    let mut request = MetadataRequest::default();
    request.topics = Some(Vec::new());
    client.try_call(ApiKey::Metadata, 12, &request)
}

/// A PLAIN login (the handshake must succeed): the mechanisms the handshake offered and the
/// SaslAuthenticate answer.
pub fn offered_then_plain(
    client: &mut TypedClient,
    user: &str,
    password: &str,
) -> (Vec<String>, SaslAuthenticateResponse) {
    let hs = handshake(client, "PLAIN").expect("handshake answered");
    assert_eq!(hs.error_code, 0);
    let offered = hs.mechanisms.iter().map(|m| m.to_string()).collect();
    let answer =
        authenticate(client, format!("\0{user}\0{password}").as_bytes()).expect("answered");
    (offered, answer)
}

/// A PLAIN login (the handshake must succeed): the SaslAuthenticate answer.
pub fn plain_login(
    client: &mut TypedClient,
    user: &str,
    password: &str,
) -> SaslAuthenticateResponse {
    offered_then_plain(client, user, password).1
}
