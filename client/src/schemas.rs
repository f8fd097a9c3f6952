//! A small client of the Confluent Schema Registry REST API (v1), for `mk schemas`: one
//! request per connection over any `AsyncRead + AsyncWrite` stream the caller connects, like
//! the rest of this crate (no runtime of its own).
//!
//! Contract:
//! - [`parse_url`] takes `http://host:port[/prefix]` (no TLS).
//! - [`call`] sends one request (`Connection: close`, a JSON body when given) and reads the
//!   response to its end, at most [`RESPONSE_BYTES_MAX`] bytes; the head is parsed by
//!   `httparse`, the body by `serde_json`.
//! - A status outside 2xx is [`SchemasError::Registry`] with the registry's `error_code` and
//!   `message` (Confluent's error body), so callers print what the registry said.

use futures::io::{AsyncReadExt, AsyncWriteExt};
use futures_io::{AsyncRead, AsyncWrite};
use serde_json::Value;

/// Largest response read.
pub const RESPONSE_BYTES_MAX: usize = 32 * 1024 * 1024;

/// The registry's media type, sent as `Content-Type` and `Accept`.
pub const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// Why a registry call failed.
#[derive(Debug, thiserror::Error)]
pub enum SchemasError {
    /// The URL is not `http://host:port[/prefix]`.
    #[error("registry URL {0:?}: expected http://host:port")]
    Url(String),
    /// The connection failed.
    #[error("registry I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The answer is not an HTTP response with a JSON body.
    #[error("registry answer: {0}")]
    Response(String),
    /// The registry refused the request.
    #[error("{status} (error {code}): {message}")]
    Registry {
        /// The HTTP status.
        status: u16,
        /// Confluent's `error_code`.
        code: i64,
        /// Its `message`.
        message: String,
    },
}

/// A registry URL split: the `host:port` to connect to and the path prefix (no trailing `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryUrl {
    /// `host:port`.
    pub authority: String,
    /// The path every API path is appended to (`""` usually).
    pub prefix: String,
}

/// Parses `http://host:port[/prefix]`.
pub fn parse_url(url: &str) -> Result<RegistryUrl, SchemasError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| SchemasError::Url(url.to_owned()))?;
    let (authority, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let port_ok = authority
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if !port_ok {
        return Err(SchemasError::Url(url.to_owned()));
    }
    let prefix = prefix.trim_end_matches('/');
    Ok(RegistryUrl {
        authority: authority.to_owned(),
        prefix: if prefix.is_empty() {
            String::new()
        } else {
            format!("/{prefix}")
        },
    })
}

/// Percent-encodes a subject name for a path segment.
pub fn encode_segment(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Sends one request and returns the JSON body of a 2xx answer (see the module contract).
pub async fn call<S>(
    mut stream: S,
    url: &RegistryUrl,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<Value, SchemasError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {}{path} HTTP/1.1\r\nHost: {}\r\nAccept: {CONTENT_TYPE}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        url.prefix,
        url.authority,
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await?;
    let mut response = Vec::new();
    (&mut stream)
        .take(RESPONSE_BYTES_MAX as u64 + 1)
        .read_to_end(&mut response)
        .await?;
    if response.len() > RESPONSE_BYTES_MAX {
        return Err(SchemasError::Response(format!(
            "over {RESPONSE_BYTES_MAX} bytes"
        )));
    }
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Response::new(&mut headers);
    let head_bytes = match parsed.parse(&response) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return Err(SchemasError::Response("the response ended early".into()))
        }
        Err(e) => return Err(SchemasError::Response(e.to_string())),
    };
    let status = parsed.code.unwrap_or(0);
    let body = &response[head_bytes..];
    let value: Value = serde_json::from_slice(body).unwrap_or_else(|_| {
        // The raw `/schema` reads answer the schema text itself.
        Value::String(String::from_utf8_lossy(body).into_owned())
    });
    if !(200..300).contains(&status) {
        return Err(SchemasError::Registry {
            status,
            code: value["error_code"].as_i64().unwrap_or(i64::from(status)),
            message: value["message"]
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned),
        });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_authority_and_prefix() {
        let url = parse_url("http://127.0.0.1:8081").expect("valid");
        assert_eq!(
            (url.authority.as_str(), url.prefix.as_str()),
            ("127.0.0.1:8081", "")
        );
        let url = parse_url("http://r.local:80/registry/").expect("valid");
        assert_eq!(
            (url.authority.as_str(), url.prefix.as_str()),
            ("r.local:80", "/registry")
        );
        for bad in ["https://a:1", "http://a", "http://:1", "a:1"] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
        assert_eq!(encode_segment("a/b c"), "a%2Fb%20c");
    }

    /// Answers `answer` to whatever is written.
    struct Canned(futures::io::Cursor<Vec<u8>>);

    impl AsyncRead for Canned {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &mut [u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Canned {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::task::Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_close(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn an_error_body_becomes_the_registry_error() {
        let answer = b"HTTP/1.1 404 Not Found\r\nContent-Length: 55\r\n\r\n{\"error_code\":40401,\"message\":\"Subject 'x' not found.\"}";
        let stream = Canned(futures::io::Cursor::new(answer.to_vec()));
        let url = parse_url("http://127.0.0.1:8081").expect("valid");
        let error =
            futures::executor::block_on(call(stream, &url, "GET", "/subjects/x/versions", None))
                .expect_err("refused");
        match error {
            SchemasError::Registry {
                status,
                code,
                message,
            } => {
                assert_eq!((status, code), (404, 40401));
                assert_eq!(message, "Subject 'x' not found.");
            }
            other => panic!("{other:?}"),
        }
    }
}
