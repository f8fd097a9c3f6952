//! TCP through the monoio backend: echo, `SO_REUSEPORT` across shards.

mod common;

use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use common::on_one_shard;
use futures::{AsyncReadExt, AsyncWriteExt};
use minikafka_backend_monoio::MonoioBackend;
use minikafka_core::backend::{Backend, BackendListener};

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().expect("addr")
}

#[test]
fn tcp_echo_round_trip() {
    on_one_shard(|backend| async move {
        let listener = backend.listen(loopback()).await.expect("listen");
        let addr = listener.local_addr().expect("local addr");
        assert_ne!(addr.port(), 0);

        backend.spawn_local(async move {
            let (mut stream, peer) = listener.accept().await.expect("accept");
            assert!(peer.ip().is_loopback());
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = stream.read(&mut buf).await.expect("server read");
                if n == 0 {
                    break;
                }
                stream.write_all(&buf[..n]).await.expect("server write");
            }
        });

        let client = backend.connect(addr).await.expect("connect");
        assert!(client.nodelay().expect("nodelay"), "TCP_NODELAY is set");
        let request: Vec<u8> = (0..200_000u32).map(|i| (i % 249) as u8).collect();
        let (mut reader, mut writer) = client.split();
        let send = async {
            writer.write_all(&request).await.expect("client write");
            writer.flush().await.expect("flush");
        };
        let receive = async {
            let mut echoed = vec![0u8; request.len()];
            reader.read_exact(&mut echoed).await.expect("client read");
            echoed
        };
        let ((), echoed) = futures::join!(send, receive);
        assert!(echoed == request, "echo matches");
    });
}

/// A vectored write sends several slices in one call (one `sendmsg`), in order.
#[test]
fn vectored_writes_send_every_slice_in_order() {
    on_one_shard(|backend| async move {
        let listener = backend.listen(loopback()).await.expect("listen");
        let addr = listener.local_addr().expect("local addr");
        let parts: Vec<Vec<u8>> = vec![
            vec![1u8; 100],
            (0..300_000u32).map(|i| (i % 251) as u8).collect(),
            vec![],
            vec![3u8; 3],
        ];
        let expected: Vec<u8> = parts.concat();
        let total = expected.len();
        let server = async {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut got = vec![0u8; total];
            stream.read_exact(&mut got).await.expect("server read");
            got
        };
        let client = async {
            let mut stream = backend.connect(addr).await.expect("connect");
            let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
            let mut left = &mut slices[..];
            let mut first_call = None;
            while !left.is_empty() {
                let n = stream.write_vectored(left).await.expect("write_vectored");
                assert!(n > 0, "a vectored write made progress");
                first_call.get_or_insert(n);
                IoSlice::advance_slices(&mut left, n);
            }
            stream.flush().await.expect("flush");
            first_call.expect("one call at least")
        };
        let (got, first_call) = futures::join!(server, client);
        assert!(got == expected, "the slices arrive whole and in order");
        assert!(
            first_call > 100,
            "the first call sent more than its first slice ({first_call} bytes)"
        );
    });
}

#[test]
fn every_shard_binds_the_same_address() {
    // Shard 0 picks a free port; shard 1 binds the same one (SO_REUSEPORT).
    let port = Arc::new(Mutex::new(None::<u16>));
    let bound = Arc::new(Mutex::new(Vec::new()));
    let (port_in, bound_in) = (Arc::clone(&port), Arc::clone(&bound));
    MonoioBackend::run_shards(2, move |backend| {
        let (port, bound) = (Arc::clone(&port_in), Arc::clone(&bound_in));
        async move {
            let addr = loop {
                let chosen = *port.lock().expect("lock");
                match (backend.shard().0, chosen) {
                    (0, None) => {
                        let l = backend.listen(loopback()).await.expect("listen");
                        let addr = l.local_addr().expect("addr");
                        *port.lock().expect("lock") = Some(addr.port());
                        break Some((l, addr));
                    }
                    (_, Some(p)) => {
                        let addr = SocketAddr::from(([127, 0, 0, 1], p));
                        let l = backend.listen(addr).await.expect("second bind");
                        break Some((l, addr));
                    }
                    (_, None) => backend.sleep(std::time::Duration::from_millis(1)).await,
                }
            };
            if let Some((listener, addr)) = addr {
                bound
                    .lock()
                    .expect("lock")
                    .push(listener.local_addr().expect("addr"));
                assert_eq!(listener.local_addr().expect("addr"), addr);
            }
        }
    })
    .expect("run");
    let bound = bound.lock().expect("lock");
    assert_eq!(bound.len(), 2);
    assert_eq!(bound[0], bound[1]);
}

/// Reads everything `stream` gives through `poll_read_uninit` into room holding a stale
/// pattern (0xA5, which the data never holds), checking each read initialised exactly the
/// bytes it counted: the rest of the room keeps the pattern.
async fn read_all_uninit<S: minikafka_core::backend::ReadUninit>(
    stream: &mut S,
    room_bytes: usize,
) -> Vec<u8> {
    use std::mem::MaybeUninit;
    let mut got = Vec::new();
    loop {
        let mut room = vec![MaybeUninit::new(0xA5u8); room_bytes];
        let n = futures::future::poll_fn(|cx| {
            std::pin::Pin::new(&mut *stream).poll_read_uninit(cx, &mut room)
        })
        .await
        .expect("uninit read");
        assert!(n <= room_bytes, "{n} bytes read into {room_bytes}");
        if n == 0 {
            return got;
        }
        // SAFETY: every byte of `room` was initialised (the stale pattern) before the read.
        let room: Vec<u8> = room.iter().map(|b| unsafe { b.assume_init() }).collect();
        assert!(
            room[n..].iter().all(|&b| b == 0xA5),
            "a read wrote past the {n} bytes it counted"
        );
        got.extend_from_slice(&room[..n]);
    }
}

/// A socket read straight into uninitialised room gives the bytes sent, counted right
/// (I199).
#[test]
fn an_uninit_read_gives_the_bytes_sent_into_uninitialised_room_i199() {
    on_one_shard(|backend| async move {
        let listener = backend.listen(loopback()).await.expect("listen");
        let addr = listener.local_addr().expect("local addr");
        let sent: Vec<u8> = (0..500_000u32).map(|i| (i % 160) as u8).collect();
        let server = async {
            let (mut stream, _) = listener.accept().await.expect("accept");
            read_all_uninit(&mut stream, 100_000).await
        };
        let client = async {
            let mut stream = backend.connect(addr).await.expect("connect");
            // In pieces, so reads find partial data as well as full room.
            for piece in sent.chunks(70_001) {
                stream.write_all(piece).await.expect("client write");
            }
            stream.close().await.expect("close");
        };
        let (got, ()) = futures::join!(server, client);
        assert_eq!(got.len(), sent.len());
        assert!(got == sent, "bytes as sent");
    });
}
