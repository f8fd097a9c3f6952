//! Targets for the broker's protocol front door: framing, the request header, the bounded
//! pre-check and `kafka-protocol`'s decode behind it (I10).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use minikafka_broker::protocol::frame::{FrameDecoder, RESERVE_CHUNK_BYTES, SIZE_PREFIX_BYTES};
use minikafka_broker::protocol::{
    decode_budget_bytes, decode_request, schema, DecodedRequest, RequestBody, RequestError,
    SupportedVersions,
};
use minikafka_core::record::{BatchIter, ValidateOptions};

use crate::alloc_meter;
use crate::input::{Input, Sizes};

/// Decodes `frame` with every covered API supported and asserts the contract: the result is
/// consistent with the frame, and decoding allocated within the frame's budget (I10).
pub fn decode_checked(frame: Bytes) -> Result<DecodedRequest, RequestError> {
    let supported = SupportedVersions::all_covered();
    let frame_bytes = frame.len();
    let (result, allocated_bytes) = alloc_meter::measure(|| decode_request(frame, &supported));
    let budget_bytes = decode_budget_bytes(frame_bytes);
    assert!(
        allocated_bytes <= budget_bytes,
        "decoding a {frame_bytes}-byte frame allocated {allocated_bytes} bytes, budget \
         {budget_bytes} (I10); result {result:?}"
    );
    match &result {
        Ok(decoded) => {
            let range = supported
                .get(decoded.api_key)
                .expect("a decoded request is of a supported API");
            assert!(range.contains(decoded.api_version));
            assert_eq!(decoded.body.api_key(), decoded.api_key);
            assert_eq!(decoded.header.request_api_key, decoded.api_key as i16);
            assert_eq!(decoded.header.request_api_version, decoded.api_version);
            assert!(decoded.ignored_trailing_bytes <= frame_bytes);
        }
        Err(err) => {
            // Every refusal but a too-short frame can be answered on its correlation id.
            let truncated = matches!(err, RequestError::HeaderTruncated { .. });
            assert_eq!(err.correlation_id().is_none(), truncated, "{err:?}");
            if truncated {
                assert!(frame_bytes < 8);
            }
            let _ = (err.error_code(), err.closes_connection(), err.to_string());
        }
    }
    result
}

/// A byte stream as a client would send it: `[max frame: u16][chunking seed: u8][stream]`.
///
/// Feeds the stream to a [`FrameDecoder`] in chunks of varying sizes; asserts that each frame is
/// exactly the next size-prefixed piece of the stream, that a frame still arriving never costs
/// memory by its declared size, and that the first refused prefix is refused for a reason the
/// prefix shows. Every frame then goes through [`decode_checked`].
pub fn frame_stream(data: &[u8]) {
    let mut input = Input::new(data);
    let max_frame_bytes = 1 + usize::from(input.u16());
    let mut sizes = Sizes::new(u32::from(input.u8()));
    let stream = input.rest();
    let decoder = FrameDecoder::new(max_frame_bytes);
    let mut buf = BytesMut::new();
    let mut fed = 0usize; // stream bytes handed to the decoder
    let mut framed = 0usize; // stream bytes split off as whole frames
    while fed < stream.len() {
        let chunk = sizes.next(256).min(stream.len() - fed);
        buf.extend_from_slice(&stream[fed..fed + chunk]);
        fed += chunk;
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => {
                    let start = framed + SIZE_PREFIX_BYTES;
                    assert!(frame.len() <= max_frame_bytes);
                    assert_eq!(&frame[..], &stream[start..start + frame.len()]);
                    framed = start + frame.len();
                    let _ = decode_checked(frame);
                }
                Ok(None) => {
                    assert_eq!(buf.len(), fed - framed, "bytes lost or duplicated");
                    // Room grows with bytes received, never with the declared size.
                    let bound = 2 * (buf.len() + RESERVE_CHUNK_BYTES) + 64;
                    assert!(buf.capacity() <= bound, "{} > {bound}", buf.capacity());
                    break;
                }
                Err(err) => {
                    let prefix: [u8; 4] = stream[framed..framed + 4]
                        .try_into()
                        .expect("a refusal needs a whole size prefix");
                    let size = i32::from_be_bytes(prefix);
                    assert!(size <= 0 || size as usize > max_frame_bytes, "{err}");
                    return; // the connection would be closed here
                }
            }
        }
    }
}

/// Puts a frame's API key and version within the covered set: a covered key and an in-range
/// version are kept; anything else is mapped onto one, so mutations keep reaching the body
/// decoders. Frames shorter than the fixed prefix are left alone.
fn snap_to_covered(frame: &mut [u8], force_key: Option<ApiKey>) {
    if frame.len() < 4 {
        return;
    }
    let raw_key = i16::from_be_bytes([frame[0], frame[1]]);
    let raw_version = i16::from_be_bytes([frame[2], frame[3]]);
    let covered = schema::COVERED;
    let schema = match force_key {
        Some(key) => schema::schema_for(key).expect("a forced key is covered"),
        None => ApiKey::try_from(raw_key)
            .ok()
            .and_then(schema::schema_for)
            .unwrap_or(covered[usize::from(raw_key as u16) % covered.len()]),
    };
    let version = if schema.covers(raw_version) {
        raw_version
    } else {
        let span = (schema.max_version - schema.min_version + 1) as u16;
        schema.min_version + ((raw_version as u16) % span) as i16
    };
    frame[0..2].copy_from_slice(&(schema.api_key as i16).to_be_bytes());
    frame[2..4].copy_from_slice(&version.to_be_bytes());
}

/// One request frame (size prefix removed) whose API key and version are snapped onto a
/// covered API ([`snap_to_covered`]); asserts [`decode_checked`]'s contract.
pub fn request_decode(data: &[u8]) {
    let mut frame = data.to_vec();
    snap_to_covered(&mut frame, None);
    let _ = decode_checked(Bytes::from(frame));
}

/// A Produce request frame (the key is forced to Produce, the version snapped into range):
/// decoded as [`request_decode`] does, then every partition's records are validated batch by
/// batch as the produce handler does, which must not panic, and each batch that validates
/// iterates (see [`crate::storage::assert_batch_iterates`]).
pub fn produce_request(data: &[u8]) {
    let mut frame = data.to_vec();
    snap_to_covered(&mut frame, Some(ApiKey::Produce));
    let Ok(decoded) = decode_checked(Bytes::from(frame)) else {
        return;
    };
    let RequestBody::Produce(produce) = decoded.body else {
        panic!("a Produce frame decoded as {:?}", decoded.api_key);
    };
    for topic in &produce.topic_data {
        for partition in &topic.partition_data {
            let Some(records) = &partition.records else {
                continue;
            };
            for batch in BatchIter::new(records).with_options(ValidateOptions::default()) {
                match batch {
                    Ok(view) => crate::storage::assert_batch_iterates(view.bytes),
                    Err(_) => break,
                }
            }
        }
    }
}
