//! The registry's durable state: what the `_schemas` records say, and nothing else. It
//! changes only in [`State::apply`] (I50), which the machine calls for its own records once
//! they are durable and the loader calls for every record read back at startup, so replaying
//! the log rebuilds exactly the state that wrote it.

use std::collections::{BTreeMap, HashMap};

use thiserror::Error;

use crate::format;
use crate::records::{RecordError, RegistryKey, RegistryRecord, RegistryValue, SchemaValue};
use crate::types::{CompatibilityLevel, Mode, SchemaReference, SchemaType};

/// How deep a chain of references is followed (a schema referring to one referring to …).
pub const REFERENCE_DEPTH_MAX: usize = 32;

/// Why a record read back from `_schemas` was not applied; the loader skips it and counts it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReplayError {
    /// The bytes did not decode.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The record contradicts the state (an id already bound to another schema, I52).
    #[error("record contradicts the registry: {0}")]
    Conflict(String),
}

/// The identity of a schema: equal identities get the same id (I52).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SchemaIdentity {
    /// Its type.
    pub schema_type: SchemaType,
    /// Its canonical form ([`format::ParsedSchema::canonical`]).
    pub canonical: String,
    /// Its references, in the order given.
    pub references: Vec<SchemaReference>,
}

/// A schema known by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSchema {
    /// Its identity.
    pub identity: SchemaIdentity,
    /// The text as first registered.
    pub text: String,
    /// How many subject versions (live or soft-deleted) use this id; at 0 the id is dropped.
    pub version_count: usize,
}

/// One version of a subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionEntry {
    /// The schema id.
    pub id: i32,
    /// Whether it is soft-deleted.
    pub deleted: bool,
}

/// The durable state. `PartialEq` so a replay can be compared with the state that wrote it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    pub(crate) subjects: BTreeMap<String, BTreeMap<i32, VersionEntry>>,
    pub(crate) schemas: BTreeMap<i32, StoredSchema>,
    pub(crate) ids_by_identity: HashMap<SchemaIdentity, i32>,
    /// The highest id any record carried; the next new schema gets one more (I53).
    pub(crate) max_id: i32,
    pub(crate) global_config: Option<CompatibilityLevel>,
    pub(crate) subject_configs: BTreeMap<String, CompatibilityLevel>,
    pub(crate) global_mode: Option<Mode>,
    pub(crate) subject_modes: BTreeMap<String, Mode>,
}

impl State {
    /// The version entry of `subject` at `version`, live or soft-deleted.
    pub fn version(&self, subject: &str, version: i32) -> Option<VersionEntry> {
        self.subjects.get(subject)?.get(&version).copied()
    }

    /// The schema with that id.
    pub fn schema(&self, id: i32) -> Option<&StoredSchema> {
        self.schemas.get(&id)
    }

    /// The ids of every stored schema (those `GET /schemas/ids/{id}` answers), ascending.
    pub fn schema_ids(&self) -> impl Iterator<Item = i32> + '_ {
        self.schemas.keys().copied()
    }

    /// How many schemas are stored (each id once, whatever the subjects sharing it).
    pub fn schema_count(&self) -> usize {
        self.schemas.len()
    }

    /// The texts of every schema `references` reach, dependencies first, each once; `None`
    /// when one does not resolve or the chain is deeper than [`REFERENCE_DEPTH_MAX`].
    pub fn referenced_texts(&self, references: &[SchemaReference]) -> Option<Vec<String>> {
        let mut texts = Vec::new();
        let mut seen = Vec::new();
        for reference in references {
            self.collect_reference(reference, 0, &mut seen, &mut texts)?;
        }
        Some(texts)
    }

    fn collect_reference(
        &self,
        reference: &SchemaReference,
        depth: usize,
        seen: &mut Vec<(String, i32)>,
        texts: &mut Vec<String>,
    ) -> Option<()> {
        if depth >= REFERENCE_DEPTH_MAX {
            return None;
        }
        let key = (reference.subject.clone(), reference.version);
        if seen.contains(&key) {
            return Some(());
        }
        seen.push(key);
        let entry = self.version(&reference.subject, reference.version)?;
        let stored = self.schemas.get(&entry.id)?;
        for inner in &stored.identity.references {
            self.collect_reference(inner, depth + 1, seen, texts)?;
        }
        texts.push(stored.text.clone());
        Some(())
    }

    /// The identity of a schema text as it would be stored. At replay a text that does not
    /// parse (a feature `apache-avro` lacks, a reference gone) keeps its raw text as canonical
    /// form rather than losing the version.
    pub fn identity_for_replay(
        &self,
        schema_type: SchemaType,
        text: &str,
        references: &[SchemaReference],
    ) -> SchemaIdentity {
        let canonical = self
            .referenced_texts(references)
            .and_then(|texts| format::parse(schema_type, text, &texts).ok())
            .map(|parsed| parsed.canonical)
            .unwrap_or_else(|| text.to_owned());
        SchemaIdentity {
            schema_type,
            canonical,
            references: references.to_vec(),
        }
    }

    /// Applies one decoded record (I50). Refuses one that contradicts the state, leaving it as
    /// it was.
    pub fn apply(&mut self, record: &RegistryRecord) -> Result<(), ReplayError> {
        match (&record.key, &record.value) {
            (RegistryKey::Schema { .. }, Some(RegistryValue::Schema(value))) => {
                self.apply_schema(value)
            }
            (RegistryKey::Schema { subject, version }, None) => {
                self.drop_version(subject, *version);
                Ok(())
            }
            (RegistryKey::Config { subject }, value) => {
                let level = match value {
                    Some(RegistryValue::Config {
                        compatibility_level,
                    }) => *compatibility_level,
                    _ => None,
                };
                match (subject, level) {
                    (None, level) => self.global_config = level,
                    (Some(subject), Some(level)) => {
                        self.subject_configs.insert(subject.clone(), level);
                    }
                    (Some(subject), None) => {
                        self.subject_configs.remove(subject);
                    }
                }
                Ok(())
            }
            (RegistryKey::Mode { subject }, value) => {
                let mode = match value {
                    Some(RegistryValue::Mode { mode }) => Some(*mode),
                    _ => None,
                };
                match (subject, mode) {
                    (None, mode) => self.global_mode = mode,
                    (Some(subject), Some(mode)) => {
                        self.subject_modes.insert(subject.clone(), mode);
                    }
                    (Some(subject), None) => {
                        self.subject_modes.remove(subject);
                    }
                }
                Ok(())
            }
            (
                RegistryKey::DeleteSubject { .. },
                Some(RegistryValue::DeleteSubject { subject, version }),
            ) => {
                if let Some(versions) = self.subjects.get_mut(subject) {
                    for (_, entry) in versions.range_mut(..=*version) {
                        entry.deleted = true;
                    }
                }
                Ok(())
            }
            (RegistryKey::ClearSubject { .. }, Some(RegistryValue::ClearSubject { subject })) => {
                let deleted: Vec<i32> = self
                    .subjects
                    .get(subject)
                    .map(|versions| {
                        versions
                            .iter()
                            .filter(|(_, entry)| entry.deleted)
                            .map(|(version, _)| *version)
                            .collect()
                    })
                    .unwrap_or_default();
                for version in deleted {
                    self.drop_version(subject, version);
                }
                Ok(())
            }
            (RegistryKey::Noop, _) => Ok(()),
            // `RegistryRecord::decode` pairs every key with its own value kind; a record built
            // in code that does not is refused the same way.
            _ => Err(ReplayError::Conflict("value of another key type".into())),
        }
    }

    fn apply_schema(&mut self, value: &SchemaValue) -> Result<(), ReplayError> {
        let identity =
            self.identity_for_replay(value.schema_type, &value.schema, &value.references);
        if let Some(stored) = self.schemas.get(&value.id) {
            if stored.identity != identity {
                return Err(ReplayError::Conflict(format!(
                    "id {} is already another schema",
                    value.id
                )));
            }
        }
        // The same key written again (a soft delete rewrites it) replaces the old entry.
        self.drop_version(&value.subject, value.version);
        let stored = self
            .schemas
            .entry(value.id)
            .or_insert_with(|| StoredSchema {
                identity: identity.clone(),
                text: value.schema.clone(),
                version_count: 0,
            });
        stored.version_count += 1;
        // I52: the first id seen for an identity stays its id.
        self.ids_by_identity.entry(identity).or_insert(value.id);
        self.max_id = self.max_id.max(value.id);
        self.subjects
            .entry(value.subject.clone())
            .or_default()
            .insert(
                value.version,
                VersionEntry {
                    id: value.id,
                    deleted: value.deleted,
                },
            );
        Ok(())
    }

    /// Removes a version (a tombstone, or before a rewrite of its key) and the schema it used
    /// when no other version uses it.
    fn drop_version(&mut self, subject: &str, version: i32) {
        let Some(versions) = self.subjects.get_mut(subject) else {
            return;
        };
        let Some(entry) = versions.remove(&version) else {
            return;
        };
        if versions.is_empty() {
            self.subjects.remove(subject);
        }
        if let Some(stored) = self.schemas.get_mut(&entry.id) {
            stored.version_count = stored.version_count.saturating_sub(1);
            if stored.version_count == 0 {
                let identity = stored.identity.clone();
                self.schemas.remove(&entry.id);
                if self.ids_by_identity.get(&identity) == Some(&entry.id) {
                    self.ids_by_identity.remove(&identity);
                }
            }
        }
    }
}
