//! HTTP/1.1 framing for the registry's REST listener, sans-IO: judge the bytes of a request
//! head (parsed by `httparse`, not by hand), and write a response.
//!
//! # Contract
//! - [`parse_head`] takes the bytes read so far and says: read more, a complete head (with the
//!   body length it announces), or a refusal to send before closing the connection.
//! - Bounds, all checked before anything is allocated from a client's number: a head is at
//!   most [`HEAD_BYTES_MAX`] bytes and [`HEADERS_MAX`] headers (431 past either); a body at
//!   most [`BODY_BYTES_MAX`] (413), whether announced by `Content-Length` or sent
//!   `Transfer-Encoding: chunked` ([`ChunkedBody`], sizes read by `httparse`, I128: refused
//!   413 as soon as the chunks would pass the bound, 400 for a bad chunk size or framing, a
//!   size or trailer line over [`CHUNK_LINE_BYTES_MAX`], more than [`HEADERS_MAX`] trailers);
//!   another transfer coding is 501, `Transfer-Encoding` with `Content-Length` 400 (request
//!   smuggling); a head `httparse` rejects is 400.
//! - `Authorization` is kept for the listener's basic auth ([`basic_credentials`] decodes it).
//! - Keep-alive follows HTTP/1.1: on unless the client sends `Connection: close` (HTTP/1.0:
//!   off unless it sends `Connection: keep-alive`).
//! - [`encode_response`] writes the status line, `Content-Type` (Confluent's
//!   [`CONTENT_TYPE`]), `Content-Length`, `Connection` and the response's own headers
//!   (`WWW-Authenticate` of a 401), then the body.

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
    /// The body's length (`Content-Length`, 0 when absent or chunked), at most
    /// [`BODY_BYTES_MAX`].
    pub content_length: usize,
    /// The body comes `Transfer-Encoding: chunked` (read it with [`ChunkedBody`]).
    pub chunked: bool,
    /// The `Authorization` header's value, when sent.
    pub authorization: Option<String>,
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
    /// Headers beyond the ones every response has (`WWW-Authenticate` of a 401).
    pub headers: Vec<(&'static str, String)>,
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
            headers: Vec::new(),
        }
    }

    /// 401 with `WWW-Authenticate: Basic` and Confluent's error body (I127).
    pub fn unauthorized() -> Self {
        let mut response = Self::error(401, 401, "Unauthorized");
        response
            .headers
            .push(("WWW-Authenticate", format!("Basic realm=\"{AUTH_REALM}\"")));
        response
    }
}

/// The realm a 401 names (Confluent's default `authentication.realm`).
pub const AUTH_REALM: &str = "SchemaRegistry";

/// The user and password of an `Authorization: Basic <base64(user:password)>` value; `None`
/// for another scheme or bytes that do not decode to UTF-8 `user:password`.
pub fn basic_credentials(value: &str) -> Option<(String, String)> {
    use base64::Engine as _;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// Longest chunk-size line or trailer line of a chunked body.
pub const CHUNK_LINE_BYTES_MAX: usize = 1024;

/// Where a [`ChunkedBody`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// Reading a chunk-size line.
    Size,
    /// Reading a chunk's data: this many bytes left.
    Data(u64),
    /// Reading the CRLF after a chunk's data.
    DataEnd,
    /// Reading trailer lines up to the empty one; this many read.
    Trailer(usize),
    /// The body is complete.
    Done,
}

/// A `Transfer-Encoding: chunked` body read incrementally (see the module contract, I128):
/// [`feed`](Self::feed) the bytes as they come; it keeps the chunks' data, never more than
/// its limit, and says how many input bytes it used.
#[derive(Debug, Clone)]
pub struct ChunkedBody {
    body: Vec<u8>,
    limit: usize,
    state: ChunkState,
}

impl ChunkedBody {
    /// A decoder keeping at most `limit` bytes of data.
    pub fn new(limit: usize) -> Self {
        ChunkedBody {
            body: Vec::new(),
            limit,
            state: ChunkState::Size,
        }
    }

    /// Reads what it can of `input`: `Ok((used, done))`, the bytes used (the rest is either
    /// an incomplete line to feed again with more, or past the body when `done`), or the
    /// refusal to send before closing.
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, bool), Response> {
        let bad = |what: &str| Response::error(400, 400, &format!("bad chunked body: {what}"));
        let mut at = 0;
        loop {
            let rest = &input[at..];
            match self.state {
                ChunkState::Done => return Ok((at, true)),
                ChunkState::Size => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((used, size))) => {
                        at += used;
                        if size == 0 {
                            self.state = ChunkState::Trailer(0);
                        } else if (self.body.len() as u64).saturating_add(size) > self.limit as u64
                        {
                            return Err(Response::error(
                                413,
                                413,
                                &format!("the body is over {} bytes", self.limit),
                            ));
                        } else {
                            self.state = ChunkState::Data(size);
                        }
                    }
                    Ok(httparse::Status::Partial) if rest.len() > CHUNK_LINE_BYTES_MAX => {
                        return Err(bad("chunk-size line too long"));
                    }
                    Ok(httparse::Status::Partial) => return Ok((at, false)),
                    Err(_) => return Err(bad("invalid chunk size")),
                },
                ChunkState::Data(left) => {
                    if rest.is_empty() {
                        return Ok((at, false));
                    }
                    let take = usize::try_from(left).unwrap_or(usize::MAX).min(rest.len());
                    self.body.extend_from_slice(&rest[..take]);
                    at += take;
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(left)
                    };
                }
                ChunkState::DataEnd => match rest {
                    [b'\r', b'\n', ..] => {
                        at += 2;
                        self.state = ChunkState::Size;
                    }
                    [] | [b'\r'] => return Ok((at, false)),
                    _ => return Err(bad("no CRLF after a chunk")),
                },
                ChunkState::Trailer(lines) => {
                    let Some(end) = rest.windows(2).position(|w| w == b"\r\n") else {
                        if rest.len() > CHUNK_LINE_BYTES_MAX {
                            return Err(bad("trailer line too long"));
                        }
                        return Ok((at, false));
                    };
                    if end > CHUNK_LINE_BYTES_MAX {
                        return Err(bad("trailer line too long"));
                    }
                    at += end + 2;
                    if end == 0 {
                        self.state = ChunkState::Done;
                    } else if lines >= HEADERS_MAX {
                        return Err(bad("too many trailers"));
                    } else {
                        self.state = ChunkState::Trailer(lines + 1);
                    }
                }
            }
        }
    }

    /// The data read so far (the whole body once [`feed`](Self::feed) said done).
    pub fn into_body(self) -> Vec<u8> {
        self.body
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
    let mut chunked = false;
    let mut authorization = None;
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
            if chunked || !value.eq_ignore_ascii_case("chunked") {
                return HeadParse::Refused(Response::error(
                    501,
                    501,
                    "only Transfer-Encoding: chunked is supported",
                ));
            }
            chunked = true;
        } else if header.name.eq_ignore_ascii_case("authorization") {
            authorization = Some(value.to_owned());
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
    if chunked && content_length.is_some() {
        return HeadParse::Refused(Response::error(
            400,
            400,
            "Transfer-Encoding with Content-Length",
        ));
    }
    HeadParse::Complete(RequestHead {
        method: method.to_owned(),
        target: target.to_owned(),
        head_bytes,
        content_length: content_length.unwrap_or(0),
        chunked,
        authorization,
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
        401 => "Unauthorized",
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
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\nConnection: {}\r\n",
        response.status,
        reason(response.status),
        response.body.len(),
        if keep_alive { "keep-alive" } else { "close" },
    );
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
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
            status(b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            501
        );
        assert_eq!(
            status(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"),
            400
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

    /// I128: a chunked body fed in pieces of any size gives the same body; pipelined bytes
    /// after it are left unused.
    #[test]
    fn a_chunked_body_decodes_whatever_the_pieces() {
        let head = complete(b"POST /x HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n");
        assert!(head.chunked && head.content_length == 0);
        let wire = b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: y\r\n\r\nGET /next";
        let body_end = wire.len() - b"GET /next".len();
        for piece in 1..wire.len() {
            let mut decoder = ChunkedBody::new(64);
            let mut pending = Vec::new();
            let mut fed = 0;
            let done = loop {
                let (used, done) = decoder.feed(&pending).expect("valid");
                pending.drain(..used);
                fed += used;
                if done || fed + pending.len() >= wire.len() {
                    break done;
                }
                let from = fed + pending.len();
                let to = (from + piece).min(wire.len());
                pending.extend_from_slice(&wire[from..to]);
            };
            assert!(done, "piece {piece}");
            assert_eq!(fed, body_end, "piece {piece}");
            assert_eq!(decoder.into_body(), b"hello, world");
        }
    }

    /// I128: past the limit is 413 before the data is read; bad sizes and framing are 400.
    #[test]
    fn hostile_chunked_bodies_are_refused() {
        let status = |limit: usize, wire: &[u8]| match ChunkedBody::new(limit).feed(wire) {
            Err(response) => response.status,
            Ok(progress) => panic!("not refused: {progress:?}"),
        };
        assert_eq!(status(8, b"9\r\n"), 413);
        assert_eq!(status(8, b"4\r\nabcd\r\n5\r\n"), 413);
        assert_eq!(status(8, b"ffffffffffffffffffff\r\n"), 400);
        assert_eq!(status(8, b"zz\r\n"), 400);
        assert_eq!(status(8, b"2\r\nabXY"), 400);
        assert_eq!(status(8, &[b'1'; CHUNK_LINE_BYTES_MAX + 1]), 400);
        let mut trailers = b"0\r\n".to_vec();
        for _ in 0..=HEADERS_MAX {
            trailers.extend_from_slice(b"X: y\r\n");
        }
        assert_eq!(status(8, &trailers), 400);
        assert_eq!(ChunkedBody::new(8).feed(b"4\r\nab"), Ok((5, false)));
    }

    #[test]
    fn basic_credentials_decode_and_a_401_names_its_scheme() {
        // "alice:pa:ss" (a colon in the password is the password's).
        assert_eq!(
            basic_credentials("Basic YWxpY2U6cGE6c3M="),
            Some(("alice".into(), "pa:ss".into()))
        );
        assert_eq!(basic_credentials("Bearer YWxpY2U6cGE6c3M="), None);
        assert_eq!(basic_credentials("Basic !!!"), None);
        assert_eq!(basic_credentials("Basic YWxpY2U="), None);
        let text =
            String::from_utf8(encode_response(&Response::unauthorized(), false)).expect("utf-8");
        assert!(text.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "{text}");
        assert!(text.contains("\r\nWWW-Authenticate: Basic realm=\"SchemaRegistry\"\r\n"));
        assert!(text.ends_with("\r\n\r\n{\"error_code\":401,\"message\":\"Unauthorized\"}"));
        let head = complete(b"GET / HTTP/1.1\r\nAuthorization: Basic eDp5\r\n\r\n");
        assert_eq!(head.authorization.as_deref(), Some("Basic eDp5"));
    }
}
