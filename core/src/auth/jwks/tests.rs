//! Signed tokens made here with keys made here (ring for P-256; a fixed RSA test key, which
//! ring cannot generate), verified and refused (I166–I168).

use super::*;
use proptest::prelude::*;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use serde_json::json;

const NOW_MS: i64 = 1_800_000_000_000;

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

struct EcKey(EcdsaKeyPair);

impl EcKey {
    fn new() -> EcKey {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("test setup");
        EcKey(
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
                .expect("test setup"),
        )
    }
    fn jwk(&self, kid: &str) -> Value {
        let point = self.0.public_key().as_ref();
        json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
               "x": b64(&point[1..33]), "y": b64(&point[33..65])})
    }
    fn sign(&self, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let sig = self
            .0
            .sign(&SystemRandom::new(), input.as_bytes())
            .expect("test setup");
        format!("{input}.{}", b64(sig.as_ref()))
    }
}

struct RsaKey(RsaKeyPair);

impl RsaKey {
    /// A fixed 2048-bit test key (`openssl genpkey -algorithm RSA -outform DER`): ring cannot
    /// make RSA keys, and core's code, tests included, starts no process (core/tests/no_io.rs).
    fn new() -> RsaKey {
        let der: &[u8] = include_bytes!("rsa_test_key.der");
        // OpenSSL 3.0 writes the DER form as PKCS#1 RSAPrivateKey, other versions as PKCS#8.
        let pair = RsaKeyPair::from_der(der).or_else(|_| RsaKeyPair::from_pkcs8(der));
        RsaKey(pair.expect("test setup"))
    }
    fn jwk(&self, kid: &str) -> Value {
        let c = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(self.0.public());
        json!({"kty": "RSA", "kid": kid, "n": b64(&c.n), "e": b64(&c.e)})
    }
    fn sign(&self, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let mut sig = vec![0; self.0.public().modulus_len()];
        self.0
            .sign(
                &signature::RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                input.as_bytes(),
                &mut sig,
            )
            .expect("test setup");
        format!("{input}.{}", b64(&sig))
    }
}

fn claims() -> Value {
    json!({"sub": "alice", "iss": "https://issuer", "aud": ["kafka", "other"],
           "iat": NOW_MS / 1000 - 10, "exp": NOW_MS / 1000 + 600, "scope": "a b"})
}

fn jwks(keys: &[Value]) -> Jwks {
    Jwks::parse(json!({ "keys": keys }).to_string().as_bytes()).expect("test setup")
}

fn strict() -> SignedValidatorConfig {
    SignedValidatorConfig {
        expected_audience: vec!["kafka".into()],
        expected_issuer: Some("https://issuer".into()),
        ..SignedValidatorConfig::default()
    }
}

#[test]
fn es256_and_rs256_tokens_signed_by_a_listed_key_validate() {
    let ec = EcKey::new();
    let rsa = RsaKey::new();
    let set = jwks(&[ec.jwk("e1"), rsa.jwk("r1")]);
    let t = ec.sign(&json!({"alg": "ES256", "kid": "e1"}), &claims());
    let v = validate_signed(&t, &set, &strict(), NOW_MS).expect("a valid ES256 token");
    assert_eq!(v.principal, "alice");
    assert_eq!(v.scope, vec!["a", "b"]);
    assert_eq!(v.lifetime_ms, (NOW_MS / 1000 + 600) * 1000);
    let t = rsa.sign(&json!({"alg": "RS256", "kid": "r1"}), &claims());
    assert_eq!(
        validate_signed(&t, &set, &strict(), NOW_MS)
            .expect("test setup")
            .principal,
        "alice"
    );
    // Without a kid every key of the type is tried.
    let t = rsa.sign(&json!({"alg": "RS256"}), &claims());
    assert!(validate_signed(&t, &set, &strict(), NOW_MS).is_ok());
}

#[test]
fn a_token_signed_by_another_key_is_refused_i167() {
    let listed = EcKey::new();
    let other = EcKey::new();
    let set = jwks(&[listed.jwk("k")]);
    let t = other.sign(&json!({"alg": "ES256", "kid": "k"}), &claims());
    assert_eq!(
        validate_signed(&t, &set, &strict(), NOW_MS),
        Err(OAuthBearerError::BadSignedToken(
            "the signature does not verify"
        ))
    );
    let t = listed.sign(&json!({"alg": "ES256", "kid": "unknown"}), &claims());
    assert!(matches!(
        validate_signed(&t, &set, &strict(), NOW_MS),
        Err(OAuthBearerError::BadSignedToken(_))
    ));
    // A signature over other claims: the claims were changed after signing.
    let good = listed.sign(&json!({"alg": "ES256", "kid": "k"}), &claims());
    let mut forged = claims();
    forged["sub"] = json!("admin");
    let parts: Vec<&str> = good.split('.').collect();
    let t = format!(
        "{}.{}.{}",
        parts[0],
        b64(forged.to_string().as_bytes()),
        parts[2]
    );
    assert_eq!(
        validate_signed(&t, &set, &strict(), NOW_MS),
        Err(OAuthBearerError::BadSignedToken(
            "the signature does not verify"
        ))
    );
}

#[test]
fn alg_none_and_hmac_are_refused_i167() {
    let ec = EcKey::new();
    let set = jwks(&[ec.jwk("k")]);
    let unsecured = crate::auth::oauthbearer::unsecured_token(&claims());
    assert_eq!(
        validate_signed(&unsecured, &set, &strict(), NOW_MS),
        Err(OAuthBearerError::BadSignedToken(
            "'alg' is not an accepted signing algorithm"
        ))
    );
    let t = ec.sign(&json!({"alg": "HS256", "kid": "k"}), &claims());
    assert!(validate_signed(&t, &set, &strict(), NOW_MS).is_err());
    // ES256's signature presented as RS256: the key types differ, nothing verifies.
    let t = ec.sign(&json!({"alg": "RS256", "kid": "k"}), &claims());
    assert!(validate_signed(&t, &set, &strict(), NOW_MS).is_err());
}

#[test]
fn claims_are_checked_after_the_signature_i168() {
    let ec = EcKey::new();
    let set = jwks(&[ec.jwk("k")]);
    let header = json!({"alg": "ES256", "kid": "k"});
    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = claims();
        f(&mut c);
        validate_signed(&ec.sign(&header, &c), &set, &strict(), NOW_MS)
    };
    assert_eq!(
        with(&|c| c["iss"] = json!("https://evil")),
        Err(bad("the issuer (iss) is not the expected issuer"))
    );
    assert_eq!(
        with(&|c| c["aud"] = json!("other")),
        Err(bad("the audience (aud) is not an expected audience"))
    );
    assert_eq!(
        with(&|c| c["aud"] = json!("kafka")).map(|v| v.principal),
        Ok("alice".into())
    );
    assert_eq!(
        with(&|c| {
            c.as_object_mut()
                .expect("claims are an object")
                .remove("exp");
        }),
        Err(bad("no expiration time (exp)"))
    );
    // Expired 31 s ago: beyond the default 30 s skew; 29 s ago: within it.
    assert_eq!(
        with(&|c| c["exp"] = json!(NOW_MS / 1000 - 31)),
        Err(OAuthBearerError::Time("expired"))
    );
    assert!(with(&|c| c["exp"] = json!(NOW_MS / 1000 - 29)).is_ok());
    assert_eq!(
        with(&|c| c["nbf"] = json!(NOW_MS / 1000 + 60)),
        Err(OAuthBearerError::Time("not yet valid (nbf)"))
    );
    // iat is required (Kafka's setRequireIssuedAt); a future one is not refused (jose4j's default).
    assert_eq!(
        with(&|c| {
            c.as_object_mut()
                .expect("claims are an object")
                .remove("iat");
        }),
        Err(bad("no issued-at time (iat)"))
    );
    assert!(with(&|c| c["iat"] = json!(NOW_MS / 1000 + 60)).is_ok());
    assert_eq!(
        with(&|c| c["sub"] = json!(" ")),
        Err(bad("no subject claim"))
    );
    assert_eq!(
        with(&|c| c["scope"] = json!(["x", "y"]))
            .expect("test setup")
            .scope,
        vec!["x", "y"]
    );
    assert!(with(&|c| c["scope"] = json!(7)).is_err());
    // With no expectations set, issuer and audience are not checked.
    let mut c = claims();
    c["iss"] = json!("anyone");
    c.as_object_mut()
        .expect("claims are an object")
        .remove("aud");
    assert!(validate_signed(
        &ec.sign(&header, &c),
        &set,
        &SignedValidatorConfig::default(),
        NOW_MS
    )
    .is_ok());
}

#[test]
fn jwks_bounds_and_skips_i166() {
    assert!(matches!(
        Jwks::parse(&vec![b' '; MAX_JWKS_BYTES + 1]),
        Err(OAuthBearerError::BadJwks(_))
    ));
    let many: Vec<Value> = (0..=MAX_JWKS_KEYS).map(|_| json!({"kty": "oct"})).collect();
    assert!(Jwks::parse(json!({ "keys": many }).to_string().as_bytes()).is_err());
    assert!(Jwks::parse(b"{}").is_err());
    assert!(Jwks::parse(b"[1]").is_err());
    // Unknown types, curves and encryption keys are skipped; a malformed kept key is an error.
    let set = jwks(&[
        json!({"kty": "oct", "k": "AAAA"}),
        json!({"kty": "EC", "crv": "P-521", "x": "", "y": ""}),
        json!({"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB"}),
    ]);
    assert!(set.keys.is_empty());
    assert!(
        Jwks::parse(br#"{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}"#).is_err()
    );
    assert!(Jwks::parse(br#"{"keys":[{"kty":"RSA","n":"!!"}]}"#).is_err());
}

proptest! {
    /// Any bytes as a JWKS or as a token: a value or an error, never a panic (I166).
    #[test]
    fn arbitrary_jwks_and_tokens_never_panic(doc in proptest::collection::vec(any::<u8>(), 0..256),
                                             token in "[A-Za-z0-9_.-]{0,200}") {
        let _ = Jwks::parse(&doc);
        let set = Jwks::default();
        prop_assert!(validate_signed(&token, &set, &SignedValidatorConfig::default(), NOW_MS).is_err());
    }

    /// Flipping any one byte of a valid token's signed input or signature makes it refused (I167).
    #[test]
    fn any_changed_byte_is_refused(index in any::<prop::sample::Index>(), flip in 1u8..=255) {
        thread_local!(static KEY: EcKey = EcKey::new());
        KEY.with(|ec| {
            let set = jwks(&[ec.jwk("k")]);
            let token = ec.sign(&json!({"alg": "ES256", "kid": "k"}), &claims());
            let mut bytes = token.into_bytes();
            let i = index.index(bytes.len());
            bytes[i] ^= flip;
            if let Ok(changed) = String::from_utf8(bytes) {
                // base64url's unused tail bits are refused by the decoder, so every change counts.
                prop_assert!(validate_signed(&changed, &set, &strict(), NOW_MS).is_err());
            }
            Ok(())
        })?;
    }
}
