//! The little HTTP/1.x the metrics endpoint speaks, as pure functions: judge a request head,
//! build a response. One request per connection, answered with `Connection: close`.
//!
//! Contract:
//! - A request head is at most [`MAX_HEAD_BYTES`]; a longer one is [`Head::TooLarge`] (the
//!   caller answers 431 and closes). Nothing is allocated from a length the client sent.
//! - `GET /metrics` (a query string is ignored) is [`Route::Metrics`]; every other method or
//!   path is [`Route::NotFound`] (404). A head that is not HTTP is [`Head::Malformed`] (400).

/// Longest request head read (request line and headers).
pub const MAX_HEAD_BYTES: usize = 8 * 1024;

/// What the bytes read so far hold.
#[derive(Debug, PartialEq, Eq)]
pub enum Head {
    /// No blank line yet: read more.
    Incomplete,
    /// The head passed [`MAX_HEAD_BYTES`] without ending.
    TooLarge,
    /// Not an HTTP request line.
    Malformed,
    /// A complete head, routed.
    Complete(Route),
}

/// Where a complete request goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// `GET /metrics`: the page.
    Metrics,
    /// Anything else: 404.
    NotFound,
}

/// Judges the bytes read so far.
pub fn parse_head(buf: &[u8]) -> Head {
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| buf.windows(2).position(|w| w == b"\n\n"));
    let Some(end) = end else {
        return if buf.len() >= MAX_HEAD_BYTES {
            Head::TooLarge
        } else {
            Head::Incomplete
        };
    };
    if end > MAX_HEAD_BYTES {
        return Head::TooLarge;
    }
    let line_end = buf[..end].iter().position(|&b| b == b'\n').unwrap_or(end);
    let Ok(line) = std::str::from_utf8(&buf[..line_end]) else {
        return Head::Malformed;
    };
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Head::Malformed;
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !target.starts_with('/') {
        return Head::Malformed;
    }
    let path = target.split('?').next().unwrap_or(target);
    Head::Complete(if method == "GET" && path == "/metrics" {
        Route::Metrics
    } else {
        Route::NotFound
    })
}

/// A complete response closing the connection.
pub fn response(status: u16, reason: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// The 404 answer.
pub fn not_found() -> Vec<u8> {
    response(
        404,
        "Not Found",
        "text/plain",
        b"only GET /metrics is served\n",
    )
}

/// The answer to a head that is not HTTP.
pub fn bad_request() -> Vec<u8> {
    response(400, "Bad Request", "text/plain", b"bad request\n")
}

/// The answer to a head longer than [`MAX_HEAD_BYTES`].
pub fn head_too_large() -> Vec<u8> {
    response(
        431,
        "Request Header Fields Too Large",
        "text/plain",
        b"request head too large\n",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_metrics_is_routed_to_the_page() {
        let get = |target: &str| {
            parse_head(format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        };
        assert_eq!(get("/metrics"), Head::Complete(Route::Metrics));
        assert_eq!(get("/metrics?x=1"), Head::Complete(Route::Metrics));
        assert_eq!(get("/"), Head::Complete(Route::NotFound));
        assert_eq!(
            parse_head(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Head::Complete(Route::NotFound)
        );
        assert_eq!(
            parse_head(b"GET /metrics HTTP/1.0\n\n"),
            Head::Complete(Route::Metrics)
        );
    }

    #[test]
    fn partial_oversized_and_garbage_heads_are_told_apart() {
        assert_eq!(parse_head(b"GET /metrics HTTP/1.1\r\n"), Head::Incomplete);
        assert_eq!(parse_head(&vec![b'a'; MAX_HEAD_BYTES]), Head::TooLarge);
        assert_eq!(parse_head(b"\x00\x00\x00\x10abc\r\n\r\n"), Head::Malformed);
        assert_eq!(parse_head(b"GET metrics HTTP/1.1\r\n\r\n"), Head::Malformed);
        assert_eq!(parse_head(b"GET /metrics SPDY\r\n\r\n"), Head::Malformed);
    }

    #[test]
    fn responses_carry_their_length_and_close() {
        let r = String::from_utf8(response(200, "OK", "text/plain", b"abc")).expect("present");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(r.contains("Content-Length: 3\r\n"));
        assert!(r.contains("Connection: close\r\n"));
        assert!(r.ends_with("\r\n\r\nabc"));
    }
}
