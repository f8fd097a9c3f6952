//! Client quotas, sans-IO: which quota applies to a (user, client id) pair with Kafka's
//! defaults-and-overrides resolution, the sampled rate Kafka measures, and the throttle time
//! a rate over its quota earns.
//!
//! Contract:
//! - Inputs: the quota configuration ([`QuotaConfigs`], as DescribeClientQuotas /
//!   AlterClientQuotas name it), the (user, client id) of a request, the amounts recorded
//!   (bytes, request time, connections) and `now_ms` passed in by the caller.
//! - Outputs: the quota in force and the entity it belongs to (those that share one entity
//!   share one rate, I80), the measured rate, and a throttle time in milliseconds (0 when
//!   within the quota), bounded by the measurement window (I81).
//! - Resolution (Kafka's `DefaultQuotaCallback`, first match wins, per quota kind; I82):
//!   `user+client`, `user+<default client>`, `user`, `<default user>+client`,
//!   `<default user>+<default client>`, `<default user>`, `client`, `<default client>`.
//! - Never: reads a clock; panics on any value (a rate over a zero or negative quota is
//!   simply throttled for the whole window).

use std::collections::{BTreeMap, VecDeque};

/// The quotas Kafka defines per client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuotaKind {
    /// `producer_byte_rate`: Produce bytes per second.
    ProducerByteRate,
    /// `consumer_byte_rate`: Fetch bytes per second.
    ConsumerByteRate,
    /// `request_percentage`: percent of one request-handler thread's time.
    RequestPercentage,
    /// `connection_creation_rate`: new connections per second, per IP address (an `ip`
    /// entity, [`QuotaConfigs::ip_quota`]).
    ConnectionCreationRate,
}

impl QuotaKind {
    /// Every kind.
    pub const ALL: [QuotaKind; 4] = [
        QuotaKind::ProducerByteRate,
        QuotaKind::ConsumerByteRate,
        QuotaKind::RequestPercentage,
        QuotaKind::ConnectionCreationRate,
    ];

    /// Kafka's configuration key.
    pub fn key(self) -> &'static str {
        match self {
            QuotaKind::ProducerByteRate => "producer_byte_rate",
            QuotaKind::ConsumerByteRate => "consumer_byte_rate",
            QuotaKind::RequestPercentage => "request_percentage",
            QuotaKind::ConnectionCreationRate => "connection_creation_rate",
        }
    }

    /// The kind named `key`.
    pub fn from_key(key: &str) -> Option<QuotaKind> {
        QuotaKind::ALL.into_iter().find(|k| k.key() == key)
    }
}

/// One side of an entity: a name, or the default (Kafka's `<default>`, a null name on the
/// wire).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityName {
    /// The default for every name without its own.
    Default,
    /// This name.
    Named(String),
}

/// A quota entity: a user, a client id, or both; each side a name or the default.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QuotaEntity {
    /// The user side, if the entity has one.
    pub user: Option<EntityName>,
    /// The client id side, if the entity has one.
    pub client_id: Option<EntityName>,
}

/// The quota configuration: values per entity and kind, and the connection creation rates
/// of IP entities.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuotaConfigs {
    values: BTreeMap<QuotaEntity, BTreeMap<QuotaKind, f64>>,
    /// `connection_creation_rate` per IP entity (the only key Kafka knows for `ip`).
    ips: BTreeMap<EntityName, f64>,
}

impl QuotaConfigs {
    /// Sets (`Some`) or removes (`None`) one value; an entity left with none is removed.
    pub fn set(&mut self, entity: QuotaEntity, kind: QuotaKind, value: Option<f64>) {
        match value {
            Some(v) => {
                self.values.entry(entity).or_default().insert(kind, v);
            }
            None => {
                if let Some(kinds) = self.values.get_mut(&entity) {
                    kinds.remove(&kind);
                    if kinds.is_empty() {
                        self.values.remove(&entity);
                    }
                }
            }
        }
    }

    /// Sets (`Some`) or removes (`None`) the `connection_creation_rate` of an IP entity
    /// (a named address, as the client wrote it, or the default).
    pub fn set_ip(&mut self, ip: EntityName, value: Option<f64>) {
        match value {
            Some(v) => {
                self.ips.insert(ip, v);
            }
            None => {
                self.ips.remove(&ip);
            }
        }
    }

    /// Every IP entity with its connection creation rate, sorted.
    pub fn ip_entries(&self) -> impl Iterator<Item = (&EntityName, f64)> {
        self.ips.iter().map(|(ip, v)| (ip, *v))
    }

    /// Whether any quota of `kind` is configured (for IPs: any IP entity).
    pub fn has_kind(&self, kind: QuotaKind) -> bool {
        if kind == QuotaKind::ConnectionCreationRate {
            return !self.ips.is_empty();
        }
        self.values.values().any(|kinds| kinds.contains_key(&kind))
    }

    /// The connection creation rate of address `ip` (Kafka's `connectionRateForIp`: its own
    /// entity, else the default IP entity), `None` when neither is set. Named entities are
    /// compared as addresses, so `::ffff:10.0.0.1` and `10.0.0.1` stay distinct as in Kafka's
    /// `InetAddress` map.
    pub fn ip_quota(&self, ip: core::net::IpAddr) -> Option<f64> {
        let named = self.ips.iter().find_map(|(name, v)| match name {
            EntityName::Named(n) if n.parse::<core::net::IpAddr>().ok() == Some(ip) => Some(*v),
            _ => None,
        });
        named.or_else(|| self.ips.get(&EntityName::Default).copied())
    }

    /// Every entity with its values, sorted.
    pub fn entries(&self) -> impl Iterator<Item = (&QuotaEntity, &BTreeMap<QuotaKind, f64>)> {
        self.values.iter()
    }

    /// The quota of `kind` for a request of `user` (the principal's name) and `client_id`,
    /// and the entity it is configured on (I82); `None` when no entity sets it.
    pub fn resolve(
        &self,
        user: &str,
        client_id: &str,
        kind: QuotaKind,
    ) -> Option<(QuotaEntity, f64)> {
        let named = |s: &str| Some(EntityName::Named(s.to_string()));
        let default = || Some(EntityName::Default);
        let order = [
            (named(user), named(client_id)),
            (named(user), default()),
            (named(user), None),
            (default(), named(client_id)),
            (default(), default()),
            (default(), None),
            (None, named(client_id)),
            (None, default()),
        ];
        order.into_iter().find_map(|(user, client_id)| {
            let entity = QuotaEntity { user, client_id };
            let value = *self.values.get(&entity)?.get(&kind)?;
            Some((entity, value))
        })
    }
}

/// The measurement window (Kafka's `quota.window.num` samples of
/// `quota.window.size.seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Samples kept (Kafka's default 11).
    pub samples: u32,
    /// Length of one sample in milliseconds (Kafka's default 1000).
    pub sample_ms: u64,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            samples: 11,
            sample_ms: 1000,
        }
    }
}

/// A rate measured as Kafka's `Rate` over a `SampledStat`: the sum of the samples still in
/// the window over the time they cover, at least `samples - 1` whole samples.
#[derive(Debug, Clone)]
pub struct SampledRate {
    window: Window,
    /// (start of the sample in ms, amount), oldest first; at most `window.samples`.
    buckets: VecDeque<(u64, f64)>,
}

impl SampledRate {
    /// An empty rate over `window` (a zero sample count or length is taken as 1).
    pub fn new(window: Window) -> SampledRate {
        let window = Window {
            samples: window.samples.max(1),
            sample_ms: window.sample_ms.max(1),
        };
        SampledRate {
            window,
            buckets: VecDeque::with_capacity(window.samples as usize),
        }
    }

    fn expire(&mut self, now_ms: u64) {
        let span = self.window.sample_ms * u64::from(self.window.samples);
        while let Some(&(start, _)) = self.buckets.front() {
            if now_ms.saturating_sub(start) >= span {
                self.buckets.pop_front();
            } else {
                break;
            }
        }
    }

    /// Records `amount` at `now_ms` (time never runs backwards here: an earlier `now_ms`
    /// counts in the current sample).
    pub fn record(&mut self, amount: f64, now_ms: u64) {
        self.expire(now_ms);
        match self.buckets.back_mut() {
            Some((start, value)) if now_ms < *start + self.window.sample_ms => *value += amount,
            _ => {
                if self.buckets.len() == self.window.samples as usize {
                    self.buckets.pop_front();
                }
                let start = now_ms - now_ms % self.window.sample_ms;
                self.buckets.push_back((start, amount));
            }
        }
    }

    /// The time the rate is measured over, in ms (Kafka's `Rate.windowSize`).
    pub fn window_ms(&self, now_ms: u64) -> u64 {
        let oldest = self.buckets.front().map_or(now_ms, |&(start, _)| start);
        let elapsed = now_ms.saturating_sub(oldest);
        let min = self.window.sample_ms * u64::from(self.window.samples - 1);
        elapsed.max(min).max(1)
    }

    /// The rate per second at `now_ms`.
    pub fn rate(&mut self, now_ms: u64) -> f64 {
        self.expire(now_ms);
        let total: f64 = self.buckets.iter().map(|&(_, v)| v).sum();
        total * 1000.0 / self.window_ms(now_ms) as f64
    }

    /// How long to throttle for the rate to come back to `quota` per second (Kafka's
    /// `ClientQuotaManager.throttleTime`: `(rate - quota) / quota × window`), 0 within it,
    /// never more than the whole window (I81).
    pub fn throttle_ms(&mut self, quota: f64, now_ms: u64) -> u64 {
        let cap = self.window.sample_ms * u64::from(self.window.samples);
        self.throttle_ms_at_most(quota, now_ms, cap)
    }

    /// [`throttle_ms`](Self::throttle_ms) bounded by `cap` ms instead of the whole window
    /// (Kafka's request and connection quotas cap at one sample, I158).
    pub fn throttle_ms_at_most(&mut self, quota: f64, now_ms: u64, cap: u64) -> u64 {
        let rate = self.rate(now_ms);
        if rate <= quota {
            return 0;
        }
        if quota <= 0.0 || !quota.is_finite() {
            return cap;
        }
        let ms = (rate - quota) / quota * self.window_ms(now_ms) as f64;
        (ms.ceil() as u64).min(cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(user: Option<&str>, client: Option<&str>) -> QuotaEntity {
        let side = |s: Option<&str>| {
            s.map(|n| {
                if n == "<default>" {
                    EntityName::Default
                } else {
                    EntityName::Named(n.to_string())
                }
            })
        };
        QuotaEntity {
            user: side(user),
            client_id: side(client),
        }
    }

    /// Kafka's precedence, one level at a time: each configured level overrides all below.
    #[test]
    fn resolution_follows_kafkas_eight_levels() {
        let levels = [
            entity(Some("alice"), Some("app")),
            entity(Some("alice"), Some("<default>")),
            entity(Some("alice"), None),
            entity(Some("<default>"), Some("app")),
            entity(Some("<default>"), Some("<default>")),
            entity(Some("<default>"), None),
            entity(None, Some("app")),
            entity(None, Some("<default>")),
        ];
        let kind = QuotaKind::ProducerByteRate;
        let mut configs = QuotaConfigs::default();
        assert_eq!(configs.resolve("alice", "app", kind), None);
        // Add from the weakest up: each new level wins.
        for (i, level) in levels.iter().enumerate().rev() {
            configs.set(level.clone(), kind, Some(i as f64));
            assert_eq!(
                configs.resolve("alice", "app", kind),
                Some((level.clone(), i as f64))
            );
        }
        // Another user falls to the default-user levels; other kinds are not set.
        assert_eq!(
            configs.resolve("bob", "app", kind),
            Some((levels[3].clone(), 3.0))
        );
        assert_eq!(
            configs.resolve("alice", "app", QuotaKind::ConsumerByteRate),
            None
        );
        // Removing the strongest level uncovers the next.
        configs.set(levels[0].clone(), kind, None);
        assert_eq!(
            configs.resolve("alice", "app", kind),
            Some((levels[1].clone(), 1.0))
        );
    }

    #[test]
    fn the_rate_is_kafkas_sampled_rate() {
        let window = Window::default();
        let mut rate = SampledRate::new(window);
        // 10 KB at t=0: measured over at least 10 whole samples (10 s).
        rate.record(10_000.0, 0);
        assert_eq!(rate.window_ms(0), 10_000);
        assert!((rate.rate(0) - 1_000.0).abs() < 1e-9);
        // Eleven seconds later the sample has left the window.
        assert_eq!(rate.rate(11_000), 0.0);
    }

    #[test]
    fn throttle_is_the_time_to_come_back_under_the_quota_and_bounded() {
        let mut rate = SampledRate::new(Window::default());
        rate.record(20_000.0, 0);
        // 2,000 B/s measured over 10 s against 1,000 B/s: 10 s more brings it to quota.
        assert_eq!(rate.throttle_ms(1_000.0, 0), 10_000);
        assert_eq!(rate.throttle_ms(2_000.0, 0), 0);
        // Far over the quota: no more than the window (11 s).
        rate.record(1e12, 1);
        assert_eq!(rate.throttle_ms(1.0, 1), 11_000);
        assert_eq!(rate.throttle_ms(0.0, 1), 11_000);
        // Under the quota after waiting: nothing.
        assert_eq!(rate.throttle_ms(1.0, 100_000), 0);
    }

    #[test]
    fn an_ip_quota_is_its_own_else_the_default() {
        let mut configs = QuotaConfigs::default();
        let ip = |s: &str| s.parse::<core::net::IpAddr>().expect("ip");
        assert_eq!(configs.ip_quota(ip("10.0.0.1")), None);
        assert!(!configs.has_kind(QuotaKind::ConnectionCreationRate));
        configs.set_ip(EntityName::Default, Some(5.0));
        configs.set_ip(EntityName::Named("10.0.0.1".into()), Some(2.0));
        assert!(configs.has_kind(QuotaKind::ConnectionCreationRate));
        assert!(!configs.has_kind(QuotaKind::RequestPercentage));
        assert_eq!(configs.ip_quota(ip("10.0.0.1")), Some(2.0));
        assert_eq!(configs.ip_quota(ip("10.0.0.2")), Some(5.0));
        configs.set_ip(EntityName::Default, None);
        assert_eq!(configs.ip_quota(ip("10.0.0.2")), None);
        assert_eq!(configs.ip_entries().count(), 1);
    }

    #[test]
    fn a_capped_throttle_is_at_most_its_cap() {
        let mut rate = SampledRate::new(Window::default());
        rate.record(1e9, 0);
        assert_eq!(rate.throttle_ms_at_most(1.0, 0, 1_000), 1_000);
        assert_eq!(rate.throttle_ms_at_most(1e12, 0, 1_000), 0);
    }

    #[test]
    fn keys_are_kafkas() {
        for kind in QuotaKind::ALL {
            assert_eq!(QuotaKind::from_key(kind.key()), Some(kind));
        }
        assert_eq!(QuotaKind::from_key("io_thread_units"), None);
    }
}
