//! Client quotas on the broker (DescribeClientQuotas, AlterClientQuotas), as
//! `kafka-configs.sh --entity-type users/clients/ips` manages them: what `mk quotas` calls.
//!
//! Contract:
//! - An entity is a list of (type, name) with Kafka's types `user`, `client-id`, `ip`; a name
//!   of `None` is the `<default>` entity.
//! - Describe with no components lists every entity; otherwise each component matches its
//!   type exactly (a name), the default, or any name ([`Match`]).
//! - Alter sets and removes keys of one entity in one request; the broker's per-entry error
//!   is answered as an [`Error`] naming the entity.

use std::fmt;

use futures::{AsyncRead, AsyncWrite};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
use kafka_protocol::protocol::StrBytes;

use crate::admin::Admin;
use crate::error::{Error, Result};

/// A quota entity: (type, name), a `None` name being `<default>`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QuotaEntity(pub Vec<(String, Option<String>)>);

impl fmt::Display for QuotaEntity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("<default>")))
            .collect();
        f.write_str(&parts.join(" "))
    }
}

/// How a describe component matches its entity type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    /// This name.
    Exact(String),
    /// The `<default>` entity.
    Default,
    /// Any entity with the type.
    Any,
}

/// One entity's quotas.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientQuota {
    /// The entity.
    pub entity: QuotaEntity,
    /// `(key, value)`, as the broker answered them.
    pub values: Vec<(String, f64)>,
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

impl<S: AsyncRead + AsyncWrite + Unpin> Admin<S> {
    /// The quotas of the entities `components` select (every entity when empty); `strict`
    /// keeps only entities of exactly the components' types.
    pub async fn describe_client_quotas(
        &mut self,
        components: &[(String, Match)],
        strict: bool,
    ) -> Result<Vec<ClientQuota>> {
        let request = DescribeClientQuotasRequest::default()
            .with_components(
                components
                    .iter()
                    .map(|(t, m)| {
                        let (match_type, name) = match m {
                            Match::Exact(name) => (0, Some(s(name))),
                            Match::Default => (1, None),
                            Match::Any => (2, None),
                        };
                        ComponentData::default()
                            .with_entity_type(s(t))
                            .with_match_type(match_type)
                            .with_match(name)
                    })
                    .collect(),
            )
            .with_strict(strict);
        let response = self.connection().request(&request).await?;
        Error::check(response.error_code, || {
            let message = response.error_message.as_deref().unwrap_or("");
            format!("describe client quotas: {message}")
        })?;
        Ok(response
            .entries
            .unwrap_or_default()
            .into_iter()
            .map(|e| ClientQuota {
                entity: QuotaEntity(
                    e.entity
                        .iter()
                        .map(|d| {
                            (
                                d.entity_type.to_string(),
                                d.entity_name.as_ref().map(|n| n.to_string()),
                            )
                        })
                        .collect(),
                ),
                values: e
                    .values
                    .iter()
                    .map(|v| (v.key.to_string(), v.value))
                    .collect(),
            })
            .collect())
    }

    /// Sets `set` and removes `remove` on `entity` (checked only, when `validate_only`).
    pub async fn alter_client_quotas(
        &mut self,
        entity: &QuotaEntity,
        set: &[(String, f64)],
        remove: &[String],
        validate_only: bool,
    ) -> Result<()> {
        let ops = set
            .iter()
            .map(|(k, v)| OpData::default().with_key(s(k)).with_value(*v))
            .chain(
                remove
                    .iter()
                    .map(|k| OpData::default().with_key(s(k)).with_remove(true)),
            )
            .collect();
        let entry = EntryData::default()
            .with_entity(
                entity
                    .0
                    .iter()
                    .map(|(t, n)| {
                        EntityData::default()
                            .with_entity_type(s(t))
                            .with_entity_name(n.as_deref().map(s))
                    })
                    .collect(),
            )
            .with_ops(ops);
        let request = AlterClientQuotasRequest::default()
            .with_entries(vec![entry])
            .with_validate_only(validate_only);
        let response = self.connection().request(&request).await?;
        for r in response.entries {
            Error::check(r.error_code, || {
                let message = r.error_message.as_deref().unwrap_or("");
                format!("quotas of {entity}: {message}")
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_are_written_as_kafka_configs_writes_them() {
        let e = QuotaEntity(vec![
            ("user".into(), Some("alice".into())),
            ("client-id".into(), None),
        ]);
        assert_eq!(e.to_string(), "user=alice client-id=<default>");
    }
}
