//! Signed OAUTHBEARER tokens checked against a JWKS (KIP-768's broker side, as Kafka's
//! `OAuthBearerValidatorCallbackHandler` with its `BrokerJwtValidator`): the JSON Web Key Set
//! parsed with bounds, a compact JWS's signature verified with ring, then the claims checked.
//!
//! Contract:
//! - [`Jwks::parse`]: at most [`MAX_JWKS_BYTES`] of JSON (refused before parsing) holding
//!   `{"keys": [...]}` with at most [`MAX_JWKS_KEYS`] entries (I166). Keys ring can verify with
//!   are kept: `kty: RSA` (`n`, `e`; 2048–8192 bits, checked at verification) and `kty: EC`
//!   with `crv` `P-256` or `P-384` (`x`, `y` of the curve's size). Keys marked `use` other
//!   than `sig`, of other types or curves, are skipped as Kafka's jose4j resolver skips them;
//!   a malformed member of a kept type is an error (the set is refused, not half-read).
//! - [`validate_signed`]: a token of at most [`super::MAX_SASL_MESSAGE_BYTES`], three
//!   base64url parts; the header's `alg` one of RS256/384/512, PS256/384/512, ES256/384
//!   (`none` and HMAC algorithms are refused: I167); the key chosen by the header's `kid` when
//!   it has one (else every key of the algorithm's type is tried); the signature verified over
//!   `header.claims` before any claim is read (I167). Then (I168), as Kafka's jose4j consumer
//!   (`setRequireExpirationTime`, `setRequireIssuedAt`): `exp` and `iat` are required and
//!   `now - skew < exp`; `nbf`, when present, `nbf <= now + skew` (a future `iat` is not
//!   refused, as jose4j does not by default); the issuer equals `expected_issuer` when that is
//!   set; `aud` (a string or a list) names one of `expected_audience` when that is set; the
//!   subject claim is a non-empty string; the scope claim, when present, a space-separated
//!   string or a list
//!   of strings. Time comes in as `now_ms`; this module reads no clock, file or socket.
//! - [`token_kid`]: the header's `kid` of a token, unverified, for the broker to tell a key it
//!   does not hold (I187).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::Value;

use super::oauthbearer::{scope_claim, OAuthBearerError, ScopeShape, ValidatedToken};
use super::MAX_SASL_MESSAGE_BYTES;

/// The largest JWKS document read (I166): a set of a few dozen 8192-bit keys fits.
pub const MAX_JWKS_BYTES: usize = 1024 * 1024;
/// The most keys a JWKS may list (I166).
pub const MAX_JWKS_KEYS: usize = 256;

/// A public key from a JWKS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    /// An RSA key: modulus and exponent, big-endian without leading zeros.
    Rsa {
        /// The modulus.
        n: Vec<u8>,
        /// The public exponent.
        e: Vec<u8>,
    },
    /// An EC key as an uncompressed point (`0x04 || x || y`) on `curve`.
    Ec {
        /// The curve.
        curve: Curve,
        /// The uncompressed point.
        point: Vec<u8>,
    },
}

/// The EC curves kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Curve {
    /// P-256 (ES256).
    P256,
    /// P-384 (ES384).
    P384,
}

impl Curve {
    fn coordinate_len(self) -> usize {
        match self {
            Curve::P256 => 32,
            Curve::P384 => 48,
        }
    }
}

/// One key of the set with its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    /// `kid`, if given.
    pub kid: Option<String>,
    /// `alg`, if given (a key with one is used only for that algorithm).
    pub alg: Option<String>,
    /// The key.
    pub key: PublicKey,
}

/// A parsed JSON Web Key Set: the keys this validator can verify with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Jwks {
    /// The kept keys, in the document's order.
    pub keys: Vec<Jwk>,
}

fn jwks_error(what: &str) -> OAuthBearerError {
    OAuthBearerError::BadJwks(what.to_string())
}

fn b64_member(
    key: &serde_json::Map<String, Value>,
    name: &str,
) -> Result<Vec<u8>, OAuthBearerError> {
    let text = key
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| jwks_error(&format!("key member '{name}' missing")))?;
    URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .map_err(|_| jwks_error(&format!("key member '{name}' is not base64url")))
}

fn strip_leading_zeros(bytes: Vec<u8>) -> Vec<u8> {
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    bytes[first..].to_vec()
}

impl Jwks {
    /// Whether a key of the set is named `kid`.
    pub fn has_kid(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.kid.as_deref() == Some(kid))
    }

    /// Parses a JWKS document (see the module contract).
    pub fn parse(document: &[u8]) -> Result<Jwks, OAuthBearerError> {
        if document.len() > MAX_JWKS_BYTES {
            return Err(jwks_error(&format!(
                "{} bytes is more than the {MAX_JWKS_BYTES} read",
                document.len()
            )));
        }
        let value: Value = serde_json::from_slice(document).map_err(|_| jwks_error("not JSON"))?;
        let entries = value
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| jwks_error("no 'keys' list"))?;
        if entries.len() > MAX_JWKS_KEYS {
            return Err(jwks_error(&format!(
                "{} keys is more than the {MAX_JWKS_KEYS} read",
                entries.len()
            )));
        }
        let mut keys = Vec::new();
        for entry in entries {
            let entry = entry
                .as_object()
                .ok_or_else(|| jwks_error("a key is not an object"))?;
            let text = |name: &str| entry.get(name).and_then(Value::as_str).map(str::to_string);
            if text("use").is_some_and(|u| u != "sig") {
                continue;
            }
            let key = match text("kty").as_deref() {
                Some("RSA") => {
                    let n = strip_leading_zeros(b64_member(entry, "n")?);
                    let e = strip_leading_zeros(b64_member(entry, "e")?);
                    if n.is_empty() || e.is_empty() {
                        return Err(jwks_error("RSA key with an empty 'n' or 'e'"));
                    }
                    PublicKey::Rsa { n, e }
                }
                Some("EC") => {
                    let curve = match text("crv").as_deref() {
                        Some("P-256") => Curve::P256,
                        Some("P-384") => Curve::P384,
                        _ => continue,
                    };
                    let x = b64_member(entry, "x")?;
                    let y = b64_member(entry, "y")?;
                    let len = curve.coordinate_len();
                    if x.len() != len || y.len() != len {
                        return Err(jwks_error("EC key coordinates of the wrong size"));
                    }
                    let mut point = Vec::with_capacity(1 + 2 * len);
                    point.push(0x04);
                    point.extend_from_slice(&x);
                    point.extend_from_slice(&y);
                    PublicKey::Ec { curve, point }
                }
                _ => continue,
            };
            keys.push(Jwk {
                kid: text("kid"),
                alg: text("alg"),
                key,
            });
        }
        Ok(Jwks { keys })
    }
}

/// What a signed token must carry (Kafka's `sasl.oauthbearer.*` settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedValidatorConfig {
    /// `sasl.oauthbearer.expected.audience`: when non-empty, `aud` must name one of these.
    pub expected_audience: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer`: when set, `iss` must equal it.
    pub expected_issuer: Option<String>,
    /// `sasl.oauthbearer.sub.claim.name` (default `sub`).
    pub sub_claim: String,
    /// `sasl.oauthbearer.scope.claim.name` (default `scope`).
    pub scope_claim: String,
    /// `sasl.oauthbearer.clock.skew.seconds` (default 30).
    pub clock_skew_seconds: u64,
}

impl Default for SignedValidatorConfig {
    fn default() -> Self {
        SignedValidatorConfig {
            expected_audience: Vec::new(),
            expected_issuer: None,
            sub_claim: "sub".to_string(),
            scope_claim: "scope".to_string(),
            clock_skew_seconds: 30,
        }
    }
}

/// A JWS algorithm this validator verifies.
#[derive(Clone, Copy)]
enum Algorithm {
    Rsa(&'static signature::RsaParameters),
    Ec(Curve, &'static signature::EcdsaVerificationAlgorithm),
}

fn algorithm(name: &str) -> Option<Algorithm> {
    Some(match name {
        "RS256" => Algorithm::Rsa(&signature::RSA_PKCS1_2048_8192_SHA256),
        "RS384" => Algorithm::Rsa(&signature::RSA_PKCS1_2048_8192_SHA384),
        "RS512" => Algorithm::Rsa(&signature::RSA_PKCS1_2048_8192_SHA512),
        "PS256" => Algorithm::Rsa(&signature::RSA_PSS_2048_8192_SHA256),
        "PS384" => Algorithm::Rsa(&signature::RSA_PSS_2048_8192_SHA384),
        "PS512" => Algorithm::Rsa(&signature::RSA_PSS_2048_8192_SHA512),
        "ES256" => Algorithm::Ec(Curve::P256, &signature::ECDSA_P256_SHA256_FIXED),
        "ES384" => Algorithm::Ec(Curve::P384, &signature::ECDSA_P384_SHA384_FIXED),
        _ => return None,
    })
}

fn verifies(alg: Algorithm, key: &PublicKey, message: &[u8], sig: &[u8]) -> bool {
    match (alg, key) {
        (Algorithm::Rsa(params), PublicKey::Rsa { n, e }) => RsaPublicKeyComponents { n, e }
            .verify(params, message, sig)
            .is_ok(),
        (Algorithm::Ec(curve, verifier), PublicKey::Ec { curve: c, point }) if curve == *c => {
            UnparsedPublicKey::new(verifier, point)
                .verify(message, sig)
                .is_ok()
        }
        _ => false,
    }
}

fn bad(what: &'static str) -> OAuthBearerError {
    OAuthBearerError::BadSignedToken(what)
}

fn decode_object(part: &str) -> Result<serde_json::Map<String, Value>, OAuthBearerError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| bad("a part is not base64url"))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(bad("a part is not a JSON object")),
    }
}

/// A NumericDate claim (seconds, possibly fractional) in ms; not a finite number: refused.
fn time_ms(
    claims: &serde_json::Map<String, Value>,
    name: &'static str,
) -> Result<Option<i64>, OAuthBearerError> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .map(|s| (s * 1000.0).round())
            .filter(|ms| ms.is_finite() && *ms >= i64::MIN as f64 && *ms <= i64::MAX as f64)
            .map(|ms| Some(ms as i64))
            .ok_or(bad("a time claim is out of range")),
        Some(_) => Err(bad("a time claim is not a number")),
    }
}

/// The longest `kid` that may cause the keys to be fetched again (I187): as Kafka's
/// `RefreshingHttpsJwks.MISSING_KEY_ID_MAX_KEY_LENGTH`, a longer one is taken for a malformed
/// token.
pub const MAX_REFRESHING_KID_LEN: usize = 1000;

/// The `kid` a compact JWS's header names, if it is well formed enough to name one (nothing
/// is verified: used only to decide whether the keys should be fetched again, I187).
pub fn token_kid(token: &str) -> Option<String> {
    if token.len() > MAX_SASL_MESSAGE_BYTES {
        return None;
    }
    let header = decode_object(token.split('.').next()?).ok()?;
    header
        .get("kid")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Verifies a signed token against `jwks` and checks its claims at `now_ms` (see the module
/// contract).
pub fn validate_signed(
    token: &str,
    jwks: &Jwks,
    config: &SignedValidatorConfig,
    now_ms: i64,
) -> Result<ValidatedToken, OAuthBearerError> {
    if token.len() > MAX_SASL_MESSAGE_BYTES {
        return Err(OAuthBearerError::TooLong(token.len()));
    }
    let mut parts = token.split('.');
    let (Some(header_part), Some(claims_part), Some(sig_part), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("not three parts"));
    };
    let header = decode_object(header_part)?;
    let alg_name = header
        .get("alg")
        .and_then(Value::as_str)
        .ok_or(bad("no 'alg' header"))?;
    // I167: `none` and anything not asymmetric is refused before any key is looked at.
    let alg = algorithm(alg_name).ok_or(bad("'alg' is not an accepted signing algorithm"))?;
    let signature = URL_SAFE_NO_PAD
        .decode(sig_part)
        .map_err(|_| bad("the signature is not base64url"))?;
    let kid = header.get("kid").and_then(Value::as_str);
    let signed = &token.as_bytes()[..header_part.len() + 1 + claims_part.len()];
    let mut candidates = jwks.keys.iter().filter(|k| {
        kid.is_none_or(|kid| k.kid.as_deref() == Some(kid))
            && k.alg.as_deref().is_none_or(|a| a == alg_name)
    });
    let mut any = false;
    let verified = candidates.any(|k| {
        any = true;
        verifies(alg, &k.key, signed, &signature)
    });
    if !any {
        return Err(bad(
            "no key in the JWKS matches the token's 'kid' and 'alg'",
        ));
    }
    if !verified {
        return Err(bad("the signature does not verify"));
    }
    let claims = decode_object(claims_part)?;
    let skew_ms = i64::try_from(config.clock_skew_seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
    let exp = time_ms(&claims, "exp")?.ok_or(bad("no expiration time (exp)"))?;
    if now_ms.saturating_sub(skew_ms) >= exp {
        return Err(OAuthBearerError::Time("expired"));
    }
    if let Some(nbf) = time_ms(&claims, "nbf")? {
        if nbf > now_ms.saturating_add(skew_ms) {
            return Err(OAuthBearerError::Time("not yet valid (nbf)"));
        }
    }
    let iat = time_ms(&claims, "iat")?.ok_or(bad("no issued-at time (iat)"))?;
    if let Some(expected) = &config.expected_issuer {
        if claims.get("iss").and_then(Value::as_str) != Some(expected.as_str()) {
            return Err(bad("the issuer (iss) is not the expected issuer"));
        }
    }
    if !config.expected_audience.is_empty() {
        let names = |a: &str| config.expected_audience.iter().any(|e| e == a);
        let ok = match claims.get("aud") {
            Some(Value::String(a)) => names(a),
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).any(names),
            _ => false,
        };
        if !ok {
            return Err(bad("the audience (aud) is not an expected audience"));
        }
    }
    let principal = match claims.get(&config.sub_claim) {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        _ => return Err(bad("no subject claim")),
    };
    let scope = scope_claim(claims.get(&config.scope_claim)).map_err(|shape| {
        bad(match shape {
            ScopeShape::NotStrings => "the scope claim is not a list of strings",
            ScopeShape::Neither => "the scope claim is not a string or a list",
        })
    })?;
    Ok(ValidatedToken {
        principal,
        lifetime_ms: exp,
        start_time_ms: Some(iat),
        scope,
    })
}

#[cfg(test)]
mod tests;
