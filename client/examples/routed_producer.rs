//! What routing costs on one broker: the same records produced through `Producer::new` (one
//! connection, no Metadata per leader), `Producer::new_routed` (I162) and `new_routed` with
//! `enable_idempotence` (I163, the at-least-once mirror's producer), in alternating rounds
//! against one running broker. Prints each round's records/s and each variant's median ratio
//! to `Producer::new`.
//!
//! `cargo run --release -p minikafka-client --example routed_producer -- HOST:PORT [RECORDS] [ROUNDS]`

use std::time::Instant;

use minikafka_client::admin::Admin;
use minikafka_client::connection::{Connection, ConnectionConfig};
use minikafka_client::producer::{Connector, Producer, ProducerConfig, ProducerRecord};
use minikafka_client::SmolRuntime;
use smol::net::TcpStream;

const TOPIC: &str = "bench-routed-producer";
const PARTITIONS: i32 = 4;

async fn connect(addr: &str) -> minikafka_client::error::Result<Connection<TcpStream>> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true).ok();
    Connection::connect(stream, ConnectionConfig::default()).await
}

#[derive(Clone, Copy, Debug)]
enum Variant {
    Direct,
    Routed,
    RoutedIdempotent,
}

/// Produces `records` 100-byte records round-robin over the partitions; records/s.
async fn round(addr: &str, variant: Variant, records: usize) -> f64 {
    let config = ProducerConfig {
        enable_idempotence: matches!(variant, Variant::RoutedIdempotent),
        ..ProducerConfig::default()
    };
    let conn = connect(addr).await.expect("connect");
    let (producer, driver) = match variant {
        Variant::Direct => Producer::new(conn, config, SmolRuntime),
        Variant::Routed | Variant::RoutedIdempotent => {
            let connector: Connector<TcpStream> =
                Box::new(|addr: String| Box::pin(async move { connect(&addr).await }));
            Producer::new_routed(conn, connector, config, SmolRuntime)
        }
    }
    .expect("producer");
    let driver = smol::spawn(driver.run());
    let value = vec![b'x'; 100];
    let started = Instant::now();
    let mut pending = Vec::with_capacity(records);
    for i in 0..records {
        let record =
            ProducerRecord::new(TOPIC, value.clone()).with_partition(i as i32 % PARTITIONS);
        pending.push(producer.send(record).await.expect("send"));
    }
    producer.flush().await.expect("flush");
    for p in pending {
        p.await.expect("delivered");
    }
    let rate = records as f64 / started.elapsed().as_secs_f64();
    drop(producer);
    driver.await;
    rate
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:9092".into());
    let records: usize = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(200_000);
    let rounds: usize = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(5);
    smol::block_on(async {
        let mut admin = Admin::new(connect(&addr).await.expect("connect"));
        // Already there from an earlier run is fine.
        let _ = admin.create_topic(TOPIC, PARTITIONS, &[]).await;
        // One warm-up round of each, not counted.
        let variants = [Variant::Direct, Variant::Routed, Variant::RoutedIdempotent];
        for v in variants {
            round(&addr, v, records / 10).await;
        }
        let mut rates: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
        let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
        for r in 0..rounds {
            // Alternate the order each round so no variant always runs first.
            let order: Vec<usize> = if r % 2 == 0 {
                vec![0, 1, 2]
            } else {
                vec![2, 1, 0]
            };
            let mut this = [0.0; 3];
            for i in order {
                this[i] = round(&addr, variants[i], records).await;
                rates[i].push(this[i]);
            }
            for i in 0..variants.len() {
                ratios[i].push(this[i] / this[0]);
            }
            println!(
                "round {r}: direct {:.0}/s, routed {:.0}/s, routed+idempotent {:.0}/s",
                this[0], this[1], this[2]
            );
        }
        for (i, v) in variants.iter().enumerate() {
            let (lo, hi) = ratios[i]
                .iter()
                .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
            println!(
                "{v:?}: median {:.0} records/s, ratio to Direct median {:.3} (min {:.3}, max {:.3})",
                median(&mut rates[i]),
                median(&mut ratios[i]),
                lo,
                hi
            );
        }
    });
}
