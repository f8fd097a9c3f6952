//! The client is runtime-agnostic: the same library that `mk` runs on smol here runs on a
//! thread-per-core io_uring runtime (a shard of the broker's monoio backend: `!Send` futures,
//! the backend's TCP streams and its timer wheel), against the REAL broker binary (see
//! `common`). Producer (with its linger timer on the shard), admin and a long-poll consumer.
#![cfg(target_os = "linux")]

mod common;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::{Duration, Instant};

use common::Broker;
use minikafka_backend_monoio::{MonoioBackend, MonoioStream};
use minikafka_client::producer::BatchConfig;
use minikafka_client::runtime::Runtime;
use minikafka_client::{
    Admin, Connection, ConnectionConfig, Consumer, ConsumerConfig, OffsetReset, Producer,
    ProducerConfig, ProducerRecord, TopicPartition,
};
use minikafka_core::backend::Backend;

/// [`Runtime`] on the shard's timers.
#[derive(Clone)]
struct ShardRuntime(MonoioBackend);

impl Runtime for ShardRuntime {
    type Sleep = Pin<Box<dyn Future<Output = ()>>>;

    fn sleep(&self, duration: Duration) -> Self::Sleep {
        let backend = self.0.clone();
        Box::pin(async move { backend.sleep(duration).await })
    }
}

async fn stream(backend: &MonoioBackend, addr: &str) -> MonoioStream {
    let addr: SocketAddr = addr.parse().expect("the broker's address");
    backend
        .connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
}

#[test]
fn producer_admin_and_consumer_run_on_a_monoio_shard() {
    let broker = Broker::start();
    let addr = broker.addr.clone();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        MonoioBackend::run_shards(1, move |backend| {
            let addr = addr.clone();
            let done_tx = done_tx.clone();
            async move {
                let conn =
                    Connection::connect(stream(&backend, &addr).await, ConnectionConfig::default())
                        .await
                        .expect("ApiVersions on a monoio shard");
                Admin::new(conn)
                    .create_topic("on-monoio", 2, &[])
                    .await
                    .expect("create topic");

                // A linger longer than the test's sends, so batches are sealed by the shard's timer.
                let config = ProducerConfig {
                    batch: BatchConfig {
                        linger: Duration::from_millis(20),
                        ..BatchConfig::default()
                    },
                    ..ProducerConfig::default()
                };
                let (producer, driver) = Producer::connect(
                    stream(&backend, &addr).await,
                    config,
                    ShardRuntime(backend.clone()),
                )
                .await
                .expect("producer connect");
                // Spawned on the shard; the channel says when the driver has finished.
                let (driver_done, driver_finished) = futures::channel::oneshot::channel();
                backend.spawn_local(async move {
                    driver.run().await;
                    let _ = driver_done.send(());
                });
                let mut deliveries = Vec::new();
                for i in 0..200 {
                    let record = ProducerRecord::new("on-monoio", format!("value-{i}"))
                        .with_partition(i % 2);
                    deliveries.push(producer.send(record).await.expect("send"));
                }
                let mut next_offset = [0i64; 2];
                for (i, delivery) in deliveries.into_iter().enumerate() {
                    let delivery = delivery.await.expect("delivery");
                    assert_eq!(delivery.partition, (i % 2) as i32);
                    let offset = delivery.offset.expect("acks=1 reports the offset").0;
                    assert_eq!(offset, next_offset[i % 2], "dense offsets in send order");
                    next_offset[i % 2] += 1;
                }
                drop(producer);
                driver_finished
                    .await
                    .expect("the producer's driver finished");

                let consumer_config = ConsumerConfig {
                    auto_offset_reset: OffsetReset::Earliest,
                    max_wait: Duration::from_millis(200),
                    ..ConsumerConfig::default()
                };
                let mut consumer =
                    Consumer::connect(stream(&backend, &addr).await, consumer_config)
                        .await
                        .expect("consumer connect");
                consumer.assign((0..2).map(|p| TopicPartition::new("on-monoio", p)));
                let deadline = Instant::now() + Duration::from_secs(20);
                let mut per_partition: [Vec<(i64, Vec<u8>)>; 2] = [Vec::new(), Vec::new()];
                while per_partition.iter().map(Vec::len).sum::<usize>() < 200 {
                    assert!(Instant::now() < deadline, "records did not all arrive");
                    for r in consumer.poll().await.expect("poll") {
                        let value = r.value.expect("value").to_vec();
                        per_partition[r.partition as usize].push((r.offset.0, value));
                    }
                }
                for (p, records) in per_partition.iter().enumerate() {
                    let expected: Vec<(i64, Vec<u8>)> = (0..100)
                        .map(|k| (k as i64, format!("value-{}", 2 * k + p).into_bytes()))
                        .collect();
                    assert_eq!(records, &expected, "partition {p}");
                }
                done_tx.send(()).expect("report completion");
            }
        })
        .expect("start a monoio shard");
    });
    // Bounded: a lost timer or wakeup on the shard fails the test instead of hanging it.
    match done_rx.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => handle.join().expect("the monoio shard ran the test"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            handle.join().expect("the monoio shard ran the test")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the client on a monoio shard did not finish within 60 s")
        }
    }
}
