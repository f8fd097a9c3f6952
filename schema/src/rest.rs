//! The Confluent Schema Registry REST API (v1 paths), sans-IO: a request (method, target,
//! body) in, a [`Response`] or a [`WriteRequest`] for the registry machine out.
//!
//! # Contract
//! - [`route`] answers every read at once from the [`Registry`]'s getters, and turns every
//!   write (register, delete, `PUT`/`DELETE` of config and mode) into a [`WriteRequest`]; the
//!   caller hands it to [`Registry::handle_write`] and, once its reply comes (after its
//!   records are durable, I54), renders it with [`write_response`].
//! - Bodies are JSON read by `serde_json` (its recursion limit bounds nesting); unknown
//!   fields are ignored (newer clients send `metadata`, `ruleSet`), as Confluent does.
//! - Path segments are percent-decoded (clients encode subject names); the query string's
//!   `deleted`, `permanent`, `force`, `defaultToGlobal`, `verbose` and `format=serialized`
//!   (a PROTOBUF schema as a base64 `FileDescriptorProto`) are read.
//! - Errors are Confluent's: `{"error_code": …, "message": …}` with the status of
//!   [`RegistryError::http_status`]; an unknown path is 404 (`error_code` 404), a known path
//!   with another method 405, a body that is not JSON 400, JSON of the wrong shape 422.
//! - Never panics, whatever the bytes (the `schema_http` fuzz target).

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::error::RegistryError;
use crate::http::Response;
use crate::registry::{RegisteredSchema, Registry, SchemaInput, WriteReply, WriteRequest};
use crate::types::{CompatibilityLevel, Mode, SchemaReference, SchemaType, VersionSpec};

/// What a request needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routed {
    /// Answered already (a read, or a refusal).
    Done(Response),
    /// A write for the registry machine; render its reply with [`write_response`].
    Write(WriteRequest),
}

/// A registration or lookup body.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaBody {
    schema: String,
    #[serde(default)]
    schema_type: Option<String>,
    #[serde(default)]
    references: Option<Vec<SchemaReference>>,
    #[serde(default)]
    id: Option<i32>,
    #[serde(default)]
    version: Option<i32>,
}

/// A `PUT /config` body.
#[derive(Deserialize)]
struct ConfigBody {
    #[serde(alias = "compatibilityLevel")]
    compatibility: String,
}

/// A `PUT /mode` body.
#[derive(Deserialize)]
struct ModeBody {
    mode: String,
}

/// The query flags the API reads.
#[derive(Default)]
struct Query {
    deleted: bool,
    permanent: bool,
    force: bool,
    default_to_global: bool,
    verbose: bool,
    serialized: bool,
}

impl Query {
    fn parse(query: &str) -> Self {
        let mut flags = Query::default();
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let on = value.eq_ignore_ascii_case("true");
            match key.as_ref() {
                "deleted" => flags.deleted = on,
                "permanent" => flags.permanent = on,
                "force" => flags.force = on,
                "defaultToGlobal" => flags.default_to_global = on,
                "verbose" => flags.verbose = on,
                "format" => flags.serialized = value == "serialized",
                _ => {}
            }
        }
        flags
    }
}

/// The answer for a registry error.
pub fn error_response(error: &RegistryError) -> Response {
    Response::error(error.http_status(), error.error_code(), &error.to_string())
}

fn not_found() -> Response {
    Response::error(404, 404, "HTTP 404 Not Found")
}

fn method_not_allowed() -> Response {
    Response::error(405, 405, "HTTP 405 Method Not Allowed")
}

fn ok(body: &Value) -> Response {
    Response::json(200, body)
}

fn answer(result: Result<Value, RegistryError>) -> Response {
    match result {
        Ok(body) => ok(&body),
        Err(e) => error_response(&e),
    }
}

/// Reads a JSON body of type `T`: 400 when it is not JSON, 422 when it has the wrong shape.
fn body<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, Response> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| Response::error(400, 400, &format!("Unparseable JSON body: {e}")))?;
    serde_json::from_value(value)
        .map_err(|e| Response::error(422, 422, &format!("Unrecognized JSON body: {e}")))
}

fn schema_input(body: &SchemaBody) -> Result<SchemaInput, RegistryError> {
    let schema_type = match body.schema_type.as_deref() {
        None => SchemaType::Avro,
        Some(name) => SchemaType::parse(name)?,
    };
    Ok(SchemaInput {
        schema: body.schema.clone(),
        schema_type,
        references: body.references.clone().unwrap_or_default(),
    })
}

/// A registered schema as Confluent returns it: `schemaType` only when not AVRO,
/// `references` only when there are some; `subject` and `version` when read under a subject.
fn schema_json(schema: &RegisteredSchema, with_subject: bool) -> Value {
    let mut out = Map::new();
    if with_subject {
        if let Some(subject) = &schema.subject {
            out.insert("subject".into(), json!(subject));
        }
        out.insert("version".into(), json!(schema.version));
    }
    out.insert("id".into(), json!(schema.id));
    if schema.schema_type != SchemaType::Avro {
        out.insert("schemaType".into(), json!(schema.schema_type.name()));
    }
    if !schema.references.is_empty() {
        out.insert("references".into(), json!(schema.references));
    }
    out.insert("schema".into(), json!(schema.schema));
    if with_subject && schema.deleted {
        out.insert("deleted".into(), json!(true));
    }
    Value::Object(out)
}

/// The raw schema text (the `/schema` reads).
fn raw(result: Result<RegisteredSchema, RegistryError>) -> Response {
    match result {
        Ok(schema) => Response {
            status: 200,
            body: schema.schema.into_bytes(),
            headers: Vec::new(),
        },
        Err(e) => error_response(&e),
    }
}

fn parse_id(text: &str) -> Result<i32, Response> {
    text.parse::<i32>().map_err(|_| not_found())
}

/// Routes one request (see the module contract). `target` is the path with its query string.
pub fn route(registry: &Registry, method: &str, target: &str, request_body: &[u8]) -> Routed {
    match route_inner(registry, method, target, request_body) {
        Ok(routed) => routed,
        Err(response) => Routed::Done(response),
    }
}

fn route_inner(
    registry: &Registry,
    method: &str,
    target: &str,
    request_body: &[u8],
) -> Result<Routed, Response> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = Query::parse(query);
    let mut segments = Vec::new();
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        let decoded = percent_encoding::percent_decode_str(segment)
            .decode_utf8()
            .map_err(|_| not_found())?;
        segments.push(decoded.into_owned());
    }
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let done = |response: Response| Ok(Routed::Done(response));
    let write = |write: WriteRequest| Ok(Routed::Write(write));
    match (method, segments.as_slice()) {
        ("GET", []) => done(ok(&json!({}))),
        ("GET", ["subjects"]) => done(ok(&json!(registry.subjects(query.deleted)))),
        ("GET", ["subjects", subject, "versions"]) => done(answer(
            registry
                .versions(subject, query.deleted)
                .map(|versions| json!(versions)),
        )),
        ("POST", ["subjects", subject, "versions"]) => {
            let parsed: SchemaBody = body(request_body)?;
            let input = schema_input(&parsed).map_err(|e| error_response(&e))?;
            write(WriteRequest::Register {
                subject: (*subject).to_owned(),
                input,
                id: parsed.id.filter(|id| *id > 0),
                version: parsed.version.filter(|v| *v > 0),
            })
        }
        ("GET", ["subjects", subject, "versions", version]) => {
            let spec = VersionSpec::parse(version).map_err(|e| error_response(&e))?;
            done(answer(
                registry
                    .subject_version(subject, spec, query.deleted)
                    .map(|s| schema_json(&s, true)),
            ))
        }
        ("GET", ["subjects", subject, "versions", version, "schema"]) => {
            let spec = VersionSpec::parse(version).map_err(|e| error_response(&e))?;
            done(raw(registry.subject_version(subject, spec, query.deleted)))
        }
        ("GET", ["subjects", subject, "versions", version, "referencedby"]) => {
            let spec = VersionSpec::parse(version).map_err(|e| error_response(&e))?;
            done(answer(
                registry.referenced_by(subject, spec).map(|ids| json!(ids)),
            ))
        }
        ("DELETE", ["subjects", subject, "versions", version]) => {
            let spec = VersionSpec::parse(version).map_err(|e| error_response(&e))?;
            write(WriteRequest::DeleteVersion {
                subject: (*subject).to_owned(),
                version: spec,
                permanent: query.permanent,
            })
        }
        ("POST", ["subjects", subject]) => {
            let parsed: SchemaBody = body(request_body)?;
            let input = schema_input(&parsed).map_err(|e| error_response(&e))?;
            done(answer(
                registry
                    .lookup(subject, &input, query.deleted)
                    .map(|s| schema_json(&s, true)),
            ))
        }
        ("DELETE", ["subjects", subject]) => write(WriteRequest::DeleteSubject {
            subject: (*subject).to_owned(),
            permanent: query.permanent,
        }),
        ("GET", ["schemas", "types"]) => done(ok(&json!(["JSON", "PROTOBUF", "AVRO"]))),
        ("GET", ["schemas", "ids", id]) => {
            let id = parse_id(id)?;
            done(answer(registry.schema_by_id(id).map(|mut s| {
                if query.serialized && s.schema_type == SchemaType::Protobuf {
                    // Confluent's `format=serialized`: a base64 FileDescriptorProto.
                    if let Ok(serialized) = crate::protobuf::serialized(&s.schema) {
                        s.schema = serialized;
                    }
                }
                let mut value = schema_json(&s, false);
                if let Some(map) = value.as_object_mut() {
                    map.remove("id");
                }
                value
            })))
        }
        ("GET", ["schemas", "ids", id, "schema"]) => {
            done(raw(registry.schema_by_id(parse_id(id)?)))
        }
        ("GET", ["schemas", "ids", id, "subjects"]) => {
            let id = parse_id(id)?;
            done(answer(registry.schema_by_id(id).map(|_| {
                let mut subjects: Vec<String> = registry
                    .versions_of_id(id, query.deleted)
                    .into_iter()
                    .map(|(subject, _)| subject)
                    .collect();
                subjects.dedup();
                json!(subjects)
            })))
        }
        ("GET", ["schemas", "ids", id, "versions"]) => {
            let id = parse_id(id)?;
            done(answer(registry.schema_by_id(id).map(|_| {
                let versions: Vec<Value> = registry
                    .versions_of_id(id, query.deleted)
                    .into_iter()
                    .map(|(subject, version)| json!({"subject": subject, "version": version}))
                    .collect();
                json!(versions)
            })))
        }
        ("GET", ["config"]) => done(ok(
            &json!({"compatibilityLevel": registry.compatibility_level(None).name()}),
        )),
        ("GET", ["config", subject]) => {
            let level = if query.default_to_global {
                Ok(registry.compatibility_level(Some(subject)))
            } else {
                registry.subject_compatibility_level(subject)
            };
            done(answer(
                level.map(|level| json!({"compatibilityLevel": level.name()})),
            ))
        }
        ("PUT", ["config"]) | ("PUT", ["config", _]) => {
            let parsed: ConfigBody = body(request_body)?;
            let level =
                CompatibilityLevel::parse(&parsed.compatibility).map_err(|e| error_response(&e))?;
            write(WriteRequest::SetConfig {
                subject: segments.get(1).map(|s| (*s).to_owned()),
                level,
            })
        }
        ("DELETE", ["config"]) | ("DELETE", ["config", _]) => write(WriteRequest::DeleteConfig {
            subject: segments.get(1).map(|s| (*s).to_owned()),
        }),
        ("POST", ["compatibility", "subjects", subject, "versions"]) => done(compatibility(
            registry,
            subject,
            None,
            request_body,
            &query,
        )?),
        ("POST", ["compatibility", "subjects", subject, "versions", version]) => {
            let spec = VersionSpec::parse(version).map_err(|e| error_response(&e))?;
            done(compatibility(
                registry,
                subject,
                Some(spec),
                request_body,
                &query,
            )?)
        }
        ("GET", ["mode"]) => done(ok(&json!({"mode": registry.mode(None).name()}))),
        ("GET", ["mode", subject]) => {
            let mode = if query.default_to_global {
                Ok(registry.mode(Some(subject)))
            } else {
                registry.subject_mode(subject)
            };
            done(answer(mode.map(|mode| json!({"mode": mode.name()}))))
        }
        ("PUT", ["mode"]) | ("PUT", ["mode", _]) => {
            let parsed: ModeBody = body(request_body)?;
            let mode = Mode::parse(&parsed.mode).map_err(|e| error_response(&e))?;
            write(WriteRequest::SetMode {
                subject: segments.get(1).map(|s| (*s).to_owned()),
                mode,
                force: query.force,
            })
        }
        ("DELETE", ["mode"]) | ("DELETE", ["mode", _]) => write(WriteRequest::DeleteMode {
            subject: segments.get(1).map(|s| (*s).to_owned()),
        }),
        (_, path) if known_path(path) => done(method_not_allowed()),
        _ => done(not_found()),
    }
}

/// The route template `target`'s path matches (`/subjects/{subject}/versions/{version}`),
/// or `other`: a label of bounded cardinality for the request metrics, whatever the client
/// sends (the subject, version and id segments are never echoed).
pub fn endpoint_template(target: &str) -> &'static str {
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).take(6).collect();
    match segments.as_slice() {
        [] => "/",
        ["subjects"] => "/subjects",
        ["subjects", _] => "/subjects/{subject}",
        ["subjects", _, "versions"] => "/subjects/{subject}/versions",
        ["subjects", _, "versions", _] => "/subjects/{subject}/versions/{version}",
        ["subjects", _, "versions", _, "schema"] => "/subjects/{subject}/versions/{version}/schema",
        ["subjects", _, "versions", _, "referencedby"] => {
            "/subjects/{subject}/versions/{version}/referencedby"
        }
        ["schemas", "types"] => "/schemas/types",
        ["schemas", "ids", _] => "/schemas/ids/{id}",
        ["schemas", "ids", _, "schema"] => "/schemas/ids/{id}/schema",
        ["schemas", "ids", _, "subjects"] => "/schemas/ids/{id}/subjects",
        ["schemas", "ids", _, "versions"] => "/schemas/ids/{id}/versions",
        ["config"] => "/config",
        ["config", _] => "/config/{subject}",
        ["mode"] => "/mode",
        ["mode", _] => "/mode/{subject}",
        ["compatibility", "subjects", _, "versions"] => {
            "/compatibility/subjects/{subject}/versions"
        }
        ["compatibility", "subjects", _, "versions", _] => {
            "/compatibility/subjects/{subject}/versions/{version}"
        }
        _ => "other",
    }
}

/// Whether `path` is one of the API's paths (for 405 rather than 404).
fn known_path(path: &[&str]) -> bool {
    matches!(
        path,
        [] | ["subjects"]
            | ["subjects", _]
            | ["subjects", _, "versions"]
            | ["subjects", _, "versions", _]
            | ["subjects", _, "versions", _, "schema" | "referencedby"]
            | ["schemas", "types"]
            | ["schemas", "ids", _]
            | ["schemas", "ids", _, "schema" | "subjects" | "versions"]
            | ["config"]
            | ["config", _]
            | ["mode"]
            | ["mode", _]
            | ["compatibility", "subjects", _, "versions"]
            | ["compatibility", "subjects", _, "versions", _]
    )
}

/// `POST /compatibility/subjects/{subject}/versions[/{version}]`.
fn compatibility(
    registry: &Registry,
    subject: &str,
    against: Option<VersionSpec>,
    request_body: &[u8],
    query: &Query,
) -> Result<Response, Response> {
    let parsed: SchemaBody = body(request_body)?;
    let input = schema_input(&parsed).map_err(|e| error_response(&e))?;
    let verdict = registry
        .test_compatibility(subject, against, &input)
        .map_err(|e| error_response(&e))?;
    let mut out = Map::new();
    out.insert("is_compatible".into(), json!(verdict.is_ok()));
    if query.verbose {
        let messages: Vec<String> = verdict.err().into_iter().collect();
        out.insert("messages".into(), json!(messages));
    }
    Ok(ok(&Value::Object(out)))
}

/// The answer to a write, once the registry replied.
pub fn write_response(reply: Result<WriteReply, RegistryError>) -> Response {
    let body = match reply {
        Err(e) => return error_response(&e),
        Ok(WriteReply::Registered { id, .. }) => json!({"id": id}),
        Ok(WriteReply::VersionDeleted(version)) => json!(version),
        Ok(WriteReply::SubjectDeleted(versions)) => json!(versions),
        Ok(WriteReply::ConfigSet(level)) => json!({"compatibility": level.name()}),
        Ok(WriteReply::ConfigDeleted(level)) => json!({"compatibilityLevel": level.name()}),
        Ok(WriteReply::ModeSet(mode) | WriteReply::ModeDeleted(mode)) => {
            json!({"mode": mode.name()})
        }
    };
    ok(&body)
}

/// Runs `write` on `registry` to its reply, treating every append as durable: the whole
/// request path without storage, for unit tests and the fuzz target.
pub fn write_in_memory(registry: &mut Registry, write: WriteRequest) -> Response {
    const REQUEST: u64 = 1;
    registry.handle_write(REQUEST, write);
    while let Some(append) = registry.poll_append() {
        registry.handle_append_done(append.request, Ok(()));
    }
    let mut reply = None;
    while let Some((_, answered)) = registry.poll_reply() {
        reply = Some(answered);
    }
    match reply {
        Some(reply) => write_response(reply),
        None => Response::error(500, 50001, "no reply"),
    }
}

/// Routes and, for a write, runs it in memory ([`write_in_memory`]).
pub fn handle_in_memory(
    registry: &mut Registry,
    method: &str,
    target: &str,
    request_body: &[u8],
) -> Response {
    match route(registry, method, target, request_body) {
        Routed::Done(response) => response,
        Routed::Write(write) => write_in_memory(registry, write),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str =
        r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}"#;
    const V2_DEFAULT: &str = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}"#;
    const V2_NO_DEFAULT: &str = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"}]}"#;

    fn call(registry: &mut Registry, method: &str, target: &str, body: &str) -> (u16, Value) {
        let response = handle_in_memory(registry, method, target, body.as_bytes());
        let value = serde_json::from_slice(&response.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&response.body).into()));
        (response.status, value)
    }

    fn register_body(schema: &str) -> String {
        json!({ "schema": schema }).to_string()
    }

    #[test]
    fn register_read_and_look_up_a_schema() {
        let mut r = Registry::new();
        let (status, body) = call(
            &mut r,
            "POST",
            "/subjects/users-value/versions",
            &register_body(V1),
        );
        assert_eq!((status, body.clone()), (200, json!({"id": 1})));
        // The same schema under another subject keeps its id (I52).
        let (_, body) = call(
            &mut r,
            "POST",
            "/subjects/other/versions",
            &register_body(V1),
        );
        assert_eq!(body, json!({"id": 1}));
        let (status, body) = call(&mut r, "GET", "/subjects/users-value/versions/latest", "");
        assert_eq!(status, 200);
        assert_eq!(body["subject"], "users-value");
        assert_eq!(body["version"], 1);
        assert_eq!(body["id"], 1);
        assert_eq!(body["schema"], V1);
        assert!(body.get("schemaType").is_none());
        let (_, body) = call(&mut r, "GET", "/schemas/ids/1", "");
        assert_eq!(body, json!({"schema": V1}));
        let (_, body) = call(&mut r, "GET", "/schemas/ids/1/schema", "");
        assert_eq!(body["name"], "User");
        let (_, body) = call(&mut r, "GET", "/schemas/ids/1/subjects", "");
        assert_eq!(body, json!(["other", "users-value"]));
        let (_, body) = call(&mut r, "GET", "/schemas/ids/1/versions", "");
        assert_eq!(body[0], json!({"subject": "other", "version": 1}));
        let (status, body) = call(&mut r, "POST", "/subjects/users-value", &register_body(V1));
        assert_eq!((status, body["version"].clone()), (200, json!(1)));
        let (_, body) = call(&mut r, "GET", "/subjects", "");
        assert_eq!(body, json!(["other", "users-value"]));
        let (status, body) = call(&mut r, "GET", "/schemas/ids/7", "");
        assert_eq!((status, body["error_code"].clone()), (404, json!(40403)));
        let (status, body) = call(&mut r, "GET", "/subjects/nope/versions", "");
        assert_eq!((status, body["error_code"].clone()), (404, json!(40401)));
        let (status, body) = call(&mut r, "GET", "/subjects/users-value/versions/9", "");
        assert_eq!((status, body["error_code"].clone()), (404, json!(40402)));
        let (status, body) = call(&mut r, "GET", "/subjects/users-value/versions/x", "");
        assert_eq!((status, body["error_code"].clone()), (422, json!(42202)));
    }

    #[test]
    fn compatibility_refuses_a_backward_breaking_change_with_409() {
        let mut r = Registry::new();
        call(&mut r, "POST", "/subjects/s/versions", &register_body(V1));
        let (status, body) = call(
            &mut r,
            "POST",
            "/compatibility/subjects/s/versions/latest?verbose=true",
            &register_body(V2_NO_DEFAULT),
        );
        assert_eq!(status, 200);
        assert_eq!(body["is_compatible"], false);
        assert_eq!(body["messages"].as_array().map(Vec::len), Some(1));
        let (status, body) = call(
            &mut r,
            "POST",
            "/subjects/s/versions",
            &register_body(V2_NO_DEFAULT),
        );
        assert_eq!((status, body["error_code"].clone()), (409, json!(409)));
        let (status, body) = call(
            &mut r,
            "POST",
            "/subjects/s/versions",
            &register_body(V2_DEFAULT),
        );
        assert_eq!((status, body), (200, json!({"id": 2})));
        // Under NONE the breaking change goes in.
        let (status, body) = call(&mut r, "PUT", "/config/s", r#"{"compatibility":"NONE"}"#);
        assert_eq!((status, body), (200, json!({"compatibility": "NONE"})));
        let (_, body) = call(&mut r, "GET", "/config/s", "");
        assert_eq!(body, json!({"compatibilityLevel": "NONE"}));
        let (status, _) = call(
            &mut r,
            "POST",
            "/subjects/s/versions",
            &register_body(V2_NO_DEFAULT),
        );
        assert_eq!(status, 200);
        let (_, body) = call(&mut r, "GET", "/config", "");
        assert_eq!(body, json!({"compatibilityLevel": "BACKWARD"}));
        let (status, body) = call(&mut r, "GET", "/config/other", "");
        assert_eq!((status, body["error_code"].clone()), (404, json!(40408)));
        let (_, body) = call(&mut r, "GET", "/config/other?defaultToGlobal=true", "");
        assert_eq!(body, json!({"compatibilityLevel": "BACKWARD"}));
    }

    #[test]
    fn references_resolve_and_are_listed_by_the_referenced_version() {
        let mut r = Registry::new();
        let address = r#"{"type":"record","name":"Address","namespace":"n","fields":[{"name":"city","type":"string"}]}"#;
        let person = r#"{"type":"record","name":"Person","namespace":"n","fields":[{"name":"home","type":"n.Address"}]}"#;
        call(
            &mut r,
            "POST",
            "/subjects/address/versions",
            &register_body(address),
        );
        let body = json!({
            "schema": person,
            "references": [{"name": "n.Address", "subject": "address", "version": 1}],
        });
        let (status, answer) = call(
            &mut r,
            "POST",
            "/subjects/person/versions",
            &body.to_string(),
        );
        assert_eq!((status, answer), (200, json!({"id": 2})));
        let (_, read) = call(&mut r, "GET", "/subjects/person/versions/1", "");
        assert_eq!(read["references"][0]["subject"], "address");
        assert_eq!(
            call(
                &mut r,
                "GET",
                "/subjects/address/versions/1/referencedby",
                ""
            ),
            (200, json!([2]))
        );
        // A referenced version cannot be deleted (42206).
        let (status, answer) = call(&mut r, "DELETE", "/subjects/address/versions/1", "");
        assert_eq!((status, answer["error_code"].clone()), (422, json!(42206)));
        // A reference to nothing is an invalid schema.
        let dangling = json!({
            "schema": person,
            "references": [{"name": "n.Address", "subject": "nowhere", "version": 1}],
        });
        let (status, answer) = call(
            &mut r,
            "POST",
            "/subjects/p2/versions",
            &dangling.to_string(),
        );
        assert_eq!((status, answer["error_code"].clone()), (422, json!(42201)));
    }

    #[test]
    fn deletes_are_soft_then_permanent() {
        let mut r = Registry::new();
        call(&mut r, "POST", "/subjects/s/versions", &register_body(V1));
        let (status, body) = call(&mut r, "DELETE", "/subjects/s?permanent=true", "");
        assert_eq!((status, body["error_code"].clone()), (404, json!(40405)));
        let (status, body) = call(&mut r, "DELETE", "/subjects/s", "");
        assert_eq!((status, body), (200, json!([1])));
        let (status, body) = call(&mut r, "GET", "/subjects/s/versions", "");
        assert_eq!((status, body["error_code"].clone()), (404, json!(40401)));
        let (_, body) = call(&mut r, "GET", "/subjects?deleted=true", "");
        assert_eq!(body, json!(["s"]));
        let (status, body) = call(&mut r, "DELETE", "/subjects/s?permanent=true", "");
        assert_eq!((status, body), (200, json!([1])));
        let (_, body) = call(&mut r, "GET", "/subjects?deleted=true", "");
        assert_eq!(body, json!([]));
    }

    #[test]
    fn modes_types_and_other_paths() {
        let mut r = Registry::new();
        assert_eq!(
            call(&mut r, "GET", "/mode", "").1,
            json!({"mode": "READWRITE"})
        );
        let (status, _) = call(&mut r, "PUT", "/mode", r#"{"mode":"READONLY"}"#);
        assert_eq!(status, 200);
        let (status, body) = call(&mut r, "POST", "/subjects/s/versions", &register_body(V1));
        assert_eq!((status, body["error_code"].clone()), (422, json!(42205)));
        assert_eq!(
            call(&mut r, "GET", "/schemas/types", "").1,
            json!(["JSON", "PROTOBUF", "AVRO"])
        );
        assert_eq!(call(&mut r, "GET", "/nowhere", "").0, 404);
        assert_eq!(call(&mut r, "PATCH", "/subjects", "").0, 405);
        let (status, body) = call(&mut r, "POST", "/subjects/s/versions", "{not json");
        assert_eq!((status, body["error_code"].clone()), (400, json!(400)));
        let (status, _) = call(&mut r, "POST", "/subjects/s/versions", r#"{"schema": 3}"#);
        assert_eq!(status, 422);
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(call(&mut r, "POST", "/subjects/s/versions", &deep).0, 400);
        // Percent-encoded subjects are decoded.
        let (status, _) = call(&mut r, "PUT", "/mode", r#"{"mode":"READWRITE"}"#);
        assert_eq!(status, 200);
        call(
            &mut r,
            "POST",
            "/subjects/a%2Fb/versions",
            &register_body(V1),
        );
        assert_eq!(call(&mut r, "GET", "/subjects", "").1, json!(["a/b"]));
    }

    proptest::proptest! {
        /// Any method, any path of API-like segments, any body: an answer, never a panic.
        #[test]
        fn any_request_is_answered(
            method in proptest::sample::select(vec!["GET", "POST", "PUT", "DELETE", "PATCH"]),
            segments in proptest::collection::vec(proptest::sample::select(vec![
                "subjects", "s", "versions", "latest", "1", "-1", "0", "schema", "schemas",
                "ids", "types", "config", "mode", "compatibility", "%2F", "%ff", "x?deleted=true",
            ]), 0..7),
            body in proptest::prop_oneof![
                proptest::collection::vec(proptest::arbitrary::any::<u8>(), 0..64),
                proptest::sample::select(vec![
                    br#"{"schema":"\"string\""}"#.to_vec(),
                    br#"{"schema":"\"int\"","schemaType":"AVRO","references":[]}"#.to_vec(),
                    br#"{"compatibility":"NONE"}"#.to_vec(),
                    br#"{"mode":"IMPORT"}"#.to_vec(),
                    br#"{"schema":"{}","schemaType":"JSON","id":7,"version":3}"#.to_vec(),
                ]),
            ],
        ) {
            let mut r = Registry::new();
            handle_in_memory(&mut r, "POST", "/subjects/s/versions", br#"{"schema":"\"string\""}"#);
            let target = format!("/{}", segments.join("/"));
            let response = handle_in_memory(&mut r, method, &target, &body);
            proptest::prop_assert!(matches!(response.status, 200 | 400 | 404 | 405 | 409 | 422 | 500));
        }
    }

    /// I126: the metrics label is the route's template, never a client's subject or id.
    #[test]
    fn endpoints_are_templates_of_bounded_cardinality() {
        assert_eq!(
            endpoint_template("/subjects/secret-subject/versions/latest?deleted=true"),
            "/subjects/{subject}/versions/{version}"
        );
        assert_eq!(endpoint_template("/schemas/ids/42"), "/schemas/ids/{id}");
        assert_eq!(endpoint_template("/"), "/");
        assert_eq!(endpoint_template("/no/such/path/at/all/x/y"), "other");
        assert_eq!(endpoint_template("/subjects/a/b"), "other");
    }
}
