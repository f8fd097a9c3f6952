//! Property tests of `record::stamp_log_append_time` (a topic with
//! `message.timestamp.type=LogAppendTime`) against an independent reference, `kafka-protocol`'s
//! record batch encoder and decoder: a batch encoded by the reference with any codec and any
//! producer fields, once stamped, still validates (its CRC recomputed), decodes as a
//! LogAppendTime batch with the same records, producer id, epoch and sequences, carries the
//! append time as its max timestamp, differs from the original only in the attributes, the
//! max timestamp and the CRC, and is unchanged by a second stamp with the same time.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression as KpCompression, Record as KpRecord, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType,
};
use minikafka_core::record::{stamp_log_append_time, validate_batch};
use proptest::collection::vec;
use proptest::prelude::*;

const CODECS: [KpCompression; 5] = [
    KpCompression::None,
    KpCompression::Gzip,
    KpCompression::Snappy,
    KpCompression::Lz4,
    KpCompression::Zstd,
];

/// Bytes a stamp may change: the CRC (17..21), the attributes (21..23), the max timestamp
/// (35..43).
fn stampable(at: usize) -> bool {
    (17..23).contains(&at) || (35..43).contains(&at)
}

#[derive(Clone, Debug)]
struct Producer {
    id: i64,
    epoch: i16,
    base_sequence: i32,
}

fn producer() -> impl Strategy<Value = Producer> {
    prop_oneof![
        Just(Producer {
            id: -1,
            epoch: -1,
            base_sequence: -1
        }),
        (0i64..i64::MAX, 0i16..i16::MAX, 0i32..1_000_000).prop_map(|(id, epoch, base_sequence)| {
            Producer {
                id,
                epoch,
                base_sequence,
            }
        }),
    ]
}

type ModelRecord = (Option<Vec<u8>>, Option<Vec<u8>>, i64);

fn records() -> impl Strategy<Value = Vec<ModelRecord>> {
    vec(
        (
            proptest::option::of(vec(any::<u8>(), 0..16)),
            proptest::option::of(vec(any::<u8>(), 0..128)),
            0i64..(1 << 42),
        ),
        1..20,
    )
}

fn encode(p: &Producer, recs: &[ModelRecord], codec: KpCompression, base_offset: i64) -> Vec<u8> {
    let kp: Vec<KpRecord> = recs
        .iter()
        .enumerate()
        .map(|(i, (key, value, ts))| KpRecord {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: p.id,
            producer_epoch: p.epoch,
            timestamp_type: TimestampType::Creation,
            offset: base_offset + i as i64,
            // Offsets and sequences advance together, so the encoder writes ONE batch (its
            // base sequence -1 when there is no producer).
            sequence: p.base_sequence.wrapping_add(i as i32),
            timestamp: *ts,
            key: key.clone().map(Bytes::from),
            value: value.clone().map(Bytes::from),
            headers: IndexMap::<StrBytes, Option<Bytes>>::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        kp.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: codec,
        },
    )
    .expect("reference encoder");
    buf.to_vec()
}

fn decode(batch: &[u8]) -> Vec<KpRecord> {
    let mut bytes = Bytes::copy_from_slice(batch);
    RecordBatchDecoder::decode(&mut bytes)
        .expect("reference decoder")
        .records
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn a_stamped_batch_is_a_valid_log_append_time_batch_with_the_same_records(
        p in producer(),
        recs in records(),
        codec_index in 0usize..CODECS.len(),
        base_offset in 0i64..(1 << 40),
        append_time_ms in 0i64..(1 << 42),
    ) {
        let codec = CODECS[codec_index];
        let original = encode(&p, &recs, codec, base_offset);
        let mut stamped = original.clone();
        stamp_log_append_time(&mut stamped, append_time_ms);

        let header = validate_batch(&stamped).expect("a stamped batch validates");
        prop_assert!(header.is_log_append_time());
        prop_assert_eq!(header.max_timestamp, append_time_ms);
        prop_assert_eq!(
            (header.producer_id, header.producer_epoch, header.base_sequence),
            (p.id, p.epoch, p.base_sequence)
        );
        let before = validate_batch(&original).expect("the reference batch validates");
        prop_assert_eq!(header.compression(), before.compression());
        prop_assert_eq!(header.base_timestamp, before.base_timestamp);

        for (at, (a, b)) in original.iter().zip(&stamped).enumerate() {
            prop_assert!(a == b || stampable(at), "byte {} changed", at);
        }
        prop_assert_eq!(original.len(), stamped.len());

        let theirs = decode(&stamped);
        let plain = decode(&original);
        prop_assert_eq!(theirs.len(), plain.len());
        for (s, o) in theirs.iter().zip(&plain) {
            prop_assert_eq!(s.timestamp_type, TimestampType::LogAppend);
            prop_assert_eq!((s.producer_id, s.producer_epoch), (o.producer_id, o.producer_epoch));
            prop_assert_eq!((s.offset, s.sequence), (o.offset, o.sequence));
            prop_assert_eq!(&s.key, &o.key);
            prop_assert_eq!(&s.value, &o.value);
        }

        let mut twice = stamped.clone();
        stamp_log_append_time(&mut twice, append_time_ms);
        prop_assert_eq!(twice, stamped);
    }
}
