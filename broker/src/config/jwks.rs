//! A listener's JWKS for OAUTHBEARER's signed tokens (I166–I168): the keys read from a
//! `file:` URL, re-read after `sasl.oauthbearer.jwks.endpoint.refresh.ms`, and the claims a
//! token must carry. Its own module so that both the listener settings (which hold it) and
//! their resolution (which builds it) can name it without importing each other (I60).

use std::io::Read as _;
use std::sync::Arc;

use minikafka_core::auth::jwks::{Jwks, SignedValidatorConfig, MAX_JWKS_BYTES};

/// A listener's signed-token validator: the JWKS read from `sasl.oauthbearer.jwks.endpoint.url`
/// and the claims a token must carry (I166–I168). The file is read again when
/// `sasl.oauthbearer.jwks.endpoint.refresh.ms` has passed since the last read (clones share
/// the keys, so every connection of the listener sees a new set); a read that fails keeps the
/// keys it had. The re-read is a blocking read of at most 1 MiB on the thread of the connection
/// whose check found the keys stale, once per interval for the whole listener.
#[derive(Clone, Debug)]
pub struct JwksValidator {
    /// The URL the keys came from (for logs).
    pub url: String,
    /// The file the URL names.
    path: String,
    /// How long a read of the file is used before it is read again.
    refresh_ms: i64,
    /// The keys, and when they were read (ms since the epoch; `NOT_YET_STAMPED` until first used).
    loaded: Arc<std::sync::RwLock<(Arc<Jwks>, i64)>>,
    /// The expected issuer, audience, claim names and skew.
    pub config: SignedValidatorConfig,
}

impl PartialEq for JwksValidator {
    fn eq(&self, other: &Self) -> bool {
        self.url == other.url && self.refresh_ms == other.refresh_ms && self.config == other.config
    }
}

impl Eq for JwksValidator {}

impl JwksValidator {
    /// The keys to verify with at `now_ms`: the last read, or the file read again when
    /// `refresh_ms` has passed since then.
    pub fn keys(&self, now_ms: i64) -> Arc<Jwks> {
        let (keys, loaded_ms) = match self.loaded.read() {
            Ok(guard) => (Arc::clone(&guard.0), guard.1),
            Err(poisoned) => (Arc::clone(&poisoned.get_ref().0), poisoned.get_ref().1),
        };
        if loaded_ms != NOT_YET_STAMPED && now_ms.saturating_sub(loaded_ms) < self.refresh_ms {
            return keys;
        }
        let mut guard = match self.loaded.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if guard.1 == NOT_YET_STAMPED {
            // Read at startup, before the shards' clock existed: the interval starts now.
            guard.1 = now_ms;
            return Arc::clone(&guard.0);
        }
        if now_ms.saturating_sub(guard.1) < self.refresh_ms {
            return Arc::clone(&guard.0);
        }
        // Whatever the outcome, the next try waits a whole interval.
        guard.1 = now_ms;
        match read_jwks(&self.path) {
            Ok(jwks) => guard.0 = Arc::new(jwks),
            Err(why) => tracing::warn!(url = %self.url, %why, "JWKS not re-read; keeping its keys"),
        }
        Arc::clone(&guard.0)
    }
}

impl JwksValidator {
    /// Reads the JWKS at `path` (named by `url`) now: an unreadable, oversized or malformed
    /// file is an error, so a listener never starts without its keys.
    pub fn open(
        url: &str,
        path: &str,
        refresh_ms: i64,
        config: SignedValidatorConfig,
    ) -> Result<JwksValidator, String> {
        let jwks = read_jwks(path)?;
        Ok(JwksValidator {
            url: url.to_string(),
            path: path.to_string(),
            refresh_ms,
            loaded: Arc::new(std::sync::RwLock::new((Arc::new(jwks), NOT_YET_STAMPED))),
            config,
        })
    }
}

/// The read time of a JWKS read at startup: the settings are parsed before the broker has a
/// clock (it asks its backend for time), so the first `keys(now)` stamps it with `now`.
const NOT_YET_STAMPED: i64 = i64::MIN;

/// Reads a JWKS file, at most [`MAX_JWKS_BYTES`] (one byte more is read to tell a longer file,
/// which the parser refuses: I166).
fn read_jwks(path: &str) -> Result<Jwks, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let mut data = Vec::new();
    file.take(MAX_JWKS_BYTES as u64 + 1)
        .read_to_end(&mut data)
        .map_err(|e| format!("cannot read {path}: {e}"))?;
    Jwks::parse(&data).map_err(|e| format!("{path}: {e}"))
}
