//! HTTP basic auth of the registry's REST API (`schema.registry.authentication.method=BASIC`,
//! I127): the same users as the Kafka listeners' SCRAM.
//!
//! Contract:
//! - [`authenticated`] accepts an `Authorization: Basic` value whose user has a SCRAM
//!   credential (SHA-256, then SHA-512) that the password verifies: the StoredKey derived from
//!   the stored salt and iterations equals the stored one, compared in constant time (core's
//!   `ScramCredential::verifies_password`). The broker never stores the password (I41).
//! - Anything else (no header, another scheme, bad base64, an unknown user, a wrong password)
//!   is refused, and the listener answers 401 with `WWW-Authenticate: Basic` before reading
//!   the body. Every refusal costs the same PBKDF2 as an acceptance when the user exists; an
//!   unknown user costs none (user names are not secrets in Kafka's ACLs either).
//! - The credentials are read from the broker's live SCRAM store, so an AlterUserScramCredentials
//!   applies to the next request.

use minikafka_core::auth::scram::ScramMechanism;
use minikafka_schema::http::basic_credentials;

use crate::server::scram_store::ScramStore;

/// Whether the `Authorization` value `header` names a SCRAM user of `store` with its password.
pub fn authenticated(store: &ScramStore, header: Option<&str>) -> bool {
    let Some((user, password)) = header.and_then(basic_credentials) else {
        return false;
    };
    [ScramMechanism::Sha256, ScramMechanism::Sha512]
        .into_iter()
        .any(|mechanism| {
            store
                .get(&user, mechanism)
                .is_some_and(|credential| credential.verifies_password(mechanism, &password))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::auth::scram::{ScramCredential, MIN_ITERATIONS};

    /// base64 of `alice:alice-secret`, `alice:wrong`, `bob:alice-secret`.
    #[test]
    fn only_a_scram_user_with_its_password_is_let_in() {
        let mut store = ScramStore::default();
        let credential = ScramCredential::from_password(
            ScramMechanism::Sha512,
            "alice-secret",
            b"salt",
            MIN_ITERATIONS,
        )
        .expect("credential");
        store.upsert("alice", ScramMechanism::Sha512, credential);
        assert!(authenticated(
            &store,
            Some("Basic YWxpY2U6YWxpY2Utc2VjcmV0")
        ));
        assert!(!authenticated(&store, Some("Basic YWxpY2U6d3Jvbmc=")));
        assert!(!authenticated(
            &store,
            Some("Basic Ym9iOmFsaWNlLXNlY3JldA==")
        ));
        assert!(!authenticated(&store, Some("Bearer x")));
        assert!(!authenticated(&store, None));
    }
}
