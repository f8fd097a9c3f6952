//! `init_transactions` against a scripted coordinator on 127.0.0.1: retriable coordinator
//! errors (COORDINATOR_NOT_AVAILABLE, CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
//! NOT_COORDINATOR) are retried after the backoff, for at most `max_block`; a fatal one
//! (PRODUCER_FENCED) fails at once and for good. No real broker answers these on demand, so
//! a small fake speaks the two APIs involved over real TCP.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream as StdTcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{
    ApiKey, BrokerId, FindCoordinatorResponse, InitProducerIdResponse, ProducerId, RequestHeader,
    ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use minikafka_client::{
    Connection, ConnectionConfig, Error, Producer, ProducerConfig, SmolRuntime,
};

const TXN_ID: &str = "tx";

/// What the fake answers: error codes to return first, per API, then success.
#[derive(Default)]
struct Script {
    find_coordinator: VecDeque<i16>,
    init_producer_id: VecDeque<i16>,
    /// Requests seen, by API key.
    seen: Vec<i16>,
}

fn read_frame(stream: &mut StdTcpStream) -> Option<BytesMut> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).ok()?;
    let size = usize::try_from(i32::from_be_bytes(size)).ok()?;
    assert!(size < 1 << 20, "the client sent a {size}-byte frame");
    let mut body = vec![0u8; size];
    stream.read_exact(&mut body).ok()?;
    Some(BytesMut::from(&body[..]))
}

/// Serves one connection per `script` until the client hangs up.
fn serve(listener: TcpListener, script: Arc<Mutex<Script>>) {
    let Ok((mut stream, _)) = listener.accept() else {
        return;
    };
    while let Some(mut frame) = read_frame(&mut stream) {
        let api_key = i16::from_be_bytes([frame[0], frame[1]]);
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let key = ApiKey::try_from(api_key).expect("a known API");
        let header = RequestHeader::decode(&mut frame, key.request_header_version(version))
            .expect("request header");
        frame.advance(frame.remaining());
        let mut script = script.lock().expect("script");
        script.seen.push(api_key);
        let mut body = BytesMut::new();
        match key {
            ApiKey::FindCoordinator => {
                let code = script.find_coordinator.pop_front().unwrap_or(0);
                let mut response = FindCoordinatorResponse::default();
                if version < 4 {
                    response = response
                        .with_error_code(code)
                        .with_node_id(BrokerId(0))
                        .with_host(StrBytes::from_static_str("127.0.0.1"))
                        .with_port(9092);
                } else {
                    response.coordinators = vec![Coordinator::default()
                        .with_key(StrBytes::from_static_str(TXN_ID))
                        .with_error_code(code)
                        .with_node_id(BrokerId(0))
                        .with_host(StrBytes::from_static_str("127.0.0.1"))
                        .with_port(9092)];
                }
                response.encode(&mut body, version).expect("encode");
            }
            ApiKey::InitProducerId => {
                let code = script.init_producer_id.pop_front().unwrap_or(0);
                let (pid, epoch) = if code == 0 { (42, 3) } else { (-1, -1) };
                InitProducerIdResponse::default()
                    .with_error_code(code)
                    .with_producer_id(ProducerId(pid))
                    .with_producer_epoch(epoch)
                    .encode(&mut body, version)
                    .expect("encode");
            }
            other => panic!("the fake coordinator does not serve {other:?}"),
        }
        drop(script);
        let mut out = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut out, key.response_header_version(version))
            .expect("encode header");
        out.extend_from_slice(&body);
        let size = i32::try_from(out.len()).expect("small response");
        if stream.write_all(&size.to_be_bytes()).is_err() || stream.write_all(&out).is_err() {
            return;
        }
    }
}

/// Runs `init_transactions` against a fake following `script`; returns its answer and the
/// requests the fake saw.
fn init_against(script: Script, max_block: Duration) -> (Result<(), Error>, Vec<i16>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let script = Arc::new(Mutex::new(script));
    let server = {
        let script = Arc::clone(&script);
        std::thread::spawn(move || serve(listener, script))
    };
    let result = smol::block_on(async {
        let stream = smol::net::TcpStream::connect(addr).await.expect("connect");
        let conn =
            Connection::new_unnegotiated(stream, ConnectionConfig::default()).expect("connection");
        let config = ProducerConfig {
            transactional_id: Some(TXN_ID.to_string()),
            txn_retry_backoff: Duration::from_millis(10),
            max_block,
            ..ProducerConfig::default()
        };
        let (producer, driver) = Producer::new(conn, config, SmolRuntime).expect("producer");
        let driver = smol::spawn(driver.run());
        let result = producer.init_transactions().await;
        drop(producer);
        driver.await;
        result
    });
    server.join().expect("fake coordinator");
    let seen = script.lock().expect("script").seen.clone();
    (result, seen)
}

const FIND: i16 = 10;
const INIT: i16 = 22;

#[test]
fn retriable_coordinator_errors_are_retried_until_init_succeeds() {
    let script = Script {
        find_coordinator: VecDeque::from([15]),
        // CONCURRENT_TRANSACTIONS twice, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR (which
        // looks the coordinator up again), then success.
        init_producer_id: VecDeque::from([51, 51, 14, 16]),
        ..Script::default()
    };
    let (result, seen) = init_against(script, Duration::from_secs(30));
    result.expect("init succeeds after the retries");
    assert_eq!(seen, [FIND, FIND, INIT, INIT, INIT, INIT, FIND, INIT]);
}

#[test]
fn a_fenced_init_fails_at_once_and_is_fatal() {
    let script = Script {
        init_producer_id: VecDeque::from([90]),
        ..Script::default()
    };
    let (result, seen) = init_against(script, Duration::from_secs(30));
    let err = result.expect_err("PRODUCER_FENCED");
    assert!(err.is_fatal_transaction_error(), "{err}");
    assert_eq!(err.kafka_code(), Some(90));
    assert_eq!(seen, [FIND, INIT], "a fatal error is not retried");
}

#[test]
fn retries_stop_after_max_block() {
    let script = Script {
        init_producer_id: VecDeque::from(vec![51; 10_000]),
        ..Script::default()
    };
    // 2 s of max_block: room for the first try's round trips on a loaded machine, and with
    // the 10 ms backoff far fewer tries than the script holds.
    let (result, seen) = init_against(script, Duration::from_secs(2));
    let err = result.expect_err("still CONCURRENT_TRANSACTIONS at the deadline");
    assert_eq!(err.kafka_code(), Some(51), "{err}");
    assert!(err.is_abortable_transaction_error(), "{err}");
    let tries = seen.iter().filter(|&&k| k == INIT).count();
    assert!(
        (2..10_000).contains(&tries),
        "retried, then gave up: {tries} tries"
    );
}
