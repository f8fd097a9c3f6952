//! The cluster proxy's own guard: a request body that fails the broker's bounded pre-check is
//! never decoded; the proxy closes that connection and counts it. (Its routing is tested with
//! real clients in client/tests/mirror.rs.)

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
