//! SCRAM users on the broker (DescribeUserScramCredentials, AlterUserScramCredentials), as
//! `kafka-configs.sh --entity-type users` manages them: what `mk users` calls.
//!
//! Contract:
//! - A password never leaves this process: the client draws a random salt, computes
//!   `SaltedPassword = Hi(password, salt, iterations)` and sends that, as Kafka's admin client
//!   does; the broker derives and stores only the keys.
//! - Each call answers the broker's per-user error as an [`Error`], naming the user.

use futures::{AsyncRead, AsyncWrite};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;
use minikafka_core::auth::scram::{ScramCredential, ScramMechanism};

use crate::admin::Admin;
use crate::error::{Error, Result};

/// Kafka's default iterations for a new credential (`kafka-configs.sh`).
pub const DEFAULT_ITERATIONS: u32 = 4096;

/// One user's SCRAM mechanisms and their iterations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramUser {
    /// The username.
    pub name: String,
    /// `(mechanism name, iterations)`, in Kafka's order.
    pub credentials: Vec<(String, i32)>,
}

fn mechanism_code(m: ScramMechanism) -> i8 {
    match m {
        ScramMechanism::Sha256 => 1,
        ScramMechanism::Sha512 => 2,
    }
}

fn mechanism_name(code: i8) -> String {
    match code {
        1 => ScramMechanism::Sha256.name().to_string(),
        2 => ScramMechanism::Sha512.name().to_string(),
        other => format!("UNKNOWN({other})"),
    }
}

/// The mechanism named `name` (`SCRAM-SHA-512`), or an error listing the two.
pub fn parse_mechanism(name: &str) -> Result<ScramMechanism> {
    ScramMechanism::from_name(&name.to_ascii_uppercase()).ok_or_else(|| {
        Error::Protocol(format!(
            "unknown SCRAM mechanism {name:?} (SCRAM-SHA-256 or SCRAM-SHA-512)"
        ))
    })
}

impl<S: AsyncRead + AsyncWrite + Unpin> Admin<S> {
    /// Every SCRAM user (`users` empty), or those named.
    pub async fn describe_scram_users(&mut self, users: &[String]) -> Result<Vec<ScramUser>> {
        let request = DescribeUserScramCredentialsRequest::default().with_users(
            (!users.is_empty()).then(|| {
                users
                    .iter()
                    .map(|u| UserName::default().with_name(StrBytes::from_string(u.clone())))
                    .collect()
            }),
        );
        let response = self.connection().request(&request).await?;
        Error::check(response.error_code, || "describe SCRAM users".to_string())?;
        let mut out = Vec::new();
        for r in response.results {
            let name = r.user.to_string();
            Error::check(r.error_code, || {
                let message = r.error_message.as_deref().unwrap_or("");
                format!("user {name}: {message}")
            })?;
            out.push(ScramUser {
                name,
                credentials: r
                    .credential_infos
                    .iter()
                    .map(|c| (mechanism_name(c.mechanism), c.iterations))
                    .collect(),
            });
        }
        Ok(out)
    }

    /// Creates or replaces `user`'s credential for `mechanism` from `password`.
    pub async fn upsert_scram_user(
        &mut self,
        user: &str,
        mechanism: ScramMechanism,
        password: &str,
        iterations: u32,
    ) -> Result<()> {
        let mut salt = [0u8; 24];
        getrandom::fill(&mut salt).map_err(|e| Error::Protocol(format!("random salt: {e}")))?;
        let salted = ScramCredential::salted_password(mechanism, password, &salt, iterations);
        let upsertion = ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(user.to_string()))
            .with_mechanism(mechanism_code(mechanism))
            .with_iterations(iterations as i32)
            .with_salt(bytes::Bytes::copy_from_slice(&salt))
            .with_salted_password(bytes::Bytes::from(salted));
        let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]);
        self.alter_scram(request, user).await
    }

    /// Deletes `user`'s credential for `mechanism`.
    pub async fn delete_scram_user(&mut self, user: &str, mechanism: ScramMechanism) -> Result<()> {
        let deletion = ScramCredentialDeletion::default()
            .with_name(StrBytes::from_string(user.to_string()))
            .with_mechanism(mechanism_code(mechanism));
        let request = AlterUserScramCredentialsRequest::default().with_deletions(vec![deletion]);
        self.alter_scram(request, user).await
    }

    async fn alter_scram(
        &mut self,
        request: AlterUserScramCredentialsRequest,
        user: &str,
    ) -> Result<()> {
        let response = self.connection().request(&request).await?;
        for r in response.results {
            Error::check(r.error_code, || {
                let message = r.error_message.as_deref().unwrap_or("");
                format!("user {user}: {message}")
            })?;
        }
        Ok(())
    }
}
