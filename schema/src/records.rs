//! The `_schemas` topic's records, byte-compatible with the Confluent Schema Registry, so a
//! `_schemas` topic copied from Confluent replays here and ours replays there.
//!
//! Every record is a JSON key and a JSON value (or a tombstone). The key's `keytype` says
//! what the value is:
//!
//! | keytype          | key fields (in this order)                | value                                                   |
//! |------------------|-------------------------------------------|---------------------------------------------------------|
//! | `SCHEMA`         | `subject`, `version`, `magic: 1`          | `subject, version, id, schemaType, [references], schema, deleted`; tombstone = version permanently deleted |
//! | `CONFIG`         | `[subject]` (absent: global), `magic: 0`  | `{["subject"], "compatibilityLevel": …}`; tombstone = setting removed |
//! | `MODE`           | `[subject]` (absent: global), `magic: 0`  | `{["subject"], "mode": …}`; tombstone = setting removed  |
//! | `DELETE_SUBJECT` | `subject`, `magic: 0`                     | `{"subject", "version"}`: every version up to it soft-deleted |
//! | `CLEAR_SUBJECT`  | `subject`, `magic: 0`                     | `{"subject"}`: the subject's soft-deleted versions dropped |
//! | `NOOP`           | `magic: 0`                                | none (Confluent writes it to find the end of the log)   |
//!
//! As Confluent 7+ writes them: `schemaType` always (older registries omitted it: read as
//! AVRO), `references` only when not empty, a value's `subject` only for a subject's setting.
//! Confluent's optional `md5`, `metadata` and `ruleSet` are not written. Unknown fields are ignored (newer Confluent versions add
//! `metadata`, `ruleSet`, `md5`, …), an unknown `keytype` (e.g. `CONTEXT`) is an error the
//! loader skips.
//!
//! Decoding is bounded (I51): a key or value longer than [`RECORD_BYTES_MAX`] or nested deeper
//! than [`JSON_DEPTH_MAX`] is refused before it is parsed, and every decode error is a
//! [`RecordError`], never a panic.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::types::{CompatibilityLevel, Mode, SchemaReference, SchemaType};

/// The largest key or value the decoder parses (a schema's text is the big part; Confluent's
/// own limit is the topic's `max.message.bytes`, 1 MiB by default, so 8 MiB is generous).
pub const RECORD_BYTES_MAX: usize = 8 * 1024 * 1024;

/// The deepest JSON nesting the decoder parses. Records are flat (a schema's text is a JSON
/// string inside them), so this is far above any record Confluent writes.
pub const JSON_DEPTH_MAX: usize = 16;

/// Why a `_schemas` record did not decode: the loader skips it (and counts it).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    /// Longer than [`RECORD_BYTES_MAX`].
    #[error("record part of {0} bytes is over the limit")]
    TooLarge(usize),
    /// Nested deeper than [`JSON_DEPTH_MAX`].
    #[error("record nested deeper than the limit")]
    TooDeep,
    /// Not the JSON shape of a registry key or value.
    #[error("malformed record: {0}")]
    Malformed(String),
    /// A `keytype` this registry does not know (newer Confluent features).
    #[error("unknown keytype {0}")]
    UnknownKeyType(String),
    /// A key whose type needs a value, with none (or the reverse).
    #[error("record {0} with a missing or unexpected value")]
    ValueShape(&'static str),
    /// The value contradicts its key (other subject or version) or holds an impossible number.
    #[error("inconsistent record: {0}")]
    Inconsistent(String),
}

/// A `_schemas` key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RegistryKey {
    /// One version of one subject.
    Schema {
        /// The subject.
        subject: String,
        /// The version (at least 1).
        version: i32,
    },
    /// The compatibility level, global (`None`) or of one subject.
    Config {
        /// The subject, or `None` for the global setting.
        subject: Option<String>,
    },
    /// The mode, global (`None`) or of one subject.
    Mode {
        /// The subject, or `None` for the global setting.
        subject: Option<String>,
    },
    /// A soft delete of a whole subject.
    DeleteSubject {
        /// The subject.
        subject: String,
    },
    /// The drop of a subject's soft-deleted versions.
    ClearSubject {
        /// The subject.
        subject: String,
    },
    /// A marker with no effect.
    Noop,
}

/// The value of a `SCHEMA` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaValue {
    /// The subject (equal to the key's).
    pub subject: String,
    /// The version (equal to the key's).
    pub version: i32,
    /// The global schema id.
    pub id: i32,
    /// The schema's format.
    pub schema_type: SchemaType,
    /// The schemas it refers to.
    pub references: Vec<SchemaReference>,
    /// The schema's text as registered.
    pub schema: String,
    /// Whether this version is soft-deleted.
    pub deleted: bool,
}

/// A decoded value, typed by its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryValue {
    /// For a `SCHEMA` key.
    Schema(SchemaValue),
    /// For a `CONFIG` key.
    Config {
        /// The level; Confluent may write a config value with other settings only.
        compatibility_level: Option<CompatibilityLevel>,
    },
    /// For a `MODE` key.
    Mode {
        /// The mode.
        mode: Mode,
    },
    /// For a `DELETE_SUBJECT` key: versions up to `version` are soft-deleted.
    DeleteSubject {
        /// The subject.
        subject: String,
        /// The latest version at the time of the delete.
        version: i32,
    },
    /// For a `CLEAR_SUBJECT` key.
    ClearSubject {
        /// The subject.
        subject: String,
    },
}

/// A whole `_schemas` record: a key and a value, `None` for a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryRecord {
    /// The key.
    pub key: RegistryKey,
    /// The value, or `None` for a tombstone.
    pub value: Option<RegistryValue>,
}

#[derive(Serialize, Deserialize)]
struct KeyJson {
    keytype: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<i32>,
    #[serde(default)]
    magic: i32,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaValueJson {
    subject: String,
    version: i32,
    id: i32,
    #[serde(default)]
    schema_type: SchemaType,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    references: Vec<SchemaReference>,
    schema: String,
    #[serde(default)]
    deleted: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigValueJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    compatibility_level: Option<CompatibilityLevel>,
}

#[derive(Serialize, Deserialize)]
struct ModeValueJson {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subject: Option<String>,
    mode: Mode,
}

#[derive(Serialize, Deserialize)]
struct DeleteSubjectValueJson {
    subject: String,
    version: i32,
}

#[derive(Serialize, Deserialize)]
struct ClearSubjectValueJson {
    subject: String,
}

/// Refuses input over the size or depth bound before serde sees it (I51). The depth scan
/// counts brackets outside strings; it is linear and allocates nothing.
fn check_bounds(bytes: &[u8]) -> Result<(), RecordError> {
    if bytes.len() > RECORD_BYTES_MAX {
        return Err(RecordError::TooLarge(bytes.len()));
    }
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in bytes {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > JSON_DEPTH_MAX {
                    return Err(RecordError::TooDeep);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

fn parse_json<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, RecordError> {
    check_bounds(bytes)?;
    serde_json::from_slice(bytes).map_err(|e| RecordError::Malformed(e.to_string()))
}

fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these plain structs (strings, integers, enums) cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

/// A setting's value may name its subject (Confluent 7+); if it does, it must be the key's.
fn check_setting_subject(key: &Option<String>, value: Option<&str>) -> Result<(), RecordError> {
    match value {
        Some(named) if key.as_deref() != Some(named) => Err(RecordError::Inconsistent(format!(
            "setting of {named} under key {key:?}"
        ))),
        _ => Ok(()),
    }
}

impl RegistryKey {
    /// The key's JSON, field for field as Confluent writes it.
    pub fn encode(&self) -> Vec<u8> {
        let (keytype, subject, version, magic) = match self {
            Self::Schema { subject, version } => {
                ("SCHEMA", Some(subject.clone()), Some(*version), 1)
            }
            Self::Config { subject } => ("CONFIG", subject.clone(), None, 0),
            Self::Mode { subject } => ("MODE", subject.clone(), None, 0),
            Self::DeleteSubject { subject } => ("DELETE_SUBJECT", Some(subject.clone()), None, 0),
            Self::ClearSubject { subject } => ("CLEAR_SUBJECT", Some(subject.clone()), None, 0),
            Self::Noop => ("NOOP", None, None, 0),
        };
        to_json(&KeyJson {
            keytype: keytype.to_owned(),
            subject,
            version,
            magic,
        })
    }

    /// Decodes a key; bounded (I51).
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordError> {
        let json: KeyJson = parse_json(bytes)?;
        let need_subject = |subject: Option<String>| {
            subject.ok_or_else(|| {
                RecordError::Malformed(format!("{} key without subject", json.keytype))
            })
        };
        let key = match json.keytype.as_str() {
            "SCHEMA" => {
                let version = json
                    .version
                    .ok_or_else(|| RecordError::Malformed("SCHEMA key without version".into()))?;
                if version < 1 {
                    return Err(RecordError::Inconsistent(format!("version {version}")));
                }
                Self::Schema {
                    subject: need_subject(json.subject.clone())?,
                    version,
                }
            }
            "CONFIG" => Self::Config {
                subject: json.subject.clone(),
            },
            "MODE" => Self::Mode {
                subject: json.subject.clone(),
            },
            "DELETE_SUBJECT" => Self::DeleteSubject {
                subject: need_subject(json.subject.clone())?,
            },
            "CLEAR_SUBJECT" => Self::ClearSubject {
                subject: need_subject(json.subject.clone())?,
            },
            "NOOP" => Self::Noop,
            other => return Err(RecordError::UnknownKeyType(other.to_owned())),
        };
        Ok(key)
    }
}

impl RegistryValue {
    /// The value's JSON, as Confluent writes it under `key` (a setting's value repeats the
    /// key's subject).
    pub fn encode(&self, key: &RegistryKey) -> Vec<u8> {
        let setting_subject = match key {
            RegistryKey::Config { subject } | RegistryKey::Mode { subject } => subject.clone(),
            _ => None,
        };
        match self {
            Self::Schema(value) => to_json(&SchemaValueJson {
                subject: value.subject.clone(),
                version: value.version,
                id: value.id,
                schema_type: value.schema_type,
                references: value.references.clone(),
                schema: value.schema.clone(),
                deleted: value.deleted,
            }),
            Self::Config {
                compatibility_level,
            } => to_json(&ConfigValueJson {
                subject: setting_subject,
                compatibility_level: *compatibility_level,
            }),
            Self::Mode { mode } => to_json(&ModeValueJson {
                subject: setting_subject,
                mode: *mode,
            }),
            Self::DeleteSubject { subject, version } => to_json(&DeleteSubjectValueJson {
                subject: subject.clone(),
                version: *version,
            }),
            Self::ClearSubject { subject } => to_json(&ClearSubjectValueJson {
                subject: subject.clone(),
            }),
        }
    }

    /// Decodes the value of a record with this key; bounded (I51). Checks that it agrees with
    /// the key (same subject and version) and that its numbers are possible.
    pub fn decode(key: &RegistryKey, bytes: &[u8]) -> Result<Self, RecordError> {
        match key {
            RegistryKey::Schema { subject, version } => {
                let json: SchemaValueJson = parse_json(bytes)?;
                if json.subject != *subject || json.version != *version {
                    return Err(RecordError::Inconsistent(format!(
                        "value of {}/{} under key {subject}/{version}",
                        json.subject, json.version
                    )));
                }
                if json.id < 0 {
                    return Err(RecordError::Inconsistent(format!("schema id {}", json.id)));
                }
                Ok(Self::Schema(SchemaValue {
                    subject: json.subject,
                    version: json.version,
                    id: json.id,
                    schema_type: json.schema_type,
                    references: json.references,
                    schema: json.schema,
                    deleted: json.deleted,
                }))
            }
            RegistryKey::Config { subject } => {
                let json: ConfigValueJson = parse_json(bytes)?;
                check_setting_subject(subject, json.subject.as_deref())?;
                Ok(Self::Config {
                    compatibility_level: json.compatibility_level,
                })
            }
            RegistryKey::Mode { subject } => {
                let json: ModeValueJson = parse_json(bytes)?;
                check_setting_subject(subject, json.subject.as_deref())?;
                Ok(Self::Mode { mode: json.mode })
            }
            RegistryKey::DeleteSubject { subject } => {
                let json: DeleteSubjectValueJson = parse_json(bytes)?;
                if json.subject != *subject || json.version < 1 {
                    return Err(RecordError::Inconsistent(format!(
                        "delete of {}/{} under key {subject}",
                        json.subject, json.version
                    )));
                }
                Ok(Self::DeleteSubject {
                    subject: json.subject,
                    version: json.version,
                })
            }
            RegistryKey::ClearSubject { subject } => {
                let json: ClearSubjectValueJson = parse_json(bytes)?;
                if json.subject != *subject {
                    return Err(RecordError::Inconsistent(format!(
                        "clear of {} under key {subject}",
                        json.subject
                    )));
                }
                Ok(Self::ClearSubject {
                    subject: json.subject,
                })
            }
            RegistryKey::Noop => Err(RecordError::ValueShape("NOOP")),
        }
    }
}

impl RegistryRecord {
    /// The key and value bytes to append (`None`: a tombstone).
    pub fn encode(&self) -> (Vec<u8>, Option<Vec<u8>>) {
        let value = self.value.as_ref().map(|value| value.encode(&self.key));
        (self.key.encode(), value)
    }

    /// Decodes a record read back from `_schemas`; bounded (I51), never panics. A tombstone is
    /// allowed for the keys a Confluent registry tombstones (SCHEMA, CONFIG, MODE) and for NOOP.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Self, RecordError> {
        let key = RegistryKey::decode(key)?;
        let value = match (&key, value) {
            (RegistryKey::Noop, _) => None,
            (RegistryKey::DeleteSubject { .. }, None) => {
                return Err(RecordError::ValueShape("DELETE_SUBJECT"))
            }
            (RegistryKey::ClearSubject { .. }, None) => {
                return Err(RecordError::ValueShape("CLEAR_SUBJECT"))
            }
            (_, None) => None,
            (key, Some(bytes)) => Some(RegistryValue::decode(key, bytes)?),
        };
        Ok(Self { key, value })
    }
}
