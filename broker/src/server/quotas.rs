//! Client quotas at run time: the configuration in force and the measured rates, shared by
//! every shard, and the throttle time a Produce or Fetch earns.
//!
//! Contract:
//! - [`Quotas`] lives in [`Shared`](super::shared::Shared) (`Send + Sync`): the
//!   configuration is an immutable snapshot replaced whole once stored (I95), the rates sit
//!   behind one short `Mutex` never held across an `.await`.
//! - A request is charged against the quota [`QuotaConfigs::resolve`] finds for its
//!   principal's name and client id (Kafka's order, I82). Its rate is the one of the matched
//!   entity with each `<default>` side read as the request's own name, as Kafka tags its quota
//!   sensors: two users under one `<default>` user quota are measured apart, two client ids
//!   under one user quota together (I80, I96).
//! - The throttle time is `core::quota`'s (Kafka's formula, bounded by the window, I81).
//!   Produce bytes stay recorded when throttled (they were appended); Fetch bytes of a
//!   throttled answer are taken back, since that answer carries no records (Kafka's
//!   `unrecordQuotaSensor`, I97).
//! - Memory is bounded: at most [`MAX_METERS`] rates; at the bound the least recently used
//!   one is dropped (its next request starts a fresh rate).
//! - `request_percentage` (I159): a request is charged the time its handler spent running
//!   (polled, not waiting), as a percentage of one thread's second (Kafka's
//!   `nanosToPercentage`); its throttle is at most one sample (Kafka's request quota caps at
//!   `quota.window.size.seconds`, I158).
//! - `connection_creation_rate` (I160): a new connection is charged to its IP address's
//!   quota (its own `ip` entity, else the default one); over it, the connection is taken
//!   back from the rate and the caller closes it after the throttle time. The broker-wide
//!   `max.connection.creation.rate` and the per-listener one are charged first; over either,
//!   the caller waits before serving the connection (Kafka's acceptor blocks). Both throttles
//!   are at most one sample (I158).
//! - Never: reads a clock (`now` comes from the backend).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use minikafka_core::clock::MonoTime;
use minikafka_core::quota::{EntityName, QuotaConfigs, QuotaKind, SampledRate, Window};
use minikafka_core::sync::Mutex;

/// Most rates kept at once (each a few hundred bytes).
pub const MAX_METERS: usize = 10_000;

/// The quota kinds this broker enforces (and AlterClientQuotas accepts).
pub const ENFORCED: [QuotaKind; 4] = QuotaKind::ALL;

/// Which rate a request is measured in: the kind and the matched entity with its sides read
/// as the request's names (`None`: the entity has no such side).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MeterKey {
    /// The quota kind.
    pub kind: QuotaKind,
    /// The user, when the matched entity has a user side.
    pub user: Option<String>,
    /// The client id, when the matched entity has a client id side.
    pub client_id: Option<String>,
    /// The IP address, for a connection creation rate.
    pub ip: Option<String>,
}

#[derive(Debug)]
struct Meter {
    rate: SampledRate,
    last_ms: u64,
    throttle_ms_total: u64,
    throttled_count: u64,
}

#[derive(Debug, Default)]
struct Meters {
    by_key: HashMap<MeterKey, Meter>,
    /// Throttle totals by kind since startup (never dropped, unlike a meter).
    totals: HashMap<QuotaKind, (u64, u64)>,
}

/// One rate's throttle counts, for the metrics endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThrottleCounts {
    /// Which rate.
    pub key: MeterKey,
    /// Throttle time answered, in ms, summed.
    pub throttle_ms_total: u64,
    /// Answers that carried a throttle time.
    pub throttled_count: u64,
}

/// The broker-wide and per-listener connection creation rates and their limits.
#[derive(Debug)]
struct ConnectionRates {
    /// `max.connection.creation.rate` (`None`: unlimited) and its rate.
    broker: (Option<f64>, SampledRate),
    /// `listener.name.<l>.max.connection.creation.rate` per listener index.
    listeners: Vec<(Option<f64>, SampledRate)>,
}

/// The configuration and rates (see the module documentation).
#[derive(Debug)]
pub struct Quotas {
    configs: RwLock<Arc<QuotaConfigs>>,
    window: Window,
    meters: Mutex<Meters>,
    connections: Mutex<ConnectionRates>,
    /// Whether any `request_percentage` quota is configured: when not, requests are not
    /// timed at all (the hot path pays one relaxed load).
    request_quota_on: std::sync::atomic::AtomicBool,
    /// Nanoseconds charged to `request_percentage` quotas, by [`RequestTimePart`] (I179).
    request_time_ns: [std::sync::atomic::AtomicU64; 2],
}

/// Which part of a request's time on the shard a charge is (I179).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestTimePart {
    /// Decoding the request and running its handler (which encodes the answer).
    Handler = 0,
    /// Writing the answer to the connection (encrypting it on TLS).
    Network = 1,
}

impl RequestTimePart {
    /// The metrics label.
    pub fn label(self) -> &'static str {
        match self {
            RequestTimePart::Handler => "handler",
            RequestTimePart::Network => "network",
        }
    }
}

fn ms(now: MonoTime) -> u64 {
    u64::try_from(now.0.as_millis()).unwrap_or(u64::MAX)
}

impl Quotas {
    /// No quotas, rates measured over `window`.
    pub fn new(window: Window) -> Self {
        Quotas {
            configs: RwLock::new(Arc::new(QuotaConfigs::default())),
            window,
            meters: Mutex::new(Meters::default()),
            connections: Mutex::new(ConnectionRates {
                broker: (None, SampledRate::new(window)),
                listeners: Vec::new(),
            }),
            request_quota_on: std::sync::atomic::AtomicBool::new(false),
            request_time_ns: Default::default(),
        }
    }

    /// Sets the broker-wide and per-listener connection creation limits (connections per
    /// second; `None`: unlimited).
    pub fn set_connection_limits(&self, broker: Option<f64>, listeners: &[Option<f64>]) {
        let mut rates = self.connections.lock();
        rates.broker.0 = broker;
        rates.listeners = listeners
            .iter()
            .map(|limit| (*limit, SampledRate::new(self.window)))
            .collect();
    }

    /// Whether requests are to be timed for a `request_percentage` quota.
    pub fn request_quota_on(&self) -> bool {
        self.request_quota_on
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The configuration in force.
    pub fn configs(&self) -> Arc<QuotaConfigs> {
        Arc::clone(&self.configs.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Replaces the configuration (already stored: I95). Rates are kept: a changed quota
    /// applies to the rate measured so far, as in Kafka.
    pub fn set_configs(&self, configs: QuotaConfigs) {
        let on = configs.has_kind(QuotaKind::RequestPercentage);
        *self.configs.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(configs);
        self.request_quota_on
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// The meter of the `kind` quota that applies to `user`/`client_id`, keyed by the parts of
    /// the entity the quota names (a `<default>` user quota is metered per user), with its
    /// value; `None` when no quota of that kind applies.
    fn user_meter(&self, kind: QuotaKind, user: &str, client_id: &str) -> Option<(MeterKey, f64)> {
        let (entity, quota) = self.configs().resolve(user, client_id, kind)?;
        let read = |side: &Option<EntityName>, name: &str| side.as_ref().map(|_| name.to_string());
        let key = MeterKey {
            kind,
            user: read(&entity.user, user),
            client_id: read(&entity.client_id, client_id),
            ip: None,
        };
        Some((key, quota))
    }

    /// Charges `amount` bytes of `kind` to `user`/`client_id` at `now` and returns the
    /// throttle time in ms (0 when no quota applies or the rate is within it). With
    /// `keep_when_throttled` false a throttled amount is taken back (I97).
    pub fn charge(
        &self,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        amount: u64,
        now: MonoTime,
        keep_when_throttled: bool,
    ) -> u64 {
        let Some((key, quota)) = self.user_meter(kind, user, client_id) else {
            return 0;
        };
        let cap = self.window.sample_ms * u64::from(self.window.samples);
        self.charge_meter(key, quota, amount as f64, ms(now), keep_when_throttled, cap)
    }

    /// Charges a request's decoding and handler time, `busy`, to the `request_percentage`
    /// quota of `user`/`client_id` (I159) and returns the throttle time in ms, at most one
    /// sample (I158); 0 when no quota applies.
    pub fn charge_request_time(
        &self,
        user: &str,
        client_id: &str,
        busy: std::time::Duration,
        now: MonoTime,
    ) -> u64 {
        self.charge_request_part(RequestTimePart::Handler, user, client_id, busy, now)
    }

    /// Charges the time spent writing a request's answer, `busy`, to the same quota (I179),
    /// with no throttle of its own: like Kafka's network-thread time it is recorded, and
    /// weighs on the throttle of the entity's next answers.
    pub fn charge_network_time(
        &self,
        user: &str,
        client_id: &str,
        busy: std::time::Duration,
        now: MonoTime,
    ) {
        self.charge_request_part(RequestTimePart::Network, user, client_id, busy, now);
    }

    /// The time charged to `request_percentage` quotas since startup, handler (decoding
    /// included) and network (writing answers), in that order (I179).
    pub fn request_time_charged(&self) -> [(RequestTimePart, std::time::Duration); 2] {
        use std::sync::atomic::Ordering::Relaxed;
        [RequestTimePart::Handler, RequestTimePart::Network].map(|part| {
            let ns = self.request_time_ns[part as usize].load(Relaxed);
            (part, std::time::Duration::from_nanos(ns))
        })
    }

    fn charge_request_part(
        &self,
        part: RequestTimePart,
        user: &str,
        client_id: &str,
        busy: std::time::Duration,
        now: MonoTime,
    ) -> u64 {
        let kind = QuotaKind::RequestPercentage;
        let Some((key, quota)) = self.user_meter(kind, user, client_id) else {
            return 0;
        };
        let ns = u64::try_from(busy.as_nanos()).unwrap_or(u64::MAX);
        self.request_time_ns[part as usize].fetch_add(ns, std::sync::atomic::Ordering::Relaxed);
        // Kafka's nanosToPercentage: 100 % is one thread busy for the whole second.
        let percent_seconds = busy.as_secs_f64() * 100.0;
        let cap = self.window.sample_ms;
        self.charge_meter(key, quota, percent_seconds, ms(now), true, cap)
    }

    /// Charges one new connection from `ip` to its `connection_creation_rate` (I160):
    /// `Some(throttle ms)` (at most one sample, I158) when over it — the connection is taken
    /// back from every rate and is to be closed after that time — else `None`.
    pub fn charge_ip_connection(&self, ip: std::net::IpAddr, now: MonoTime) -> Option<u64> {
        let quota = self.configs().ip_quota(ip)?;
        let key = MeterKey {
            kind: QuotaKind::ConnectionCreationRate,
            user: None,
            client_id: None,
            ip: Some(ip.to_string()),
        };
        let throttle = self.charge_meter(key, quota, 1.0, ms(now), false, self.window.sample_ms);
        (throttle > 0).then_some(throttle)
    }

    /// Charges one new connection on listener `listener` to the broker-wide and that
    /// listener's connection creation limits and returns how long to wait before serving
    /// it (the longer of the two, at most one sample, I158; Kafka's acceptor waits so).
    pub fn charge_listener_connection(&self, listener: usize, now: MonoTime) -> u64 {
        let now_ms = ms(now);
        let cap = self.window.sample_ms;
        let mut rates = self.connections.lock();
        let charge = |(limit, rate): &mut (Option<f64>, SampledRate)| match limit {
            Some(limit) => {
                rate.record(1.0, now_ms);
                rate.throttle_ms_at_most(*limit, now_ms, cap)
            }
            None => 0,
        };
        let broker = charge(&mut rates.broker);
        let listener = rates.listeners.get_mut(listener).map_or(0, charge);
        broker.max(listener)
    }

    /// Records `amount` in the rate `key` against `quota`; the throttle time, at most `cap`.
    fn charge_meter(
        &self,
        key: MeterKey,
        quota: f64,
        amount: f64,
        now_ms: u64,
        keep_when_throttled: bool,
        cap: u64,
    ) -> u64 {
        let kind = key.kind;
        let mut meters = self.meters.lock();
        if !meters.by_key.contains_key(&key) && meters.by_key.len() >= MAX_METERS {
            let oldest = meters
                .by_key
                .iter()
                .min_by_key(|(_, m)| m.last_ms)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                meters.by_key.remove(&oldest);
            }
        }
        let window = self.window;
        let meter = meters.by_key.entry(key).or_insert_with(|| Meter {
            rate: SampledRate::new(window),
            last_ms: now_ms,
            throttle_ms_total: 0,
            throttled_count: 0,
        });
        meter.last_ms = meter.last_ms.max(now_ms);
        meter.rate.record(amount, now_ms);
        let throttle_ms = meter.rate.throttle_ms_at_most(quota, now_ms, cap);
        if throttle_ms > 0 {
            if !keep_when_throttled {
                meter.rate.record(-amount, now_ms);
            }
            meter.throttle_ms_total = meter.throttle_ms_total.saturating_add(throttle_ms);
            meter.throttled_count += 1;
            let total = meters.totals.entry(kind).or_default();
            total.0 = total.0.saturating_add(throttle_ms);
            total.1 += 1;
        }
        throttle_ms
    }

    /// The most bytes of `kind` one answer may move for `user`/`client_id` (Kafka's
    /// `getMaxValueInQuotaWindow`: the quota × (samples − 1) × sample length), `None` when no
    /// quota applies. Fetch caps its `max_bytes` with it, so that an answer within the quota
    /// window is possible (the first batch still goes whole).
    pub fn max_bytes_in_window(&self, kind: QuotaKind, user: &str, client_id: &str) -> Option<u64> {
        let (_, quota) = self.configs().resolve(user, client_id, kind)?;
        let samples = f64::from(self.window.samples.saturating_sub(1).max(1));
        let bytes = quota * samples * self.window.sample_ms as f64 / 1000.0;
        // A float cast saturates: a huge quota is no cap at all.
        Some(bytes as u64)
    }

    /// Throttle totals by kind since startup: (ms, answers), for every enforced kind.
    pub fn totals(&self) -> Vec<(QuotaKind, u64, u64)> {
        let meters = self.meters.lock();
        ENFORCED
            .iter()
            .map(|kind| {
                let (ms, count) = meters.totals.get(kind).copied().unwrap_or_default();
                (*kind, ms, count)
            })
            .collect()
    }

    /// The throttle counts of every rate kept now that was ever throttled, sorted.
    pub fn throttled(&self) -> Vec<ThrottleCounts> {
        let meters = self.meters.lock();
        let mut out: Vec<ThrottleCounts> = meters
            .by_key
            .iter()
            .filter(|(k, m)| m.throttled_count > 0 && k.ip.is_none())
            .map(|(key, m)| ThrottleCounts {
                key: key.clone(),
                throttle_ms_total: m.throttle_ms_total,
                throttled_count: m.throttled_count,
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::quota::QuotaEntity;
    use std::time::Duration;

    fn at(ms: u64) -> MonoTime {
        MonoTime(Duration::from_millis(ms))
    }

    fn quotas_with(entity: QuotaEntity, kind: QuotaKind, value: f64) -> Quotas {
        let quotas = Quotas::new(Window::default());
        let mut configs = QuotaConfigs::default();
        configs.set(entity, kind, Some(value));
        quotas.set_configs(configs);
        quotas
    }

    #[test]
    fn a_default_user_quota_measures_each_user_apart() {
        let default_user = QuotaEntity {
            user: Some(EntityName::Default),
            client_id: None,
        };
        let kind = QuotaKind::ProducerByteRate;
        let q = quotas_with(default_user, kind, 1_000.0);
        // 10 s window minimum: 10,000 bytes is exactly the quota, 20,000 is twice it.
        assert_eq!(q.charge(kind, "alice", "a", 10_000, at(0), true), 0);
        assert_eq!(q.charge(kind, "bob", "b", 10_000, at(0), true), 0);
        assert_eq!(
            q.charge(kind, "alice", "other", 10_000, at(0), true),
            10_000
        );
        // Not the consumer's quota, and nothing configured for it.
        assert_eq!(
            q.charge(
                QuotaKind::ConsumerByteRate,
                "alice",
                "a",
                1 << 40,
                at(0),
                true
            ),
            0
        );
        let throttled = q.throttled();
        assert_eq!(throttled.len(), 1);
        assert_eq!(throttled[0].key.user.as_deref(), Some("alice"));
        assert_eq!(throttled[0].key.client_id, None);
        assert_eq!(q.totals()[0], (kind, 10_000, 1));
        // 1,000 B/s over 10 whole samples of 1 s.
        assert_eq!(q.max_bytes_in_window(kind, "carol", "c"), Some(10_000));
        assert_eq!(
            q.max_bytes_in_window(QuotaKind::ConsumerByteRate, "carol", "c"),
            None
        );
    }

    #[test]
    fn a_throttled_fetch_is_taken_back() {
        let client = QuotaEntity {
            user: None,
            client_id: Some(EntityName::Named("app".into())),
        };
        let kind = QuotaKind::ConsumerByteRate;
        let q = quotas_with(client, kind, 1_000.0);
        assert!(q.charge(kind, "u", "app", 20_000, at(0), false) > 0);
        // Taken back: the rate is as before, so a small read passes.
        assert_eq!(q.charge(kind, "u", "app", 5_000, at(0), false), 0);
        // Another client id has no quota.
        assert_eq!(q.charge(kind, "u", "x", 1 << 40, at(0), false), 0);
    }

    #[test]
    fn meters_are_bounded() {
        let default_client = QuotaEntity {
            user: None,
            client_id: Some(EntityName::Default),
        };
        let kind = QuotaKind::ProducerByteRate;
        let q = quotas_with(default_client, kind, 1.0);
        for i in 0..(MAX_METERS as u64 + 50) {
            q.charge(kind, "u", &format!("c{i}"), 100, at(i), true);
        }
        assert_eq!(q.meters.lock().by_key.len(), MAX_METERS);
        assert!(q.throttled().len() <= MAX_METERS);
    }
}
