//! The mirror's Prometheus endpoint (`mk mirror --metrics-listener HOST:PORT`): lag per
//! partition, records copied, records/s and restarts, in the text format (0.0.4) the broker's
//! own endpoint serves.
//!
//! Contract (I122):
//! - [`Metrics`] is what the sessions update (after each window and each lag reading) and what
//!   a scrape reads; one mutex, held for a map update or a render, never across an await.
//! - [`render`] is pure: `# HELP` and `# TYPE` before each family's samples, labels escaped.
//! - [`serve`] answers `GET /metrics` (a query string ignored) with the page and anything else
//!   with 404, one request per connection, `Connection: close`; a request head is read up to
//!   8 KiB (longer: 431) and a connection that sends nothing for 10 s is closed. A scrape never
//!   blocks the copy: the endpoint runs on its own task.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{AsyncReadExt, AsyncWriteExt};

use crate::consumer::TopicPartition;

/// What the endpoint shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Records behind the source's high watermark, per mirrored partition (last reading).
    pub lag: BTreeMap<TopicPartition, i64>,
    /// Records copied per topic since start (re-copies after a restart count again).
    pub copied: BTreeMap<String, u64>,
    /// Records per second over the last progress interval.
    pub records_per_second: f64,
    /// Sessions restarted after retriable errors.
    pub restarts: u64,
    /// Sessions started again because new source topics matched (`--refresh-topics-s`).
    pub topic_refreshes: u64,
}

/// Shared between the sessions and the endpoint.
#[derive(Clone, Debug, Default)]
pub struct Metrics(Arc<Mutex<Snapshot>>);

impl Metrics {
    /// Applies `f` to the numbers.
    pub fn update(&self, f: impl FnOnce(&mut Snapshot)) {
        let mut guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard);
    }

    /// A copy of the numbers now.
    pub fn snapshot(&self) -> Snapshot {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The Prometheus text format's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The page.
pub fn render(s: &Snapshot) -> String {
    fn family(out: &mut String, name: &str, kind: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
    }
    let mut out = String::new();
    family(
        &mut out,
        "mk_mirror_lag_records",
        "gauge",
        "Records on the source not yet copied (high watermark minus position), per partition.",
    );
    for (tp, lag) in &s.lag {
        let _ = writeln!(
            out,
            "mk_mirror_lag_records{{topic=\"{}\",partition=\"{}\"}} {lag}",
            escape(&tp.topic),
            tp.partition
        );
    }
    family(
        &mut out,
        "mk_mirror_records_copied_total",
        "counter",
        "Records acknowledged by the target, per topic (re-copies after a restart count again).",
    );
    for (topic, n) in &s.copied {
        let _ = writeln!(
            out,
            "mk_mirror_records_copied_total{{topic=\"{}\"}} {n}",
            escape(topic)
        );
    }
    family(
        &mut out,
        "mk_mirror_records_per_second",
        "gauge",
        "Records copied per second over the last progress interval.",
    );
    let _ = writeln!(out, "mk_mirror_records_per_second {}", s.records_per_second);
    family(
        &mut out,
        "mk_mirror_restarts_total",
        "counter",
        "Sessions restarted from the stored progress after retriable errors.",
    );
    let _ = writeln!(out, "mk_mirror_restarts_total {}", s.restarts);
    family(
        &mut out,
        "mk_mirror_topic_refreshes_total",
        "counter",
        "Sessions started again because new source topics matched.",
    );
    let _ = writeln!(out, "mk_mirror_topic_refreshes_total {}", s.topic_refreshes);
    out
}

/// Longest request head read.
const MAX_HEAD_BYTES: usize = 8 * 1024;

/// `Some(true)`: `GET /metrics`; `Some(false)`: another request; `None`: not complete yet.
fn route(head: &[u8]) -> Option<bool> {
    let end = head.iter().position(|&b| b == b'\n')?;
    let line = std::str::from_utf8(&head[..end]).unwrap_or("");
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (method, target) = (parts.next()?, parts.next().unwrap_or(""));
    Some(method == "GET" && target.split('?').next() == Some("/metrics"))
}

fn response(status: &str, content_type: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serves the page on `listener` until the task is dropped.
pub async fn serve(listener: smol::net::TcpListener, metrics: Metrics) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            smol::Timer::after(Duration::from_millis(100)).await;
            continue;
        };
        let metrics = metrics.clone();
        smol::spawn(async move {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            let answer = loop {
                let read = smol::future::or(async { Some(stream.read(&mut buf).await) }, async {
                    smol::Timer::after(Duration::from_secs(10)).await;
                    None
                })
                .await;
                match read {
                    Some(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                    _ => return,
                }
                match route(&head) {
                    Some(true) => {
                        break response("200 OK", CONTENT_TYPE, &render(&metrics.snapshot()))
                    }
                    Some(false) => break response("404 Not Found", "text/plain", "not found\n"),
                    None if head.len() >= MAX_HEAD_BYTES => {
                        break response("431 Request Header Fields Too Large", "text/plain", "")
                    }
                    None => {}
                }
            };
            let _ = stream.write_all(&answer).await;
            let _ = stream.close().await;
        })
        .detach();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_help_and_type_before_samples() {
        let mut s = Snapshot::default();
        s.lag.insert(TopicPartition::new("a\"b", 3), 42);
        s.copied.insert("a\"b".into(), 7);
        s.restarts = 2;
        let page = render(&s);
        assert!(page.contains("mk_mirror_lag_records{topic=\"a\\\"b\",partition=\"3\"} 42\n"));
        assert!(page.contains("mk_mirror_records_copied_total{topic=\"a\\\"b\"} 7\n"));
        assert!(page.contains("mk_mirror_restarts_total 2\n"));
        let mut typed = std::collections::BTreeSet::new();
        for line in page.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                typed.insert(rest.split(' ').next().expect("name").to_string());
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().expect("name");
                assert!(typed.contains(name), "{name} sampled before its TYPE");
            }
        }
    }

    #[test]
    fn only_get_metrics_is_the_page() {
        assert_eq!(route(b"GET /metrics HTTP/1.1\r\n"), Some(true));
        assert_eq!(route(b"GET /metrics?x=1 HTTP/1.1\r\n"), Some(true));
        assert_eq!(route(b"POST /metrics HTTP/1.1\r\n"), Some(false));
        assert_eq!(route(b"GET / HTTP/1.1\r\n"), Some(false));
        assert_eq!(route(b"GET /metr"), None);
    }
}
