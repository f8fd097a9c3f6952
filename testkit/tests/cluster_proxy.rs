//! The cluster proxy's own guard: a request body that fails the broker's bounded pre-check is
//! never decoded; the proxy closes that connection and counts it. Its lost answers: the
//! Produce reaches the broker, the client gets only a closed connection. (Its routing and the
//! clients' re-sends are tested with real clients in client/tests/mirror.rs.)

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use minikafka_testkit::cluster_proxy::{ClusterProxy, ProxyPlan};

#[test]
fn a_produce_whose_array_count_overruns_the_frame_closes_the_connection() {
    // A stand-in upstream: it accepts and holds connections, and answers nothing.
    let upstream = TcpListener::bind("127.0.0.1:0").expect("bind");
    let upstream_addr = upstream.local_addr().expect("addr").to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in upstream.incoming().flatten() {
            held.push(s);
        }
    });
    let proxy = ClusterProxy::start(&upstream_addr, ProxyPlan::new(2)).expect("proxy");
    let mut client = TcpStream::connect(&proxy.addrs[0]).expect("connect");
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    // Produce v9 (flexible): header v2, then a null transactional id, acks -1, a timeout, and
    // a topic array whose count (268 435 455) no 20-byte body can hold.
    let mut frame = Vec::new();
    frame.extend_from_slice(&0i16.to_be_bytes()); // api key: Produce
    frame.extend_from_slice(&9i16.to_be_bytes()); // version
    frame.extend_from_slice(&1i32.to_be_bytes()); // correlation id
    frame.extend_from_slice(&(-1i16).to_be_bytes()); // client id: null
    frame.push(0); // header tagged fields
    frame.push(0); // transactional id: null (compact)
    frame.extend_from_slice(&(-1i16).to_be_bytes()); // acks
    frame.extend_from_slice(&1000i32.to_be_bytes()); // timeout
    frame.extend_from_slice(&[0xff, 0xff, 0xff, 0x7f]); // topic count + 1, as a varint
    let mut wire = (frame.len() as i32).to_be_bytes().to_vec();
    wire.extend_from_slice(&frame);
    client.write_all(&wire).expect("write");
    let mut buf = [0u8; 16];
    let read = client.read(&mut buf).expect("closed, not timed out");
    assert_eq!(read, 0, "the proxy answered instead of closing");
    assert_eq!(proxy.counters().refused_frames.load(SeqCst), 1);
    assert_eq!(proxy.counters().produces.load(SeqCst), 0);
}

/// At `lose_answers_at` the proxy forwards the Produce (the broker gets it and answers), drops
/// the answer and closes the client's connection: the records are written but never
/// acknowledged, the case a producer's re-send must not duplicate (I182).
#[test]
fn a_lost_answer_reaches_the_broker_and_the_client_sees_only_a_closed_connection() {
    use bytes::BytesMut;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, RequestHeader, TopicName};
    use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};

    // A stand-in upstream: it answers every frame with a bare header and reports each one.
    let upstream = TcpListener::bind("127.0.0.1:0").expect("bind");
    let upstream_addr = upstream.local_addr().expect("addr").to_string();
    let (seen, seen_rx) = std::sync::mpsc::channel::<i16>();
    std::thread::spawn(move || {
        for mut s in upstream.incoming().flatten() {
            let seen = seen.clone();
            std::thread::spawn(move || loop {
                let mut len = [0u8; 4];
                if s.read_exact(&mut len).is_err() {
                    return;
                }
                let mut frame = vec![0u8; i32::from_be_bytes(len).max(0) as usize];
                if s.read_exact(&mut frame).is_err() || frame.len() < 8 {
                    return;
                }
                let _ = seen.send(i16::from_be_bytes([frame[0], frame[1]]));
                let mut answer = 4i32.to_be_bytes().to_vec();
                answer.extend_from_slice(&frame[4..8]);
                if s.write_all(&answer).is_err() {
                    return;
                }
            });
        }
    });
    let plan = ProxyPlan {
        lose_answers_at: Some(1),
        ..ProxyPlan::new(1)
    };
    let proxy = ClusterProxy::start(&upstream_addr, plan).expect("proxy");
    let mut client = TcpStream::connect(&proxy.addrs[0]).expect("connect");
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let version = 9;
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_data(
                vec![PartitionProduceData::default().with_index(0)],
            )]);
    let mut body = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(0)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .encode(&mut body, ProduceRequest::header_version(version))
        .expect("header");
    request.encode(&mut body, version).expect("body");
    let mut wire = (body.len() as i32).to_be_bytes().to_vec();
    wire.extend_from_slice(&body);
    client.write_all(&wire).expect("write");
    let mut buf = [0u8; 16];
    let read = client.read(&mut buf).expect("closed, not timed out");
    assert_eq!(read, 0, "the answer reached the client");
    let api_key = seen_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the Produce reached the broker");
    assert_eq!(api_key, 0);
    assert_eq!(proxy.counters().lost_answers.load(SeqCst), 1);
    assert_eq!(proxy.counters().produces_forwarded[0].load(SeqCst), 1);
}
