//! PROTOBUF schemas: parsed by `protox-parse` (a pure-Rust `.proto` parser, no `protoc`),
//! identified by their descriptor, and checked for compatibility by a subset of Confluent's
//! Protobuf rules.
//!
//! The canonical form is the file's `FileDescriptorProto` without source positions, encoded
//! and written as hex: comments, layout and option order of the text do not change it.
//! Imports are not resolved (each schema is parsed alone), so type names stay as written.
//!
//! Compatibility, "a reader with `reader` reads data written with `writer`":
//! - the package and syntax are the same;
//! - every message of the writer (by nested name) exists in the reader (Confluent's
//!   MESSAGE_REMOVED; adding a message is therefore not forward-compatible, as there);
//! - a field number in both has the same kind, or kinds of one wire-compatible group
//!   (int32/uint32/int64/uint64/bool, sint32/sint64, fixed32/sfixed32, fixed64/sfixed64,
//!   string/bytes), and the same message or enum type name;
//! - a `required` field (proto2) of the reader is in the writer.
//!
//! Not yet checked: oneof changes, enum value changes, map and repeated label changes,
//! reserved ranges.

use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto};

/// How deep nested messages are compared (the parser bounds nesting too).
const NESTING_DEPTH_MAX: usize = 64;

/// Parses a schema text: a `.proto` file, or (as confluent-kafka's Python and Go serializers
/// register them, and Confluent's registry accepts) a base64 `FileDescriptorProto`. The
/// error is the `.proto` parser's message.
pub fn parse(text: &str) -> Result<FileDescriptorProto, String> {
    let mut file = match protox_parse::parse("schema.proto", text) {
        Ok(file) => file,
        Err(e) => descriptor_from_base64(text).ok_or_else(|| e.to_string())?,
    };
    file.source_code_info = None;
    file.name = None;
    Ok(file)
}

/// A base64 `FileDescriptorProto` (the "serialized" format), if `text` is one.
fn descriptor_from_base64(text: &str) -> Option<FileDescriptorProto> {
    use base64::Engine;
    let trimmed = text.trim();
    if trimmed.is_empty()
        || !trimmed
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
    {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(trimmed)
        .ok()?;
    FileDescriptorProto::decode(bytes.as_slice()).ok()
}

/// The schema as a base64 `FileDescriptorProto` (Confluent's `format=serialized`): the text
/// itself when it is one, else the descriptor parsed from the `.proto` text (with its name).
pub fn serialized(text: &str) -> Result<String, String> {
    use base64::Engine;
    if descriptor_from_base64(text).is_some() {
        return Ok(text.trim().to_owned());
    }
    let file = protox_parse::parse("schema.proto", text).map_err(|e| e.to_string())?;
    let file = FileDescriptorProto {
        source_code_info: None,
        ..file
    };
    Ok(base64::engine::general_purpose::STANDARD.encode(file.encode_to_vec()))
}

/// The canonical form: the descriptor's bytes, in hex.
pub fn canonical(file: &FileDescriptorProto) -> String {
    let bytes = file.encode_to_vec();
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// Whether a reader with `reader` reads data written with `writer` (the rules above).
pub fn can_read(writer: &FileDescriptorProto, reader: &FileDescriptorProto) -> Result<(), String> {
    if writer.package() != reader.package() {
        return Err(format!(
            "package changed from '{}' to '{}'",
            writer.package(),
            reader.package()
        ));
    }
    if writer.syntax() != reader.syntax() {
        return Err("syntax changed".into());
    }
    messages_can_read(&writer.message_type, &reader.message_type, "", 0)
}

fn messages_can_read(
    writer: &[DescriptorProto],
    reader: &[DescriptorProto],
    scope: &str,
    depth: usize,
) -> Result<(), String> {
    if depth > NESTING_DEPTH_MAX {
        return Ok(());
    }
    for written in writer {
        let name = format!("{scope}{}", written.name());
        let Some(read) = reader.iter().find(|m| m.name() == written.name()) else {
            return Err(format!("message {name} removed"));
        };
        for read_field in &read.field {
            let written_field = written
                .field
                .iter()
                .find(|f| f.number() == read_field.number());
            match written_field {
                Some(written_field) => field_can_read(written_field, read_field, &name)?,
                None if read_field.label() == Label::Required => {
                    return Err(format!(
                        "{name}: required field {} added",
                        read_field.name()
                    ))
                }
                None => {}
            }
        }
        messages_can_read(
            &written.nested_type,
            &read.nested_type,
            &format!("{name}."),
            depth + 1,
        )?;
    }
    Ok(())
}

fn wire_group(kind: Type) -> u8 {
    match kind {
        Type::Int32 | Type::Uint32 | Type::Int64 | Type::Uint64 | Type::Bool => 1,
        Type::Sint32 | Type::Sint64 => 2,
        Type::Fixed32 | Type::Sfixed32 => 3,
        Type::Fixed64 | Type::Sfixed64 => 4,
        Type::String | Type::Bytes => 5,
        Type::Float => 6,
        Type::Double => 7,
        Type::Message => 8,
        Type::Group => 9,
        Type::Enum => 10,
    }
}

fn field_can_read(
    written: &FieldDescriptorProto,
    read: &FieldDescriptorProto,
    message: &str,
) -> Result<(), String> {
    // A field whose type names a message or enum is parsed with no kind (names are not
    // resolved); compare kinds only when both have one, and type names when either has one.
    let kinds_differ = match (written.r#type, read.r#type) {
        (Some(_), Some(_)) => wire_group(written.r#type()) != wire_group(read.r#type()),
        (None, None) => false,
        _ => true,
    };
    if kinds_differ || written.type_name() != read.type_name() {
        return Err(format!("{message}: field {} changed kind", read.number()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(text: &str) -> FileDescriptorProto {
        parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn canonical_form_ignores_comments_and_layout() {
        let a = proto("syntax = \"proto3\";\nmessage A { int64 id = 1; }");
        let b = proto("syntax = \"proto3\";\n// the A\nmessage A {\n  int64 id = 1;\n}\n");
        assert_eq!(canonical(&a), canonical(&b));
        let c = proto("syntax = \"proto3\";\nmessage A { int64 key = 1; }");
        assert_ne!(canonical(&a), canonical(&c));
    }

    #[test]
    fn compatibility_subset() {
        let v1 = proto("syntax = \"proto3\"; package p; message A { int64 id = 1; }");
        let added =
            proto("syntax = \"proto3\"; package p; message A { int64 id = 1; string n = 2; }");
        let widened = proto("syntax = \"proto3\"; package p; message A { int32 id = 1; }");
        let changed = proto("syntax = \"proto3\"; package p; message A { string id = 1; }");
        let renamed = proto("syntax = \"proto3\"; package p; message B { int64 id = 1; }");
        let moved = proto("syntax = \"proto3\"; package q; message A { int64 id = 1; }");
        let typed = proto("syntax = \"proto3\"; package p; message A { B id = 1; } message B {}");
        assert!(can_read(&v1, &added).is_ok());
        assert!(can_read(&added, &v1).is_ok());
        assert!(can_read(&v1, &widened).is_ok());
        assert!(can_read(&v1, &changed).is_err());
        assert!(can_read(&v1, &renamed).is_err());
        assert!(can_read(&v1, &moved).is_err());
        assert!(can_read(&v1, &typed).is_err());
        let required = proto(
            "syntax = \"proto2\"; message A { required int64 id = 1; required int64 k = 2; }",
        );
        let one = proto("syntax = \"proto2\"; message A { required int64 id = 1; }");
        assert!(can_read(&one, &required).is_err());
        assert!(can_read(&required, &one).is_ok());
    }

    #[test]
    fn a_base64_descriptor_is_the_same_file_as_its_text() {
        let text = "syntax = \"proto3\";\npackage p;\nmessage M { string a = 1; }\n";
        let encoded = serialized(text).expect("serialized");
        let from_text = parse(text).expect("text");
        let from_descriptor = parse(&encoded).expect("descriptor");
        assert_eq!(canonical(&from_text), canonical(&from_descriptor));
        assert_eq!(serialized(&encoded).expect("again"), encoded);
        assert!(parse("bm90IGEgZGVzY3JpcHRvcg!!").is_err());
    }

    #[test]
    fn bad_text_is_an_error() {
        for text in [
            "message {",
            "syntax = \"proto9\";",
            "message A { int64 id = 0; }",
        ] {
            assert!(parse(text).is_err(), "{text}");
        }
    }
}
