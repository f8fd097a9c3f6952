//! The schema registry as a sans-IO state machine.
//!
//! # Contract
//! - **Getters** answer the REST reads (`GET /schemas/ids/{id}`, `GET /subjects`,
//!   `GET /subjects/{s}/versions/{v}`, `POST /subjects/{s}` lookup, `GET /config`, …) from the
//!   durable state, at once.
//! - **Inputs**: [`Registry::replay`] feeds each `_schemas` record read back at startup (before
//!   the first write); [`Registry::handle_write`] takes a write request (register, delete,
//!   config, mode) under a caller-chosen [`RequestId`]; [`Registry::handle_append_done`] reports
//!   whether the records of an [`Append`] are durable.
//! - **Outputs**: [`Registry::poll_append`] gives records to append to `_schemas` (one [`Append`]
//!   in flight at a time); [`Registry::poll_reply`] gives the answer to each write. After every
//!   input, drain both until `None`.
//! - A write is answered only after its records are durable, and the state changes only by
//!   applying records (I50, I54): a write that needs no record (a schema already registered)
//!   is answered at once, one whose append fails is answered with 50001 and changes nothing.
//! - Writes are evaluated one at a time, each against the state that includes every earlier
//!   write (I54); at most [`WRITES_QUEUED_MAX`] wait.
//! - No I/O, no clock: nothing here depends on time, so no input takes `now`.

use std::collections::VecDeque;

use crate::error::RegistryError;
use crate::format;
use crate::records::{RegistryKey, RegistryRecord, RegistryValue, SchemaValue, RECORD_BYTES_MAX};
use crate::state::{ReplayError, SchemaIdentity, State};
use crate::types::{CompatibilityLevel, Mode, SchemaReference, SchemaType, VersionSpec};

/// How many writes may wait behind the one in flight before new ones are refused (50001).
pub const WRITES_QUEUED_MAX: usize = 4096;

/// The caller's name for a write, echoed in its [`Append`] and its reply.
pub type RequestId = u64;

/// A schema to register or look up: `POST /subjects/{subject}/versions` and
/// `POST /subjects/{subject}` bodies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaInput {
    /// The schema text.
    pub schema: String,
    /// Its type (AVRO when the request names none).
    pub schema_type: SchemaType,
    /// The schemas it refers to.
    pub references: Vec<SchemaReference>,
}

/// A write request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteRequest {
    /// `POST /subjects/{subject}/versions`. `id` and `version` are only allowed in IMPORT mode.
    Register {
        /// The subject.
        subject: String,
        /// The schema.
        input: SchemaInput,
        /// An explicit id (IMPORT mode).
        id: Option<i32>,
        /// An explicit version (IMPORT mode).
        version: Option<i32>,
    },
    /// `DELETE /subjects/{subject}/versions/{version}[?permanent=true]`.
    DeleteVersion {
        /// The subject.
        subject: String,
        /// The version.
        version: VersionSpec,
        /// A hard delete (only of a soft-deleted version, I55).
        permanent: bool,
    },
    /// `DELETE /subjects/{subject}[?permanent=true]`.
    DeleteSubject {
        /// The subject.
        subject: String,
        /// A hard delete (only of a soft-deleted subject, I55).
        permanent: bool,
    },
    /// `PUT /config[/{subject}]`.
    SetConfig {
        /// The subject, or `None` for the global level.
        subject: Option<String>,
        /// The level.
        level: CompatibilityLevel,
    },
    /// `DELETE /config[/{subject}]`.
    DeleteConfig {
        /// The subject, or `None` for the global level.
        subject: Option<String>,
    },
    /// `PUT /mode[/{subject}][?force=true]`.
    SetMode {
        /// The subject, or `None` for the global mode.
        subject: Option<String>,
        /// The mode.
        mode: Mode,
        /// IMPORT over existing schemas (otherwise refused).
        force: bool,
    },
    /// `DELETE /mode/{subject}` (or the global mode, back to READWRITE).
    DeleteMode {
        /// The subject, or `None` for the global mode.
        subject: Option<String>,
    },
}

/// The answer to a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteReply {
    /// The schema's id (and the version it has under the subject).
    Registered {
        /// The global id.
        id: i32,
        /// The version under the subject.
        version: i32,
    },
    /// The version deleted.
    VersionDeleted(i32),
    /// The versions deleted.
    SubjectDeleted(Vec<i32>),
    /// The level now set.
    ConfigSet(CompatibilityLevel),
    /// The level that was set before the delete.
    ConfigDeleted(CompatibilityLevel),
    /// The mode now set.
    ModeSet(Mode),
    /// The mode that was set before the delete.
    ModeDeleted(Mode),
}

/// Records to append to `_schemas`, in order, for one write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Append {
    /// The write they belong to.
    pub request: RequestId,
    /// The records.
    pub records: Vec<RegistryRecord>,
}

/// A registered schema as the REST reads return it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredSchema {
    /// The subject (`None` when read by id).
    pub subject: Option<String>,
    /// The version under the subject (0 when read by id).
    pub version: i32,
    /// The global id.
    pub id: i32,
    /// Its type.
    pub schema_type: SchemaType,
    /// The text as first registered.
    pub schema: String,
    /// Its references.
    pub references: Vec<SchemaReference>,
    /// Whether this version is soft-deleted.
    pub deleted: bool,
}

struct InFlight {
    request: RequestId,
    records: Vec<RegistryRecord>,
    reply: WriteReply,
}

/// The registry machine (see the module contract).
#[derive(Default)]
pub struct Registry {
    state: State,
    waiting: VecDeque<(RequestId, WriteRequest)>,
    in_flight: Option<InFlight>,
    appends: VecDeque<Append>,
    replies: VecDeque<(RequestId, Result<WriteReply, RegistryError>)>,
}

impl Registry {
    /// An empty registry (before any replay).
    pub fn new() -> Self {
        Self::default()
    }

    /// The durable state, for comparing a replay with the machine that wrote the records.
    pub fn state(&self) -> &State {
        &self.state
    }

    // ----- inputs -----

    /// Applies one `_schemas` record read back at startup (I50). A record that does not decode
    /// or contradicts the state is refused and changes nothing: the loader skips it.
    pub fn replay(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), ReplayError> {
        let record = RegistryRecord::decode(key, value)?;
        self.state.apply(&record)
    }

    /// Takes a write; its reply (and maybe an [`Append`]) come from the `poll_*` outputs.
    pub fn handle_write(&mut self, request: RequestId, write: WriteRequest) {
        if self.waiting.len() >= WRITES_QUEUED_MAX {
            self.replies.push_back((
                request,
                Err(RegistryError::Store("too many writes queued".into())),
            ));
            return;
        }
        self.waiting.push_back((request, write));
        self.drive();
    }

    /// Reports the outcome of the [`Append`] for `request`: `Ok` once its records are durable,
    /// `Err` when the append failed (the write is answered 50001 and the state is unchanged;
    /// the caller should reload from the log if part of it may have been written).
    ///
    /// # Panics
    /// When `request` is not the append in flight (a driver bug).
    pub fn handle_append_done(&mut self, request: RequestId, outcome: Result<(), String>) {
        let in_flight = self.in_flight.take();
        let Some(in_flight) = in_flight.filter(|f| f.request == request) else {
            panic!("append done for {request}, which is not the append in flight");
        };
        let reply = match outcome {
            Ok(()) => {
                for record in &in_flight.records {
                    let applied = self.state.apply(record);
                    // The records were built against this very state (I54).
                    assert!(applied.is_ok(), "own record refused: {applied:?}");
                }
                Ok(in_flight.reply)
            }
            Err(message) => Err(RegistryError::Store(message)),
        };
        self.replies.push_back((request, reply));
        self.drive();
    }

    // ----- outputs -----

    /// The next records to append (at most one [`Append`] is in flight).
    pub fn poll_append(&mut self) -> Option<Append> {
        self.appends.pop_front()
    }

    /// The next answered write.
    pub fn poll_reply(&mut self) -> Option<(RequestId, Result<WriteReply, RegistryError>)> {
        self.replies.pop_front()
    }

    /// Evaluates waiting writes until one needs an append (I54).
    fn drive(&mut self) {
        while self.in_flight.is_none() {
            let Some((request, write)) = self.waiting.pop_front() else {
                return;
            };
            let is_register = matches!(write, WriteRequest::Register { .. });
            let evaluated = self.evaluate(write).and_then(|(records, reply)| {
                refuse_unreadable_records(&records, is_register)?;
                Ok((records, reply))
            });
            match evaluated {
                Ok((records, reply)) if records.is_empty() => {
                    self.replies.push_back((request, Ok(reply)));
                }
                Ok((records, reply)) => {
                    self.appends.push_back(Append {
                        request,
                        records: records.clone(),
                    });
                    self.in_flight = Some(InFlight {
                        request,
                        records,
                        reply,
                    });
                }
                Err(error) => self.replies.push_back((request, Err(error))),
            }
        }
    }

    fn evaluate(
        &self,
        write: WriteRequest,
    ) -> Result<(Vec<RegistryRecord>, WriteReply), RegistryError> {
        match write {
            WriteRequest::Register {
                subject,
                input,
                id,
                version,
            } => self.evaluate_register(subject, input, id, version),
            WriteRequest::DeleteVersion {
                subject,
                version,
                permanent,
            } => self.evaluate_delete_version(subject, version, permanent),
            WriteRequest::DeleteSubject { subject, permanent } => {
                self.evaluate_delete_subject(subject, permanent)
            }
            WriteRequest::SetConfig { subject, level } => Ok((
                vec![RegistryRecord {
                    key: RegistryKey::Config { subject },
                    value: Some(RegistryValue::Config {
                        compatibility_level: Some(level),
                    }),
                }],
                WriteReply::ConfigSet(level),
            )),
            WriteRequest::DeleteConfig { subject } => {
                let previous =
                    match &subject {
                        None => self.state.global_config.unwrap_or_default(),
                        Some(name) => *self.state.subject_configs.get(name).ok_or_else(|| {
                            RegistryError::SubjectConfigNotConfigured(name.clone())
                        })?,
                    };
                Ok((
                    vec![RegistryRecord {
                        key: RegistryKey::Config { subject },
                        value: None,
                    }],
                    WriteReply::ConfigDeleted(previous),
                ))
            }
            WriteRequest::SetMode {
                subject,
                mode,
                force,
            } => {
                if mode == Mode::Import && !force {
                    let has_schemas = match &subject {
                        None => !self.state.subjects.is_empty(),
                        Some(name) => self.state.subjects.contains_key(name),
                    };
                    if has_schemas {
                        return Err(RegistryError::OperationNotPermitted(
                            "Cannot import since found existing subjects".into(),
                        ));
                    }
                }
                Ok((
                    vec![RegistryRecord {
                        key: RegistryKey::Mode { subject },
                        value: Some(RegistryValue::Mode { mode }),
                    }],
                    WriteReply::ModeSet(mode),
                ))
            }
            WriteRequest::DeleteMode { subject } => {
                let previous = match &subject {
                    None => self.state.global_mode.unwrap_or_default(),
                    Some(name) => *self
                        .state
                        .subject_modes
                        .get(name)
                        .ok_or_else(|| RegistryError::SubjectModeNotConfigured(name.clone()))?,
                };
                Ok((
                    vec![RegistryRecord {
                        key: RegistryKey::Mode { subject },
                        value: None,
                    }],
                    WriteReply::ModeDeleted(previous),
                ))
            }
        }
    }

    fn refuse_if_read_only(&self, subject: &str) -> Result<Mode, RegistryError> {
        let mode = self.mode(Some(subject));
        if mode == Mode::Readonly {
            return Err(RegistryError::OperationNotPermitted(format!(
                "Subject {subject} is in read-only mode"
            )));
        }
        Ok(mode)
    }

    /// Parses a schema input with its references resolved (42201 when one does not).
    fn parse_input(&self, input: &SchemaInput) -> Result<format::ParsedSchema, RegistryError> {
        let texts = self
            .state
            .referenced_texts(&input.references)
            .ok_or_else(|| {
                RegistryError::InvalidSchema(
                    "a reference does not resolve to a registered schema".into(),
                )
            })?;
        format::parse(input.schema_type, &input.schema, &texts)
    }

    fn identity(input: &SchemaInput, parsed: &format::ParsedSchema) -> SchemaIdentity {
        SchemaIdentity {
            schema_type: input.schema_type,
            canonical: parsed.canonical.clone(),
            references: input.references.clone(),
        }
    }

    fn evaluate_register(
        &self,
        subject: String,
        input: SchemaInput,
        explicit_id: Option<i32>,
        explicit_version: Option<i32>,
    ) -> Result<(Vec<RegistryRecord>, WriteReply), RegistryError> {
        let mode = self.refuse_if_read_only(&subject)?;
        if (explicit_id.is_some() || explicit_version.is_some()) && mode != Mode::Import {
            return Err(RegistryError::OperationNotPermitted(format!(
                "Subject {subject} is not in import mode"
            )));
        }
        if explicit_id.is_some_and(|id| id < 1) || explicit_version.is_some_and(|v| v < 1) {
            return Err(RegistryError::OperationNotPermitted(
                "an explicit id and version are at least 1".into(),
            ));
        }
        let parsed = self.parse_input(&input)?;
        let identity = Self::identity(&input, &parsed);
        let versions = self.state.subjects.get(&subject);

        // Already registered (live) under this subject: answer with it, write nothing.
        if let Some(versions) = versions {
            for (version, entry) in versions.iter().filter(|(_, e)| !e.deleted) {
                let same = self
                    .state
                    .schema(entry.id)
                    .is_some_and(|stored| stored.identity == identity);
                if same && explicit_id.is_none_or(|id| id == entry.id) {
                    return Ok((
                        Vec::new(),
                        WriteReply::Registered {
                            id: entry.id,
                            version: *version,
                        },
                    ));
                }
            }
        }

        if mode != Mode::Import {
            self.check_compatibility(&subject, &parsed, None)?;
        }

        let id = match explicit_id {
            Some(id) => {
                if let Some(stored) = self.state.schema(id) {
                    if stored.identity != identity {
                        return Err(RegistryError::OperationNotPermitted(format!(
                            "Overwrite new schema with id {id} is not permitted."
                        )));
                    }
                }
                id
            }
            None => match self.state.ids_by_identity.get(&identity) {
                Some(id) => *id,
                None => self
                    .state
                    .max_id
                    .checked_add(1)
                    .ok_or_else(|| RegistryError::Store("schema ids are exhausted".into()))?,
            },
        };
        let latest_version = versions
            .and_then(|v| v.keys().next_back().copied())
            .unwrap_or(0);
        let version = match explicit_version {
            Some(version) if versions.is_some_and(|v| v.contains_key(&version)) => {
                return Err(RegistryError::OperationNotPermitted(format!(
                    "Overwrite new schema with version {version} is not permitted."
                )))
            }
            Some(version) => version,
            None => latest_version
                .checked_add(1)
                .ok_or_else(|| RegistryError::Store("versions are exhausted".into()))?,
        };
        let record = RegistryRecord {
            key: RegistryKey::Schema {
                subject: subject.clone(),
                version,
            },
            value: Some(RegistryValue::Schema(SchemaValue {
                subject,
                version,
                id,
                schema_type: input.schema_type,
                references: input.references,
                schema: input.schema,
                deleted: false,
            })),
        };
        Ok((vec![record], WriteReply::Registered { id, version }))
    }

    /// Checks a parsed schema against the subject's live versions under its level: the latest
    /// only, or all (transitive). `against` restricts the check to one version
    /// (`POST /compatibility/subjects/{s}/versions/{v}`).
    fn check_compatibility(
        &self,
        subject: &str,
        parsed: &format::ParsedSchema,
        against: Option<i32>,
    ) -> Result<(), RegistryError> {
        let level = self.compatibility_level(Some(subject));
        if level == CompatibilityLevel::None {
            return Ok(());
        }
        let Some(versions) = self.state.subjects.get(subject) else {
            return Ok(());
        };
        let mut live: Vec<i32> = versions
            .iter()
            .filter(|(_, e)| !e.deleted)
            .map(|(v, _)| *v)
            .collect();
        if let Some(version) = against {
            live.retain(|v| *v == version);
        } else if !level.is_transitive() {
            live = live.last().copied().into_iter().collect();
        }
        for version in live {
            let Some(old) = self.parsed_version(subject, version) else {
                continue;
            };
            let mut failures = Vec::new();
            if level.checks_backward() {
                if let Err(reason) = format::can_read(&old, parsed) {
                    failures.push(format!("backward against version {version}: {reason}"));
                }
            }
            if level.checks_forward() {
                if let Err(reason) = format::can_read(parsed, &old) {
                    failures.push(format!("forward against version {version}: {reason}"));
                }
            }
            if !failures.is_empty() {
                return Err(RegistryError::Incompatible {
                    subject: subject.to_owned(),
                    reason: failures.join("; "),
                });
            }
        }
        Ok(())
    }

    /// A stored version parsed again (a text that no longer parses is not compared).
    fn parsed_version(&self, subject: &str, version: i32) -> Option<format::ParsedSchema> {
        let entry = self.state.version(subject, version)?;
        let stored = self.state.schema(entry.id)?;
        let texts = self.state.referenced_texts(&stored.identity.references)?;
        format::parse(stored.identity.schema_type, &stored.text, &texts).ok()
    }

    /// Whether a live schema other than `(subject, version)` itself refers to it (42206).
    fn refuse_if_referenced(&self, subject: &str, version: i32) -> Result<(), RegistryError> {
        for versions in self.state.subjects.values() {
            for entry in versions.values().filter(|e| !e.deleted) {
                let refers = self.state.schema(entry.id).is_some_and(|stored| {
                    stored
                        .identity
                        .references
                        .iter()
                        .any(|r| r.subject == subject && r.version == version)
                });
                if refers {
                    return Err(RegistryError::ReferenceExists {
                        subject: subject.to_owned(),
                        version,
                    });
                }
            }
        }
        Ok(())
    }

    fn evaluate_delete_version(
        &self,
        subject: String,
        spec: VersionSpec,
        permanent: bool,
    ) -> Result<(Vec<RegistryRecord>, WriteReply), RegistryError> {
        self.refuse_if_read_only(&subject)?;
        let versions = self
            .state
            .subjects
            .get(&subject)
            .ok_or_else(|| RegistryError::SubjectNotFound(subject.clone()))?;
        let version = match spec {
            VersionSpec::Number(number) => number,
            VersionSpec::Latest => {
                let latest_live = versions.iter().rev().find(|(_, e)| !e.deleted || permanent);
                *latest_live
                    .ok_or_else(|| RegistryError::SubjectNotFound(subject.clone()))?
                    .0
            }
        };
        let entry = *versions
            .get(&version)
            .ok_or_else(|| RegistryError::VersionNotFound {
                subject: subject.clone(),
                version,
            })?;
        match (permanent, entry.deleted) {
            (false, true) => return Err(RegistryError::VersionSoftDeleted { subject, version }),
            (true, false) => return Err(RegistryError::VersionNotSoftDeleted { subject, version }),
            _ => {}
        }
        self.refuse_if_referenced(&subject, version)?;
        let key = RegistryKey::Schema {
            subject: subject.clone(),
            version,
        };
        let value = if permanent {
            None
        } else {
            let stored = self
                .state
                .schema(entry.id)
                .ok_or(RegistryError::SchemaNotFound)?;
            Some(RegistryValue::Schema(SchemaValue {
                subject,
                version,
                id: entry.id,
                schema_type: stored.identity.schema_type,
                references: stored.identity.references.clone(),
                schema: stored.text.clone(),
                deleted: true,
            }))
        };
        Ok((
            vec![RegistryRecord { key, value }],
            WriteReply::VersionDeleted(version),
        ))
    }

    fn evaluate_delete_subject(
        &self,
        subject: String,
        permanent: bool,
    ) -> Result<(Vec<RegistryRecord>, WriteReply), RegistryError> {
        self.refuse_if_read_only(&subject)?;
        let versions = self
            .state
            .subjects
            .get(&subject)
            .ok_or_else(|| RegistryError::SubjectNotFound(subject.clone()))?;
        let all_deleted = versions.values().all(|e| e.deleted);
        if permanent {
            if !all_deleted {
                return Err(RegistryError::SubjectNotSoftDeleted(subject));
            }
            // As Confluent: tombstones from the highest version down (a version may refer to
            // an earlier one of the same subject), then the subject's own config and mode.
            let mut records = Vec::new();
            for version in versions.keys().rev() {
                self.refuse_if_referenced(&subject, *version)?;
                records.push(RegistryRecord {
                    key: RegistryKey::Schema {
                        subject: subject.clone(),
                        version: *version,
                    },
                    value: None,
                });
            }
            if self.state.subject_modes.contains_key(&subject) {
                records.push(RegistryRecord {
                    key: RegistryKey::Mode {
                        subject: Some(subject.clone()),
                    },
                    value: None,
                });
            }
            if self.state.subject_configs.contains_key(&subject) {
                records.push(RegistryRecord {
                    key: RegistryKey::Config {
                        subject: Some(subject.clone()),
                    },
                    value: None,
                });
            }
            let deleted = versions.keys().copied().collect();
            return Ok((records, WriteReply::SubjectDeleted(deleted)));
        }
        if all_deleted {
            return Err(RegistryError::SubjectSoftDeleted(subject));
        }
        let live: Vec<i32> = versions
            .iter()
            .filter(|(_, e)| !e.deleted)
            .map(|(v, _)| *v)
            .collect();
        for version in &live {
            self.refuse_if_referenced(&subject, *version)?;
        }
        // The watermark is the latest live version, as Confluent writes it.
        let watermark = live.last().copied().unwrap_or(1);
        let record = RegistryRecord {
            key: RegistryKey::DeleteSubject {
                subject: subject.clone(),
            },
            value: Some(RegistryValue::DeleteSubject {
                subject,
                version: watermark,
            }),
        };
        Ok((vec![record], WriteReply::SubjectDeleted(live)))
    }

    // ----- getters (REST reads) -----

    /// The effective compatibility level of a subject (its own, else the global one, else
    /// BACKWARD), or the global one for `None`.
    pub fn compatibility_level(&self, subject: Option<&str>) -> CompatibilityLevel {
        subject
            .and_then(|s| self.state.subject_configs.get(s).copied())
            .or(self.state.global_config)
            .unwrap_or_default()
    }

    /// `GET /config/{subject}` without `defaultToGlobal`: the subject's own level (40408).
    pub fn subject_compatibility_level(
        &self,
        subject: &str,
    ) -> Result<CompatibilityLevel, RegistryError> {
        self.state
            .subject_configs
            .get(subject)
            .copied()
            .ok_or_else(|| RegistryError::SubjectConfigNotConfigured(subject.to_owned()))
    }

    /// The effective mode of a subject (its own, else the global one, else READWRITE), or the
    /// global one for `None`.
    pub fn mode(&self, subject: Option<&str>) -> Mode {
        subject
            .and_then(|s| self.state.subject_modes.get(s).copied())
            .or(self.state.global_mode)
            .unwrap_or_default()
    }

    /// `GET /mode/{subject}` without `defaultToGlobal`: the subject's own mode (40409).
    pub fn subject_mode(&self, subject: &str) -> Result<Mode, RegistryError> {
        self.state
            .subject_modes
            .get(subject)
            .copied()
            .ok_or_else(|| RegistryError::SubjectModeNotConfigured(subject.to_owned()))
    }

    /// `GET /schemas/ids/{id}` (40403).
    pub fn schema_by_id(&self, id: i32) -> Result<RegisteredSchema, RegistryError> {
        let stored = self.state.schema(id).ok_or(RegistryError::SchemaNotFound)?;
        Ok(RegisteredSchema {
            subject: None,
            version: 0,
            id,
            schema_type: stored.identity.schema_type,
            schema: stored.text.clone(),
            references: stored.identity.references.clone(),
            deleted: false,
        })
    }

    /// `GET /schemas/ids/{id}/versions`: every `(subject, version)` using the id.
    pub fn versions_of_id(&self, id: i32, include_deleted: bool) -> Vec<(String, i32)> {
        let mut found = Vec::new();
        for (subject, versions) in &self.state.subjects {
            for (version, entry) in versions {
                if entry.id == id && (include_deleted || !entry.deleted) {
                    found.push((subject.clone(), *version));
                }
            }
        }
        found
    }

    /// `GET /subjects/{subject}/versions/{version}/referencedby`: the ids of the schemas
    /// whose references name that subject version and that some live version uses, ascending
    /// (40401, 40402 as the version read).
    pub fn referenced_by(
        &self,
        subject: &str,
        spec: VersionSpec,
    ) -> Result<Vec<i32>, RegistryError> {
        let version = self.subject_version(subject, spec, false)?.version;
        let live_ids: std::collections::BTreeSet<i32> = self
            .state
            .subjects
            .values()
            .flat_map(|versions| versions.values())
            .filter(|entry| !entry.deleted)
            .map(|entry| entry.id)
            .collect();
        Ok(self
            .state
            .schemas
            .iter()
            .filter(|(id, stored)| {
                live_ids.contains(id)
                    && stored
                        .identity
                        .references
                        .iter()
                        .any(|r| r.subject == subject && r.version == version)
            })
            .map(|(id, _)| *id)
            .collect())
    }

    /// `GET /subjects[?deleted=true]`: subjects with a live version (or any version).
    pub fn subjects(&self, include_deleted: bool) -> Vec<String> {
        self.state
            .subjects
            .iter()
            .filter(|(_, versions)| include_deleted || versions.values().any(|e| !e.deleted))
            .map(|(subject, _)| subject.clone())
            .collect()
    }

    /// `GET /subjects/{subject}/versions[?deleted=true]` (40401 when there is none).
    pub fn versions(
        &self,
        subject: &str,
        include_deleted: bool,
    ) -> Result<Vec<i32>, RegistryError> {
        let versions: Vec<i32> = self
            .state
            .subjects
            .get(subject)
            .map(|versions| {
                versions
                    .iter()
                    .filter(|(_, e)| include_deleted || !e.deleted)
                    .map(|(v, _)| *v)
                    .collect()
            })
            .unwrap_or_default();
        if versions.is_empty() {
            return Err(RegistryError::SubjectNotFound(subject.to_owned()));
        }
        Ok(versions)
    }

    /// `GET /subjects/{subject}/versions/{version}[?deleted=true]` (40401, 40402).
    pub fn subject_version(
        &self,
        subject: &str,
        spec: VersionSpec,
        include_deleted: bool,
    ) -> Result<RegisteredSchema, RegistryError> {
        let versions = self.versions(subject, include_deleted)?;
        let version = match spec {
            VersionSpec::Latest => *versions
                .last()
                .ok_or_else(|| RegistryError::SubjectNotFound(subject.to_owned()))?,
            VersionSpec::Number(number) => number,
        };
        let not_found = || RegistryError::VersionNotFound {
            subject: subject.to_owned(),
            version,
        };
        if !versions.contains(&version) {
            return Err(not_found());
        }
        let entry = self.state.version(subject, version).ok_or_else(not_found)?;
        let stored = self
            .state
            .schema(entry.id)
            .ok_or(RegistryError::SchemaNotFound)?;
        Ok(RegisteredSchema {
            subject: Some(subject.to_owned()),
            version,
            id: entry.id,
            schema_type: stored.identity.schema_type,
            schema: stored.text.clone(),
            references: stored.identity.references.clone(),
            deleted: entry.deleted,
        })
    }

    /// `POST /subjects/{subject}[?deleted=true]`: the version of the subject holding this
    /// schema (40401 no subject, 40403 not under it, 42201 invalid).
    pub fn lookup(
        &self,
        subject: &str,
        input: &SchemaInput,
        include_deleted: bool,
    ) -> Result<RegisteredSchema, RegistryError> {
        let versions = self.versions(subject, include_deleted)?;
        let parsed = self.parse_input(input)?;
        let identity = Self::identity(input, &parsed);
        let id = *self
            .state
            .ids_by_identity
            .get(&identity)
            .ok_or(RegistryError::SchemaNotFound)?;
        let version = versions
            .into_iter()
            .rev()
            .find(|v| self.state.version(subject, *v).is_some_and(|e| e.id == id))
            .ok_or(RegistryError::SchemaNotFound)?;
        self.subject_version(subject, VersionSpec::Number(version), include_deleted)
    }

    /// `POST /compatibility/subjects/{subject}/versions[/{version}]`: `Ok(Ok(()))` when
    /// compatible, `Ok(Err(reasons))` when not, `Err` for a bad request (42201, 40401, 40402).
    pub fn test_compatibility(
        &self,
        subject: &str,
        against: Option<VersionSpec>,
        input: &SchemaInput,
    ) -> Result<Result<(), String>, RegistryError> {
        let parsed = self.parse_input(input)?;
        let against = match against {
            None => None,
            Some(spec) => Some(self.subject_version(subject, spec, false)?.version),
        };
        match self.check_compatibility(subject, &parsed, against) {
            Ok(()) => Ok(Ok(())),
            Err(RegistryError::Incompatible { reason, .. }) => Ok(Err(reason)),
            Err(other) => Err(other),
        }
    }
}

/// Refuses records that replay would refuse for their size (I51): JSON escaping can make a
/// record several times its schema text, and a record written but not readable back would
/// lose the write at the next start. 42201 for a registration, 42205 for other writes.
fn refuse_unreadable_records(
    records: &[RegistryRecord],
    is_register: bool,
) -> Result<(), RegistryError> {
    for record in records {
        let (key, value) = record.encode();
        let bytes = key.len().max(value.map_or(0, |v| v.len()));
        if bytes > RECORD_BYTES_MAX {
            let message = format!("the record would be {bytes} bytes, over the limit");
            return Err(if is_register {
                RegistryError::InvalidSchema(message)
            } else {
                RegistryError::OperationNotPermitted(message)
            });
        }
    }
    Ok(())
}
