//! The `request_percentage` quota at run time (I159): how long a request's handler ran, and
//! the throttle time it earns written into its answer's `throttle_time_ms`.
//!
//! Contract:
//! - [`timed`] measures the time a future spends being polled (its handler running on the
//!   shard's thread), not the time it waits for a disk sync or a long-poll: Kafka charges
//!   a request thread's time, not a request's latency. The clock is the backend's (virtual
//!   in the simulator, where a handler takes no time).
//! - A request is timed only while some `request_percentage` quota is configured
//!   ([`Quotas::request_quota_on`](super::quotas::Quotas::request_quota_on)) and its API is
//!   [`charged`]: ApiVersions and the SASL APIs, which a client sends before it is known, and
//!   WriteTxnMarkers (a cluster action) are not, as Kafka exempts them.
//! - A throttled answer gets the larger of its own `throttle_time_ms` and the request quota's
//!   ([`set_throttle_time`], patched into the encoded bytes at the field's place for the API
//!   and version), and the connection is muted for the throttle time (KIP-219, I98).
//! - Never: patches bytes it cannot place (an answer whose layout is not the expected one is
//!   left as it is, the mute still applies).

use std::future::Future;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use minikafka_core::backend::Backend;

use super::handlers::Outcome;

/// Runs `fut` to completion; its output and the time it spent in `poll`.
pub async fn timed<B: Backend, F: Future>(backend: &B, fut: F) -> (F::Output, Duration) {
    let mut fut = std::pin::pin!(fut);
    let mut busy = Duration::ZERO;
    let out = futures::future::poll_fn(|cx| {
        let start = backend.now();
        let poll = fut.as_mut().poll(cx);
        busy += backend.now().saturating_duration_since(start);
        poll
    })
    .await;
    (out, busy)
}

/// Where an answer carries `throttle_time_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// At this offset from the start of the body.
    FromBodyStart(usize),
    /// Last field of the body (Produce).
    Last,
}

/// Where `throttle_time_ms` is in the answer to `api` at `version`, `None` when that answer
/// has none.
fn place(api: ApiKey, version: i16) -> Option<Place> {
    use ApiKey::*;
    let (since, place) = match api {
        Produce => (1, Place::Last),
        OffsetDelete => (0, Place::FromBodyStart(2)),
        Fetch | DeleteTopics | FindCoordinator | SyncGroup | Heartbeat | LeaveGroup
        | ListGroups | DescribeGroups => (1, Place::FromBodyStart(0)),
        ListOffsets | CreateTopics | JoinGroup | OffsetForLeaderEpoch => {
            (2, Place::FromBodyStart(0))
        }
        Metadata | OffsetCommit | OffsetFetch => (3, Place::FromBodyStart(0)),
        DeleteRecords
        | InitProducerId
        | DescribeConfigs
        | AlterConfigs
        | IncrementalAlterConfigs
        | CreatePartitions
        | DescribeCluster
        | DeleteGroups
        | ConsumerGroupHeartbeat
        | ConsumerGroupDescribe
        | DescribeLogDirs
        | DescribeAcls
        | CreateAcls
        | DeleteAcls
        | DescribeUserScramCredentials
        | AlterUserScramCredentials
        | DescribeProducers
        | DescribeTopicPartitions
        | AddPartitionsToTxn
        | AddOffsetsToTxn
        | EndTxn
        | DescribeTransactions
        | ListTransactions
        | TxnOffsetCommit
        | DescribeClientQuotas
        | AlterClientQuotas => (0, Place::FromBodyStart(0)),
        _ => return None,
    };
    (version >= since).then_some(place)
}

/// Whether requests of `api` are charged to a `request_percentage` quota.
pub fn charged(api: ApiKey) -> bool {
    !matches!(
        api,
        ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
    ) && place(api, i16::MAX).is_some()
}

/// Sets the `throttle_time_ms` of the size-prefixed answer `frame` (or its first part, for an
/// answer in parts) to at least `throttle_ms`; `false` when the answer has no such field or
/// is not laid out as expected (left unchanged).
pub fn set_throttle_time(api: ApiKey, version: i16, frame: &mut [u8], throttle_ms: i32) -> bool {
    let Some(place) = place(api, version) else {
        return false;
    };
    // Size prefix, correlation id, then (header v1) the header's tagged fields: none.
    let mut body = 8;
    if api.response_header_version(version) >= 1 {
        if frame.get(8) != Some(&0) {
            return false;
        }
        body += 1;
    }
    let at = match place {
        Place::FromBodyStart(offset) => body + offset,
        Place::Last => {
            // A flexible body ends with its tagged fields: only an empty set is placed.
            let flexible = api.request_header_version(version) >= 2;
            let end = if flexible {
                if frame.last() != Some(&0) {
                    return false;
                }
                frame.len() - 1
            } else {
                frame.len()
            };
            match end.checked_sub(4) {
                Some(at) if at >= body => at,
                _ => return false,
            }
        }
    };
    let Some(field) = frame.get_mut(at..at + 4) else {
        return false;
    };
    let old = i32::from_be_bytes([field[0], field[1], field[2], field[3]]);
    field.copy_from_slice(&old.max(throttle_ms).to_be_bytes());
    true
}

fn patched(api: ApiKey, version: i16, bytes: &Bytes, throttle_ms: i32) -> Bytes {
    let mut copy = BytesMut::from(&bytes[..]);
    if set_throttle_time(api, version, &mut copy, throttle_ms) {
        copy.freeze()
    } else {
        bytes.clone()
    }
}

/// `outcome` with the request quota's throttle time in its answer (see the module
/// documentation); unchanged for 0.
pub fn with_throttle(api: ApiKey, version: i16, outcome: Outcome, throttle_ms: u64) -> Outcome {
    let ms = i32::try_from(throttle_ms).unwrap_or(i32::MAX);
    if ms == 0 {
        return outcome;
    }
    match outcome {
        Outcome::Respond(bytes) => Outcome::Respond(patched(api, version, &bytes, ms)),
        Outcome::RespondInParts(mut parts) => {
            if let Some(first) = parts.first_mut() {
                *first = patched(api, version, first, ms);
            }
            Outcome::RespondInParts(parts)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::encode_response_for;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

    /// Encodes `response` at `version` with `throttle` 5, patches 700, decodes it back.
    fn round_trip<R>(api: ApiKey, version: i16, response: R, get: fn(&R) -> i32)
    where
        R: Encodable + Decodable + HeaderVersion,
    {
        let bytes = encode_response_for(version, 42, &response).expect("encode");
        let mut frame = BytesMut::from(&bytes[..]);
        assert!(
            set_throttle_time(api, version, &mut frame, 700),
            "{api:?} v{version}"
        );
        let mut body = Bytes::from(frame.to_vec()).slice(4..);
        let header = ResponseHeader::decode(&mut body, R::header_version(version)).expect("hdr");
        assert_eq!(header.correlation_id, 42);
        let decoded = R::decode(&mut body, version).expect("decode");
        assert_eq!(get(&decoded), 700, "{api:?} v{version}");
        // A larger throttle already there is kept.
        let mut frame = BytesMut::from(&bytes[..]);
        set_throttle_time(api, version, &mut frame, 700);
        set_throttle_time(api, version, &mut frame, 3);
        let mut body = Bytes::from(frame.to_vec()).slice(4..);
        ResponseHeader::decode(&mut body, R::header_version(version)).expect("hdr");
        assert_eq!(get(&R::decode(&mut body, version).expect("decode")), 700);
    }

    #[test]
    fn the_throttle_field_is_found_in_each_layout() {
        for v in [3, 8, 9, 11] {
            let mut r = ProduceResponse::default();
            r.throttle_time_ms = 5;
            r.responses.push(Default::default());
            round_trip(ApiKey::Produce, v, r, |r| r.throttle_time_ms);
        }
        for v in [4, 11, 12, 16] {
            let mut r = FetchResponse::default();
            r.throttle_time_ms = 5;
            round_trip(ApiKey::Fetch, v, r, |r| r.throttle_time_ms);
        }
        for v in [3, 9, 12] {
            let mut r = MetadataResponse::default();
            r.throttle_time_ms = 5;
            round_trip(ApiKey::Metadata, v, r, |r| r.throttle_time_ms);
        }
        let mut r = OffsetDeleteResponse::default();
        r.throttle_time_ms = 5;
        r.error_code = 3;
        round_trip(ApiKey::OffsetDelete, 0, r, |r| r.throttle_time_ms);
        for v in [0, 1] {
            let mut r = DescribeClientQuotasResponse::default();
            r.throttle_time_ms = 5;
            round_trip(ApiKey::DescribeClientQuotas, v, r, |r| r.throttle_time_ms);
        }
        for v in [1, 4] {
            let mut r = HeartbeatResponse::default();
            r.throttle_time_ms = 5;
            round_trip(ApiKey::Heartbeat, v, r, |r| r.throttle_time_ms);
        }
    }

    proptest::proptest! {
        /// Whatever the bytes, API and version: no panic, and only the four bytes of the
        /// field may change.
        #[test]
        fn any_frame_is_patched_in_place_or_left_alone(
            frame in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            api in 0i16..70,
            version in -1i16..20,
        ) {
            let Ok(api) = ApiKey::try_from(api) else { return Ok(()) };
            let mut patched = frame.clone();
            set_throttle_time(api, version, &mut patched, 1_000);
            let changed = frame.iter().zip(&patched).filter(|(a, b)| a != b).count();
            proptest::prop_assert!(changed <= 4);
            proptest::prop_assert_eq!(frame.len(), patched.len());
        }
    }

    #[test]
    fn answers_without_the_field_are_left_alone() {
        assert!(!charged(ApiKey::ApiVersions));
        assert!(!charged(ApiKey::SaslAuthenticate));
        assert!(!charged(ApiKey::WriteTxnMarkers));
        assert!(charged(ApiKey::Produce));
        let mut frame = [0u8; 12];
        assert!(!set_throttle_time(ApiKey::Metadata, 2, &mut frame, 9));
        assert!(!set_throttle_time(ApiKey::SaslHandshake, 1, &mut frame, 9));
        // Too short to hold the field: unchanged.
        let mut short = [0u8; 9];
        assert!(!set_throttle_time(ApiKey::Metadata, 9, &mut short, 9));
        assert_eq!(short, [0u8; 9]);
    }
}
