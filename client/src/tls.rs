//! TLS for `security.protocol=SSL` and `SASL_SSL`: rustls over any futures-io stream.
//!
//! Contract:
//! - Input: librdkafka's settings by meaning: the CAs that vouch for the broker
//!   (`ssl.ca.location`, PEM), and for mutual TLS the client's certificate chain and key
//!   (`ssl.certificate.location`, `ssl.key.location`, PEM).
//! - Output: a [`TlsConnector`] whose [`TlsConnector::connect`] runs the handshake on a
//!   connected stream and gives a [`MaybeTls`] stream, which a [`crate::Connection`] uses like
//!   any other (SASL, for `SASL_SSL`, then runs inside it).
//! - The broker's certificate must chain to the given CAs and name the host connected to
//!   (librdkafka's default `ssl.endpoint.identification.algorithm=https`).
//! - Writes (I192): a write of up to [`SEND_BUFFER_BYTES`] is encrypted whole and given to the
//!   socket in one vectored write; rustls holds at most that much ciphertext the socket has
//!   not taken (a full buffer accepts nothing more until it drains).
//! - Never: trusts a certificate without a CA to check it against (there is no "insecure"
//!   switch), reads a clock or spawns a task.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_io::{AsyncRead, AsyncWrite};
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// Ciphertext rustls may hold for the socket (its default is 64 KiB; I192). One write of a
/// request up to this size is encrypted whole and handed to the socket in one `writev`;
/// at 64 KiB a 100 KB Produce request took two, and each send on loopback costs the sender
/// the receiver's TCP work and a wake-up as well as the copy
/// (docs/perf-log/2026-12-06-tls-unbuffered.md). 1 MiB is Kafka's default
/// `max.request.size` and 64 records of 16 KiB, the most rustls writes in one `writev`.
pub const SEND_BUFFER_BYTES: usize = 1024 * 1024;

/// What the client trusts and presents.
#[derive(Clone, Debug, Default)]
pub struct TlsConfig {
    /// PEM text of the CA certificates that vouch for the broker (`ssl.ca.location`'s file).
    pub ca_pem: String,
    /// PEM text of the client's certificate chain, for mutual TLS (`ssl.certificate.location`).
    pub certificate_pem: Option<String>,
    /// PEM text of the client's private key, for mutual TLS (`ssl.key.location`).
    pub key_pem: Option<String>,
}

impl TlsConfig {
    /// Reads the PEM files librdkafka's settings name: `ca` (`ssl.ca.location`) and, for
    /// mutual TLS, `certificate` and `key` (`ssl.certificate.location`, `ssl.key.location`).
    pub fn from_files(ca: &str, certificate: Option<&str>, key: Option<&str>) -> io::Result<Self> {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .map_err(|e| io::Error::new(e.kind(), format!("cannot read {path}: {e}")))
        };
        Ok(TlsConfig {
            ca_pem: read(ca)?,
            certificate_pem: certificate.map(read).transpose()?,
            key_pem: key.map(read).transpose()?,
        })
    }
}

/// Runs client handshakes with one loaded configuration. Cheap to clone.
#[derive(Clone)]
pub struct TlsConnector {
    config: Arc<ClientConfig>,
}

impl std::fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConnector").finish_non_exhaustive()
    }
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why)
}

impl TlsConnector {
    /// Loads `config`: an error names what is missing or unreadable.
    pub fn new(config: &TlsConfig) -> io::Result<Self> {
        let mut roots = RootCertStore::empty();
        let cas = CertificateDer::pem_slice_iter(config.ca_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("bad CA certificate PEM: {e}")))?;
        if cas.is_empty() {
            return Err(invalid(
                "no CA certificate (PEM CERTIFICATE block) found".into(),
            ));
        }
        for ca in cas {
            roots
                .add(ca)
                .map_err(|e| invalid(format!("bad CA certificate: {e}")))?;
        }
        let builder =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| invalid(e.to_string()))?
                .with_root_certificates(roots);
        let config = match (&config.certificate_pem, &config.key_pem) {
            (None, None) => builder.with_no_client_auth(),
            (Some(chain), Some(key)) => {
                let chain = CertificateDer::pem_slice_iter(chain.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| invalid(format!("bad client certificate PEM: {e}")))?;
                if chain.is_empty() {
                    return Err(invalid("no client certificate found".into()));
                }
                let key = PrivateKeyDer::from_pem_slice(key.as_bytes())
                    .map_err(|e| invalid(format!("bad client key PEM: {e}")))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| invalid(format!("client key and certificate: {e}")))?
            }
            _ => {
                return Err(invalid(
                    "a client certificate and its key go together".into(),
                ))
            }
        };
        Ok(TlsConnector {
            config: Arc::new(config),
        })
    }

    /// Runs the handshake on `stream`, checking that the broker's certificate names `host`
    /// (a DNS name or an IP address, as in the bootstrap address).
    pub async fn connect<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        host: &str,
        stream: S,
    ) -> io::Result<MaybeTls<S>> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| invalid(format!("{host}: not a host name: {e}")))?;
        let connector = futures_rustls::TlsConnector::from(Arc::clone(&self.config));
        let mut stream = connector.connect(name, stream).await?;
        stream.get_mut().1.set_buffer_limit(Some(SEND_BUFFER_BYTES));
        Ok(MaybeTls::Tls(Box::new(stream)))
    }
}

/// The host of a `host:port` address (`[::1]:9093` gives `::1`).
pub fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// A stream that is plain or TLS, chosen at run time (`security.protocol`).
#[derive(Debug)]
pub enum MaybeTls<S> {
    /// PLAINTEXT or SASL_PLAINTEXT.
    Plain(S),
    /// SSL or SASL_SSL, after the handshake.
    Tls(Box<futures_rustls::client::TlsStream<S>>),
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for MaybeTls<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for MaybeTls<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_flush(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_close(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_taken_from_addresses() {
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host_of("[::1]:9093"), "::1");
        assert_eq!(host_of("localhost"), "localhost");
    }

    #[test]
    fn a_ca_is_required() {
        assert!(TlsConnector::new(&TlsConfig::default()).is_err());
    }
}
