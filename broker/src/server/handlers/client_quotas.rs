//! DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), v0–1: the client quotas, as
//! `kafka-configs.sh --entity-type users/clients`, the admin clients and `mk quotas` manage
//! them.
//!
//! Contract (Kafka's `ClientQuotaControlManager` and `ClientQuotasImage` answers):
//! - Entity types `user`, `client-id` and `ip`; a null name is the `<default>` entity. An
//!   entity or filter naming a type twice, an unknown type, `ip` beside another type, an
//!   empty entity or an `ip` name that is not an IP address is INVALID_REQUEST.
//! - Describe: components match EXACT (0, that name), DEFAULT (1, the default) or SPECIFIED
//!   (2, any entity with that type); `strict` asks for entities of exactly the filter's
//!   types. A bad filter answers the top-level error and no entries.
//! - Alter: one result per entry, in request order. A key Kafka does not know for the
//!   entity is INVALID_REQUEST ("Invalid configuration key"), as is a value not above 0, a
//!   byte rate that is not an integer, a `connection_creation_rate` that is not an integer
//!   of Kafka's INT range, or a key set twice in one entry (`request_percentage` is a
//!   DOUBLE: any finite value above 0). The one key Kafka knows but this broker does not
//!   enforce, `controller_mutation_rate` (no KRaft controller here), is refused with
//!   INVALID_REQUEST and a message saying so, never stored unenforced (I99). IP entities
//!   (`connection_creation_rate` only) are stored and described like the others (I160). `remove` drops a value. `validate_only` checks and
//!   changes nothing. The valid entries' changes are stored durably (`quota_store`) under the
//!   admin lock before they are answered or put in force (I95); a failed write answers
//!   UNKNOWN_SERVER_ERROR for them and changes nothing.
//! - Authorization (I48): Describe needs DESCRIBE_CONFIGS on the cluster, Alter
//!   ALTER_CONFIGS (`authorize`), else CLUSTER_AUTHORIZATION_FAILED.
//! - The request arrays are bounded by the pre-check (I10); an answer is bounded by the
//!   request and the stored quotas.

use std::collections::BTreeSet;

use kafka_protocol::messages::alter_client_quotas_response::{
    EntityData as AlterEntityData, EntryData as AlterEntryData,
};
use kafka_protocol::messages::describe_client_quotas_response::{
    EntityData as DescribeEntityData, EntryData as DescribeEntryData, ValueData,
};
use kafka_protocol::messages::{
    alter_client_quotas_request, describe_client_quotas_request, AlterClientQuotasRequest,
    AlterClientQuotasResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use minikafka_core::error_code::ErrorCode;
use minikafka_core::quota::{EntityName, QuotaConfigs, QuotaEntity, QuotaKind};

use super::str_bytes;
use crate::server::quotas::ENFORCED;
use crate::server::shard_context::SecurityStores;

/// Kafka's entity type of a user quota.
pub const USER: &str = "user";
/// Kafka's entity type of a client id quota.
pub const CLIENT_ID: &str = "client-id";
/// Kafka's entity type of an IP quota.
pub const IP: &str = "ip";

/// Keys Kafka knows for user and client id entities.
const USER_CLIENT_KEYS: [&str; 4] = [
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
];
/// Keys Kafka knows for IP entities.
const IP_KEYS: [&str; 1] = ["connection_creation_rate"];

/// Filter match types (Kafka's `ClientQuotaFilterComponent`).
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

/// An entity as the wire names it: (type, name), sorted by type.
type WireEntity = Vec<(String, Option<String>)>;

/// A checked entity: a user/client-id one, or an IP one (a named address or the default).
#[derive(Debug, Clone, PartialEq)]
enum Checked {
    Client(QuotaEntity),
    Ip(EntityName),
}

fn invalid(message: impl Into<String>) -> (ErrorCode, String) {
    (ErrorCode::INVALID_REQUEST, message.into())
}

fn check_types<'a>(types: impl Iterator<Item = &'a str>) -> Result<(), (ErrorCode, String)> {
    let mut seen = BTreeSet::new();
    for t in types {
        if ![USER, CLIENT_ID, IP].contains(&t) {
            return Err(invalid(format!("Unhandled client quota entity type: {t}")));
        }
        if !seen.insert(t) {
            return Err(invalid(format!(
                "Entity type {t} cannot appear more than once."
            )));
        }
    }
    if seen.contains(IP) && seen.len() > 1 {
        return Err(invalid(
            "Invalid quota entity combination: ip cannot be combined with user or client-id.",
        ));
    }
    Ok(())
}

/// The entity an AlterClientQuotas entry names, checked.
fn check_entity(entity: &WireEntity) -> Result<Checked, (ErrorCode, String)> {
    if entity.is_empty() {
        return Err(invalid("Invalid empty client quota entity"));
    }
    check_types(entity.iter().map(|(t, _)| t.as_str()))?;
    let side = |name: &Option<String>| match name {
        None => EntityName::Default,
        Some(n) => EntityName::Named(n.clone()),
    };
    let mut out = QuotaEntity {
        user: None,
        client_id: None,
    };
    for (t, name) in entity {
        match t.as_str() {
            USER => out.user = Some(side(name)),
            CLIENT_ID => out.client_id = Some(side(name)),
            _ => {
                if let Some(ip) = name {
                    if ip.parse::<std::net::IpAddr>().is_err() {
                        return Err(invalid(format!("{ip} is not a valid IP address")));
                    }
                }
                return Ok(Checked::Ip(side(name)));
            }
        }
    }
    Ok(Checked::Client(out))
}

/// The value of one op, checked for the entity kind.
fn check_op(
    ip: bool,
    key: &str,
    value: f64,
    remove: bool,
) -> Result<(QuotaKind, Option<f64>), (ErrorCode, String)> {
    let known: &[&str] = if ip { &IP_KEYS } else { &USER_CLIENT_KEYS };
    if !known.contains(&key) {
        return Err(invalid(format!("Invalid configuration key {key}")));
    }
    let enforced = QuotaKind::from_key(key).filter(|k| ENFORCED.contains(k));
    let Some(kind) = enforced else {
        return Err(invalid(format!(
            "Quota {key} is not enforced by this broker (a single node has no KRaft \
             controller); refused rather than stored unenforced"
        )));
    };
    if remove {
        return Ok((kind, None));
    }
    if value.is_nan() || value <= 0.0 || value.is_infinite() {
        return Err(invalid(format!("Quota {key} must be greater than 0")));
    }
    // Kafka's types: the byte rates are LONGs, the connection rate an INT, the request
    // percentage a DOUBLE.
    let max = match kind {
        QuotaKind::RequestPercentage => return Ok((kind, Some(value))),
        QuotaKind::ConnectionCreationRate => (i32::MAX as f64, "an INT"),
        _ => (i64::MAX as f64, "a LONG"),
    };
    if value.fract() != 0.0 || value > max.0 {
        return Err(invalid(format!(
            "Quota {key} must be an integer no larger than {}",
            max.1
        )));
    }
    Ok((kind, Some(value)))
}

/// What one entry changes: values set (`Some`) or removed (`None`) on one entity.
type Changes = (Checked, Vec<(QuotaKind, Option<f64>)>);

/// The changes of one entry (`None` for a valid entry that changes nothing), or why it is
/// refused.
fn check_entry(
    entry: &alter_client_quotas_request::EntryData,
) -> Result<Option<Changes>, (ErrorCode, String)> {
    let wire: WireEntity = entry
        .entity
        .iter()
        .map(|e| {
            (
                e.entity_type.to_string(),
                e.entity_name.as_ref().map(|n| n.to_string()),
            )
        })
        .collect();
    let checked = check_entity(&wire)?;
    let ip = matches!(checked, Checked::Ip(_));
    let mut keys = BTreeSet::new();
    let mut changes = Vec::with_capacity(entry.ops.len());
    for op in &entry.ops {
        if !keys.insert(op.key.as_str()) {
            return Err(invalid(format!("Duplicate quota key {}", op.key.as_str())));
        }
        changes.push(check_op(ip, &op.key, op.value, op.remove)?);
    }
    Ok((!changes.is_empty()).then_some((checked, changes)))
}

/// AlterClientQuotas (authorized by the caller).
pub async fn alter(
    state: &impl SecurityStores,
    request: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let checked: Vec<_> = request.entries.iter().map(check_entry).collect();
    let stored: Result<(), String> =
        if request.validate_only || !checked.iter().any(|c| matches!(c, Ok(Some(_)))) {
            Ok(())
        } else {
            let _admin = state.lock_admin().await;
            let mut next: QuotaConfigs = (*state.quota_configs()).clone();
            for (entity, changes) in checked.iter().flatten().flatten() {
                for (kind, value) in changes {
                    match entity {
                        Checked::Client(entity) => next.set(entity.clone(), *kind, *value),
                        Checked::Ip(ip) => next.set_ip(ip.clone(), *value),
                    }
                }
            }
            match state.replace_quota_configs(next).await {
                Ok(()) => Ok(()),
                Err(e) => {
                    tracing::error!("storing the client quotas failed: {e}");
                    Err(e.to_string())
                }
            }
        };
    let mut response = AlterClientQuotasResponse::default();
    response.entries = request
        .entries
        .iter()
        .zip(&checked)
        .map(|(entry, checked)| {
            let (code, message) = match (checked, &stored) {
                (Err((code, message)), _) => (*code, Some(message.as_str())),
                (Ok(Some(_)), Err(why)) => (ErrorCode::UNKNOWN_SERVER_ERROR, Some(why.as_str())),
                _ => (ErrorCode::NONE, None),
            };
            result(entry, code, message)
        })
        .collect();
    response
}

/// One entry's result: the request's entity echoed with `code`.
pub fn result(
    entry: &alter_client_quotas_request::EntryData,
    code: ErrorCode,
    message: Option<&str>,
) -> AlterEntryData {
    let mut out = AlterEntryData::default();
    out.error_code = code.code();
    out.error_message = message.map(str_bytes);
    out.entity = entry
        .entity
        .iter()
        .map(|e| {
            let mut d = AlterEntityData::default();
            d.entity_type = e.entity_type.clone();
            d.entity_name = e.entity_name.clone();
            d
        })
        .collect();
    out
}

/// A checked filter component: the type and how its name must match.
#[derive(Debug, Clone, PartialEq)]
enum Match {
    Exact(String),
    Default,
    Specified,
}

fn check_filter(
    components: &[describe_client_quotas_request::ComponentData],
) -> Result<Vec<(String, Match)>, (ErrorCode, String)> {
    check_types(components.iter().map(|c| c.entity_type.as_str()))?;
    components
        .iter()
        .map(|c| {
            let m = match (c.match_type, &c._match) {
                (MATCH_EXACT, Some(name)) => Match::Exact(name.to_string()),
                (MATCH_EXACT, None) => {
                    return Err(invalid(format!(
                        "Exact match for {} needs a name",
                        c.entity_type.as_str()
                    )))
                }
                (MATCH_DEFAULT, _) => Match::Default,
                (MATCH_SPECIFIED, _) => Match::Specified,
                (other, _) => return Err(invalid(format!("Unknown match type {other}"))),
            };
            Ok((c.entity_type.to_string(), m))
        })
        .collect()
}

fn sides(entity: &QuotaEntity) -> Vec<(&'static str, &EntityName)> {
    let mut out = Vec::with_capacity(2);
    if let Some(user) = &entity.user {
        out.push((USER, user));
    }
    if let Some(client) = &entity.client_id {
        out.push((CLIENT_ID, client));
    }
    out
}

fn matches(sides: &[(&str, &EntityName)], filter: &[(String, Match)], strict: bool) -> bool {
    if strict && sides.len() != filter.len() {
        return false;
    }
    filter.iter().all(|(t, m)| {
        let Some((_, name)) = sides.iter().find(|(st, _)| st == t) else {
            return false;
        };
        match (m, name) {
            (Match::Exact(want), EntityName::Named(have)) => want == have,
            (Match::Exact(_), EntityName::Default) => false,
            (Match::Default, name) => **name == EntityName::Default,
            (Match::Specified, _) => true,
        }
    })
}

/// DescribeClientQuotas (authorized by the caller).
pub fn describe(
    state: &impl SecurityStores,
    request: &DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let mut response = DescribeClientQuotasResponse::default();
    let filter = match check_filter(&request.components) {
        Ok(filter) => filter,
        Err((code, message)) => {
            response.error_code = code.code();
            response.error_message = Some(str_bytes(&message));
            return response;
        }
    };
    let configs = state.quota_configs();
    response.entries = Some(describe_entries(&configs, &filter, request.strict));
    response
}

fn describe_entries(
    configs: &QuotaConfigs,
    filter: &[(String, Match)],
    strict: bool,
) -> Vec<DescribeEntryData> {
    let clients = configs.entries().map(|(entity, values)| {
        let values: Vec<(QuotaKind, f64)> = values.iter().map(|(k, v)| (*k, *v)).collect();
        (sides(entity), values)
    });
    let ips = configs
        .ip_entries()
        .map(|(ip, v)| (vec![(IP, ip)], vec![(QuotaKind::ConnectionCreationRate, v)]));
    clients
        .chain(ips)
        .filter(|(sides, _)| matches(sides, filter, strict))
        .map(|(sides, values)| {
            let mut entry = DescribeEntryData::default();
            entry.entity = sides
                .into_iter()
                .map(|(t, name)| {
                    let mut d = DescribeEntityData::default();
                    d.entity_type = str_bytes(t);
                    d.entity_name = match name {
                        EntityName::Default => None,
                        EntityName::Named(n) => Some(str_bytes(n)),
                    };
                    d
                })
                .collect();
            entry.values = values
                .into_iter()
                .map(|(kind, value)| {
                    let mut v = ValueData::default();
                    v.key = str_bytes(kind.key());
                    v.value = value;
                    v
                })
                .collect();
            entry
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(parts: &[(&str, Option<&str>)]) -> WireEntity {
        parts
            .iter()
            .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
            .collect()
    }

    #[test]
    fn entities_are_checked_as_kafka_checks_them() {
        let ok = check_entity(&wire(&[("user", Some("alice")), ("client-id", None)]));
        assert_eq!(
            ok,
            Ok(Checked::Client(QuotaEntity {
                user: Some(EntityName::Named("alice".into())),
                client_id: Some(EntityName::Default),
            }))
        );
        assert_eq!(
            check_entity(&wire(&[("ip", Some("10.0.0.1"))])),
            Ok(Checked::Ip(EntityName::Named("10.0.0.1".into())))
        );
        assert_eq!(
            check_entity(&wire(&[("ip", None)])),
            Ok(Checked::Ip(EntityName::Default))
        );
        for bad in [
            wire(&[]),
            wire(&[("user", None), ("user", Some("a"))]),
            wire(&[("group", Some("g"))]),
            wire(&[("ip", None), ("user", Some("a"))]),
            wire(&[("ip", Some("not-an-ip"))]),
        ] {
            let err = check_entity(&bad).expect_err("refused");
            assert_eq!(err.0, ErrorCode::INVALID_REQUEST, "{bad:?}");
        }
    }

    #[test]
    fn ops_are_checked_as_kafka_checks_them() {
        assert_eq!(
            check_op(false, "producer_byte_rate", 1024.0, false),
            Ok((QuotaKind::ProducerByteRate, Some(1024.0)))
        );
        assert_eq!(
            check_op(false, "consumer_byte_rate", f64::NAN, true),
            Ok((QuotaKind::ConsumerByteRate, None))
        );
        assert_eq!(
            check_op(false, "request_percentage", 12.5, false),
            Ok((QuotaKind::RequestPercentage, Some(12.5)))
        );
        assert_eq!(
            check_op(true, "connection_creation_rate", 5.0, false),
            Ok((QuotaKind::ConnectionCreationRate, Some(5.0)))
        );
        for (ip, key, value, why) in [
            (false, "io_thread_units", 1.0, "Invalid configuration key"),
            (
                false,
                "connection_creation_rate",
                1.0,
                "Invalid configuration key",
            ),
            (true, "producer_byte_rate", 1.0, "Invalid configuration key"),
            (false, "controller_mutation_rate", 5.0, "not enforced"),
            (false, "request_percentage", -1.0, "greater than 0"),
            (false, "request_percentage", f64::NAN, "greater than 0"),
            (true, "connection_creation_rate", 0.0, "greater than 0"),
            (true, "connection_creation_rate", -3.0, "greater than 0"),
            (true, "connection_creation_rate", 2.5, "INT"),
            (true, "connection_creation_rate", 3e9, "INT"),
            (false, "producer_byte_rate", 0.0, "greater than 0"),
            (false, "producer_byte_rate", -5.0, "greater than 0"),
            (false, "producer_byte_rate", f64::INFINITY, "greater than 0"),
            (false, "producer_byte_rate", 1.5, "integer"),
            (false, "producer_byte_rate", 1e300, "integer"),
        ] {
            let err = check_op(ip, key, value, false).expect_err(key);
            assert_eq!(err.0, ErrorCode::INVALID_REQUEST);
            assert!(err.1.contains(why), "{key} {value}: {}", err.1);
        }
    }

    #[test]
    fn filters_match_as_kafkas_describe() {
        let mut configs = QuotaConfigs::default();
        let named = |s: &str| Some(EntityName::Named(s.into()));
        let kind = QuotaKind::ProducerByteRate;
        let alice = QuotaEntity {
            user: named("alice"),
            client_id: None,
        };
        let alice_app = QuotaEntity {
            user: named("alice"),
            client_id: named("app"),
        };
        let default_user = QuotaEntity {
            user: Some(EntityName::Default),
            client_id: None,
        };
        let app = QuotaEntity {
            user: None,
            client_id: named("app"),
        };
        for e in [&alice, &alice_app, &default_user, &app] {
            configs.set(e.clone(), kind, Some(1.0));
        }
        let count = |f: &[(&str, Match)], strict: bool| {
            let f: Vec<(String, Match)> =
                f.iter().map(|(t, m)| (t.to_string(), m.clone())).collect();
            describe_entries(&configs, &f, strict).len()
        };
        assert_eq!(count(&[], false), 4);
        assert_eq!(count(&[], true), 0);
        assert_eq!(count(&[("user", Match::Exact("alice".into()))], false), 2);
        assert_eq!(count(&[("user", Match::Exact("alice".into()))], true), 1);
        assert_eq!(count(&[("user", Match::Default)], false), 1);
        assert_eq!(count(&[("user", Match::Specified)], true), 2);
        assert_eq!(count(&[("client-id", Match::Specified)], false), 2);
        assert_eq!(count(&[("ip", Match::Specified)], false), 0);
        configs.set_ip(EntityName::Named("10.0.0.1".into()), Some(3.0));
        configs.set_ip(EntityName::Default, Some(9.0));
        let count = |f: &[(&str, Match)], strict: bool| {
            let f: Vec<(String, Match)> =
                f.iter().map(|(t, m)| (t.to_string(), m.clone())).collect();
            describe_entries(&configs, &f, strict).len()
        };
        assert_eq!(count(&[], false), 6);
        assert_eq!(count(&[("ip", Match::Specified)], true), 2);
        assert_eq!(count(&[("ip", Match::Default)], false), 1);
        assert_eq!(count(&[("ip", Match::Exact("10.0.0.1".into()))], false), 1);
        assert_eq!(count(&[("user", Match::Specified)], false), 3);
    }
}
