//! HTTP/1.1 framing for the registry's REST listener, sans-IO: judge the bytes of a request
//! head (parsed by `httparse`, not by hand), and write a response.
//!
//! # Contract
//! - [`parse_head`] takes the bytes read so far and says: read more, a complete head (with the
//!   body length it announces), or a refusal to send before closing the connection.
//! - Bounds, all checked before anything is allocated from a client's number: a head is at
//!   most [`HEAD_BYTES_MAX`] bytes and [`HEADERS_MAX`] headers (431 past either); a body at
//!   most [`BODY_BYTES_MAX`] (413); `Transfer-Encoding` is refused (501: every registry client
//!   sends `Content-Length`); a head `httparse` rejects is 400.
//! - Keep-alive follows HTTP/1.1: on unless the client sends `Connection: close` (HTTP/1.0:
//!   off unless it sends `Connection: keep-alive`).
//! - [`encode_response`] writes the status line, `Content-Type` (Confluent's
//!   [`CONTENT_TYPE`]), `Content-Length` and `Connection`, then the body.

/// Longest request head read (request line and headers).
pub const HEAD_BYTES_MAX: usize = 16 * 1024;
/// Most headers in one request.
pub const HEADERS_MAX: usize = 64;
/// Largest request body: a schema text at its bound ([`crate::format::SCHEMA_TEXT_BYTES_MAX`])
/// with its JSON escaping and references fits.
pub const BODY_BYTES_MAX: usize = 8 * 1024 * 1024;
/// The Confluent Schema Registry's media type, on every response.
pub const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// A complete request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// The method, as sent (`GET`, `POST`, …).
    pub method: String,
    /// The request target: path and query string.
    pub target: String,
    /// Bytes of the head (the body starts after them).
    pub head_bytes: usize,
    /// The body's length (`Content-Length`, 0 when absent), at most [`BODY_BYTES_MAX`].
    pub content_length: usize,
    /// Whether the connection stays open after the answer.
    pub keep_alive: bool,
    /// `Expect: 100-continue`: the client waits for `100 Continue` before sending the body.
    pub expect_continue: bool,
}

/// What the bytes read so far hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadParse {
    /// The head has not ended yet, and is within bounds: read more.
    Incomplete,
    /// A complete head.
    Complete(RequestHead),
    /// A head refused: send this answer and close.
    Refused(Response),
}

/// A response: status and JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// The body (JSON, or a raw schema text for the `/schema` reads).
    pub body: Vec<u8>,
}

impl Response {
    /// An answer with Confluent's error body `{"error_code": code, "message": message}`.
    pub fn error(status: u16, code: u32, message: &str) -> Self {
        let body = serde_json::json!({ "error_code": code, "message": message });
        Self::json(status, &body)
    }

    /// An answer with a JSON body.
    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        Response {
            status,
            body: body.to_string().into_bytes(),
        }
    }
}

/// Judges the bytes read so far (see the module contract).
pub fn parse_head(buf: &[u8]) -> HeadParse {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut request = httparse::Request::new(&mut headers);
    let head_bytes = match request.parse(buf) {
        Ok(httparse::Status::Partial) if buf.len() >= HEAD_BYTES_MAX => {
            return HeadParse::Refused(head_too_large());
        }
        Ok(httparse::Status::Partial) => return HeadParse::Incomplete,
        Ok(httparse::Status::Complete(n)) if n > HEAD_BYTES_MAX => {
            return HeadParse::Refused(head_too_large());
        }
        Ok(httparse::Status::Complete(n)) => n,
        Err(httparse::Error::TooManyHeaders) => return HeadParse::Refused(head_too_large()),
        Err(e) => {
            return HeadParse::Refused(Response::error(
                400,
                400,
                &format!("HTTP 400 Bad Request: {e}"),
            ))
        }
    };
    let (Some(method), Some(target), Some(minor)) = (request.method, request.path, request.version)
    else {
        return HeadParse::Refused(Response::error(400, 400, "HTTP 400 Bad Request"));
    };
    let mut content_length: Option<usize> = None;
    let mut keep_alive = minor >= 1;
    let mut expect_continue = false;
    for header in request.headers.iter() {
        let value = std::str::from_utf8(header.value).unwrap_or("").trim();
        if header.name.eq_ignore_ascii_case("content-length") {
            let Ok(length) = value.parse::<usize>() else {
                return HeadParse::Refused(Response::error(400, 400, "bad Content-Length"));
            };
            if content_length.is_some_and(|earlier| earlier != length) {
                return HeadParse::Refused(Response::error(400, 400, "two Content-Lengths"));
            }
            if length > BODY_BYTES_MAX {
                return HeadParse::Refused(Response::error(
                    413,
                    413,
                    &format!("the body is over {BODY_BYTES_MAX} bytes"),
                ));
            }
            content_length = Some(length);
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            return HeadParse::Refused(Response::error(
                501,
                501,
                "Transfer-Encoding is not supported; send Content-Length",
            ));
        } else if header.name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") {
                    keep_alive = true;
                }
            }
        } else if header.name.eq_ignore_ascii_case("expect") {
            expect_continue = value.eq_ignore_ascii_case("100-continue");
        }
    }
    HeadParse::Complete(RequestHead {
        method: method.to_owned(),
        target: target.to_owned(),
        head_bytes,
        content_length: content_length.unwrap_or(0),
        keep_alive,
        expect_continue,
    })
}

/// 431, for a head over [`HEAD_BYTES_MAX`] or [`HEADERS_MAX`].
fn head_too_large() -> Response {
    Response::error(431, 431, "request header fields too large")
}

/// The interim answer to `Expect: 100-continue`.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The reason phrase of the statuses the registry answers.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// The bytes of `response`, with `Connection: keep-alive` or `close`.
pub fn encode_response(response: &Response, keep_alive: bool) -> Vec<u8> {
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
        response.status,
        reason(response.status),
        response.body.len(),
        if keep_alive { "keep-alive" } else { "close" },
    );
    let mut out = Vec::with_capacity(head.len() + response.body.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(&response.body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(bytes: &[u8]) -> RequestHead {
        match parse_head(bytes) {
            HeadParse::Complete(head) => head,
            other => panic!("not complete: {other:?}"),
        }
    }

    #[test]
    fn a_post_with_a_body_and_keep_alive() {
        let head = complete(
            b"POST /subjects/a/versions HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n{\"schema\":1}",
        );
        assert_eq!(head.method, "POST");
        assert_eq!(head.target, "/subjects/a/versions");
        assert_eq!(head.content_length, 12);
        assert!(head.keep_alive && !head.expect_continue);
        assert_eq!(head.head_bytes, 67);
    }

    #[test]
    fn connection_close_and_http_1_0_end_the_connection() {
        assert!(!complete(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive);
        assert!(!complete(b"GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(complete(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
        assert!(complete(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n").expect_continue);
    }

    #[test]
    fn hostile_heads_are_refused_with_their_status() {
        let status = |bytes: &[u8]| match parse_head(bytes) {
            HeadParse::Refused(r) => r.status,
            other => panic!("not refused: {other:?}"),
        };
        assert_eq!(status(b"\x00\x01garbage\r\n\r\n"), 400);
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n"),
            413
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            400
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            501
        );
        let mut many = b"GET / HTTP/1.1\r\n".to_vec();
        for i in 0..=HEADERS_MAX {
            many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(status(&many), 431);
        let mut long = b"GET / HTTP/1.1\r\nX: ".to_vec();
        long.resize(HEAD_BYTES_MAX, b'a');
        assert_eq!(status(&long), 431);
        long.truncate(HEAD_BYTES_MAX - 1);
        assert_eq!(parse_head(&long), HeadParse::Incomplete);
    }

    #[test]
    fn responses_carry_the_media_type_and_length() {
        let bytes = encode_response(
            &Response::error(404, 40401, "Subject 'a' not found."),
            false,
        );
        let text = String::from_utf8(bytes).expect("utf-8");
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"), "{text}");
        assert!(text.contains("Content-Type: application/vnd.schemaregistry.v1+json\r\n"));
        assert!(text.contains("Connection: close\r\n"));
        let body = text.split_once("\r\n\r\n").expect("body").1;
        assert!(text.contains(&format!("Content-Length: {}\r\n", body.len())));
        let value: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(value["error_code"], 40401);
    }
}
