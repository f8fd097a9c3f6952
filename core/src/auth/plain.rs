//! SASL PLAIN (RFC 4616) as Kafka's `PlainSaslServer` serves it: one client message,
//! `authzid NUL authcid NUL passwd`, checked against the `user_<name>="<password>"` options of
//! a `PlainLoginModule` JAAS entry.
//!
//! Contract:
//! - [`parse`]: a message of at most [`MAX_SASL_MESSAGE_BYTES`] (I40), valid UTF-8, with
//!   exactly two NULs; the username and password must not be empty. Borrowed, no copies.
//! - [`PlainUsers::authenticate`]: the authenticated username, or [`PlainError`] with Kafka's
//!   reason. The password is compared in constant time (I42); an unknown user and a wrong
//!   password give the same error. An authzid, if sent, must equal the username.
//! - Never: logs or prints a password (`Debug` redacts it).

use std::collections::BTreeMap;
use std::fmt;

use sha2::{Digest, Sha256};

use super::jaas::JaasEntry;
use super::{constant_time_eq, MAX_SASL_MESSAGE_BYTES};

/// The login module whose `user_*` options list PLAIN's users.
pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

/// The option prefix of a user's password in the JAAS entry.
pub const USER_OPTION_PREFIX: &str = "user_";

/// A parsed PLAIN message.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PlainMessage<'a> {
    /// The authorization id (empty when the client sent none).
    pub authzid: &'a str,
    /// The authentication id: the username.
    pub username: &'a str,
    /// The password.
    pub password: &'a str,
}

impl fmt::Debug for PlainMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainMessage")
            .field("authzid", &self.authzid)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Why a PLAIN exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    /// The message is longer than [`MAX_SASL_MESSAGE_BYTES`].
    #[error("Invalid SASL/PLAIN response: {0} bytes is too long")]
    TooLong(usize),
    /// The message is not UTF-8.
    #[error("Invalid SASL/PLAIN response: not UTF-8")]
    NotUtf8,
    /// The message does not split into three NUL-separated tokens.
    #[error("Invalid SASL/PLAIN response: expected 3 tokens, got {0}")]
    TokenCount(usize),
    /// The username is empty.
    #[error("Authentication failed: username not specified")]
    NoUsername,
    /// The password is empty.
    #[error("Authentication failed: password not specified")]
    NoPassword,
    /// Unknown user or wrong password (one error for both).
    #[error("Authentication failed: Invalid username or password")]
    BadCredentials,
    /// The authzid names someone else.
    #[error("Authentication failed: Client requested an authorization id that is different from username")]
    AuthzidMismatch,
    /// The JAAS entry is not a `PlainLoginModule`.
    #[error("JAAS login module {0} is not {PLAIN_LOGIN_MODULE}")]
    WrongLoginModule(String),
}

/// Parses a PLAIN client message.
pub fn parse(message: &[u8]) -> Result<PlainMessage<'_>, PlainError> {
    if message.len() > MAX_SASL_MESSAGE_BYTES {
        return Err(PlainError::TooLong(message.len()));
    }
    let text = std::str::from_utf8(message).map_err(|_| PlainError::NotUtf8)?;
    // Kafka splits at most four times and wants exactly three tokens.
    let tokens: Vec<&str> = text.splitn(4, '\0').collect();
    let [authzid, username, password] = tokens[..] else {
        return Err(PlainError::TokenCount(tokens.len()));
    };
    if username.is_empty() {
        return Err(PlainError::NoUsername);
    }
    if password.is_empty() {
        return Err(PlainError::NoPassword);
    }
    Ok(PlainMessage {
        authzid,
        username,
        password,
    })
}

/// Encodes a PLAIN client message (the client side; the inverse of [`parse`]).
pub fn encode(authzid: &str, username: &str, password: &str) -> Vec<u8> {
    [authzid, username, password].join("\0").into_bytes()
}

/// PLAIN's users and passwords, from a JAAS entry.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainUsers {
    passwords: BTreeMap<String, String>,
}

impl fmt::Debug for PlainUsers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainUsers")
            .field("users", &self.passwords.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl PlainUsers {
    /// The `user_<name>` options of a `PlainLoginModule` entry.
    pub fn from_jaas(entry: &JaasEntry) -> Result<PlainUsers, PlainError> {
        if entry.login_module != PLAIN_LOGIN_MODULE {
            return Err(PlainError::WrongLoginModule(entry.login_module.clone()));
        }
        let passwords = entry
            .options
            .iter()
            .filter_map(|(key, value)| {
                let user = key.strip_prefix(USER_OPTION_PREFIX)?;
                Some((user.to_string(), value.clone()))
            })
            .collect();
        Ok(PlainUsers { passwords })
    }

    /// The usernames, in order.
    pub fn usernames(&self) -> impl Iterator<Item = &str> {
        self.passwords.keys().map(String::as_str)
    }

    /// Checks a PLAIN client message; returns the authenticated username.
    pub fn authenticate<'a>(&self, message: &'a [u8]) -> Result<&'a str, PlainError> {
        let m = parse(message)?;
        let known = self.passwords.get(m.username);
        // The comparison runs for an unknown user too, against an empty password that can
        // never match (an empty password is refused by `parse`). Both sides are hashed to 32
        // bytes first, so the comparison itself runs whatever the lengths (I42).
        let expected = known.map_or(&[][..], |p| p.as_bytes());
        let matches = constant_time_eq(&Sha256::digest(m.password), &Sha256::digest(expected));
        if known.is_none() || !matches {
            return Err(PlainError::BadCredentials);
        }
        if !m.authzid.is_empty() && m.authzid != m.username {
            return Err(PlainError::AuthzidMismatch);
        }
        Ok(m.username)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::jaas;
    use proptest::prelude::*;

    fn users() -> PlainUsers {
        let entry = jaas::parse_single(&format!(
            r#"{PLAIN_LOGIN_MODULE} required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#
        ))
        .expect("jaas");
        PlainUsers::from_jaas(&entry).expect("plain users")
    }

    #[test]
    fn users_come_from_the_user_options_only() {
        let users = users();
        assert_eq!(users.usernames().collect::<Vec<_>>(), ["admin", "alice"]);
        assert!(!format!("{users:?}").contains("secret"));
    }

    #[test]
    fn good_credentials_authenticate_with_or_without_authzid() {
        let users = users();
        assert_eq!(users.authenticate(b"\0alice\0alice-secret"), Ok("alice"));
        assert_eq!(
            users.authenticate(b"alice\0alice\0alice-secret"),
            Ok("alice")
        );
        assert_eq!(users.authenticate(b"\0admin\0admin-secret"), Ok("admin"));
    }

    #[test]
    fn refusals_carry_kafkas_reasons() {
        let users = users();
        let cases: &[(&[u8], PlainError)] = &[
            (b"\0alice\0wrong", PlainError::BadCredentials),
            (b"\0mallory\0alice-secret", PlainError::BadCredentials),
            // `username` and `password` options are the broker's own login, not users.
            (b"\0username\0admin", PlainError::BadCredentials),
            (b"admin\0alice\0alice-secret", PlainError::AuthzidMismatch),
            (b"\0\0alice-secret", PlainError::NoUsername),
            (b"\0alice\0", PlainError::NoPassword),
            (b"alice-secret", PlainError::TokenCount(1)),
            (b"\0alice", PlainError::TokenCount(2)),
            (b"\0alice\0alice-secret\0", PlainError::TokenCount(4)),
            (b"\0alice\0a\0b\0c", PlainError::TokenCount(4)),
            (b"\0alice\0\xff", PlainError::NotUtf8),
        ];
        for (message, want) in cases {
            assert_eq!(
                users.authenticate(message).as_ref(),
                Err(want),
                "{message:?}"
            );
        }
        let long = vec![b'a'; MAX_SASL_MESSAGE_BYTES + 1];
        assert_eq!(parse(&long), Err(PlainError::TooLong(long.len())));
        let other = jaas::parse_single("other.Module required user_a=\"b\";").expect("jaas");
        assert!(matches!(
            PlainUsers::from_jaas(&other),
            Err(PlainError::WrongLoginModule(_))
        ));
    }

    #[test]
    fn debug_redacts_the_password() {
        let m = parse(b"\0alice\0alice-secret").expect("parses");
        assert!(!format!("{m:?}").contains("alice-secret"));
    }

    proptest! {
        /// Any NUL-free, non-empty username and password round-trip through encode/parse.
        #[test]
        fn encode_parse_round_trip(
            authzid in "[^\0]{0,12}",
            username in "[^\0]{1,12}",
            password in "[^\0]{1,24}",
        ) {
            let message = encode(&authzid, &username, &password);
            let m = parse(&message).expect("parses");
            prop_assert_eq!((m.authzid, m.username, m.password), (&authzid[..], &username[..], &password[..]));
        }

        /// Any bytes: a message or an error, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = users().authenticate(&bytes);
        }
    }
}
