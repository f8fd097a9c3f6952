//! TLS in the simulation (`SimOptions::tls`): the broker's one listener speaks SSL with a
//! certificate made for the run, and every simulated client runs the rustls handshake before
//! its first request, on the simulated network like any other bytes.
//!
//! The keys are Ed25519 and the serial numbers fixed, so every handshake message has the same
//! length in every run: the bytes differ (rustls draws its randoms from the OS), the lengths,
//! and with them the simulated network's schedule, do not. A seed with TLS replays exactly.
//! Certificates are made at run time; no key material is committed.

use minikafka_client::tls::{TlsConfig, TlsConnector};

/// The run's CA and the broker's certificate for 127.0.0.1, signed by it, as PEM.
pub(crate) struct RunCertificate {
    ca_pem: String,
    broker_chain_pem: String,
    broker_key_pem: String,
}

impl RunCertificate {
    /// Makes a CA and a broker certificate naming 127.0.0.1 (the simulated address).
    pub(crate) fn new() -> Self {
        let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("an Ed25519 key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.serial_number = Some(rcgen::SerialNumber::from(1u64));
        ca_params.distinguished_name = rcgen::DistinguishedName::new();
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "mk-sim CA");
        let ca = ca_params.self_signed(&ca_key).expect("the CA certificate");

        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("an Ed25519 key");
        let mut params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
        params.serial_number = Some(rcgen::SerialNumber::from(2u64));
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "mk-sim broker");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params
            .signed_by(&key, &ca, &ca_key)
            .expect("the broker certificate");
        RunCertificate {
            ca_pem: ca.pem(),
            broker_chain_pem: cert.pem(),
            broker_key_pem: key.serialize_pem(),
        }
    }

    /// The broker settings of an SSL listener on the simulated address, with the inline PEM
    /// keystore (no file: the broker's settings are read before the simulated disk is).
    pub(crate) fn broker_settings(&self) -> Vec<(String, String)> {
        [
            ("listeners", "SSL://127.0.0.1:9092"),
            ("advertised.listeners", "SSL://127.0.0.1:9092"),
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.certificate.chain", &self.broker_chain_pem),
            ("ssl.keystore.key", &self.broker_key_pem),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// The clients' handshake: trusts the run's CA only.
    pub(crate) fn connector(&self) -> TlsConnector {
        TlsConnector::new(&TlsConfig {
            ca_pem: self.ca_pem.clone(),
            ..TlsConfig::default()
        })
        .expect("the run's CA loads")
    }
}
