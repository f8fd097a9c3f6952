//! OAUTHBEARER (RFC 7628) as Kafka serves it: the client's initial response, and Kafka's
//! unsecured JWT validator (`OAuthBearerUnsecuredValidatorCallbackHandler`), for tokens with
//! `alg: none` — what Kafka ships for development, with no signature to check.
//!
//! Contract:
//! - [`parse_client_initial_response`]: `n,[a=authzid],` `\x01` `key=value\x01`… `\x01`, of at
//!   most [`MAX_SASL_MESSAGE_BYTES`] (I40). `auth=Bearer <token>` is required (scheme in any
//!   case; the token `[-_.a-zA-Z0-9]+`); the other pairs are SASL extensions, keys
//!   `[A-Za-z]+` (never `auth`), values printable ASCII, space, tab, CR, LF — as Kafka's
//!   `OAuthBearerClientInitialResponse` and `validateExtensions`.
//! - [`validate_unsecured`]: the token is `header.claims.` (three base64url parts, the last
//!   empty); the header's `alg` is `none`; the principal claim (`sub` by default) is a
//!   non-empty string; `exp` (seconds, possibly fractional) is required and must be after
//!   `now_ms` minus the allowed clock skew; `iat`, if present, must not be after `now_ms`
//!   plus the skew and must be before `exp`; every required scope must be in the `scope`
//!   claim (a space-separated string or a list of strings). Time comes in as `now_ms`
//!   (milliseconds since the Unix epoch): this module reads no clock.
//! - An authzid, if sent, must equal the token's principal ([`authenticate_unsecured`]).

use std::collections::BTreeMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::Value;

use super::MAX_SASL_MESSAGE_BYTES;

/// The separator of the initial response's key/value pairs.
pub const SEPARATOR: char = '\u{1}';
/// The key of the bearer token.
pub const AUTH_KEY: &str = "auth";

/// The client's initial response.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientInitialResponse {
    /// The authorization id from the GS2 header (empty when absent).
    pub authzid: String,
    /// The bearer token.
    pub token: String,
    /// SASL extensions (every pair but `auth`).
    pub extensions: BTreeMap<String, String>,
}

impl std::fmt::Debug for ClientInitialResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientInitialResponse")
            .field("authzid", &self.authzid)
            .field("token", &"<redacted>")
            .field("extensions", &self.extensions)
            .finish()
    }
}

/// Why an OAUTHBEARER exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthBearerError {
    /// The message is longer than [`MAX_SASL_MESSAGE_BYTES`].
    #[error("OAUTHBEARER message of {0} bytes is too long")]
    TooLong(usize),
    /// The initial response does not follow the grammar (what was wrong).
    #[error("Invalid OAUTHBEARER client first message: {0}")]
    Malformed(&'static str),
    /// An extension key or value Kafka refuses.
    #[error("Invalid OAUTHBEARER extension: {0}")]
    BadExtension(String),
    /// The token is not an unsecured JWS (what was wrong).
    #[error("Invalid unsecured JWS: {0}")]
    BadToken(&'static str),
    /// A time claim says the token is not valid at `now_ms` (which check).
    #[error("Token not valid now: {0}")]
    Time(&'static str),
    /// A required scope is missing from the token.
    #[error("The provided scope did not include the required scope: {0}")]
    MissingScope(String),
    /// The JWKS could not be read (what was wrong); the listener keeps no keys from it.
    #[error("Invalid JWKS: {0}")]
    BadJwks(String),
    /// A signed token was refused (what was wrong): its form, algorithm, key, signature or
    /// a claim other than time and scope.
    #[error("Invalid signed JWT: {0}")]
    BadSignedToken(&'static str),
    /// The authzid is not the token's principal.
    #[error("Authentication failed: Client requested an authorization id that is different from the token's principal name")]
    AuthzidMismatch,
}

fn is_extension_key(key: &str) -> bool {
    !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic())
}

fn is_extension_value(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) || matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

fn is_token(token: &str) -> bool {
    !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Parses the client's initial response.
pub fn parse_client_initial_response(
    message: &[u8],
) -> Result<ClientInitialResponse, OAuthBearerError> {
    if message.len() > MAX_SASL_MESSAGE_BYTES {
        return Err(OAuthBearerError::TooLong(message.len()));
    }
    let text =
        std::str::from_utf8(message).map_err(|_| OAuthBearerError::Malformed("not UTF-8"))?;
    let rest = text
        .strip_prefix("n,")
        .ok_or(OAuthBearerError::Malformed("GS2 header"))?;
    let (authzid, rest) = rest
        .split_once(',')
        .ok_or(OAuthBearerError::Malformed("GS2 header"))?;
    let authzid = match authzid {
        "" => String::new(),
        a => {
            let name = a
                .strip_prefix("a=")
                .filter(|n| !n.is_empty() && n.bytes().all(|b| (0x01..=0x7f).contains(&b)))
                .ok_or(OAuthBearerError::Malformed("authzid"))?;
            super::scram::from_saslname(name).map_err(|_| OAuthBearerError::Malformed("authzid"))?
        }
    };
    // \x01 kvpair\x01 … \x01: the pairs sit between the first separator and a final empty one.
    let pairs = rest
        .strip_prefix(SEPARATOR)
        .and_then(|r| r.strip_suffix(SEPARATOR))
        .ok_or(OAuthBearerError::Malformed("separators"))?;
    let mut token = None;
    let mut extensions = BTreeMap::new();
    if !pairs.is_empty() {
        let pairs = pairs
            .strip_suffix(SEPARATOR)
            .ok_or(OAuthBearerError::Malformed("key/value pairs"))?;
        for pair in pairs.split(SEPARATOR) {
            let (key, value) = pair
                .split_once('=')
                .ok_or(OAuthBearerError::Malformed("key/value pair without '='"))?;
            if key == AUTH_KEY {
                token = Some(value);
                continue;
            }
            if !is_extension_key(key) || !is_extension_value(value) {
                return Err(OAuthBearerError::BadExtension(key.to_string()));
            }
            extensions.insert(key.to_string(), value.to_string());
        }
    }
    let auth = token.ok_or(OAuthBearerError::Malformed("'auth' not specified"))?;
    let (scheme, token) = auth
        .split_once(' ')
        .ok_or(OAuthBearerError::Malformed("invalid 'auth' format"))?;
    let token = token.trim_start_matches(' ');
    if !scheme
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        || !is_token(token)
    {
        return Err(OAuthBearerError::Malformed("invalid 'auth' format"));
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(OAuthBearerError::Malformed("'Bearer' not specified"));
    }
    Ok(ClientInitialResponse {
        authzid,
        token: token.to_string(),
        extensions,
    })
}

/// Encodes an initial response (the client side; the inverse of the parser).
pub fn encode_client_initial_response(
    authzid: &str,
    token: &str,
    extensions: &BTreeMap<String, String>,
) -> Vec<u8> {
    let mut out = String::from("n,");
    if !authzid.is_empty() {
        out.push_str("a=");
        out.push_str(&super::scram::to_saslname(authzid));
    }
    out.push(',');
    out.push(SEPARATOR);
    out.push_str(&format!("{AUTH_KEY}=Bearer {token}"));
    out.push(SEPARATOR);
    for (key, value) in extensions {
        out.push_str(&format!("{key}={value}"));
        out.push(SEPARATOR);
    }
    out.push(SEPARATOR);
    out.into_bytes()
}

/// The unsecured validator's options (Kafka's `unsecuredValidator*` JAAS options).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsecuredValidatorConfig {
    /// `unsecuredValidatorPrincipalClaimName` (default `sub`).
    pub principal_claim: String,
    /// `unsecuredValidatorScopeClaimName` (default `scope`).
    pub scope_claim: String,
    /// `unsecuredValidatorRequiredScope` (comma-separated in the JAAS option).
    pub required_scope: Vec<String>,
    /// `unsecuredValidatorAllowableClockSkewMs` (default 0).
    pub allowable_clock_skew_ms: u64,
}

impl Default for UnsecuredValidatorConfig {
    fn default() -> Self {
        UnsecuredValidatorConfig {
            principal_claim: "sub".to_string(),
            scope_claim: "scope".to_string(),
            required_scope: Vec::new(),
            allowable_clock_skew_ms: 0,
        }
    }
}

impl UnsecuredValidatorConfig {
    /// Reads the options from a JAAS entry's options, defaults for those absent.
    pub fn from_options(options: &BTreeMap<String, String>) -> Result<Self, OAuthBearerError> {
        let mut config = UnsecuredValidatorConfig::default();
        if let Some(v) = options.get("unsecuredValidatorPrincipalClaimName") {
            config.principal_claim = v.trim().to_string();
        }
        if let Some(v) = options.get("unsecuredValidatorScopeClaimName") {
            config.scope_claim = v.trim().to_string();
        }
        if let Some(v) = options.get("unsecuredValidatorRequiredScope") {
            config.required_scope = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
        }
        if let Some(v) = options.get("unsecuredValidatorAllowableClockSkewMs") {
            config.allowable_clock_skew_ms = v.trim().parse().map_err(|_| {
                OAuthBearerError::BadToken("unsecuredValidatorAllowableClockSkewMs")
            })?;
        }
        Ok(config)
    }
}

/// A validated token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedToken {
    /// The principal name (the principal claim).
    pub principal: String,
    /// When the token expires, in ms since the epoch.
    pub lifetime_ms: i64,
    /// When it was issued, if it says.
    pub start_time_ms: Option<i64>,
    /// Its scopes.
    pub scope: Vec<String>,
}

fn decode_json_object(part: &str) -> Result<serde_json::Map<String, Value>, OAuthBearerError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| OAuthBearerError::BadToken("not base64url"))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(OAuthBearerError::BadToken("not a JSON object")),
    }
}

/// A time claim (seconds since the epoch, possibly fractional) in milliseconds, as Kafka's
/// `Math.round(seconds * 1000)`; a claim that is not a finite number is refused.
fn time_claim_ms(
    claims: &serde_json::Map<String, Value>,
    name: &'static str,
) -> Result<Option<i64>, OAuthBearerError> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => {
            let ms = n
                .as_f64()
                .map(|s| (s * 1000.0).round())
                .filter(|ms| ms.is_finite() && *ms >= i64::MIN as f64 && *ms <= i64::MAX as f64);
            ms.map(|ms| Some(ms as i64))
                .ok_or(OAuthBearerError::BadToken(name))
        }
        Some(_) => Err(OAuthBearerError::BadToken(name)),
    }
}

/// Validates an unsecured token at `now_ms` (see the module contract).
pub fn validate_unsecured(
    token: &str,
    config: &UnsecuredValidatorConfig,
    now_ms: i64,
) -> Result<ValidatedToken, OAuthBearerError> {
    if token.len() > MAX_SASL_MESSAGE_BYTES {
        return Err(OAuthBearerError::TooLong(token.len()));
    }
    let parts: Vec<&str> = token.splitn(4, '.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err(OAuthBearerError::BadToken("not three parts"));
    };
    if !signature.is_empty() {
        return Err(OAuthBearerError::BadToken("signature is not empty"));
    }
    let header = decode_json_object(header)?;
    if header.get("alg").and_then(Value::as_str) != Some("none") {
        return Err(OAuthBearerError::BadToken("alg is not none"));
    }
    let claims = decode_json_object(claims)?;
    let principal = match claims.get(&config.principal_claim) {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        _ => return Err(OAuthBearerError::BadToken("no principal name claim")),
    };
    let lifetime_ms = time_claim_ms(&claims, "exp")?
        .ok_or(OAuthBearerError::BadToken("no expiration time (exp)"))?;
    let start_time_ms = time_claim_ms(&claims, "iat")?;
    let skew = i64::try_from(config.allowable_clock_skew_ms).unwrap_or(i64::MAX);
    if let Some(iat) = start_time_ms {
        if now_ms.saturating_add(skew) < iat {
            return Err(OAuthBearerError::Time(
                "issued after now plus the allowed skew",
            ));
        }
        if lifetime_ms <= iat {
            return Err(OAuthBearerError::Time("expires before it was issued"));
        }
    }
    if now_ms.saturating_sub(skew) >= lifetime_ms {
        return Err(OAuthBearerError::Time("expired"));
    }
    let scope = scope_claim(claims.get(&config.scope_claim)).map_err(|shape| {
        OAuthBearerError::BadToken(match shape {
            ScopeShape::NotStrings => "scope is not a list of strings",
            ScopeShape::Neither => "scope is not a string or list",
        })
    })?;
    if let Some(missing) = config.required_scope.iter().find(|s| !scope.contains(s)) {
        return Err(OAuthBearerError::MissingScope(missing.clone()));
    }
    Ok(ValidatedToken {
        principal,
        lifetime_ms,
        start_time_ms,
        scope,
    })
}

/// Parses an initial response and validates its token at `now_ms`; an authzid must name the
/// token's principal. Returns the token (its principal is the authenticated user).
pub fn authenticate_unsecured(
    message: &[u8],
    config: &UnsecuredValidatorConfig,
    now_ms: i64,
) -> Result<ValidatedToken, OAuthBearerError> {
    let response = parse_client_initial_response(message)?;
    let token = validate_unsecured(&response.token, config, now_ms)?;
    if !response.authzid.is_empty() && response.authzid != token.principal {
        return Err(OAuthBearerError::AuthzidMismatch);
    }
    Ok(token)
}

/// An unsecured token (`alg: none`) with these claims, for tests and development clients.
pub fn unsecured_token(claims: &Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
    let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
    format!("{header}.{claims}.")
}

/// Why a scope claim was refused (each validator words it its own way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScopeShape {
    /// A list with an item that is not a string.
    NotStrings,
    /// Neither a string nor a list.
    Neither,
}

/// A token's scope claim, as Kafka reads it: absent (no scope), a space-separated string, or a
/// list of strings.
pub(crate) fn scope_claim(claim: Option<&Value>) -> Result<Vec<String>, ScopeShape> {
    match claim {
        None => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(s
            .split(' ')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or(ScopeShape::NotStrings),
        Some(_) => Err(ScopeShape::Neither),
    }
}

#[cfg(test)]
mod tests;
