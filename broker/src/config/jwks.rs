//! A listener's JWKS for OAUTHBEARER's signed tokens (I166–I168): the keys read from a
//! `file:` URL or fetched from an `http:`/`https:` endpoint, refreshed after
//! `sasl.oauthbearer.jwks.endpoint.refresh.ms`, and the claims a token must carry. Its own
//! module so that both the listener settings (which hold it) and their resolution (which
//! builds it) can name it without importing each other (I60).
//!
//! Contract (I178):
//! - Startup reads or fetches the keys once; a listener whose JWKS cannot be had does not
//!   start (Kafka's `RefreshingHttpsJwks` throws "Could not refresh JWKS" from its
//!   configuration, which stops the broker).
//! - An endpoint is fetched again by a task on shard 0 ([`crate::server::jwks_refresh`]), the
//!   blocking HTTP call through [`Backend::run_blocking`](minikafka_core::backend::Backend::run_blocking)
//!   (a thread of its own), never on a shard's event loop; a
//!   token's check only reads the keys held. A fetch is bounded in time ([`FETCH_TIMEOUT`],
//!   connecting within [`CONNECT_TIMEOUT`]) and size ([`MAX_JWKS_BYTES`]: a longer body is
//!   refused, not truncated); a failed fetch keeps the keys and is retried after
//!   `...retry.backoff.ms`, doubling up to `...retry.backoff.max.ms`.
//! - A token naming a `kid` the endpoint's keys lack has them fetched at once (I187), as
//!   Kafka's `RefreshingHttpsJwks.maybeExpediteRefresh`: one such fetch in flight per listener
//!   (others wait for it), at most one begun per `...retry.backoff.max.ms`, none for a `kid`
//!   longer than [`MAX_REFRESHING_KID_LEN`]; so a flood of tokens with made-up kids costs the
//!   endpoint at most one fetch per that interval.
//! - Redirects are not followed and no proxy is used; an `https:` endpoint is verified against the OAUTHBEARER
//!   JAAS entry's `ssl.truststore.location` (PEM) when given, else Mozilla's roots.

use std::io::Read as _;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::channel::oneshot;
use futures::future::{FutureExt as _, Shared};

use minikafka_core::auth::jwks::{
    Jwks, SignedValidatorConfig, MAX_JWKS_BYTES, MAX_REFRESHING_KID_LEN,
};

/// How long one fetch of an endpoint may take in all (I178).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to an endpoint may take (I178).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A listener's signed-token validator: the JWKS named by `sasl.oauthbearer.jwks.endpoint.url`
/// and the claims a token must carry (I166–I168). Clones share the keys, so every connection
/// of the listener sees a new set. A `file:` JWKS is read again when `refresh_ms` has passed
/// since the last read, by the connection whose check found the keys stale (a blocking read of
/// at most 1 MiB of a local file, once per interval for the whole listener); an endpoint is
/// fetched by [`JwksRefresher`]'s task (I178). A read or fetch that fails keeps the keys.
#[derive(Clone, Debug)]
pub struct JwksValidator {
    /// The URL the keys came from (for logs).
    pub url: String,
    /// Where the keys are read from.
    source: Source,
    /// How long a read of the keys is used before they are read again.
    refresh_ms: i64,
    /// The keys, and when they were read (ms since the epoch; `NOT_YET_STAMPED` until first used).
    loaded: Arc<RwLock<(Arc<Jwks>, i64)>>,
    /// The fetches an unknown `kid` asked for (I187), shared by every clone.
    expedited: Arc<Mutex<Expedited>>,
    /// The expected issuer, audience, claim names and skew.
    pub config: SignedValidatorConfig,
}

/// An endpoint's fetches asked for by tokens naming a `kid` its keys lack (I187).
#[derive(Default)]
struct Expedited {
    /// When the last one began (ms since the epoch).
    last_started_ms: Option<i64>,
    /// Completes when the one in flight has stored its keys (or failed).
    in_flight: Option<Shared<oneshot::Receiver<()>>>,
}

impl std::fmt::Debug for Expedited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expedited")
            .field("last_started_ms", &self.last_started_ms)
            .field("in_flight", &self.in_flight.is_some())
            .finish()
    }
}

/// What a token naming a `kid` the keys lack is to do (I187).
pub enum Expedite {
    /// Nothing: a fetch began too recently (or the `kid` is too long); check with the keys held.
    No,
    /// Wait for the fetch in flight, then check with the keys it stored.
    Wait(Shared<oneshot::Receiver<()>>),
    /// Run [`JwksRefresher::fetch`] now and [`JwksRefresher::store`] what it gets; dropping
    /// the ticket (after storing, or on failure) releases the waiters.
    Fetch(ExpediteTicket),
}

/// The one expedited fetch in flight (I187): dropped, it lets the next begin and wakes the
/// connections waiting for it.
pub struct ExpediteTicket {
    expedited: Arc<Mutex<Expedited>>,
    done: Option<oneshot::Sender<()>>,
}

impl Drop for ExpediteTicket {
    fn drop(&mut self) {
        lock(&self.expedited).in_flight = None;
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }
}

fn lock(expedited: &Mutex<Expedited>) -> std::sync::MutexGuard<'_, Expedited> {
    match expedited.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Where a listener's JWKS comes from.
#[derive(Clone, Debug)]
enum Source {
    /// A `file:` URL's path.
    File(String),
    /// An `http:` or `https:` endpoint.
    Http(HttpEndpoint),
}

/// An `http(s):` JWKS endpoint: the client (its trust roots and timeouts) and the retry
/// backoff of a failed fetch.
#[derive(Clone, Debug)]
pub struct HttpEndpoint {
    agent: ureq::Agent,
    /// `sasl.oauthbearer.jwks.endpoint.retry.backoff.ms`.
    pub retry_backoff_ms: u64,
    /// `sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms`.
    pub retry_backoff_max_ms: u64,
}

impl HttpEndpoint {
    /// A client for an endpoint, trusting `trust_roots` (DER certificates) when given, else
    /// Mozilla's roots; redirects are not followed, no proxy is used; bounded by the timeouts
    /// above.
    pub fn new(
        trust_roots: Option<Vec<Vec<u8>>>,
        retry_backoff_ms: u64,
        retry_backoff_max_ms: u64,
    ) -> HttpEndpoint {
        use ureq::tls::{Certificate, RootCerts, TlsConfig, TlsProvider};
        let roots = match trust_roots {
            Some(ders) => RootCerts::from(ders.iter().map(|d| Certificate::from_der(d).to_owned())),
            None => RootCerts::WebPki,
        };
        let tls = TlsConfig::builder()
            .provider(TlsProvider::Rustls)
            .root_certs(roots)
            .build();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .tls_config(tls)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_global(Some(FETCH_TIMEOUT))
            .max_redirects(0)
            // Direct: no proxy from the environment (Kafka's JVM client reads none either),
            // so where a fetch goes does not depend on the broker's environment.
            .proxy(None)
            .http_status_as_error(true)
            .build()
            .into();
        HttpEndpoint {
            agent,
            retry_backoff_ms,
            retry_backoff_max_ms,
        }
    }
}

impl PartialEq for JwksValidator {
    fn eq(&self, other: &Self) -> bool {
        self.url == other.url && self.refresh_ms == other.refresh_ms && self.config == other.config
    }
}

impl Eq for JwksValidator {}

impl JwksValidator {
    /// The keys to verify with at `now_ms`. For a `file:` JWKS, the file is read again when
    /// `refresh_ms` has passed since the last read; an endpoint's keys are only read here
    /// (its task fetches them: I178).
    pub fn keys(&self, now_ms: i64) -> Arc<Jwks> {
        let (keys, loaded_ms) = match self.loaded.read() {
            Ok(guard) => (Arc::clone(&guard.0), guard.1),
            Err(poisoned) => (Arc::clone(&poisoned.get_ref().0), poisoned.get_ref().1),
        };
        let Source::File(path) = &self.source else {
            return keys;
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
        match read_jwks(path) {
            Ok(jwks) => guard.0 = Arc::new(jwks),
            Err(why) => tracing::warn!(url = %self.url, %why, "JWKS not re-read; keeping its keys"),
        }
        Arc::clone(&guard.0)
    }

    /// The refresher of an `http(s):` JWKS, which a task runs (I178); `None` for a file.
    pub fn refresher(&self) -> Option<JwksRefresher> {
        match &self.source {
            Source::File(_) => None,
            Source::Http(endpoint) => Some(JwksRefresher {
                url: self.url.clone(),
                endpoint: endpoint.clone(),
                refresh_ms: self.refresh_ms,
                loaded: Arc::clone(&self.loaded),
                expedited: Arc::clone(&self.expedited),
            }),
        }
    }

    /// Reads the JWKS of a `file:` URL (`path`, named by `url`) now: an unreadable, oversized
    /// or malformed file is an error, so a listener never starts without its keys.
    pub fn open(
        url: &str,
        path: &str,
        refresh_ms: i64,
        config: SignedValidatorConfig,
    ) -> Result<JwksValidator, String> {
        let jwks = read_jwks(path)?;
        Ok(Self::with_keys(
            url,
            Source::File(path.to_string()),
            jwks,
            refresh_ms,
            config,
        ))
    }

    /// Fetches the JWKS of an `http(s):` endpoint now, blocking (at startup, before any shard
    /// runs): an endpoint that cannot be reached, answers an error, or sends an oversized or
    /// malformed set is an error, so a listener never starts without its keys (as Kafka).
    pub fn fetch(
        url: &str,
        endpoint: HttpEndpoint,
        refresh_ms: i64,
        config: SignedValidatorConfig,
    ) -> Result<JwksValidator, String> {
        let jwks = fetch_jwks(&endpoint.agent, url)?;
        Ok(Self::with_keys(
            url,
            Source::Http(endpoint),
            jwks,
            refresh_ms,
            config,
        ))
    }

    fn with_keys(
        url: &str,
        source: Source,
        jwks: Jwks,
        refresh_ms: i64,
        config: SignedValidatorConfig,
    ) -> JwksValidator {
        JwksValidator {
            url: url.to_string(),
            source,
            refresh_ms,
            loaded: Arc::new(RwLock::new((Arc::new(jwks), NOT_YET_STAMPED))),
            expedited: Arc::default(),
            config,
        }
    }
}

/// What the refresh task of an `http(s):` JWKS needs (I178): the endpoint, the interval, the
/// backoff, and the keys it replaces (shared with every clone of the validator).
#[derive(Clone, Debug)]
pub struct JwksRefresher {
    /// The endpoint's URL.
    pub url: String,
    endpoint: HttpEndpoint,
    refresh_ms: i64,
    loaded: Arc<RwLock<(Arc<Jwks>, i64)>>,
    expedited: Arc<Mutex<Expedited>>,
}

impl JwksRefresher {
    /// Whether the keys held name `kid`.
    pub fn holds(&self, kid: &str) -> bool {
        match self.loaded.read() {
            Ok(guard) => guard.0.has_kid(kid),
            Err(poisoned) => poisoned.get_ref().0.has_kid(kid),
        }
    }

    /// What a token naming `kid`, which the keys lack, is to do at `now_ms` (I187): wait for
    /// the fetch in flight; else begin one unless one began less than
    /// `...retry.backoff.max.ms` ago (a clock set back allows one).
    pub fn expedite(&self, kid: &str, now_ms: i64) -> Expedite {
        if kid.len() > MAX_REFRESHING_KID_LEN {
            return Expedite::No;
        }
        let mut expedited = lock(&self.expedited);
        if let Some(in_flight) = &expedited.in_flight {
            return Expedite::Wait(in_flight.clone());
        }
        let max_ms = (self.endpoint.retry_backoff_max_ms).max(self.endpoint.retry_backoff_ms);
        let interval = i64::try_from(max_ms).unwrap_or(i64::MAX);
        let too_soon = expedited
            .last_started_ms
            .is_some_and(|last| now_ms >= last && now_ms - last < interval);
        if too_soon {
            return Expedite::No;
        }
        let (done, waiters) = oneshot::channel();
        expedited.last_started_ms = Some(now_ms);
        expedited.in_flight = Some(waiters.shared());
        Expedite::Fetch(ExpediteTicket {
            expedited: Arc::clone(&self.expedited),
            done: Some(done),
        })
    }

    /// How long fetched keys are used before the next fetch.
    pub fn refresh_interval(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.refresh_ms).unwrap_or(u64::MAX))
    }

    /// How long to wait after the `failures`-th failed fetch in a row (1 or more): the retry
    /// backoff doubled for each earlier failure, at most the maximum backoff.
    pub fn retry_wait(&self, failures: u32) -> Duration {
        let base = self.endpoint.retry_backoff_ms;
        let doubled = base.saturating_mul(1u64 << failures.saturating_sub(1).min(32));
        Duration::from_millis(doubled.min(self.endpoint.retry_backoff_max_ms.max(base)))
    }

    /// The blocking fetch, to run through `Backend::run_blocking`.
    pub fn fetch(&self) -> impl FnOnce() -> std::io::Result<Jwks> + Send + 'static {
        let agent = self.endpoint.agent.clone();
        let url = self.url.clone();
        move || fetch_jwks(&agent, &url).map_err(std::io::Error::other)
    }

    /// Replaces the keys every connection of the listener checks with.
    pub fn store(&self, jwks: Jwks) {
        let mut guard = match self.loaded.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        guard.0 = Arc::new(jwks);
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

/// Fetches a JWKS from an endpoint: a GET bounded by the agent's timeouts, a success status,
/// and a body of at most [`MAX_JWKS_BYTES`] (a longer one is refused after one byte more is
/// read: I166, I178).
fn fetch_jwks(agent: &ureq::Agent, url: &str) -> Result<Jwks, String> {
    let mut response = agent
        .get(url)
        .header("Accept", "application/json")
        .call()
        .map_err(|e| format!("cannot fetch {url}: {e}"))?;
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_JWKS_BYTES as u64)
        .read_to_vec()
        .map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => {
                format!("{url}: the JWKS is larger than {MAX_JWKS_BYTES} bytes")
            }
            e => format!("cannot read {url}: {e}"),
        })?;
    Jwks::parse(&body).map_err(|e| format!("{url}: {e}"))
}
