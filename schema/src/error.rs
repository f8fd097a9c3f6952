//! The registry's errors, each with the Confluent Schema Registry error code a REST client
//! expects (`{"error_code": 40401, "message": …}`), so the HTTP side maps them one to one.

use thiserror::Error;

/// Why a registry request was refused. [`RegistryError::error_code`] gives Confluent's code.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RegistryError {
    /// The subject has no version (or only soft-deleted ones and the request excludes them).
    #[error("Subject '{0}' not found.")]
    SubjectNotFound(String),
    /// The subject exists but not at that version.
    #[error("Version {version} not found under subject '{subject}'.")]
    VersionNotFound {
        /// The subject asked for.
        subject: String,
        /// The version asked for.
        version: i32,
    },
    /// No schema with that id, or that schema is not registered under the subject (lookup).
    #[error("Schema not found.")]
    SchemaNotFound,
    /// The subject was soft-deleted; permanent delete or a lookup with `deleted=true` can see it.
    #[error("Subject '{0}' was soft deleted. Set permanent=true to delete permanently")]
    SubjectSoftDeleted(String),
    /// A permanent delete of a subject that was not soft-deleted first.
    #[error("Subject '{0}' was not deleted first before being permanently deleted")]
    SubjectNotSoftDeleted(String),
    /// The version was soft-deleted already.
    #[error("Subject '{subject}' Version {version} was soft deleted. Set permanent=true to delete permanently")]
    VersionSoftDeleted {
        /// The subject.
        subject: String,
        /// The version.
        version: i32,
    },
    /// A permanent delete of a version that was not soft-deleted first.
    #[error("Subject '{subject}' Version {version} was not deleted first before being permanently deleted")]
    VersionNotSoftDeleted {
        /// The subject.
        subject: String,
        /// The version.
        version: i32,
    },
    /// The subject has no compatibility level of its own.
    #[error("Subject '{0}' does not have subject-level compatibility configured")]
    SubjectConfigNotConfigured(String),
    /// The subject has no mode of its own.
    #[error("Subject '{0}' does not have subject-level mode configured")]
    SubjectModeNotConfigured(String),
    /// The schema breaks the subject's compatibility level.
    #[error("Schema being registered is incompatible with an earlier schema for subject '{subject}': {reason}")]
    Incompatible {
        /// The subject.
        subject: String,
        /// What the checker found (the first difference).
        reason: String,
    },
    /// The schema text does not parse as its type, or a reference does not resolve.
    #[error("Invalid schema: {0}")]
    InvalidSchema(String),
    /// A version that is neither a positive number nor `latest`.
    #[error("The specified version '{0}' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"")]
    InvalidVersion(String),
    /// An unknown compatibility level name.
    #[error("Invalid compatibility level: {0}")]
    InvalidCompatibilityLevel(String),
    /// An unknown mode name.
    #[error("Invalid mode: {0}")]
    InvalidMode(String),
    /// The mode forbids the operation (READONLY writes, an explicit id outside IMPORT, …).
    #[error("{0}")]
    OperationNotPermitted(String),
    /// The version is referenced by another live schema and cannot be deleted.
    #[error("One or more references exist to the schema {{subject={subject},version={version}}}")]
    ReferenceExists {
        /// The subject.
        subject: String,
        /// The version.
        version: i32,
    },
    /// The append of the records to `_schemas` failed, or too many writes are queued.
    #[error("Error while storing the schema registry records: {0}")]
    Store(String),
}

impl RegistryError {
    /// Confluent's `error_code` for this error.
    pub fn error_code(&self) -> u32 {
        match self {
            Self::SubjectNotFound(_) => 40401,
            Self::VersionNotFound { .. } => 40402,
            Self::SchemaNotFound => 40403,
            Self::SubjectSoftDeleted(_) => 40404,
            Self::SubjectNotSoftDeleted(_) => 40405,
            Self::VersionSoftDeleted { .. } => 40406,
            Self::VersionNotSoftDeleted { .. } => 40407,
            Self::SubjectConfigNotConfigured(_) => 40408,
            Self::SubjectModeNotConfigured(_) => 40409,
            Self::Incompatible { .. } => 409,
            Self::InvalidSchema(_) => 42201,
            Self::InvalidVersion(_) => 42202,
            Self::InvalidCompatibilityLevel(_) => 42203,
            Self::InvalidMode(_) => 42204,
            Self::OperationNotPermitted(_) => 42205,
            Self::ReferenceExists { .. } => 42206,
            Self::Store(_) => 50001,
        }
    }

    /// The HTTP status the REST side answers with: the code's first three digits (409 is its
    /// own status).
    pub fn http_status(&self) -> u16 {
        let code = self.error_code();
        let status = if code < 1000 { code } else { code / 100 };
        u16::try_from(status).unwrap_or(500)
    }
}
