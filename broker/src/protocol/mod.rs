//! The broker's protocol front door: bytes in, a judged and decoded request (or a reason) out.
//!
//! Contract:
//! - Inputs: frames split off the socket stream by [`frame::FrameDecoder`] (size-capped), and
//!   the broker's [`SupportedVersions`].
//! - Outputs: [`decode_request`] returns a [`DecodedRequest`] (the header plus the
//!   `kafka-protocol` request in a [`RequestBody`]) or a [`RequestError`] saying why not; on the
//!   way out, [`encode_response`] / [`encode_response_for`] write a size-prefixed response and
//!   [`encode_api_versions_unsupported`] answers an ApiVersions request of a version we lack.
//! - Order of checks, each before any work of the next: frame size (frame.rs), header fixed
//!   part, API key, API version (ApiVersions is answered, everything else refused), header
//!   lengths, then the bounded pre-check of the body against our own schema (precheck.rs,
//!   schema.rs), then a budget on what the decoder will allocate, and only then
//!   `kafka-protocol`'s decoder, whose array decoders trust wire counts (I10).
//! - Bytes after a complete body are ignored, as Apache Kafka ignores them (librdkafka 2.x
//!   sends 3 in every all-topics Metadata v9+ request): the decoder and its budget get exactly
//!   the body the pre-check walked, and [`DecodedRequest::ignored_trailing_bytes`] says how
//!   many bytes were left out.
//! - Never: hands unchecked bytes to `kafka-protocol`, panics on any input, or does I/O.

pub mod frame;
pub mod header;
pub mod precheck;
pub mod schema;
pub mod spliced;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::{ApiVersion, ApiVersionsResponse};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AlterConfigsRequest, ApiKey,
    ApiVersionsRequest, ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest,
    CreateAclsRequest, CreatePartitionsRequest, CreateTopicsRequest, DeleteAclsRequest,
    DeleteGroupsRequest, DeleteRecordsRequest, DeleteTopicsRequest, DescribeAclsRequest,
    DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest, DescribeLogDirsRequest,
    DescribeProducersRequest, DescribeTopicPartitionsRequest, DescribeTransactionsRequest,
    EndTxnRequest, FetchRequest, FindCoordinatorRequest, HeartbeatRequest,
    IncrementalAlterConfigsRequest, InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest,
    ListGroupsRequest, ListOffsetsRequest, ListTransactionsRequest, MetadataRequest,
    OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest,
    ProduceRequest, RequestHeader, ResponseHeader, SyncGroupRequest, TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
};
use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
use minikafka_core::error_code::ErrorCode;

pub use frame::{FrameDecoder, FrameError};
pub use header::{parse_header, ParsedHeader};
pub use precheck::{precheck, PrecheckError, PrecheckErrorKind, PrecheckReport};

/// The decoder may allocate at most this many bytes per frame byte (plus
/// [`DECODE_SLACK_BYTES`]); the pre-check's estimate is compared against it (I10).
pub const DECODE_BYTES_PER_FRAME_BYTE: u64 = 32;
/// Allocation the decoder may always make, however small the frame.
pub const DECODE_SLACK_BYTES: u64 = 256 * 1024;

/// A `StrBytes` (the protocol's string type) holding `s`.
pub fn str_bytes(s: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.to_string())
}

/// The decode allocation budget for a frame of `frame_bytes` bytes.
pub fn decode_budget_bytes(frame_bytes: usize) -> u64 {
    (frame_bytes as u64)
        .saturating_mul(DECODE_BYTES_PER_FRAME_BYTE)
        .saturating_add(DECODE_SLACK_BYTES)
}

/// The versions the broker accepts for one API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiRange {
    /// The API.
    pub api_key: ApiKey,
    /// Lowest accepted version.
    pub min_version: i16,
    /// Highest accepted version.
    pub max_version: i16,
}

impl ApiRange {
    /// Whether `version` is accepted.
    pub fn contains(&self, version: i16) -> bool {
        self.min_version <= version && version <= self.max_version
    }
}

/// A [`SupportedVersions`] table asked for something the pre-check cannot guard.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SupportedVersionsError {
    /// No schema exists for this API.
    #[error("{api_key:?} has no pre-check schema")]
    NotCovered {
        /// The API.
        api_key: ApiKey,
    },
    /// The range is empty or reaches outside the schema's versions.
    #[error("{api_key:?} {min_version}..={max_version} is empty or outside the schema's range")]
    OutsideSchema {
        /// The API.
        api_key: ApiKey,
        /// Asked-for lowest version.
        min_version: i16,
        /// Asked-for highest version.
        max_version: i16,
    },
    /// The API is listed twice.
    #[error("{api_key:?} is listed twice")]
    Duplicate {
        /// The API.
        api_key: ApiKey,
    },
}

/// The APIs and versions the broker accepts (and advertises in ApiVersions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupportedVersions {
    ranges: Vec<ApiRange>,
}

impl SupportedVersions {
    /// Every covered API at every version its schema covers.
    pub fn all_covered() -> Self {
        let ranges = schema::COVERED
            .iter()
            .map(|s| ApiRange {
                api_key: s.api_key,
                min_version: s.min_version,
                max_version: s.max_version,
            })
            .collect();
        SupportedVersions { ranges }
    }

    /// A table of `ranges`; each must lie within its API's schema.
    pub fn new(ranges: Vec<ApiRange>) -> Result<Self, SupportedVersionsError> {
        for (i, r) in ranges.iter().enumerate() {
            let schema = schema::schema_for(r.api_key)
                .ok_or(SupportedVersionsError::NotCovered { api_key: r.api_key })?;
            if r.min_version > r.max_version
                || !schema.covers(r.min_version)
                || !schema.covers(r.max_version)
            {
                return Err(SupportedVersionsError::OutsideSchema {
                    api_key: r.api_key,
                    min_version: r.min_version,
                    max_version: r.max_version,
                });
            }
            if ranges[..i].iter().any(|o| o.api_key == r.api_key) {
                return Err(SupportedVersionsError::Duplicate { api_key: r.api_key });
            }
        }
        Ok(SupportedVersions { ranges })
    }

    /// The accepted range for `api_key`, if any.
    pub fn get(&self, api_key: ApiKey) -> Option<ApiRange> {
        self.ranges.iter().copied().find(|r| r.api_key == api_key)
    }

    /// All accepted ranges.
    pub fn ranges(&self) -> &[ApiRange] {
        &self.ranges
    }
}

/// Why a frame did not become a [`DecodedRequest`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The frame is shorter than the fixed 8-byte header prefix.
    #[error("frame of {frame_bytes} bytes is too short for a request header")]
    HeaderTruncated {
        /// Frame length.
        frame_bytes: usize,
    },
    /// The API key is not one the broker supports.
    #[error("unknown or unsupported api key {api_key}")]
    UnknownApiKey {
        /// Key from the wire.
        api_key: i16,
        /// Correlation id from the wire.
        correlation_id: i32,
    },
    /// The API version is outside the supported range (not ApiVersions).
    #[error("{api_key:?} version {api_version} is not supported")]
    UnsupportedVersion {
        /// The API.
        api_key: ApiKey,
        /// Version from the wire.
        api_version: i16,
        /// Correlation id from the wire.
        correlation_id: i32,
    },
    /// An ApiVersions request of a version we lack: answer it with
    /// [`encode_api_versions_unsupported`] (error 35, v0 format) and keep the connection.
    #[error("ApiVersions version {api_version} is not supported; answer with our ranges")]
    ApiVersionsUnsupportedVersion {
        /// Version from the wire.
        api_version: i16,
        /// Correlation id from the wire.
        correlation_id: i32,
    },
    /// The header's client_id or tagged fields do not fit the frame.
    #[error("{api_key:?} request header is malformed: {source}")]
    MalformedHeader {
        /// The API.
        api_key: ApiKey,
        /// Correlation id from the wire.
        correlation_id: i32,
        /// The failed check (offset within the frame).
        source: PrecheckError,
    },
    /// The header passed the checks but `kafka-protocol` refused it (e.g. bad UTF-8).
    #[error("{api_key:?} request header failed to decode: {message}")]
    HeaderDecode {
        /// The API.
        api_key: ApiKey,
        /// Correlation id from the wire.
        correlation_id: i32,
        /// The decoder's message.
        message: String,
    },
    /// The body failed the bounded pre-check.
    #[error("{api_key:?} v{api_version} body failed the pre-check at frame byte {frame_offset}: {source}")]
    Precheck {
        /// The API.
        api_key: ApiKey,
        /// The version.
        api_version: i16,
        /// Correlation id from the wire.
        correlation_id: i32,
        /// Offset within the frame at which the check failed.
        frame_offset: usize,
        /// The failed check (offset within the body).
        source: PrecheckError,
    },
    /// The decoder would allocate more than the frame's budget.
    #[error(
        "{api_key:?} v{api_version} would decode into {decoded_bytes} bytes, budget {budget_bytes}"
    )]
    DecodeBudget {
        /// The API.
        api_key: ApiKey,
        /// The version.
        api_version: i16,
        /// Correlation id from the wire.
        correlation_id: i32,
        /// The pre-check's estimate.
        decoded_bytes: u64,
        /// The budget for this frame.
        budget_bytes: u64,
    },
    /// The body passed the pre-check but `kafka-protocol` refused it.
    #[error("{api_key:?} v{api_version} body failed to decode: {message}")]
    Decode {
        /// The API.
        api_key: ApiKey,
        /// The version.
        api_version: i16,
        /// Correlation id from the wire.
        correlation_id: i32,
        /// The decoder's message.
        message: String,
    },
}

impl RequestError {
    /// The request's correlation id, if the frame was long enough to carry one.
    pub fn correlation_id(&self) -> Option<i32> {
        match self {
            RequestError::HeaderTruncated { .. } => None,
            RequestError::UnknownApiKey { correlation_id, .. }
            | RequestError::UnsupportedVersion { correlation_id, .. }
            | RequestError::ApiVersionsUnsupportedVersion { correlation_id, .. }
            | RequestError::MalformedHeader { correlation_id, .. }
            | RequestError::HeaderDecode { correlation_id, .. }
            | RequestError::Precheck { correlation_id, .. }
            | RequestError::DecodeBudget { correlation_id, .. }
            | RequestError::Decode { correlation_id, .. } => Some(*correlation_id),
        }
    }

    /// The Kafka error code that describes this error.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            RequestError::UnsupportedVersion { .. }
            | RequestError::ApiVersionsUnsupportedVersion { .. } => ErrorCode::UNSUPPORTED_VERSION,
            _ => ErrorCode::INVALID_REQUEST,
        }
    }

    /// Whether the connection must be closed (everything but the ApiVersions case, as Kafka
    /// does: the stream cannot be trusted after a request it could not parse).
    pub fn closes_connection(&self) -> bool {
        !matches!(self, RequestError::ApiVersionsUnsupportedVersion { .. })
    }
}

macro_rules! request_bodies {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        /// A decoded request body, one variant per covered API.
        #[derive(Debug, Clone, PartialEq)]
        pub enum RequestBody {
            $(
                #[doc = concat!("A decoded `", stringify!($ty), "`.")]
                $variant($ty),
            )*
        }

        impl RequestBody {
            /// The body's API.
            pub fn api_key(&self) -> ApiKey {
                match self {
                    $(RequestBody::$variant(_) => ApiKey::$variant,)*
                }
            }

            /// Decodes a pre-checked body with `kafka-protocol`.
            fn decode(api_key: ApiKey, version: i16, body: &mut Bytes) -> Result<Self, String> {
                match api_key {
                    $(ApiKey::$variant => <$ty as Decodable>::decode(body, version)
                        .map(RequestBody::$variant)
                        .map_err(|e| e.to_string()),)*
                    other => Err(format!("{other:?} has no decoder here")),
                }
            }

            /// Encodes the body (without a header) at `version`; used by tests and tools.
            pub fn encode(&self, version: i16) -> Result<Bytes, String> {
                let mut buf = BytesMut::new();
                match self {
                    $(RequestBody::$variant(m) => m.encode(&mut buf, version).map_err(|e| e.to_string())?,)*
                }
                Ok(buf.freeze())
            }
        }
    };
}

request_bodies! {
    Produce(ProduceRequest),
    Fetch(FetchRequest),
    ListOffsets(ListOffsetsRequest),
    Metadata(MetadataRequest),
    OffsetCommit(OffsetCommitRequest),
    OffsetFetch(OffsetFetchRequest),
    FindCoordinator(FindCoordinatorRequest),
    JoinGroup(JoinGroupRequest),
    Heartbeat(HeartbeatRequest),
    LeaveGroup(LeaveGroupRequest),
    SyncGroup(SyncGroupRequest),
    DescribeGroups(DescribeGroupsRequest),
    ListGroups(ListGroupsRequest),
    ApiVersions(ApiVersionsRequest),
    CreateTopics(CreateTopicsRequest),
    DeleteTopics(DeleteTopicsRequest),
    DeleteRecords(DeleteRecordsRequest),
    InitProducerId(InitProducerIdRequest),
    DescribeConfigs(DescribeConfigsRequest),
    AlterConfigs(AlterConfigsRequest),
    DeleteGroups(DeleteGroupsRequest),
    CreatePartitions(CreatePartitionsRequest),
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest),
    OffsetDelete(OffsetDeleteRequest),
    DescribeCluster(DescribeClusterRequest),
    ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest),
    ConsumerGroupDescribe(ConsumerGroupDescribeRequest),
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    DescribeLogDirs(DescribeLogDirsRequest),
    DescribeAcls(DescribeAclsRequest),
    CreateAcls(CreateAclsRequest),
    DeleteAcls(DeleteAclsRequest),
    DescribeProducers(DescribeProducersRequest),
    DescribeTopicPartitions(DescribeTopicPartitionsRequest),
    AddPartitionsToTxn(AddPartitionsToTxnRequest),
    AddOffsetsToTxn(AddOffsetsToTxnRequest),
    EndTxn(EndTxnRequest),
    DescribeTransactions(DescribeTransactionsRequest),
    ListTransactions(ListTransactionsRequest),
    TxnOffsetCommit(TxnOffsetCommitRequest),
    WriteTxnMarkers(WriteTxnMarkersRequest),
    SaslHandshake(SaslHandshakeRequest),
    SaslAuthenticate(SaslAuthenticateRequest),
    DescribeUserScramCredentials(DescribeUserScramCredentialsRequest),
    AlterUserScramCredentials(AlterUserScramCredentialsRequest),
    DescribeClientQuotas(DescribeClientQuotasRequest),
    AlterClientQuotas(AlterClientQuotasRequest),
}

/// A request that passed every check and was decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedRequest {
    /// The decoded request header (api key, version, correlation id, client id).
    pub header: RequestHeader,
    /// The API.
    pub api_key: ApiKey,
    /// The API version.
    pub api_version: i16,
    /// The request header version the frame used.
    pub header_version: i16,
    /// The decoded body.
    pub body: RequestBody,
    /// Bytes after the body that were ignored (neither walked nor decoded).
    pub ignored_trailing_bytes: usize,
}

/// Judges and decodes one frame (size prefix already removed).
pub fn decode_request(
    frame: Bytes,
    supported: &SupportedVersions,
) -> Result<DecodedRequest, RequestError> {
    let parsed = parse_header(&frame, supported)?;
    let ParsedHeader {
        api_key,
        api_version,
        header_version,
        header,
        body_offset,
    } = parsed;
    let correlation_id = header.correlation_id;
    let Some(schema) = schema::schema_for(api_key) else {
        // SupportedVersions only admits covered APIs; keep the refusal anyway.
        return Err(RequestError::UnknownApiKey {
            api_key: api_key as i16,
            correlation_id,
        });
    };
    let report = precheck(schema, api_version, &frame[body_offset..]).map_err(|source| {
        RequestError::Precheck {
            api_key,
            api_version,
            correlation_id,
            frame_offset: body_offset + source.offset,
            source,
        }
    })?;
    // Only the walked body is budgeted and decoded; trailing bytes never reach the decoder and
    // never raise the budget (I10). body_bytes <= frame.len() - body_offset, so this is in range.
    let body_end = body_offset + report.body_bytes;
    let mut body = frame.slice(body_offset..body_end);
    let budget_bytes = decode_budget_bytes(body_end);
    if report.decoded_bytes > budget_bytes {
        return Err(RequestError::DecodeBudget {
            api_key,
            api_version,
            correlation_id,
            decoded_bytes: report.decoded_bytes,
            budget_bytes,
        });
    }
    let decoded = RequestBody::decode(api_key, api_version, &mut body);
    let body_value = decoded.map_err(|message| RequestError::Decode {
        api_key,
        api_version,
        correlation_id,
        message,
    })?;
    if !body.is_empty() {
        return Err(RequestError::Decode {
            api_key,
            api_version,
            correlation_id,
            message: format!("{} body bytes left undecoded", body.len()),
        });
    }
    Ok(DecodedRequest {
        header,
        api_key,
        api_version,
        header_version,
        body: body_value,
        ignored_trailing_bytes: report.trailing_bytes,
    })
}

/// A response could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponseEncodeError {
    /// `kafka-protocol` refused (a field set that the version lacks, say).
    #[error("response failed to encode: {message}")]
    Encode {
        /// The encoder's message.
        message: String,
    },
    /// The response is larger than a frame can say.
    #[error("response of {size_bytes} bytes does not fit a frame")]
    TooLarge {
        /// Header plus body bytes.
        size_bytes: usize,
    },
}

fn encode_error(e: impl std::fmt::Display) -> ResponseEncodeError {
    ResponseEncodeError::Encode {
        message: e.to_string(),
    }
}

/// Writes `[size][response header (header_version)][response (api_version)]`.
pub fn encode_response<R: Encodable>(
    header_version: i16,
    api_version: i16,
    correlation_id: i32,
    response: &R,
) -> Result<Bytes, ResponseEncodeError> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_bytes = header.compute_size(header_version).map_err(encode_error)?;
    let body_bytes = response.compute_size(api_version).map_err(encode_error)?;
    let size_bytes = header_bytes.saturating_add(body_bytes);
    let Ok(size_prefix) = i32::try_from(size_bytes) else {
        return Err(ResponseEncodeError::TooLarge { size_bytes });
    };
    let mut buf = BytesMut::with_capacity(frame::SIZE_PREFIX_BYTES + size_bytes);
    buf.put_i32(size_prefix);
    header
        .encode(&mut buf, header_version)
        .map_err(encode_error)?;
    response
        .encode(&mut buf, api_version)
        .map_err(encode_error)?;
    debug_assert_eq!(buf.len(), frame::SIZE_PREFIX_BYTES + size_bytes);
    Ok(buf.freeze())
}

/// [`encode_response`] with the header version the response type prescribes for
/// `api_version` (always v0 for ApiVersions).
pub fn encode_response_for<R: Encodable + HeaderVersion>(
    api_version: i16,
    correlation_id: i32,
    response: &R,
) -> Result<Bytes, ResponseEncodeError> {
    encode_response(
        R::header_version(api_version),
        api_version,
        correlation_id,
        response,
    )
}

/// An ApiVersions response body listing `supported`, with `error_code`.
pub fn api_versions_response(
    supported: &SupportedVersions,
    error_code: ErrorCode,
) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.error_code = error_code.code();
    response.api_keys = supported
        .ranges()
        .iter()
        .map(|r| {
            let mut v = ApiVersion::default();
            v.api_key = r.api_key as i16;
            v.min_version = r.min_version;
            v.max_version = r.max_version;
            v
        })
        .collect();
    response
}

/// The answer to an ApiVersions request of a version we lack: UNSUPPORTED_VERSION (35) in a
/// v0 response (header v0) listing our ranges, as Kafka brokers answer it.
pub fn encode_api_versions_unsupported(
    correlation_id: i32,
    supported: &SupportedVersions,
) -> Result<Bytes, ResponseEncodeError> {
    encode_response(
        0,
        0,
        correlation_id,
        &api_versions_response(supported, ErrorCode::UNSUPPORTED_VERSION),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{MetadataResponse, ResponseHeader};
    use kafka_protocol::protocol::StrBytes;

    fn frame(api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Bytes {
        let mut header = RequestHeader::default();
        header.request_api_key = api_key;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(StrBytes::from_static_str("t"));
        let hv = ApiKey::try_from(api_key)
            .expect("key")
            .request_header_version(version);
        let mut buf = BytesMut::new();
        header.encode(&mut buf, hv).expect("header");
        buf.extend_from_slice(body);
        buf.freeze()
    }

    #[test]
    fn metadata_v0_huge_count_never_reaches_the_decoder_i10() {
        let supported = SupportedVersions::all_covered();
        let f = frame(3, 0, 9, &[0x7f, 0xff, 0xff, 0xff]);
        let err = decode_request(f, &supported).expect_err("attack");
        match err {
            RequestError::Precheck {
                api_key,
                correlation_id,
                frame_offset,
                source,
                ..
            } => {
                assert_eq!((api_key, correlation_id), (ApiKey::Metadata, 9));
                assert_eq!(frame_offset, 8 + 2 + 1);
                assert!(matches!(
                    source.kind,
                    PrecheckErrorKind::CountTooLarge { .. }
                ));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn valid_metadata_decodes_with_header() {
        let supported = SupportedVersions::all_covered();
        let mut req = MetadataRequest::default();
        req.topics = None;
        let mut body = BytesMut::new();
        req.encode(&mut body, 1).expect("encode");
        let decoded = decode_request(frame(3, 1, 42, &body), &supported).expect("decode");
        assert_eq!(decoded.header.correlation_id, 42);
        assert_eq!(decoded.header_version, 1);
        assert_eq!(decoded.body, RequestBody::Metadata(req));
        assert_eq!(decoded.body.api_key(), ApiKey::Metadata);
        assert_eq!(decoded.ignored_trailing_bytes, 0);
    }

    #[test]
    fn trailing_bytes_are_ignored_never_decoded_i10() {
        // Metadata v1: null topics, then bytes that would decode as a huge array if the decoder
        // ever saw them.
        let supported = SupportedVersions::all_covered();
        let body = [0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xaa];
        let decoded = decode_request(frame(3, 1, 7, &body), &supported).expect("decode");
        let mut want = MetadataRequest::default();
        want.topics = None;
        assert_eq!(decoded.body, RequestBody::Metadata(want));
        assert_eq!(decoded.ignored_trailing_bytes, 5);
    }

    #[test]
    fn decode_budget_rejects_amplifying_bodies_i10() {
        // Metadata v9 (flexible): N topics of 2 bytes each (empty name, no tags) would decode
        // into N 72-byte structs: more than DECODE_BYTES_PER_FRAME_BYTE per frame byte.
        let supported = SupportedVersions::all_covered();
        let n: u32 = 200_000;
        let mut body = Vec::new();
        let mut count = n + 1;
        while count >= 0x80 {
            body.push((count as u8) | 0x80);
            count >>= 7;
        }
        body.push(count as u8);
        for _ in 0..n {
            body.extend_from_slice(&[1, 0]);
        }
        body.extend_from_slice(&[1, 0, 0, 0]); // three bools (v9), tagged fields
        let report = precheck(&schema::METADATA, 9, &body).expect("well formed");
        assert!(report.decoded_bytes > decode_budget_bytes(body.len() + 16));
        let res = decode_request(frame(3, 9, 1, &body), &supported);
        assert!(
            matches!(res, Err(RequestError::DecodeBudget { .. })),
            "{:?}",
            res.as_ref().err()
        );
        // The same shape at a tenth of the size fits the slack and decodes.
        let small = 1000usize;
        let mut body = vec![0xe9, 0x07]; // 1001 as a varint
        for _ in 0..small {
            body.extend_from_slice(&[1, 0]);
        }
        body.extend_from_slice(&[1, 0, 0, 0]);
        let res = decode_request(frame(3, 9, 1, &body), &supported);
        assert!(res.is_ok(), "{:?}", res.as_ref().err());
    }

    #[test]
    fn api_versions_unsupported_is_answered_in_v0_with_error_35() {
        let supported = SupportedVersions::all_covered();
        let mut raw = frame(18, 0, 5, &[]).to_vec();
        raw[2..4].copy_from_slice(&99i16.to_be_bytes());
        let err = decode_request(Bytes::from(raw), &supported).expect_err("future version");
        assert_eq!(
            err,
            RequestError::ApiVersionsUnsupportedVersion {
                api_version: 99,
                correlation_id: 5
            }
        );
        assert!(!err.closes_connection());
        assert_eq!(err.error_code(), ErrorCode::UNSUPPORTED_VERSION);

        let out = encode_api_versions_unsupported(5, &supported).expect("encode");
        let size = i32::from_be_bytes([out[0], out[1], out[2], out[3]]) as usize;
        assert_eq!(size, out.len() - 4);
        let mut rest = out.slice(4..);
        let header = ResponseHeader::decode(&mut rest, 0).expect("header v0");
        assert_eq!(header.correlation_id, 5);
        let resp = ApiVersionsResponse::decode(&mut rest, 0).expect("v0 body");
        assert!(rest.is_empty());
        assert_eq!(resp.error_code, 35);
        assert_eq!(resp.api_keys.len(), supported.ranges().len());
        let meta = resp
            .api_keys
            .iter()
            .find(|k| k.api_key == 3)
            .expect("metadata listed");
        assert_eq!((meta.min_version, meta.max_version), (0, 13));
    }

    #[test]
    fn encode_response_writes_size_header_and_body() {
        let resp = MetadataResponse::default();
        for version in [0i16, 9, 12] {
            let out = encode_response_for(version, 77, &resp).expect("encode");
            let size = i32::from_be_bytes([out[0], out[1], out[2], out[3]]) as usize;
            assert_eq!(size, out.len() - 4);
            let hv = MetadataResponse::header_version(version);
            assert_eq!(hv, if version >= 9 { 1 } else { 0 });
            let mut rest = out.slice(4..);
            assert_eq!(
                ResponseHeader::decode(&mut rest, hv)
                    .expect("h")
                    .correlation_id,
                77
            );
            assert_eq!(
                MetadataResponse::decode(&mut rest, version).expect("b"),
                resp
            );
            assert!(rest.is_empty());
        }
        // ApiVersions responses always use header v0, even for flexible versions.
        let out = encode_response_for(
            3,
            1,
            &api_versions_response(&SupportedVersions::all_covered(), ErrorCode::NONE),
        )
        .expect("encode");
        let mut rest = out.slice(4..);
        assert_eq!(
            ResponseHeader::decode(&mut rest, 0)
                .expect("h")
                .correlation_id,
            1
        );
        assert!(ApiVersionsResponse::decode(&mut rest, 3).is_ok());
        assert!(rest.is_empty());
    }

    #[test]
    fn supported_versions_refuse_uncovered_ranges() {
        let ok = SupportedVersions::new(vec![ApiRange {
            api_key: ApiKey::Metadata,
            min_version: 1,
            max_version: 12,
        }]);
        assert!(ok.is_ok());
        assert_eq!(
            SupportedVersions::new(vec![ApiRange {
                api_key: ApiKey::Metadata,
                min_version: 0,
                max_version: 14
            }]),
            Err(SupportedVersionsError::OutsideSchema {
                api_key: ApiKey::Metadata,
                min_version: 0,
                max_version: 14
            })
        );
        assert_eq!(
            SupportedVersions::new(vec![ApiRange {
                api_key: ApiKey::ElectLeaders,
                min_version: 0,
                max_version: 1
            }]),
            Err(SupportedVersionsError::NotCovered {
                api_key: ApiKey::ElectLeaders
            })
        );
        let narrow = ok.expect("ok");
        let err = decode_request(frame(3, 0, 1, &[0, 0, 0, 0]), &narrow).expect_err("v0 excluded");
        assert!(matches!(
            err,
            RequestError::UnsupportedVersion { api_version: 0, .. }
        ));
        assert!(err.closes_connection());
    }
}
