//! SCRAM tests: the RFC 7677 vector, RFC 5802's message syntax, round trips for both
//! mechanisms, every refusal, and properties over random users and passwords.

use super::*;
use proptest::prelude::*;

/// Drives `server` through a whole exchange as a client holding `password`; returns the
/// server-final message or the first error.
fn exchange(
    server: &mut ScramServer,
    credential: Option<&ScramCredential>,
    gs2_header: &str,
    username: &str,
    client_nonce: &str,
    password: &str,
) -> Result<String, ScramError> {
    let first_bare = format!("n={},r={client_nonce}", to_saslname(username));
    server.handle_message(format!("{gs2_header}{first_bare}").as_bytes())?;
    assert!(matches!(
        server.poll_output(),
        Some(ScramOutput::LookupCredential { username: u, token_authenticated: false }) if u == username
    ));
    assert_eq!(server.poll_output(), None);
    server.handle_credential(credential)?;
    let Some(ScramOutput::Send(server_first)) = server.poll_output() else {
        panic!("no server-first");
    };
    let server_first = String::from_utf8(server_first).expect("utf-8");
    let mut parts = server_first.split(',');
    let nonce = parts.next().and_then(|p| p.strip_prefix("r=")).expect("r=");
    let salt = BASE64
        .decode(parts.next().and_then(|p| p.strip_prefix("s=")).expect("s="))
        .expect("salt");
    let iterations: u32 = parts
        .next()
        .and_then(|p| p.strip_prefix("i="))
        .expect("i=")
        .parse()
        .expect("iterations");
    let without_proof = format!("c={},r={nonce}", BASE64.encode(gs2_header));
    let auth_message = format!("{first_bare},{server_first},{without_proof}");
    let (proof, server_signature) = client_proof(
        server.mechanism(),
        password,
        &salt,
        iterations,
        &auth_message,
    );
    server.handle_message(format!("{without_proof},p={proof}").as_bytes())?;
    let Some(ScramOutput::Send(server_final)) = server.poll_output() else {
        panic!("no server-final");
    };
    let server_final = String::from_utf8(server_final).expect("utf-8");
    assert_eq!(server_final, format!("v={server_signature}"));
    assert!(matches!(
        server.poll_output(),
        Some(ScramOutput::Authenticated { username: u, .. }) if u == username
    ));
    assert_eq!(server.poll_output(), None);
    Ok(server_final)
}

#[test]
fn rfc_7677_scram_sha_256_test_vector() {
    let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("salt");
    let credential = ScramCredential::from_password(ScramMechanism::Sha256, "pencil", &salt, 4096)
        .expect("cred");
    let mut server =
        ScramServer::new(ScramMechanism::Sha256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0").expect("server");
    server
        .handle_message(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
        .expect("client-first");
    assert!(matches!(
        server.poll_output(),
        Some(ScramOutput::LookupCredential { .. })
    ));
    server
        .handle_credential(Some(&credential))
        .expect("credential");
    assert_eq!(
        server.poll_output(),
        Some(ScramOutput::Send(
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
                .to_vec()
        ))
    );
    server
        .handle_message(
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        )
        .expect("client-final");
    assert_eq!(
        server.poll_output(),
        Some(ScramOutput::Send(
            b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec()
        ))
    );
    assert_eq!(
        server.poll_output(),
        Some(ScramOutput::Authenticated {
            username: "user".into(),
            token_authenticated: false
        })
    );
    assert_eq!(server.poll_output(), None);
    assert!(server.is_complete());
    assert_eq!(server.username(), Some("user"));
}

#[test]
fn rfc_5802_messages_parse() {
    // RFC 5802 §5's SCRAM-SHA-1 example: the syntax is the same for every hash.
    let first = parse_client_first(b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL").expect("first");
    assert_eq!(first.gs2_header, "n,,");
    assert_eq!(first.bare, "n=user,r=fyko+d2lbbFgONRv9qkxdawL");
    assert_eq!(
        (first.username.as_str(), first.nonce.as_str()),
        ("user", "fyko+d2lbbFgONRv9qkxdawL")
    );
    assert_eq!(first.authzid, None);
    let last = parse_client_final(
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
    )
    .expect("final");
    assert_eq!(last.channel_binding, b"n,,");
    assert_eq!(last.nonce, "fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j");
    assert_eq!(last.proof.len(), 20);
    assert_eq!(
        last.without_proof,
        "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j"
    );
}

#[test]
fn both_mechanisms_round_trip_with_an_authzid_and_escaped_names() {
    for mechanism in ScramMechanism::ALL {
        let credential =
            ScramCredential::from_password(mechanism, "s3cret,=é", b"salty", 4096).expect("cred");
        assert_eq!(credential.stored_key.len(), mechanism.digest_bytes());
        let username = "al,ice=x";
        let gs2 = format!("n,a={},", to_saslname(username));
        let mut server = ScramServer::new(mechanism, "srvnonce").expect("server");
        exchange(
            &mut server,
            Some(&credential),
            &gs2,
            username,
            "cnonce",
            "s3cret,=é",
        )
        .expect("authenticates");
        assert!(server.is_complete());
        assert_eq!(server.username(), Some(username));
    }
}

#[test]
fn credential_text_is_kafkas_and_round_trips() {
    for mechanism in ScramMechanism::ALL {
        let credential =
            ScramCredential::from_password(mechanism, "pw", b"0123456789", 8192).expect("cred");
        let text = credential.to_kafka_string();
        assert!(
            text.starts_with("salt=MDEyMzQ1Njc4OQ==,stored_key="),
            "{text}"
        );
        assert!(text.ends_with(",iterations=8192"), "{text}");
        assert_eq!(
            ScramCredential::from_kafka_string(mechanism, &text),
            Ok(credential.clone())
        );
        assert!(!format!("{credential:?}").contains(&BASE64.encode(&credential.stored_key)));
    }
}

#[test]
fn credentials_refuse_too_few_iterations_and_malformed_text_i41() {
    let m = ScramMechanism::Sha256;
    assert_eq!(
        ScramCredential::from_password(m, "pw", b"s", 4095),
        Err(ScramError::Iterations(4095))
    );
    assert_eq!(
        ScramCredential::from_password(m, "pw", b"s", 16385),
        Err(ScramError::Iterations(16385))
    );
    assert!(ScramCredential::from_password(m, "pw", b"", 4096).is_err());
    let good = ScramCredential::from_password(m, "pw", b"s", 4096)
        .expect("cred")
        .to_kafka_string();
    let bad = [
        good.replace("iterations=4096", "iterations=4095"),
        good.replace("iterations=4096", "iterations=x"),
        good.replace(",iterations=4096", ""),
        good.replace("salt=", "pepper="),
        good.replace("stored_key=", "stored_key=!!"),
        "garbage".to_string(),
    ];
    for text in bad {
        assert!(
            ScramCredential::from_kafka_string(m, &text).is_err(),
            "{text}"
        );
    }
    // A SHA-256 credential is not a SHA-512 one (key lengths).
    assert_eq!(
        ScramCredential::from_kafka_string(ScramMechanism::Sha512, &good),
        Err(ScramError::Credential("key length"))
    );
    // A stored credential below the minimum is never used.
    let mut weak = ScramCredential::from_password(m, "pw", b"s", 4096).expect("cred");
    weak.iterations = 1;
    let mut server = ScramServer::new(m, "n").expect("server");
    server.handle_message(b"n,,n=u,r=c").expect("first");
    assert_eq!(
        server.handle_credential(Some(&weak)),
        Err(ScramError::Iterations(1))
    );
    assert!(server.is_failed());
}

#[test]
fn client_first_refusals() {
    let cases: &[(&[u8], ScramError)] = &[
        (b"y,,n=user,r=abc", ScramError::ChannelBindingNotSupported),
        (
            b"p=tls-unique,,n=user,r=abc",
            ScramError::ChannelBindingNotSupported,
        ),
        (b"x,,n=user,r=abc", ScramError::Malformed("GS2 header")),
        (b"n,,m=ext,n=user,r=abc", ScramError::MandatoryExtension),
        (b"n,,n=user,r=abc,m=ext", ScramError::MandatoryExtension),
        (b"n,,n=us=er,r=abc", ScramError::BadSaslName("us=er".into())),
        (b"n,,n=user=2", ScramError::BadSaslName("user=2".into())),
        (b"n,,n=,r=abc", ScramError::Malformed("username")),
        (b"n,,n=user", ScramError::Malformed("nonce")),
        (b"n,,n=user,r=", ScramError::Malformed("nonce")),
        (b"n,,n=user,r=a b", ScramError::Malformed("nonce")),
        (b"n,,n=user,r=abc,1=x", ScramError::Malformed("extension")),
        (
            b"n,,n=user,r=abc,novalue",
            ScramError::Malformed("extension without '='"),
        ),
        (b"n,x,n=user,r=abc", ScramError::Malformed("authzid")),
        (b"n,,n=us\xffer,r=abc", ScramError::Malformed("not UTF-8")),
        (b"n,,n=us\xc3\xa9r,r=abc", ScramError::Malformed("username")),
    ];
    for (message, want) in cases {
        let got = parse_client_first(message);
        assert_eq!(
            got.as_ref().err(),
            Some(want),
            "{:?}",
            String::from_utf8_lossy(message)
        );
    }
    let long = vec![b'n'; MAX_SASL_MESSAGE_BYTES + 1];
    assert_eq!(
        parse_client_first(&long),
        Err(ScramError::TooLong(long.len()))
    );
    assert_eq!(
        parse_client_final(&long),
        Err(ScramError::TooLong(long.len()))
    );
}

#[test]
fn kafka_token_extension_is_read_and_other_extensions_kept() {
    let first = parse_client_first(b"n,,n=tokenid,r=abc,tokenauth=TRUE,other=x").expect("parses");
    assert!(first.token_authenticated());
    assert_eq!(first.extensions["other"], "x");
    let mut server = ScramServer::new(ScramMechanism::Sha512, "n").expect("server");
    server
        .handle_message(b"n,,n=tokenid,r=abc,tokenauth=true")
        .expect("first");
    assert_eq!(
        server.poll_output(),
        Some(ScramOutput::LookupCredential {
            username: "tokenid".into(),
            token_authenticated: true
        })
    );
    // No delegation tokens: the caller answers None.
    assert_eq!(server.handle_credential(None), Err(ScramError::UnknownUser));
}

#[test]
fn exchange_refusals_fail_the_machine_for_good() {
    let m = ScramMechanism::Sha256;
    let credential = ScramCredential::from_password(m, "right", b"salt", 4096).expect("cred");

    // Wrong password.
    let mut server = ScramServer::new(m, "srv").expect("server");
    let got = exchange(
        &mut server,
        Some(&credential),
        "n,,",
        "user",
        "cli",
        "wrong",
    );
    assert_eq!(got, Err(ScramError::InvalidProof));
    assert!(server.is_failed());
    assert_eq!(server.poll_output(), None);
    assert_eq!(
        server.handle_message(b"n,,n=user,r=cli"),
        Err(ScramError::Failed)
    );

    // Unknown user.
    let mut server = ScramServer::new(m, "srv").expect("server");
    let got = exchange(&mut server, None, "n,,", "user", "cli", "right");
    assert_eq!(got, Err(ScramError::UnknownUser));

    // An authzid that is not the username.
    let mut server = ScramServer::new(m, "srv").expect("server");
    assert_eq!(
        server.handle_message(b"n,a=admin,n=user,r=cli"),
        Err(ScramError::AuthzidMismatch)
    );

    // Final-message tampering: nonce, channel binding, proof length, reserved attribute.
    let finals: [(&str, ScramError); 7] = [
        ("c=biws,r=cliOTHER,p=AAAA", ScramError::NonceMismatch),
        ("c=biws,r=clisrvX,p=AAAA", ScramError::NonceMismatch),
        // Ends with the combined nonce (librdkafka < 2.6.1's shape): judged by the proof.
        ("c=biws,r=cliclisrv,p=AAAA", ScramError::InvalidProof),
        ("c=eSws,r=clisrv,p=AAAA", ScramError::ChannelBindingMismatch),
        ("c=biws,r=clisrv,p=AAAA", ScramError::InvalidProof),
        ("m=x,r=clisrv,p=AAAA", ScramError::MandatoryExtension),
        ("c=biws,r=clisrv", ScramError::Malformed("proof")),
    ];
    for (last, want) in finals {
        let mut server = ScramServer::new(m, "srv").expect("server");
        server.handle_message(b"n,,n=user,r=cli").expect("first");
        server
            .handle_credential(Some(&credential))
            .expect("credential");
        assert_eq!(server.handle_message(last.as_bytes()), Err(want), "{last}");
        assert!(server.is_failed());
    }

    // Inputs out of order.
    let mut server = ScramServer::new(m, "srv").expect("server");
    assert_eq!(
        server.handle_credential(Some(&credential)),
        Err(ScramError::UnexpectedInput("await-client-first"))
    );
    let mut server = ScramServer::new(m, "srv").expect("server");
    server.handle_message(b"n,,n=user,r=cli").expect("first");
    assert_eq!(
        server.handle_message(b"c=biws,r=clisrv,p=AAAA"),
        Err(ScramError::UnexpectedInput("await-credential"))
    );
    assert!(ScramServer::new(m, "has,comma").is_err());
    assert!(ScramServer::new(m, "").is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any ASCII username (with `,` and `=`) and any password authenticate; a different
    /// password never does.
    #[test]
    fn random_users_and_passwords_authenticate_and_wrong_ones_never_do(
        username in "[\x01-\x7f]{1,16}",
        password in any::<String>(),
        other in any::<String>(),
        nonce_seed in proptest::collection::vec(any::<u8>(), 18),
        sha512 in any::<bool>(),
    ) {
        let m = if sha512 { ScramMechanism::Sha512 } else { ScramMechanism::Sha256 };
        let credential = ScramCredential::from_password(m, &password, &nonce_seed, 4096).expect("cred");
        let nonce = server_nonce_from_entropy(&nonce_seed);
        let mut server = ScramServer::new(m, &nonce).expect("server");
        prop_assert!(exchange(&mut server, Some(&credential), "n,,", &username, "c", &password).is_ok());
        if other != password {
            let mut server = ScramServer::new(m, &nonce).expect("server");
            let got = exchange(&mut server, Some(&credential), "n,,", &username, "c", &other);
            prop_assert_eq!(got, Err(ScramError::InvalidProof));
        }
    }

    /// saslname escaping round-trips any username.
    #[test]
    fn saslname_round_trips(username in any::<String>()) {
        let escaped = to_saslname(&username);
        prop_assert!(!escaped.contains(','));
        prop_assert_eq!(from_saslname(&escaped), Ok(username));
    }

    /// Any bytes, as either message: a value or an error, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
        let _ = parse_client_first(&bytes);
        let _ = parse_client_final(&bytes);
        let mut server = ScramServer::new(ScramMechanism::Sha256, "n").expect("server");
        let _ = server.handle_message(&bytes);
    }
}

/// A credential made from the client's SaltedPassword (AlterUserScramCredentials) is the
/// credential made from the password.
#[test]
fn a_salted_password_gives_the_same_credential_as_the_password() {
    for m in ScramMechanism::ALL {
        let salt = b"0123456789abcdef";
        let salted = ScramCredential::salted_password(m, "pw", salt, 4096);
        let a = ScramCredential::from_salted_password(m, &salted, salt, 4096).expect("ok");
        let b = ScramCredential::from_password(m, "pw", salt, 4096).expect("ok");
        assert_eq!(a, b);
        assert!(ScramCredential::from_salted_password(m, &salted[1..], salt, 4096).is_err());
        assert!(ScramCredential::from_salted_password(m, &salted, b"", 4096).is_err());
        assert!(ScramCredential::from_salted_password(m, &salted, salt, 4095).is_err());
    }
}

/// I127: the password a credential was made from verifies; any other does not.
#[test]
fn a_credential_verifies_its_password_only() {
    for mechanism in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
        let credential =
            ScramCredential::from_password(mechanism, "s3cret", b"salty", MIN_ITERATIONS)
                .expect("credential");
        assert!(credential.verifies_password(mechanism, "s3cret"));
        assert!(!credential.verifies_password(mechanism, "s3cret "));
        assert!(!credential.verifies_password(mechanism, ""));
    }
}

/// librdkafka before 2.6.1 (Debian 12's kcat: 2.0.2) sends `r=<client nonce><combined nonce>`
/// in its final message (librdkafka #4895). Kafka accepts a final nonce that ends with the
/// combined one since 3.8.1; so do we, with the proof computed over the message as sent.
#[test]
fn a_final_nonce_with_the_client_nonce_repeated_in_front_authenticates_as_in_kafka() {
    for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
        let credential =
            ScramCredential::from_password(m, "erin-secret", b"0123456789abcdef", 4096)
                .expect("cred");
        for (password, want_ok) in [("erin-secret", true), ("wrong", false)] {
            let mut server = ScramServer::new(m, "srvNONCE").expect("server");
            let first_bare = "n=erin,r=cliNONCE";
            server
                .handle_message(format!("n,,{first_bare}").as_bytes())
                .expect("first");
            assert!(matches!(
                server.poll_output(),
                Some(ScramOutput::LookupCredential { .. })
            ));
            server
                .handle_credential(Some(&credential))
                .expect("credential");
            let Some(ScramOutput::Send(server_first)) = server.poll_output() else {
                panic!("no server-first");
            };
            let server_first = String::from_utf8(server_first).expect("utf-8");
            assert!(
                server_first.starts_with("r=cliNONCEsrvNONCE,"),
                "{server_first}"
            );
            // The client nonce, then the combined one, as librdkafka 2.0.2 writes it.
            let without_proof = "c=biws,r=cliNONCEcliNONCEsrvNONCE";
            let auth_message = format!("{first_bare},{server_first},{without_proof}");
            let (proof, server_signature) =
                client_proof(m, password, b"0123456789abcdef", 4096, &auth_message);
            let got = server.handle_message(format!("{without_proof},p={proof}").as_bytes());
            if want_ok {
                got.expect("accepted, as Kafka accepts it");
                assert_eq!(
                    server.poll_output(),
                    Some(ScramOutput::Send(
                        format!("v={server_signature}").into_bytes()
                    ))
                );
                assert!(matches!(
                    server.poll_output(),
                    Some(ScramOutput::Authenticated { username, .. }) if username == "erin"
                ));
            } else {
                assert_eq!(got, Err(ScramError::InvalidProof), "{m:?}");
                assert!(server.is_failed());
            }
        }
    }
}
