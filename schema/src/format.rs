//! Per-type schema handling: parse a schema's text, give its canonical form (the identity
//! ids are assigned by, I52), and check one schema against another for compatibility.
//!
//! | type     | parse                               | canonical form                      | compatibility checked |
//! |----------|-------------------------------------|-------------------------------------|-----------------------|
//! | AVRO     | `apache-avro` (named references resolved) | Avro Parsing Canonical Form  | Avro schema resolution (`SchemaCompatibility::can_read`) |
//! | JSON     | `serde_json`; must be an object or a boolean | keys sorted, no whitespace  | a subset: `type` narrowed or changed, a property newly `required`, recursively through `properties` and `items` |
//! | PROTOBUF | `protox-parse` (imports not resolved) | the descriptor without source positions, hex | a subset of Confluent's rules, see [`crate::protobuf`] |
//!
//! Everything here is a pure function of its inputs, bounded by [`SCHEMA_TEXT_BYTES_MAX`] and
//! by serde_json's nesting limit (128).

use apache_avro::schema_compatibility::SchemaCompatibility;
use serde_json::Value;

use crate::error::RegistryError;
use crate::types::SchemaType;

/// The longest schema text accepted for registration.
pub const SCHEMA_TEXT_BYTES_MAX: usize = 4 * 1024 * 1024;

/// How deep the JSON Schema compatibility walk goes (deeper parts are not compared).
const JSON_COMPAT_DEPTH_MAX: usize = 64;

/// A schema that parsed, with its canonical form.
#[derive(Debug, Clone)]
pub struct ParsedSchema {
    /// Its type.
    pub schema_type: SchemaType,
    /// The canonical form: equal forms mean the same schema (I52).
    pub canonical: String,
    parsed: Parsed,
}

#[derive(Debug, Clone)]
enum Parsed {
    Avro(Box<apache_avro::Schema>),
    Json(Value),
    Protobuf(Box<prost_types::FileDescriptorProto>),
}

/// Parses `text` as `schema_type`; `referenced` holds the texts of every schema it refers to,
/// transitively, dependencies first. An error is 42201 (invalid schema).
pub fn parse(
    schema_type: SchemaType,
    text: &str,
    referenced: &[String],
) -> Result<ParsedSchema, RegistryError> {
    if text.len() > SCHEMA_TEXT_BYTES_MAX {
        return Err(RegistryError::InvalidSchema(format!(
            "schema of {} bytes is over the limit",
            text.len()
        )));
    }
    let invalid = |e: &dyn std::fmt::Display| RegistryError::InvalidSchema(e.to_string());
    let (canonical, parsed) = match schema_type {
        SchemaType::Avro => {
            let schema = if referenced.is_empty() {
                apache_avro::Schema::parse_str(text).map_err(|e| invalid(&e))?
            } else {
                apache_avro::Schema::parse_str_with_list(text, referenced)
                    .map_err(|e| invalid(&e))?
                    .0
            };
            (schema.canonical_form(), Parsed::Avro(Box::new(schema)))
        }
        SchemaType::Json => {
            let value: Value = serde_json::from_str(text).map_err(|e| invalid(&e))?;
            if !(value.is_object() || value.is_boolean()) {
                return Err(RegistryError::InvalidSchema(
                    "a JSON schema is an object or a boolean".into(),
                ));
            }
            // serde_json's map is a BTreeMap (no `preserve_order`): keys come out sorted.
            let canonical = serde_json::to_string(&value).map_err(|e| invalid(&e))?;
            (canonical, Parsed::Json(value))
        }
        SchemaType::Protobuf => {
            let file = crate::protobuf::parse(text).map_err(|e| invalid(&e))?;
            (
                crate::protobuf::canonical(&file),
                Parsed::Protobuf(Box::new(file)),
            )
        }
    };
    Ok(ParsedSchema {
        schema_type,
        canonical,
        parsed,
    })
}

/// Whether a consumer using `reader` can read data written with `writer`. `Err` says the
/// first difference found. Schemas of different types never are.
pub fn can_read(writer: &ParsedSchema, reader: &ParsedSchema) -> Result<(), String> {
    match (&writer.parsed, &reader.parsed) {
        (Parsed::Avro(writer), Parsed::Avro(reader)) => {
            SchemaCompatibility::can_read(writer, reader)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        (Parsed::Json(writer), Parsed::Json(reader)) => json_can_read(writer, reader, "#", 0),
        (Parsed::Protobuf(writer), Parsed::Protobuf(reader)) => {
            crate::protobuf::can_read(writer, reader)
        }
        _ => Err(format!(
            "schema type changed from {} to {}",
            writer.schema_type.name(),
            reader.schema_type.name()
        )),
    }
}

fn json_types(schema: &Value) -> Option<Vec<&str>> {
    match schema.get("type")? {
        Value::String(one) => Some(vec![one.as_str()]),
        Value::Array(many) => Some(many.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

fn json_required(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The JSON Schema subset: the reader must accept every type the writer allows (an `integer`
/// is a `number`), must not require a property the writer did not, and the same holds for
/// every property and `items` schema both declare.
fn json_can_read(writer: &Value, reader: &Value, path: &str, depth: usize) -> Result<(), String> {
    if depth > JSON_COMPAT_DEPTH_MAX {
        return Ok(());
    }
    if let (Some(written), Some(read)) = (json_types(writer), json_types(reader)) {
        for kind in &written {
            let accepted = read.contains(kind) || (*kind == "integer" && read.contains(&"number"));
            if !accepted {
                return Err(format!("{path}: type {kind} is no longer accepted"));
            }
        }
    }
    let written_required = json_required(writer);
    for name in json_required(reader) {
        if !written_required.contains(&name) {
            return Err(format!("{path}: property {name} is newly required"));
        }
    }
    if let (Some(Value::Object(written)), Some(Value::Object(read))) =
        (writer.get("properties"), reader.get("properties"))
    {
        for (name, read_property) in read {
            if let Some(written_property) = written.get(name) {
                json_can_read(
                    written_property,
                    read_property,
                    &format!("{path}/properties/{name}"),
                    depth + 1,
                )?;
            }
        }
    }
    if let (Some(written), Some(read)) = (writer.get("items"), reader.get("items")) {
        json_can_read(written, read, &format!("{path}/items"), depth + 1)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn avro(text: &str) -> ParsedSchema {
        parse(SchemaType::Avro, text, &[]).expect("valid avro")
    }

    #[test]
    fn avro_canonical_form_ignores_layout_and_docs() {
        let a = avro(r#"{"type":"record","name":"User","fields":[{"name":"id","type":"long"}]}"#);
        let b = avro(
            r#"{ "name" : "User", "doc": "a user", "type" : "record",
                 "fields" : [ { "type" : "long", "name" : "id" } ] }"#,
        );
        assert_eq!(a.canonical, b.canonical);
    }

    #[test]
    fn avro_resolution_in_both_directions() {
        let v1 = avro(r#"{"type":"record","name":"U","fields":[{"name":"id","type":"long"}]}"#);
        let with_default = avro(
            r#"{"type":"record","name":"U","fields":[{"name":"id","type":"long"},{"name":"n","type":"string","default":""}]}"#,
        );
        let without_default = avro(
            r#"{"type":"record","name":"U","fields":[{"name":"id","type":"long"},{"name":"n","type":"string"}]}"#,
        );
        assert!(can_read(&v1, &with_default).is_ok());
        assert!(can_read(&v1, &without_default).is_err());
        // The old schema reads new data (the extra field is skipped): forward-compatible.
        assert!(can_read(&without_default, &v1).is_ok());
    }

    #[test]
    fn invalid_texts_are_42201() {
        for (schema_type, text) in [
            (SchemaType::Avro, r#"{"type":"record"}"#),
            (SchemaType::Avro, "not json"),
            (SchemaType::Json, "[1, 2]"),
            (SchemaType::Json, "{"),
            (SchemaType::Protobuf, "message {"),
        ] {
            let error = parse(schema_type, text, &[]).expect_err(text);
            assert_eq!(error.error_code(), 42201, "{text}");
        }
    }

    #[test]
    fn json_subset_rules() {
        let parse_json = |text: &str| parse(SchemaType::Json, text, &[]).expect("valid json");
        let v1 = parse_json(r#"{"type":"object","properties":{"a":{"type":"integer"}}}"#);
        let widened = parse_json(r#"{"type":"object","properties":{"a":{"type":"number"}}}"#);
        let narrowed = parse_json(r#"{"type":"object","properties":{"a":{"type":"string"}}}"#);
        let required = parse_json(
            r#"{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}"#,
        );
        assert!(can_read(&v1, &widened).is_ok());
        assert!(can_read(&v1, &narrowed).is_err());
        assert!(can_read(&v1, &required).is_err());
        assert!(can_read(&required, &v1).is_ok());
        let reordered = parse_json(r#"{"properties":{"a":{"type":"integer"}},"type":"object"}"#);
        assert_eq!(v1.canonical, reordered.canonical);
    }
}

#[cfg(test)]
mod hostile_inputs {
    use super::*;

    #[test]
    fn hostile_schemas_are_errors_or_parse_never_panic() {
        let deep_avro = format!(
            "{}\"long\"{}",
            r#"{"type":"array","items":"#.repeat(60),
            "}".repeat(60)
        );
        let deep_json = format!(
            "{}{}",
            r#"{"items":"#.repeat(120),
            "}".repeat(120).replacen('}', "{}}", 1)
        );
        let too_deep_json = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let deep_proto = format!(
            "syntax = \"proto3\";\n{}{}",
            "message M { ".repeat(40),
            "} ".repeat(40)
        );
        let cases: Vec<(SchemaType, String)> = vec![
            (SchemaType::Avro, deep_avro),
            (SchemaType::Avro, r#"{"type":"record","name":"R","fields":[{"name":"r","type":"R"}]}"#.into()),
            (SchemaType::Avro, r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}"#.into()),
            (SchemaType::Avro, r#"{"type":"enum","name":"E","symbols":["A","A"]}"#.into()),
            (SchemaType::Avro, r#"{"type":"fixed","name":"F","size":-1}"#.into()),
            (SchemaType::Avro, r#"{"type":"bytes","logicalType":"decimal","precision":0,"scale":5}"#.into()),
            (SchemaType::Avro, r#"["null","null"]"#.into()),
            (SchemaType::Avro, "Undefined".into()),
            (SchemaType::Json, deep_json),
            (SchemaType::Json, too_deep_json),
            (SchemaType::Protobuf, deep_proto),
            (SchemaType::Protobuf, "message A { map<string, A> m = 1; oneof o { int32 x = 2; } }".into()),
            (SchemaType::Protobuf, "\u{0}\u{ffff}".into()),
        ];
        for (schema_type, text) in cases {
            if let Ok(parsed) = parse(schema_type, &text, &[]) {
                // A parsed schema compares with itself without panicking.
                let _ = can_read(&parsed, &parsed);
            }
        }
    }
}
