//! OAUTHBEARER (unsecured JWTs, Kafka's default validator, I138) and KIP-368 re-authentication
//! (`connections.max.reauth.ms`, I139) over real TCP against the `minikafka` binary, spoken
//! as Kafka's clients speak them: SaslHandshake v1, then SaslAuthenticate v2 with RFC 7628's
//! client first message `n,,\x01auth=Bearer <jwt>\x01\x01`.
//!
//! Refusals: an expired token, a token without the required scope, a signed (`alg` not
//! `none`) token, an authzid that is not the token's principal and a malformed message, each
//! answered as Kafka answers it (the JSON error as a challenge, then SASL_AUTHENTICATION_FAILED
//! after the client's `\x01`); a re-authentication as another principal or with another
//! mechanism; a request after the session expired. librdkafka's own OAUTHBEARER and
//! re-authentication run in `tests/interop/test_security.py`.
//!
//! Contract: every test starts its own broker ([`common::Broker`]) inside [`common::bounded`].

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kafka_protocol::messages::*;
use minikafka_core::auth::oauthbearer::unsecured_token;
use serde_json::json;

use common::sasl::{authenticate, handshake, metadata, plain_login};
use common::typed::TypedClient;
use common::{bounded, Broker};

const LIMIT: Duration = Duration::from_secs(90);
const PLAIN_JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";"#;
const OAUTH_JAAS: &str = r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorRequiredScope="kafka";"#;
const SASL_AUTHENTICATION_FAILED: i16 = 58;
const ILLEGAL_SASL_STATE: i16 = 34;
const INVALID_TOKEN: &str = r#"{"status":"invalid_token"}"#;

fn broker_with(extra: &[(&str, &str)]) -> Broker {
    let mut builder = Broker::builder()
        .listener("SASL_PLAINTEXT")
        .with(
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms",
            "PLAIN,OAUTHBEARER",
        )
        .with(
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            PLAIN_JAAS,
        )
        .with(
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config",
            OAUTH_JAAS,
        );
    for (k, v) in extra {
        builder = builder.with(k, v);
    }
    builder.start()
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

/// RFC 7628's client first message, as Kafka's clients send it.
fn first_message(authzid: &str, token: &str) -> Vec<u8> {
    let gs2 = if authzid.is_empty() {
        "n,,".to_string()
    } else {
        format!("n,a={authzid},")
    };
    format!("{gs2}\x01auth=Bearer {token}\x01\x01").into_bytes()
}

/// Handshake then the first message; the SaslAuthenticate answer.
fn oauth_login(client: &mut TypedClient, message: &[u8]) -> SaslAuthenticateResponse {
    let hs = handshake(client, "OAUTHBEARER").expect("handshake answered");
    assert_eq!(hs.error_code, 0);
    authenticate(client, message).expect("answered")
}

/// A token refused by the validator: the JSON error comes as a challenge (no error code),
/// the client's `\x01` is answered SASL_AUTHENTICATION_FAILED with the same JSON, and the
/// connection closes.
fn assert_refused_with(broker: &Broker, token: &str, json: &str) {
    let mut client = TypedClient::connect(broker.listener_addr("SASL_PLAINTEXT"));
    let challenge = oauth_login(&mut client, &first_message("", token));
    assert_eq!(challenge.error_code, 0, "{:?}", challenge.error_message);
    assert_eq!(String::from_utf8_lossy(&challenge.auth_bytes), json);
    let failed = authenticate(&mut client, b"\x01").expect("answered");
    assert_eq!(failed.error_code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(failed.error_message.as_deref(), Some(json));
    assert!(client.is_closed_by_broker(), "closed after a refused token");
}

#[test]
fn oauthbearer_unsecured_jwts_authenticate_and_refusals_are_kafkas() {
    bounded(LIMIT, || {
        let broker = broker_with(&[]);
        let addr = broker.listener_addr("SASL_PLAINTEXT");
        let good = unsecured_token(
            &json!({"sub": "alice", "exp": now_s() + 60.0, "scope": "kafka other"}),
        );
        let mut client = TypedClient::connect(addr);
        let hs = handshake(&mut client, "OAUTHBEARER").expect("answered");
        let names: Vec<String> = hs.mechanisms.iter().map(|m| m.to_string()).collect();
        assert_eq!(names, ["PLAIN", "OAUTHBEARER"]);
        let answer = authenticate(&mut client, &first_message("alice", &good)).expect("answered");
        assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
        assert!(answer.auth_bytes.is_empty());
        // The token's exp bounds the session even without connections.max.reauth.ms (I139).
        assert!(
            (1..=60_000).contains(&answer.session_lifetime_ms),
            "{}",
            answer.session_lifetime_ms
        );
        assert!(
            metadata(&mut client).is_some(),
            "served after authentication"
        );

        let expired =
            unsecured_token(&json!({"sub": "alice", "exp": now_s() - 5.0, "scope": "kafka"}));
        assert_refused_with(&broker, &expired, INVALID_TOKEN);
        let no_sub = unsecured_token(&json!({"exp": now_s() + 60.0, "scope": "kafka"}));
        assert_refused_with(&broker, &no_sub, INVALID_TOKEN);
        let no_scope = unsecured_token(&json!({"sub": "alice", "exp": now_s() + 60.0}));
        assert_refused_with(
            &broker,
            &no_scope,
            r#"{"status":"insufficient_scope", "scope":"[kafka]"}"#,
        );
        // A signed token is not an unsecured one (this listener has no JWKS; see
        // tests/sasl_oauthbearer_jwks.rs for one that has).
        let signed = good.replacen(
            good.split('.').next().expect("header"),
            "eyJhbGciOiJIUzI1NiJ9",
            1,
        ) + "c2lnbmF0dXJl";
        assert_refused_with(&broker, &signed, INVALID_TOKEN);

        // An authzid other than the token's principal: refused at once, as Kafka says it.
        let mut other = TypedClient::connect(addr);
        let answer = oauth_login(&mut other, &first_message("bob", &good));
        assert_eq!(answer.error_code, SASL_AUTHENTICATION_FAILED);
        assert_eq!(
            answer.error_message.as_deref(),
            Some("Authentication failed: Client requested an authorization id (bob) that is different from the token's principal name (alice)")
        );
        assert!(other.is_closed_by_broker());

        // Malformed first messages: Kafka's "invalid credentials" message, nothing else.
        for message in [
            format!("n,,\x01auth=Basic {good}\x01\x01").into_bytes(),
            format!("n,,\x01auth=Bearer {good}\x01").into_bytes(),
            b"n,,\x01\x01".to_vec(),
            b"y,,\x01auth=Bearer x\x01\x01".to_vec(),
            vec![0xff; 64],
        ] {
            let mut bad = TypedClient::connect(addr);
            let answer = oauth_login(&mut bad, &message);
            assert_eq!(answer.error_code, SASL_AUTHENTICATION_FAILED);
            assert_eq!(
                answer.error_message.as_deref(),
                Some("Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER")
            );
            assert!(bad.is_closed_by_broker());
        }

        let log = broker.output();
        assert!(
            log.contains("OAUTHBEARER token refused: Token not valid now: expired"),
            "{log}"
        );
        // The tokens are never logged.
        assert!(
            !log.contains(good.split('.').nth(1).expect("claims")),
            "a token in the log"
        );
    });
}

#[test]
fn oauthbearer_is_not_offered_unless_enabled() {
    bounded(LIMIT, || {
        let broker = Broker::builder()
            .listener("SASL_PLAINTEXT")
            .with(
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                PLAIN_JAAS,
            )
            .start();
        let mut client = TypedClient::connect(broker.listener_addr("SASL_PLAINTEXT"));
        let hs = handshake(&mut client, "OAUTHBEARER").expect("answered");
        assert_eq!(hs.error_code, 33, "UNSUPPORTED_SASL_MECHANISM by default");
        assert!(client.is_closed_by_broker());
    });
}

#[test]
fn kip368_sessions_expire_and_reauthenticate_on_the_connection() {
    bounded(LIMIT, || {
        // 3 s sessions and a 2 s token: a loaded machine's pauses fit well inside both.
        let broker = broker_with(&[("connections.max.reauth.ms", "3000")]);
        let addr = broker.listener_addr("SASL_PLAINTEXT");

        // The session lifetime is connections.max.reauth.ms, or the token's exp if sooner.
        let mut client = TypedClient::connect(addr);
        let answer = plain_login(&mut client, "alice", "alice-secret");
        assert_eq!(answer.error_code, 0);
        assert_eq!(answer.session_lifetime_ms, 3000);
        let short =
            unsecured_token(&json!({"sub": "carol", "exp": now_s() + 2.0, "scope": "kafka"}));
        let mut carol = TypedClient::connect(addr);
        let answer = oauth_login(&mut carol, &first_message("", &short));
        assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
        // The token's exp (at most 2 s away) is sooner than the 3000 ms maximum. The broker's
        // clock is read per loop turn, so the lifetime may be a few ms above 2000.
        assert!(
            (1..3000).contains(&answer.session_lifetime_ms),
            "{}",
            answer.session_lifetime_ms
        );

        // Re-authenticating on the connection renews the session; requests go on after it.
        // A second re-authentication within a second is not one: the handshake is served as
        // on any authenticated connection (ILLEGAL_SASL_STATE), as Kafka does. Judged only
        // when the client saw less than half a second pass since its re-authentication
        // began (the broker's interval is no longer than that plus a loop turn); a slower
        // round, on a loaded machine, finishes the re-authentication it started and tries
        // again after the second has passed.
        assert!(metadata(&mut client).is_some());
        let mut judged = false;
        for _ in 0..5 {
            let began = Instant::now();
            let again = plain_login(&mut client, "alice", "alice-secret");
            assert_eq!(again.error_code, 0, "{:?}", again.error_message);
            assert_eq!(again.session_lifetime_ms, 3000);
            assert!(
                metadata(&mut client).is_some(),
                "served after re-authentication"
            );
            let second = handshake(&mut client, "PLAIN").expect("answered");
            if began.elapsed() < Duration::from_millis(500) {
                assert_eq!(second.error_code, ILLEGAL_SASL_STATE);
                judged = true;
                break;
            }
            if second.error_code == 0 {
                let done = authenticate(&mut client, b"\0alice\0alice-secret").expect("answered");
                assert_eq!(done.error_code, 0, "{:?}", done.error_message);
            }
            std::thread::sleep(Duration::from_millis(1100));
        }
        assert!(judged, "every round took over 500 ms");

        // A session that expired without re-authentication: the next request closes it.
        let mut idle = TypedClient::connect(addr);
        assert_eq!(plain_login(&mut idle, "bob", "bob-secret").error_code, 0);
        std::thread::sleep(Duration::from_millis(3200));
        assert!(
            metadata(&mut idle).is_none(),
            "served after the session expired"
        );
        assert!(
            metadata(&mut carol).is_none(),
            "served after the token expired"
        );

        // Re-authentication as another principal, or with another mechanism, fails.
        let mut switch = TypedClient::connect(addr);
        assert_eq!(
            plain_login(&mut switch, "alice", "alice-secret").error_code,
            0
        );
        let answer = plain_login(&mut switch, "bob", "bob-secret");
        assert_eq!(answer.error_code, SASL_AUTHENTICATION_FAILED);
        assert_eq!(
            answer.error_message.as_deref(),
            Some("Cannot change principals during re-authentication from User.alice: User.bob")
        );
        assert!(switch.is_closed_by_broker());
        let mut mechanism = TypedClient::connect(addr);
        assert_eq!(
            plain_login(&mut mechanism, "alice", "alice-secret").error_code,
            0
        );
        let good =
            unsecured_token(&json!({"sub": "alice", "exp": now_s() + 60.0, "scope": "kafka"}));
        let answer = oauth_login(&mut mechanism, &first_message("", &good));
        assert_eq!(answer.error_code, SASL_AUTHENTICATION_FAILED);
        assert_eq!(
            answer.error_message.as_deref(),
            Some("SASL mechanism 'OAUTHBEARER' requested by client is not supported for re-authentication of mechanism 'PLAIN'")
        );
        assert!(mechanism.is_closed_by_broker());

        let log = broker.output();
        assert!(
            log.contains("SASL session expired without re-authentication"),
            "{log}"
        );
    });
}
