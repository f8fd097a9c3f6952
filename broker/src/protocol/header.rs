//! The Kafka request header, parsed and judged before any body byte is decoded.
//!
//! Contract:
//! - Inputs: one frame (size prefix already removed by [`super::frame`]) and the broker's
//!   [`SupportedVersions`].
//! - Outputs: a [`ParsedHeader`] (the decoded `kafka-protocol` [`RequestHeader`], the header
//!   version and where the body starts), or a [`RequestError`]: unknown API key, unsupported
//!   version, the ApiVersions special case (which must be answered, not dropped), or a
//!   malformed header.
//! - Layout: api_key (i16), api_version (i16), correlation_id (i32); from header v1 on the
//!   client_id, a nullable string with an i16 length (never compact, even in flexible
//!   versions); from header v2 on, a tagged-field section. Which header version applies comes
//!   from `kafka-protocol`'s `ApiKey::request_header_version`.
//! - Never: decodes the header's variable part before its lengths are checked against the frame
//!   (I10), panics on any input, or performs I/O.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;

use super::precheck::{skip_tagged_fields, PrecheckError, PrecheckErrorKind};
use super::{RequestError, SupportedVersions};

/// Bytes of the fixed header prefix: api_key, api_version, correlation_id.
pub const FIXED_HEADER_BYTES: usize = 8;

/// A request header that passed every check.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedHeader {
    /// The API.
    pub api_key: ApiKey,
    /// The API version (within the supported range).
    pub api_version: i16,
    /// The request header version (0, 1 or 2).
    pub header_version: i16,
    /// The decoded header.
    pub header: RequestHeader,
    /// Offset within the frame at which the body starts.
    pub body_offset: usize,
}

/// Parses and judges the header at the front of `frame`.
pub fn parse_header(
    frame: &Bytes,
    supported: &SupportedVersions,
) -> Result<ParsedHeader, RequestError> {
    let Some(fixed) = frame.first_chunk::<FIXED_HEADER_BYTES>() else {
        return Err(RequestError::HeaderTruncated {
            frame_bytes: frame.len(),
        });
    };
    let raw_key = i16::from_be_bytes([fixed[0], fixed[1]]);
    let api_version = i16::from_be_bytes([fixed[2], fixed[3]]);
    let correlation_id = i32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);

    let Some(range) = ApiKey::try_from(raw_key)
        .ok()
        .and_then(|key| supported.get(key))
    else {
        return Err(RequestError::UnknownApiKey {
            api_key: raw_key,
            correlation_id,
        });
    };
    let api_key = range.api_key;
    if !range.contains(api_version) {
        if api_key == ApiKey::ApiVersions {
            // Answered with UNSUPPORTED_VERSION in a v0 response listing our ranges, so the
            // client can pick a version it shares with us.
            return Err(RequestError::ApiVersionsUnsupportedVersion {
                api_version,
                correlation_id,
            });
        }
        return Err(RequestError::UnsupportedVersion {
            api_key,
            api_version,
            correlation_id,
        });
    }

    let header_version = api_key.request_header_version(api_version);
    let malformed = |source: PrecheckError| RequestError::MalformedHeader {
        api_key,
        correlation_id,
        source,
    };
    let mut end = FIXED_HEADER_BYTES;
    if header_version >= 1 {
        end = client_id_end(frame, end).map_err(malformed)?;
    }
    if header_version >= 2 {
        end = skip_tagged_fields(frame, end).map_err(malformed)?;
    }

    let header = if header_version >= 1 {
        let mut bytes = frame.slice(..end);
        let header = RequestHeader::decode(&mut bytes, header_version).map_err(|e| {
            RequestError::HeaderDecode {
                api_key,
                correlation_id,
                message: e.to_string(),
            }
        })?;
        if !bytes.is_empty() {
            return Err(RequestError::HeaderDecode {
                api_key,
                correlation_id,
                message: format!("{} header bytes left undecoded", bytes.len()),
            });
        }
        header
    } else {
        // Header v0 carries no client id; `kafka-protocol` only decodes v1 and v2.
        let mut header = RequestHeader::default();
        header.request_api_key = raw_key;
        header.request_api_version = api_version;
        header.correlation_id = correlation_id;
        header.client_id = None;
        header
    };
    Ok(ParsedHeader {
        api_key,
        api_version,
        header_version,
        header,
        body_offset: end,
    })
}

/// Checks the client_id (i16 length, -1 for null) at `offset` and returns the offset after it.
fn client_id_end(frame: &[u8], offset: usize) -> Result<usize, PrecheckError> {
    const FIELD: &str = "client_id";
    let remaining = frame.len().saturating_sub(offset);
    let Some(len) = frame.get(offset..).and_then(|b| b.first_chunk::<2>()) else {
        return Err(PrecheckError {
            offset,
            kind: PrecheckErrorKind::Truncated {
                field: FIELD,
                needed_bytes: 2,
                remaining_bytes: remaining,
            },
        });
    };
    let len = i16::from_be_bytes(*len);
    let start = offset + 2;
    match len {
        -1 => Ok(start),
        n if n < -1 => Err(PrecheckError {
            offset,
            kind: PrecheckErrorKind::NegativeLength {
                field: FIELD,
                length: i64::from(n),
            },
        }),
        n => {
            // n >= 0 here.
            let n = n as usize;
            if n > remaining - 2 {
                return Err(PrecheckError {
                    offset: start,
                    kind: PrecheckErrorKind::Truncated {
                        field: FIELD,
                        needed_bytes: n as u64,
                        remaining_bytes: remaining - 2,
                    },
                });
            }
            Ok(start + n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(key: i16, version: i16, correlation_id: i32, client_id: Option<&str>) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&key.to_be_bytes());
        v.extend_from_slice(&version.to_be_bytes());
        v.extend_from_slice(&correlation_id.to_be_bytes());
        match client_id {
            Some(s) => {
                v.extend_from_slice(&(s.len() as i16).to_be_bytes());
                v.extend_from_slice(s.as_bytes());
            }
            None => v.extend_from_slice(&(-1i16).to_be_bytes()),
        }
        v
    }

    #[test]
    fn parses_v1_and_v2_headers_with_non_compact_client_id() {
        let supported = SupportedVersions::all_covered();
        // Metadata v1 -> header v1.
        let frame = Bytes::from(header(3, 1, 7, Some("cli")));
        let h = parse_header(&frame, &supported).expect("v1");
        assert_eq!(
            (h.api_key, h.api_version, h.header_version),
            (ApiKey::Metadata, 1, 1)
        );
        assert_eq!(h.header.correlation_id, 7);
        assert_eq!(h.header.client_id.as_deref(), Some("cli"));
        assert_eq!(h.body_offset, frame.len());
        // Metadata v12 -> header v2: same i16 client id, then tagged fields (one unknown).
        let mut v = header(3, 12, 8, None);
        v.extend_from_slice(&[1, 9, 1, 0xaa]);
        v.extend_from_slice(&[0xde, 0xad]);
        let frame = Bytes::from(v);
        let h = parse_header(&frame, &supported).expect("v2");
        assert_eq!(h.header_version, 2);
        assert_eq!(h.header.client_id, None);
        assert_eq!(h.header.unknown_tagged_fields.len(), 1);
        assert_eq!(&frame[h.body_offset..], &[0xde, 0xad]);
    }

    #[test]
    fn unknown_key_and_unsupported_versions_are_rejected_before_the_body() {
        let supported = SupportedVersions::all_covered();
        let frame = Bytes::from(header(999, 0, 1, None));
        assert_eq!(
            parse_header(&frame, &supported),
            Err(RequestError::UnknownApiKey {
                api_key: 999,
                correlation_id: 1
            })
        );
        // ElectLeaders is a real key we do not cover.
        let frame = Bytes::from(header(43, 0, 2, None));
        assert!(matches!(
            parse_header(&frame, &supported),
            Err(RequestError::UnknownApiKey { .. })
        ));
        let frame = Bytes::from(header(3, 14, 3, None));
        assert_eq!(
            parse_header(&frame, &supported),
            Err(RequestError::UnsupportedVersion {
                api_key: ApiKey::Metadata,
                api_version: 14,
                correlation_id: 3
            })
        );
        // ApiVersions with a future version: only the fixed prefix is needed.
        let frame = Bytes::from(header(18, 77, 4, None)[..8].to_vec());
        assert_eq!(
            parse_header(&frame, &supported),
            Err(RequestError::ApiVersionsUnsupportedVersion {
                api_version: 77,
                correlation_id: 4
            })
        );
    }

    #[test]
    fn truncated_and_hostile_client_ids_are_clean_errors_i10() {
        let supported = SupportedVersions::all_covered();
        let full = header(3, 1, 5, Some("client"));
        for len in 0..full.len() {
            let frame = Bytes::from(full[..len].to_vec());
            assert!(parse_header(&frame, &supported).is_err(), "len {len}");
        }
        let mut hostile = header(3, 1, 5, None);
        let n = hostile.len();
        hostile[n - 2..].copy_from_slice(&i16::MAX.to_be_bytes());
        assert!(matches!(
            parse_header(&Bytes::from(hostile), &supported),
            Err(RequestError::MalformedHeader { .. })
        ));
    }
}
