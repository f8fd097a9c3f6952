//! The registry's vocabulary: schema types, compatibility levels, modes, references. Their
//! names on the wire (JSON) are Confluent's.

use serde::{Deserialize, Serialize};

use crate::error::RegistryError;

/// The format of a schema's text. AVRO is the default when a request or record names none.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum SchemaType {
    /// Apache Avro (JSON schema text).
    #[default]
    Avro,
    /// JSON Schema.
    Json,
    /// Protocol Buffers (`.proto` text).
    Protobuf,
}

impl SchemaType {
    /// Confluent's name (`"AVRO"`, `"JSON"`, `"PROTOBUF"`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Avro => "AVRO",
            Self::Json => "JSON",
            Self::Protobuf => "PROTOBUF",
        }
    }

    /// Parses Confluent's name; an unknown name is an invalid schema (42201), as Confluent answers.
    pub fn parse(name: &str) -> Result<Self, RegistryError> {
        match name {
            "AVRO" => Ok(Self::Avro),
            "JSON" => Ok(Self::Json),
            "PROTOBUF" => Ok(Self::Protobuf),
            other => Err(RegistryError::InvalidSchema(format!(
                "unknown schema type {other}"
            ))),
        }
    }
}

/// Which earlier versions a new schema must stay compatible with, and in which direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CompatibilityLevel {
    /// The new schema reads data written with the latest version (Confluent's default).
    #[default]
    Backward,
    /// The new schema reads data written with every earlier version.
    BackwardTransitive,
    /// The latest version reads data written with the new schema.
    Forward,
    /// Every earlier version reads data written with the new schema.
    ForwardTransitive,
    /// Backward and forward against the latest version.
    Full,
    /// Backward and forward against every earlier version.
    FullTransitive,
    /// No check.
    None,
}

impl CompatibilityLevel {
    /// Every level, for tests and for listing.
    pub const ALL: [Self; 7] = [
        Self::Backward,
        Self::BackwardTransitive,
        Self::Forward,
        Self::ForwardTransitive,
        Self::Full,
        Self::FullTransitive,
        Self::None,
    ];

    /// Confluent's name (`"BACKWARD"`, …).
    pub fn name(self) -> &'static str {
        match self {
            Self::Backward => "BACKWARD",
            Self::BackwardTransitive => "BACKWARD_TRANSITIVE",
            Self::Forward => "FORWARD",
            Self::ForwardTransitive => "FORWARD_TRANSITIVE",
            Self::Full => "FULL",
            Self::FullTransitive => "FULL_TRANSITIVE",
            Self::None => "NONE",
        }
    }

    /// Parses Confluent's name (case-insensitive, as Confluent accepts); 42203 otherwise.
    pub fn parse(name: &str) -> Result<Self, RegistryError> {
        Self::ALL
            .into_iter()
            .find(|level| level.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| RegistryError::InvalidCompatibilityLevel(name.to_owned()))
    }

    /// Whether the new schema must read data of the old ones (backward direction).
    pub fn checks_backward(self) -> bool {
        matches!(
            self,
            Self::Backward | Self::BackwardTransitive | Self::Full | Self::FullTransitive
        )
    }

    /// Whether the old schemas must read data of the new one (forward direction).
    pub fn checks_forward(self) -> bool {
        matches!(
            self,
            Self::Forward | Self::ForwardTransitive | Self::Full | Self::FullTransitive
        )
    }

    /// Whether every earlier live version is checked, not only the latest.
    pub fn is_transitive(self) -> bool {
        matches!(
            self,
            Self::BackwardTransitive | Self::ForwardTransitive | Self::FullTransitive
        )
    }
}

/// What writes the registry (or one subject) accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Mode {
    /// Registrations and deletes are accepted (the default).
    #[default]
    Readwrite,
    /// Every write is refused (42205).
    Readonly,
    /// Registrations may carry their own id and version (migration from another registry);
    /// compatibility is not checked.
    Import,
}

impl Mode {
    /// Confluent's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Readwrite => "READWRITE",
            Self::Readonly => "READONLY",
            Self::Import => "IMPORT",
        }
    }

    /// Parses Confluent's name (case-insensitive); 42204 otherwise.
    pub fn parse(name: &str) -> Result<Self, RegistryError> {
        [Self::Readwrite, Self::Readonly, Self::Import]
            .into_iter()
            .find(|mode| mode.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| RegistryError::InvalidMode(name.to_owned()))
    }
}

/// A schema's reference to another registered schema: `name` is how the referring schema
/// names it (an Avro full name, a JSON `$ref` URL, a `.proto` import path).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SchemaReference {
    /// The name the referring schema uses.
    pub name: String,
    /// The subject the referenced schema is registered under.
    pub subject: String,
    /// Its version under that subject.
    pub version: i32,
}

/// Which version of a subject a request names: a number, or `latest` (also spelled `-1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionSpec {
    /// The highest live version.
    Latest,
    /// That version number (at least 1).
    Number(i32),
}

impl VersionSpec {
    /// Parses a REST path segment: `latest`, `-1`, or a number in `[1, 2^31-1]`; 42202 otherwise.
    pub fn parse(text: &str) -> Result<Self, RegistryError> {
        if text.eq_ignore_ascii_case("latest") {
            return Ok(Self::Latest);
        }
        match text.parse::<i32>() {
            Ok(-1) => Ok(Self::Latest),
            Ok(number) if number >= 1 => Ok(Self::Number(number)),
            _ => Err(RegistryError::InvalidVersion(text.to_owned())),
        }
    }
}
