//! DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), v0: the
//! SCRAM users, as `kafka-configs.sh --entity-type users`, the admin clients and `mk users`
//! manage them.
//!
//! Contract (Kafka's `ScramControlManager` answers):
//! - Describe: every user when the list is null or empty; a user named twice gets
//!   DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND; otherwise each mechanism and its
//!   iterations (never a key or salt).
//! - Alter: one result per user named. An empty name or iterations outside 4096..=16384, a
//!   salted password of the wrong length or an empty salt get UNACCEPTABLE_CREDENTIAL; an
//!   unknown mechanism UNSUPPORTED_SASL_MECHANISM; one user and mechanism named twice
//!   DUPLICATE_RESOURCE; a deletion of a credential that does not exist RESOURCE_NOT_FOUND. A
//!   user with an error changes nothing; the others' changes are stored durably before
//!   they are answered or used (I46).

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use minikafka_core::auth::scram::{ScramCredential, ScramMechanism};
use minikafka_core::error_code::ErrorCode;

use super::str_bytes;
use crate::server::scram_store::valid_username;
use crate::server::shard_context::SecurityStores;

/// Kafka's `ScramMechanism` type codes.
fn mechanism_code(m: ScramMechanism) -> i8 {
    match m {
        ScramMechanism::Sha256 => 1,
        ScramMechanism::Sha512 => 2,
    }
}

fn mechanism_of(code: i8) -> Option<ScramMechanism> {
    ScramMechanism::ALL
        .into_iter()
        .find(|m| mechanism_code(*m) == code)
}

/// Builds the Describe response.
pub fn describe(
    state: &impl SecurityStores,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let store = state.scram_credentials();
    let names: Vec<String> = match request.users.filter(|u| !u.is_empty()) {
        Some(users) => users.into_iter().map(|u| u.name.to_string()).collect(),
        None => store.usernames().map(str::to_string).collect(),
    };
    let mut response = DescribeUserScramCredentialsResponse::default();
    for name in &names {
        let mut result = DescribeUserScramCredentialsResult::default();
        result.user = str_bytes(name);
        if names.iter().filter(|n| *n == name).count() > 1 {
            result.error_code = ErrorCode::DUPLICATE_RESOURCE.code();
            result.error_message = Some(str_bytes(
                "Cannot describe SCRAM credentials for the same user twice in a single request",
            ));
        } else if let Some(mechanisms) = store.describe(name) {
            result.credential_infos = mechanisms
                .into_iter()
                .map(|(m, iterations)| {
                    let mut info = CredentialInfo::default();
                    info.mechanism = mechanism_code(m);
                    info.iterations = iterations as i32;
                    info
                })
                .collect();
        } else {
            result.error_code = ErrorCode::RESOURCE_NOT_FOUND.code();
            result.error_message = Some(str_bytes(&format!(
                "Attempt to describe a user credential that does not exist: {name}"
            )));
        }
        response.results.push(result);
    }
    response
}

/// One user's alterations, or why they are refused.
type Change = Result<Vec<(ScramMechanism, Option<ScramCredential>)>, (ErrorCode, String)>;

/// Builds the Alter response, storing the accepted changes first.
pub async fn alter(
    state: &impl SecurityStores,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let _admin = state.lock_admin().await;
    let mut store = (*state.scram_credentials()).clone();
    // user -> changes, in request order of first mention.
    let mut changes: BTreeMap<String, Change> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut add =
        |user: &StrBytes,
         code: i8,
         credential: Result<Option<ScramCredential>, (ErrorCode, String)>| {
            let user = user.to_string();
            if !order.contains(&user) {
                order.push(user.clone());
            }
            let entry = changes.entry(user.clone()).or_insert(Ok(Vec::new()));
            let Ok(list) = entry else { return };
            let refusal = if !valid_username(&user) {
                Some((
                    ErrorCode::UNACCEPTABLE_CREDENTIAL,
                    "Username must not be empty".to_string(),
                ))
            } else if let Some(m) = mechanism_of(code) {
                if list.iter().any(|(seen, _)| *seen == m) {
                    Some((
                        ErrorCode::DUPLICATE_RESOURCE,
                        "A user credential cannot be altered twice in the same request".to_string(),
                    ))
                } else {
                    match credential {
                        Ok(c) => {
                            list.push((m, c));
                            None
                        }
                        Err(e) => Some(e),
                    }
                }
            } else {
                Some((
                    ErrorCode::UNSUPPORTED_SASL_MECHANISM,
                    "Unknown SCRAM mechanism".to_string(),
                ))
            };
            if let Some(refusal) = refusal {
                *entry = Err(refusal);
            }
        };
    for d in &request.deletions {
        add(&d.name, d.mechanism, Ok(None));
    }
    for u in &request.upsertions {
        let credential = match mechanism_of(u.mechanism) {
            Some(m) => match u32::try_from(u.iterations) {
                Ok(i) if i < minikafka_core::auth::scram::MIN_ITERATIONS => Err((
                    ErrorCode::UNACCEPTABLE_CREDENTIAL,
                    "Too few iterations".to_string(),
                )),
                Ok(i) if i > minikafka_core::auth::scram::MAX_ITERATIONS => Err((
                    ErrorCode::UNACCEPTABLE_CREDENTIAL,
                    "Too many iterations".to_string(),
                )),
                Ok(i) => ScramCredential::from_salted_password(m, &u.salted_password, &u.salt, i)
                    .map(Some)
                    .map_err(|e| (ErrorCode::UNACCEPTABLE_CREDENTIAL, e.to_string())),
                Err(_) => Err((
                    ErrorCode::UNACCEPTABLE_CREDENTIAL,
                    "Too few iterations".to_string(),
                )),
            },
            None => Ok(None),
        };
        add(&u.name, u.mechanism, credential);
    }
    // Deletions of credentials that do not exist refuse their user.
    for (user, change) in changes.iter_mut() {
        if let Ok(list) = change {
            if list
                .iter()
                .any(|(m, c)| c.is_none() && store.get(user, *m).is_none())
            {
                *change = Err((
                    ErrorCode::RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist".to_string(),
                ));
            }
        }
    }
    let mut altered = false;
    for (user, change) in &changes {
        if let Ok(list) = change {
            for (m, c) in list {
                match c {
                    Some(c) => store.upsert(user, *m, c.clone()),
                    None => {
                        store.delete(user, *m);
                    }
                }
                altered = true;
            }
        }
    }
    let mut stored: Result<(), String> = Ok(());
    if altered {
        stored = state
            .replace_scram_credentials(store)
            .await
            .map_err(|e| format!("storing SCRAM credentials: {e}"));
        match &stored {
            Ok(()) => {
                tracing::info!(users = ?changes.iter().filter(|(_, c)| c.is_ok()).map(|(u, _)| u).collect::<Vec<_>>(), "SCRAM credentials altered");
            }
            Err(e) => tracing::error!("{e}"),
        }
    }
    let mut response = AlterUserScramCredentialsResponse::default();
    for user in &order {
        let mut result = AlterUserScramCredentialsResult::default();
        result.user = str_bytes(user);
        match (&changes[user], &stored) {
            (Err((code, message)), _) => {
                result.error_code = code.code();
                result.error_message = Some(str_bytes(message));
            }
            (Ok(_), Err(e)) => {
                result.error_code = ErrorCode::KAFKA_STORAGE_ERROR.code();
                result.error_message = Some(str_bytes(e));
            }
            (Ok(_), Ok(())) => {}
        }
        response.results.push(result);
    }
    response
}
