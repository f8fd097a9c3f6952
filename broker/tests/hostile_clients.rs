//! Hostile and greedy clients against the real `minikafka` binary over TCP on 127.0.0.1:
//!
//! - a huge array count in every request type the broker serves (the table is the broker's own
//!   ApiVersions answer; the count is written where each API's first array sits, found from the
//!   pre-check schema), at its lowest and highest version: each costs only its connection;
//! - requests pipelined far beyond the per-connection in-flight limit: all answered, in order;
//! - a client that never reads its responses: the broker stops reading from it (back-pressure,
//!   the client's writes stall) instead of buffering responses without bound, its memory stays
//!   bounded, and other clients are served meanwhile;
//! - a client that pipelines large requests its handlers cannot answer yet (long-polling
//!   Fetches): the broker reads about `MAX_UNANSWERED_REQUEST_BYTES` of them, not its
//!   in-flight count of them, and answers every one once data arrives.

use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use minikafka_broker::protocol::schema::{schema_for, Kind, MessageSchema, StructSchema};
use minikafka_broker::server::connection::{MAX_IN_FLIGHT, MAX_UNANSWERED_REQUEST_BYTES};

mod common;

use common::librdkafka::{create_topics, expect_all_ok, Rec, TestProducer};
use common::raw::{assert_closed_after, connect, read_frame, request};
use common::{bounded, Broker};

const TEST_LIMIT: Duration = Duration::from_secs(180);

/// The (api key, min version, max version) rows of an ApiVersions v0 answer.
fn served_apis(stream: &mut TcpStream) -> Vec<(i16, i16, i16)> {
    stream
        .write_all(&request(18, 0, 1, &[]))
        .expect("write ApiVersions");
    let body = read_frame(stream).expect("ApiVersions response");
    assert_eq!(&body[4..6], &[0, 0], "ApiVersions error code");
    let count =
        usize::try_from(i32::from_be_bytes([body[6], body[7], body[8], body[9]])).expect("count");
    (0..count)
        .map(|i| {
            let at = 10 + i * 6;
            let field = |o: usize| i16::from_be_bytes([body[at + o], body[at + o + 1]]);
            (field(0), field(2), field(4))
        })
        .collect()
}

/// Appends the shortest valid encoding of `kind` (zeros, empty strings and arrays).
fn write_minimal(out: &mut Vec<u8>, kind: &Kind, version: i16, flexible: bool) {
    let zeros = |out: &mut Vec<u8>, n: usize| out.extend(std::iter::repeat_n(0u8, n));
    match kind {
        Kind::Int8 | Kind::Bool => zeros(out, 1),
        Kind::Int16 => zeros(out, 2),
        Kind::Int32 => zeros(out, 4),
        Kind::Int64 | Kind::Float64 => zeros(out, 8),
        Kind::Uuid => zeros(out, 16),
        // Compact: length + 1 = 1 (empty).
        Kind::Str
        | Kind::NullableStr
        | Kind::Bytes
        | Kind::NullableBytes
        | Kind::Records
        | Kind::Array(_)
        | Kind::NullableArray(_)
            if flexible =>
        {
            out.push(1)
        }
        Kind::Str | Kind::NullableStr => zeros(out, 2),
        Kind::Bytes
        | Kind::NullableBytes
        | Kind::Records
        | Kind::Array(_)
        | Kind::NullableArray(_) => zeros(out, 4),
        Kind::Struct(s) => write_minimal_struct(out, s, version, flexible, usize::MAX),
        Kind::NullableStruct(_) => out.push(0xff), // the null marker
    }
}

fn write_minimal_struct(
    out: &mut Vec<u8>,
    s: &StructSchema,
    version: i16,
    flexible: bool,
    fields: usize,
) {
    let present = s
        .fields
        .iter()
        .filter(|f| f.tag.is_none() && f.present_in(version));
    for f in present.take(fields) {
        write_minimal(out, &f.kind, version, flexible);
    }
    if flexible && fields == usize::MAX {
        out.push(0); // no tagged fields
    }
}

/// A body whose first top-level array (or, lacking one, first string, else first byte string)
/// claims 2^31 - 1 elements (bytes), preceded by the shortest valid encoding of the fields
/// before it. `None` when the body has none of them.
fn huge_count_body(schema: &MessageSchema, version: i16) -> Option<Vec<u8>> {
    let flexible = schema.is_flexible(version);
    let header_v2 = schema.api_key.request_header_version(version) >= 2;
    let fields: Vec<_> = schema
        .body
        .fields
        .iter()
        .filter(|f| f.tag.is_none() && f.present_in(version))
        .collect();
    let is_array = |k: &Kind| matches!(k, Kind::Array(_) | Kind::NullableArray(_));
    let is_str = |k: &Kind| matches!(k, Kind::Str | Kind::NullableStr);
    let is_bytes = |k: &Kind| matches!(k, Kind::Bytes | Kind::NullableBytes);
    let target = fields
        .iter()
        .position(|f| is_array(&f.kind))
        .or_else(|| fields.iter().position(|f| is_str(&f.kind)))
        .or_else(|| fields.iter().position(|f| is_bytes(&f.kind)))?;
    let mut body = Vec::new();
    if header_v2 {
        body.push(0); // the request header's (v2) empty tagged-field section
    }
    write_minimal_struct(&mut body, schema.body, version, flexible, target);
    // Arrays and byte strings have 4-byte lengths when not flexible; strings 2.
    let kind = &fields[target].kind;
    match (flexible, is_array(kind) || is_bytes(kind)) {
        (true, _) => body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]), // 2^31 as count+1
        (false, true) => body.extend_from_slice(&i32::MAX.to_be_bytes()),
        (false, false) => body.extend_from_slice(&i16::MAX.to_be_bytes()),
    }
    body.extend_from_slice(&[0; 16]); // a little more, nowhere near the claim
    Some(body)
}

/// Every served API, at its lowest and highest version, with a 2^31 - 1 count where its first
/// array (else string) sits: each closes only its own connection, the broker stays small and
/// keeps answering a connection opened before them all (I10).
#[test]
fn a_huge_count_in_every_served_request_costs_only_its_connection_i10() {
    bounded(TEST_LIMIT, || {
        let mut broker = Broker::start();
        let addr = broker.addr();
        let mut bystander = connect(addr);
        let apis = served_apis(&mut bystander);
        let apis_count = apis.len();
        assert!(apis_count >= 10, "only {apis_count} APIs served");
        let mut attacked = std::collections::BTreeSet::new();
        for (key, min, max) in apis {
            let api = ApiKey::try_from(key).expect("a served key is known");
            let schema = schema_for(api).expect("every served API has a pre-check schema");
            for version in [min, max] {
                let Some(body) = huge_count_body(schema, version) else {
                    continue;
                };
                let what = format!("{api:?} v{version} with a 2^31 count");
                assert_closed_after(addr, &what, &request(key, version, 7, &body), false);
                assert!(broker.is_alive(), "broker died after {what}");
                attacked.insert(key);
            }
        }
        // Every served API but DescribeCluster (whose body has no length field) was attacked.
        assert!(
            attacked.len() >= apis_count - 1,
            "only {attacked:?} of {apis_count} APIs attacked"
        );
        assert!(!served_apis(&mut bystander).is_empty());
        if let Some(kib) = broker.resident_kib() {
            assert!(kib < 512 * 1024, "broker resident memory {kib} KiB");
        }
    });
}

/// 2,000 Metadata requests written in one go (the in-flight limit is 32 per connection): every
/// one is answered, in request order, on the same connection.
#[test]
fn requests_pipelined_far_beyond_the_in_flight_limit_are_all_answered_in_order() {
    bounded(TEST_LIMIT, || {
        let broker = Broker::start();
        let mut stream = connect(broker.addr());
        let count = 2_000i32;
        let mut burst = Vec::new();
        for correlation_id in 0..count {
            // Metadata v1, no topics requested (an empty array).
            burst.extend(request(3, 1, correlation_id, &[0, 0, 0, 0]));
        }
        let writer = {
            let mut stream = stream.try_clone().expect("clone");
            std::thread::spawn(move || stream.write_all(&burst).expect("write the burst"))
        };
        for correlation_id in 0..count {
            read_answer_to(&mut stream, correlation_id);
        }
        writer.join().expect("writer");
    });
}

/// A client pipelines Fetches of a 1 MiB partition and never reads an answer. The broker must
/// stop reading it (the client's writes stall: back-pressure) rather than queue responses, keep
/// its memory bounded, and keep serving a producer meanwhile.
#[test]
fn a_client_that_never_reads_gets_back_pressure_not_unbounded_buffering() {
    bounded(TEST_LIMIT, || {
        let mut broker = Broker::start();
        create_topics(&broker, &[("greedy", 1)]);
        let mut producer = TestProducer::new(&broker, &[]);
        let value = vec![b'x'; 64 * 1024];
        let recs: Vec<Rec> = (0..16)
            .map(|_| Rec::new("greedy", Some(0), &value))
            .collect();
        expect_all_ok(&producer.produce_all(&recs));

        // 64 KiB of ignored trailing bytes per request, so socket buffers (a few MiB) fill after
        // dozens of requests, not thousands: only a broker that stops reading stalls the writer.
        let mut fetch = fetch_v4_body("greedy", 1 << 20);
        fetch.resize(fetch.len() + 64 * 1024, 0);
        let mut greedy = connect(broker.addr());
        greedy
            .set_write_timeout(Some(Duration::from_secs(2)))
            .expect("write timeout");
        let mut stalled = false;
        let mut written = 0i32;
        // Each answer is ~1 MiB: unbounded reading would take 1.3 GB of requests and buffering
        // 20 GB of answers long before this.
        while written < 20_000 {
            match greedy.write_all(&request(1, 4, written, &fetch)) {
                Ok(()) => written += 1,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    stalled = true;
                    break;
                }
                Err(e) => panic!("write failed after {written} requests: {e}"),
            }
            if written % 500 == 0 {
                let kib = broker.resident_kib().unwrap_or(0);
                assert!(
                    kib < 1024 * 1024,
                    "broker at {kib} KiB after {written} unread fetches"
                );
            }
        }
        assert!(
            stalled,
            "the broker read all {written} requests of a client that never reads"
        );
        let kib = broker.resident_kib().unwrap_or(0);
        assert!(
            kib < 1024 * 1024,
            "broker at {kib} KiB with a stalled client"
        );
        // Others are still served while the greedy connection is stuck.
        let acks = producer.produce_all(&[Rec::new("greedy", Some(0), b"meanwhile")]);
        assert_eq!(expect_all_ok(&acks).len(), 1);
        drop(greedy);
        assert!(broker.is_alive());
    });
}

/// A client pipelines ApiVersions requests (small requests, answers of a few hundred bytes)
/// and never reads. The answers the broker computes for it are bounded by the socket buffers
/// it chose (`socket.send.buffer.bytes`; the client's receive buffer, set small here) plus
/// its in-flight limit, not by Linux's auto-tuned megabytes: measured as the bytes the kernel
/// holds for the connection on both ends (`/proc/net/tcp`). A neighbour is served meanwhile.
#[test]
fn a_client_that_never_reads_gets_only_its_socket_buffers_of_answers() {
    const SEND_BUFFER: usize = 102_400;
    const CLIENT_RECEIVE_BUFFER: usize = 32 * 1024;
    bounded(TEST_LIMIT, || {
        let mut broker = Broker::builder()
            .with("socket.send.buffer.bytes", &SEND_BUFFER.to_string())
            .start();
        let addr = broker.addr();
        let mut neighbour = connect(addr);
        let answer_bytes = api_versions_answer_bytes(&mut neighbour);

        let greedy = small_receive_buffer_connect(addr, CLIENT_RECEIVE_BUFFER);
        let greedy_port = greedy.local_addr().expect("local addr").port();
        let mut greedy = greedy;
        let batch: Vec<u8> = (0..64).flat_map(|i| request(18, 0, i, &[])).collect();
        let mut requests = 0usize;
        loop {
            match greedy.write_all(&batch) {
                Ok(()) => requests += 64,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
                Err(e) => panic!("write failed after {requests} requests: {e}"),
            }
            assert!(
                requests < 10_000_000,
                "the broker read {requests} requests of a client that never reads"
            );
        }
        // The broker answers until the buffers are full, then stops: wait for the count to
        // hold still (a second unchanged), bounded by the test's limit.
        let mut held = kernel_held_bytes(broker.port(), greedy_port);
        let mut unchanged = 0;
        while unchanged < 5 {
            std::thread::sleep(Duration::from_millis(200));
            let now = kernel_held_bytes(broker.port(), greedy_port);
            unchanged = if now == held { unchanged + 1 } else { 0 };
            held = now;
        }
        // Linux doubles both buffer settings for its bookkeeping; each end may overshoot by
        // one 64 KiB segment. (The broker itself holds at most its in-flight answers more.)
        let bound = (2 * SEND_BUFFER + 2 * CLIENT_RECEIVE_BUFFER + 2 * 64 * 1024) as u64;
        assert!(
            held > 0,
            "the broker answered nothing ({requests} requests sent)"
        );
        assert!(
            held <= bound,
            "{held} bytes of answers held for a client that never reads (bound {bound}, \
             {requests} requests sent, answers of {answer_bytes} bytes)"
        );
        // The neighbour is served while the greedy connection is stuck.
        for i in 0..20 {
            neighbour
                .write_all(&request(18, 0, 1000 + i, &[]))
                .expect("neighbour write");
            let body = read_frame(&mut neighbour).expect("neighbour answered");
            assert_eq!(body[..4], (1000 + i).to_be_bytes()[..], "answered in order");
        }
        create_topics(&broker, &[("beside-greedy", 1)]);
        let mut producer = TestProducer::new(&broker, &[]);
        let acks = producer.produce_all(&[Rec::new("beside-greedy", Some(0), b"meanwhile")]);
        assert_eq!(expect_all_ok(&acks).len(), 1);
        drop(greedy);
        assert!(broker.is_alive());
    });
}

/// A client pipelines 40 Fetches of 512 KiB each (padded with ignored trailing bytes) that
/// long-poll an empty partition, so no handler can answer yet. The broker must read about
/// `MAX_UNANSWERED_REQUEST_BYTES` of them and leave the rest in the socket — not its
/// `MAX_IN_FLIGHT` (32) of them, 16 MiB — measured as the bytes written minus the bytes the
/// kernel still holds on the way (`/proc/net/tcp`). Once a record arrives every Fetch is
/// answered, in order (I10).
#[test]
fn large_requests_that_wait_for_answers_are_read_only_up_to_the_byte_budget() {
    const REQUESTS: i32 = 40;
    const PAD_BYTES: usize = 512 * 1024;
    bounded(TEST_LIMIT, || {
        let mut broker = Broker::start();
        create_topics(&broker, &[("waiting", 1)]);
        let mut fetch = fetch_body("waiting", 60_000, 1, 1 << 20);
        fetch.resize(fetch.len() + PAD_BYTES, 0);
        let frames: Vec<Vec<u8>> = (0..REQUESTS).map(|i| request(1, 4, i, &fetch)).collect();
        let frame_bytes = frames[0].len();
        let stream = connect(broker.addr());
        let client_port = stream.local_addr().expect("local addr").port();
        let written = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let writer = {
            let mut stream = stream.try_clone().expect("clone");
            stream.set_write_timeout(None).expect("blocking writes");
            let written = std::sync::Arc::clone(&written);
            std::thread::spawn(move || {
                for frame in &frames {
                    let mut left = &frame[..];
                    while !left.is_empty() {
                        let n = stream.write(left).expect("write a fetch");
                        written.fetch_add(n as u64, std::sync::atomic::Ordering::SeqCst);
                        left = &left[n..];
                    }
                }
            })
        };
        // Bytes the broker took off its socket, once that holds still (a second unchanged).
        let taken = || {
            let (broker_rx, client_tx) = kernel_queued_toward_broker(broker.port(), client_port);
            written
                .load(std::sync::atomic::Ordering::SeqCst)
                .saturating_sub(broker_rx + client_tx)
        };
        let mut read = taken();
        let mut unchanged = 0;
        while unchanged < 5 {
            std::thread::sleep(Duration::from_millis(200));
            let now = taken();
            unchanged = if now == read { unchanged + 1 } else { 0 };
            read = now;
        }
        // The budget, the request that crossed it, and one 64 KiB socket read.
        let bound = (MAX_UNANSWERED_REQUEST_BYTES + frame_bytes + 64 * 1024) as u64;
        let count_bound = (MAX_IN_FLIGHT * frame_bytes) as u64;
        assert!(read > 0, "the broker read nothing");
        assert!(
            read <= bound,
            "the broker read {read} bytes of unanswerable requests (bound {bound}; \
             {MAX_IN_FLIGHT} of them would be {count_bound})"
        );
        // A record arrives: the waiting Fetches answer, the broker reads on, all answered.
        let mut producer = TestProducer::new(&broker, &[]);
        let acks = producer.produce_all(&[Rec::new("waiting", Some(0), b"arrived")]);
        assert_eq!(expect_all_ok(&acks).len(), 1);
        let mut stream = stream;
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("read timeout");
        for correlation_id in 0..REQUESTS {
            let body = read_answer_to(&mut stream, correlation_id);
            assert!(
                body.windows(7).any(|w| w == b"arrived"),
                "fetch {correlation_id} answered without the record"
            );
        }
        writer.join().expect("writer");
        assert!(broker.is_alive());
    });
}

/// Bytes the kernel holds on the way from a client to the broker over loopback: the broker
/// end's receive queue and the client end's send queue (`/proc/net/tcp`).
fn kernel_queued_toward_broker(broker_port: u16, client_port: u16) -> (u64, u64) {
    let (mut broker_rx, mut client_tx) = (0, 0);
    for (local, remote, tx, rx) in tcp_queues() {
        if local == broker_port && remote == client_port {
            broker_rx += rx;
        } else if local == client_port && remote == broker_port {
            client_tx += tx;
        }
    }
    (broker_rx, client_tx)
}

/// The size on the wire (frame included) of an ApiVersions v0 answer.
fn api_versions_answer_bytes(stream: &mut TcpStream) -> usize {
    stream
        .write_all(&request(18, 0, 1, &[]))
        .expect("write ApiVersions");
    4 + read_frame(stream).expect("ApiVersions answer").len()
}

/// A connection whose receive buffer is set before connecting (so the window it advertises
/// is small from the start), with the usual 5 s timeouts.
fn small_receive_buffer_connect(addr: SocketAddr, bytes: usize) -> TcpStream {
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    socket.set_recv_buffer_size(bytes).expect("SO_RCVBUF");
    socket
        .connect_timeout(&addr.into(), Duration::from_secs(5))
        .expect("connect");
    let stream = TcpStream::from(socket);
    stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .expect("write timeout");
    stream
}

/// Bytes the kernel holds for one loopback connection: the broker end's send queue plus the
/// client end's receive queue (the `tx_queue` and `rx_queue` columns of `/proc/net/tcp`).
fn kernel_held_bytes(broker_port: u16, client_port: u16) -> u64 {
    let mut held = 0;
    for (local, remote, tx, rx) in tcp_queues() {
        if local == broker_port && remote == client_port {
            held += tx;
        } else if local == client_port && remote == broker_port {
            held += rx;
        }
    }
    held
}

/// (local port, remote port, tx_queue, rx_queue) of every IPv4 TCP socket (`/proc/net/tcp`).
fn tcp_queues() -> Vec<(u16, u16, u64, u64)> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let port = |address: &str| {
        u16::from_str_radix(address.rsplit(':').next().unwrap_or(""), 16).unwrap_or(0)
    };
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, remote, queues) = (fields.get(1)?, fields.get(2)?, fields.get(4)?);
            let (tx, rx) = queues.split_once(':').unwrap_or(("0", "0"));
            Some((
                port(local),
                port(remote),
                u64::from_str_radix(tx, 16).unwrap_or(0),
                u64::from_str_radix(rx, 16).unwrap_or(0),
            ))
        })
        .collect()
}

/// A Fetch v4 body (non-flexible): replica -1, max wait 0, min bytes 0, max bytes, isolation 0,
/// one topic with partition 0 from offset 0 up to `max_bytes`.
fn fetch_v4_body(topic: &str, max_bytes: i32) -> Vec<u8> {
    fetch_body(topic, 0, 0, max_bytes)
}

/// The same with a long poll: wait up to `max_wait_ms` for `min_bytes`.
fn fetch_body(topic: &str, max_wait_ms: i32, min_bytes: i32, max_bytes: i32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.extend_from_slice(&max_wait_ms.to_be_bytes());
    b.extend_from_slice(&min_bytes.to_be_bytes());
    b.extend_from_slice(&max_bytes.to_be_bytes());
    b.push(0);
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    b.extend_from_slice(topic.as_bytes());
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&max_bytes.to_be_bytes());
    b
}

/// Reads the next response frame and checks it answers `correlation_id` (answers come in
/// request order on a connection); its body.
fn read_answer_to(stream: &mut std::net::TcpStream, correlation_id: i32) -> Vec<u8> {
    let body = read_frame(stream).unwrap_or_else(|| panic!("no answer {correlation_id}"));
    assert_eq!(
        &body[0..4],
        &correlation_id.to_be_bytes(),
        "answered out of order"
    );
    body
}
