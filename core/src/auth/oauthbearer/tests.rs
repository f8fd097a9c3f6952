//! OAUTHBEARER tests: the initial response's grammar (round trips and refusals) and the
//! unsecured validator's claims against `now_ms`.

use super::*;
use proptest::prelude::*;
use serde_json::json;

const NOW_MS: i64 = 1_700_000_000_000;

fn config() -> UnsecuredValidatorConfig {
    UnsecuredValidatorConfig::default()
}

fn token(claims: Value) -> String {
    unsecured_token(&claims)
}

#[test]
fn kafkas_client_message_parses() {
    // What Kafka's OAuthBearerClientInitialResponse writes: GS2 header, auth, extensions.
    let jwt = token(json!({"sub": "alice", "exp": 1_700_000_100}));
    let message = format!("n,,\x01auth=Bearer {jwt}\x01traceId=123\x01\x01");
    let response = parse_client_initial_response(message.as_bytes()).expect("parses");
    assert_eq!(response.authzid, "");
    assert_eq!(response.token, jwt);
    assert_eq!(response.extensions["traceId"], "123");
    assert!(!format!("{response:?}").contains(&jwt));
    // Scheme in any case, authzid escaped as a saslname.
    let message = format!("n,a=al=2Cice,\x01auth=bearer {jwt}\x01\x01");
    let response = parse_client_initial_response(message.as_bytes()).expect("parses");
    assert_eq!(response.authzid, "al,ice");
}

#[test]
fn initial_response_refusals() {
    let cases: &[(&[u8], OAuthBearerError)] = &[
        (
            b"y,,\x01auth=Bearer t\x01\x01",
            OAuthBearerError::Malformed("GS2 header"),
        ),
        (
            b"n,\x01auth=Bearer t\x01\x01",
            OAuthBearerError::Malformed("GS2 header"),
        ),
        (
            b"n,b=x,\x01auth=Bearer t\x01\x01",
            OAuthBearerError::Malformed("authzid"),
        ),
        (
            b"n,,auth=Bearer t\x01\x01",
            OAuthBearerError::Malformed("separators"),
        ),
        (
            b"n,,\x01auth=Bearer t\x01",
            OAuthBearerError::Malformed("key/value pairs"),
        ),
        (
            b"n,,\x01\x01",
            OAuthBearerError::Malformed("'auth' not specified"),
        ),
        (
            b"n,,\x01x=y\x01\x01",
            OAuthBearerError::Malformed("'auth' not specified"),
        ),
        (
            b"n,,\x01auth=Basic t\x01\x01",
            OAuthBearerError::Malformed("'Bearer' not specified"),
        ),
        (
            b"n,,\x01auth=Bearer\x01\x01",
            OAuthBearerError::Malformed("invalid 'auth' format"),
        ),
        (
            b"n,,\x01auth=Bearer t+t\x01\x01",
            OAuthBearerError::Malformed("invalid 'auth' format"),
        ),
        (
            b"n,,\x01auth=Bearer t\x01x1=y\x01\x01",
            OAuthBearerError::BadExtension("x1".into()),
        ),
        (
            b"n,,\x01auth=Bearer t\x01x=\x01\x01",
            OAuthBearerError::BadExtension("x".into()),
        ),
        (
            b"n,,\x01auth=Bearer t\x01noequals\x01\x01",
            OAuthBearerError::Malformed("key/value pair without '='"),
        ),
        (
            b"n,,\x01auth=Bearer t\xff\x01\x01",
            OAuthBearerError::Malformed("not UTF-8"),
        ),
    ];
    for (message, want) in cases {
        let got = parse_client_initial_response(message);
        assert_eq!(
            got.as_ref().err(),
            Some(want),
            "{:?}",
            String::from_utf8_lossy(message)
        );
    }
    let long = vec![b'n'; MAX_SASL_MESSAGE_BYTES + 1];
    assert_eq!(
        parse_client_initial_response(&long),
        Err(OAuthBearerError::TooLong(long.len()))
    );
}

#[test]
fn a_valid_unsecured_token_yields_its_principal_times_and_scope() {
    let jwt = token(json!({
        "sub": "alice", "iat": 1_699_999_000, "exp": 1_700_000_100.5, "scope": "read write"
    }));
    let mut config = config();
    config.required_scope = vec!["write".into()];
    let validated = validate_unsecured(&jwt, &config, NOW_MS).expect("valid");
    assert_eq!(
        validated,
        ValidatedToken {
            principal: "alice".into(),
            lifetime_ms: 1_700_000_100_500,
            start_time_ms: Some(1_699_999_000_000),
            scope: vec!["read".into(), "write".into()],
        }
    );
    // A list of scopes works as well, and a custom principal claim.
    let jwt = token(json!({"user": "bob", "exp": 1_700_000_100, "scope": ["a", "b"]}));
    let options: BTreeMap<String, String> = [
        ("unsecuredValidatorPrincipalClaimName", "user"),
        ("unsecuredValidatorRequiredScope", "a, b"),
        ("unsecuredValidatorAllowableClockSkewMs", "10"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let config = UnsecuredValidatorConfig::from_options(&options).expect("options");
    assert_eq!(config.required_scope, ["a", "b"]);
    assert_eq!(
        validate_unsecured(&jwt, &config, NOW_MS)
            .expect("valid")
            .principal,
        "bob"
    );
}

#[test]
fn time_claims_are_judged_against_now_with_the_skew() {
    let exp_s = NOW_MS / 1000 + 10;
    let jwt = token(json!({"sub": "a", "exp": exp_s}));
    let exp_ms = exp_s * 1000;
    assert!(validate_unsecured(&jwt, &config(), exp_ms - 1).is_ok());
    // Expired at exactly exp (Kafka: now - skew >= exp fails).
    assert_eq!(
        validate_unsecured(&jwt, &config(), exp_ms),
        Err(OAuthBearerError::Time("expired"))
    );
    let mut skewed = config();
    skewed.allowable_clock_skew_ms = 5;
    assert!(validate_unsecured(&jwt, &skewed, exp_ms + 4).is_ok());
    assert!(validate_unsecured(&jwt, &skewed, exp_ms + 5).is_err());
    // Issued in the future.
    let jwt = token(json!({"sub": "a", "iat": NOW_MS / 1000 + 5, "exp": NOW_MS / 1000 + 50}));
    assert_eq!(
        validate_unsecured(&jwt, &config(), NOW_MS),
        Err(OAuthBearerError::Time(
            "issued after now plus the allowed skew"
        ))
    );
    skewed.allowable_clock_skew_ms = 5_000;
    assert!(validate_unsecured(&jwt, &skewed, NOW_MS).is_ok());
    // Expires before it was issued.
    let jwt = token(json!({"sub": "a", "iat": NOW_MS / 1000 - 5, "exp": NOW_MS / 1000 - 6}));
    assert_eq!(
        validate_unsecured(&jwt, &config(), NOW_MS),
        Err(OAuthBearerError::Time("expires before it was issued"))
    );
}

#[test]
fn token_refusals() {
    let later = NOW_MS / 1000 + 100;
    let header_hs256 = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256"}"#);
    let claims = URL_SAFE_NO_PAD.encode(json!({"sub": "a", "exp": later}).to_string());
    let cases: Vec<(String, OAuthBearerError)> = vec![
        (
            format!("{header_hs256}.{claims}."),
            OAuthBearerError::BadToken("alg is not none"),
        ),
        (
            format!("{}sig", token(json!({"sub": "a", "exp": later}))),
            OAuthBearerError::BadToken("signature is not empty"),
        ),
        (
            claims.clone(),
            OAuthBearerError::BadToken("not three parts"),
        ),
        (
            format!("{}.", token(json!({"sub": "a", "exp": later}))),
            OAuthBearerError::BadToken("not three parts"),
        ),
        (
            token(json!({"exp": later})),
            OAuthBearerError::BadToken("no principal name claim"),
        ),
        (
            token(json!({"sub": "", "exp": later})),
            OAuthBearerError::BadToken("no principal name claim"),
        ),
        (
            token(json!({"sub": 7, "exp": later})),
            OAuthBearerError::BadToken("no principal name claim"),
        ),
        (
            token(json!({"sub": "a"})),
            OAuthBearerError::BadToken("no expiration time (exp)"),
        ),
        (
            token(json!({"sub": "a", "exp": "soon"})),
            OAuthBearerError::BadToken("exp"),
        ),
        (
            token(json!({"sub": "a", "exp": 1e300})),
            OAuthBearerError::BadToken("exp"),
        ),
        (
            token(json!({"sub": "a", "exp": later, "iat": true})),
            OAuthBearerError::BadToken("iat"),
        ),
        (
            token(json!({"sub": "a", "exp": later, "scope": 3})),
            OAuthBearerError::BadToken("scope is not a string or list"),
        ),
        (
            token(json!({"sub": "a", "exp": later, "scope": [3]})),
            OAuthBearerError::BadToken("scope is not a list of strings"),
        ),
        (
            "!!.!!.".to_string(),
            OAuthBearerError::BadToken("not base64url"),
        ),
        (
            format!("{}.{claims}.", URL_SAFE_NO_PAD.encode("[1]")),
            OAuthBearerError::BadToken("not a JSON object"),
        ),
    ];
    for (jwt, want) in cases {
        assert_eq!(
            validate_unsecured(&jwt, &config(), NOW_MS),
            Err(want),
            "{jwt}"
        );
    }
    let mut scoped = config();
    scoped.required_scope = vec!["admin".into()];
    let jwt = token(json!({"sub": "a", "exp": later, "scope": "read"}));
    assert_eq!(
        validate_unsecured(&jwt, &scoped, NOW_MS),
        Err(OAuthBearerError::MissingScope("admin".into()))
    );
    // Deep nesting is an error from the JSON parser, not a stack overflow.
    let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    let jwt = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(deep)
    );
    assert!(validate_unsecured(&jwt, &config(), NOW_MS).is_err());
}

#[test]
fn authenticate_checks_the_authzid_against_the_principal() {
    let jwt = token(json!({"sub": "alice", "exp": NOW_MS / 1000 + 60}));
    let none = BTreeMap::new();
    let ok = encode_client_initial_response("alice", &jwt, &none);
    assert_eq!(
        authenticate_unsecured(&ok, &config(), NOW_MS)
            .expect("ok")
            .principal,
        "alice"
    );
    let anonymous = encode_client_initial_response("", &jwt, &none);
    assert!(authenticate_unsecured(&anonymous, &config(), NOW_MS).is_ok());
    let other = encode_client_initial_response("bob", &jwt, &none);
    assert_eq!(
        authenticate_unsecured(&other, &config(), NOW_MS),
        Err(OAuthBearerError::AuthzidMismatch)
    );
}

proptest! {
    /// Any authzid, token and extensions in the grammar round-trip through encode/parse.
    #[test]
    fn initial_response_round_trips(
        authzid in "[\x01-\x7f]{0,12}",
        token in "[-_.a-zA-Z0-9]{1,40}",
        extensions in proptest::collection::btree_map("[A-Za-z]{1,8}", "[\x21-\x7e \t\r\n]{1,12}", 0..4),
    ) {
        prop_assume!(!extensions.contains_key(AUTH_KEY));
        let message = encode_client_initial_response(&authzid, &token, &extensions);
        let parsed = parse_client_initial_response(&message).expect("parses");
        prop_assert_eq!(parsed.authzid, authzid);
        prop_assert_eq!(parsed.token, token);
        prop_assert_eq!(parsed.extensions, extensions);
    }

    /// Any bytes: a value or an error, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
        let _ = authenticate_unsecured(&bytes, &config(), NOW_MS);
        let _ = validate_unsecured(&String::from_utf8_lossy(&bytes), &config(), NOW_MS);
    }
}
