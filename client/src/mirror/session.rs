//! The mirror's sessions: connect, set up topics, load progress, copy windows, sync groups;
//! restarted from the stored progress after retriable errors (contract in the module above).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;
use regex::Regex;
use smol::net::TcpStream as PlainTcp;

use super::Stream as TcpStream;

use super::groups::{self, GroupSync};
use super::metrics::{self, Metrics};
use super::offset_map::{parse_progress_key, progress_key, OffsetMap, Progress, Window};
use super::route;
use super::setup::{self, SetupReport};
use crate::admin::{self, Admin, OffsetSpec};
use crate::connection::{Connection, ConnectionConfig};
use crate::consumer::TopicPartition;
use crate::consumer::{
    Consumer, ConsumerConfig, ConsumerRecord, IsolationLevel, OffsetReset, SeekTo,
};
use crate::error::{Error, Result};
use crate::producer::{Connector, DeliveryFuture, Producer, ProducerConfig, ProducerRecord};
use crate::sasl::SaslConfig;
use crate::tls::{MaybeTls, TlsConfig, TlsConnector};
use crate::{Offset, SmolRuntime};

/// The compacted topic on the target holding the mirror's progress and offset map.
pub const PROGRESS_TOPIC: &str = "mk-mirror.progress";

/// What to mirror and how.
#[derive(Clone, Debug)]
pub struct MirrorConfig {
    /// Source bootstrap address, `HOST:PORT`.
    pub source: String,
    /// Target bootstrap address, `HOST:PORT`.
    pub target: String,
    /// Topics to mirror.
    pub topics: Regex,
    /// Groups whose offsets are synced.
    pub groups: Regex,
    /// Stop once caught up with the source's ends taken at start.
    pub once: bool,
    /// Records and progress in one transaction on the target.
    pub exactly_once: bool,
    /// Client settings for the source (`k=v`).
    pub source_config: Vec<(String, String)>,
    /// Client settings for the target (`k=v`).
    pub target_config: Vec<(String, String)>,
    /// Most records per window (and so per at-least-once duplicate run).
    pub batch_records: usize,
    /// How often lag and rate go to stderr (`None`: never).
    pub progress_interval: Option<Duration>,
    /// How often group offsets are synced while mirroring continuously.
    pub group_sync_interval: Duration,
    /// Restarts in a row after retriable errors before giving up.
    pub max_restarts: u32,
    /// How often the source's topic list is read again while mirroring continuously; a new
    /// matching topic starts a new session, which creates and mirrors it (`None`: never).
    pub refresh_topics_interval: Option<Duration>,
    /// `HOST:PORT` of the Prometheus endpoint (module `metrics`), if any.
    pub metrics_listener: Option<String>,
    /// Set (by `mk mirror`'s SIGINT/SIGTERM handler) to end the run between windows: the
    /// window in flight is copied and its progress stored, the groups are synced, and the run
    /// returns its report. A stop therefore leaves nothing for the next run to copy again,
    /// where a kill leaves up to one window (I198).
    pub stop: Arc<AtomicBool>,
}

impl MirrorConfig {
    /// A configuration with the defaults `mk mirror` uses.
    pub fn new(source: impl Into<String>, target: impl Into<String>) -> MirrorConfig {
        MirrorConfig {
            source: source.into(),
            target: target.into(),
            topics: Regex::new(".*").expect("valid"),
            groups: Regex::new(".*").expect("valid"),
            once: false,
            exactly_once: false,
            source_config: Vec::new(),
            target_config: Vec::new(),
            batch_records: 20_000,
            progress_interval: Some(Duration::from_secs(5)),
            group_sync_interval: Duration::from_secs(10),
            max_restarts: 10,
            refresh_topics_interval: Some(Duration::from_secs(600)),
            metrics_listener: None,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether a stop was asked for (see `stop`).
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Topics created, configs refused, topics not mirrored.
    pub setup: SetupReport,
    /// Records copied per topic (this run; re-copies after a restart count again).
    pub copied: BTreeMap<String, u64>,
    /// The last group sync.
    pub groups: Vec<GroupSync>,
    /// Sessions restarted after retriable errors.
    pub restarts: u32,
    /// Sessions started again because new source topics matched.
    pub topic_refreshes: u32,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for t in &self.setup.topics_created {
            writeln!(f, "created topic {t}")?;
        }
        for r in &self.setup.refused_configs {
            writeln!(
                f,
                "config refused by the target: {} {}={}: {}",
                r.topic, r.name, r.value, r.reason
            )?;
        }
        for (topic, n) in &self.copied {
            writeln!(f, "copied {n} records of {topic}")?;
        }
        for g in &self.groups {
            match &g.skipped {
                Some(why) => writeln!(f, "group {} not synced: {why}", g.group)?,
                None => writeln!(
                    f,
                    "group {} synced: {} partitions",
                    g.group,
                    g.committed.len()
                )?,
            }
            for (tp, (s, t)) in &g.committed {
                writeln!(f, "  {tp}: source offset {s} -> target offset {t}")?;
            }
            for tp in &g.untranslated {
                writeln!(f, "  {tp}: not translated (older than the offset map)")?;
            }
        }
        for p in &self.setup.problems {
            writeln!(f, "problem: {p}")?;
        }
        if self.restarts > 0 {
            writeln!(f, "restarts after retriable errors: {}", self.restarts)?;
        }
        if self.topic_refreshes > 0 {
            writeln!(
                f,
                "sessions started again for new topics: {}",
                self.topic_refreshes
            )?;
        }
        Ok(())
    }
}

/// Client settings parsed from `k=v` pairs.
#[derive(Clone, Debug)]
struct Clients {
    /// `source` or `target`, for error messages.
    side: &'static str,
    /// TLS (`security.protocol` SSL or SASL_SSL); SASL is in `connection`.
    tls: Option<TlsConnector>,
    connection: ConnectionConfig,
    consumer: ConsumerConfig,
    producer: ProducerConfig,
    replication_factor: i16,
}

fn number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T> {
    value
        .parse()
        .map_err(|_| Error::InvalidArgument(format!("{key}={value}: not a number")))
}

/// The security settings of one side, by librdkafka's names, before they are checked together.
#[derive(Default)]
struct Security {
    protocol: Option<String>,
    mechanism: Option<String>,
    username: Option<String>,
    password: Option<String>,
    ca: Option<String>,
    certificate: Option<String>,
    key: Option<String>,
}

impl Security {
    /// Takes `key` when it is a security setting.
    fn take(&mut self, key: &str, value: &str) -> bool {
        let slot = match key {
            "security.protocol" => &mut self.protocol,
            "sasl.mechanism" | "sasl.mechanisms" => &mut self.mechanism,
            "sasl.username" => &mut self.username,
            "sasl.password" => &mut self.password,
            "ssl.ca.location" => &mut self.ca,
            "ssl.certificate.location" => &mut self.certificate,
            "ssl.key.location" => &mut self.key,
            _ => return false,
        };
        *slot = Some(value.to_string());
        true
    }

    /// Checks the settings together (as Kafka's clients do at start): the TLS connector and the
    /// SASL credentials they ask for. A setting the protocol does not use is refused, not
    /// ignored (a `sasl.password` with `security.protocol=SSL` is a mistake worth a word).
    fn resolve(self, side: &str) -> Result<(Option<TlsConnector>, Option<SaslConfig>)> {
        let bad = |why: String| Error::InvalidArgument(format!("{side} config: {why}"));
        let protocol = self
            .protocol
            .as_deref()
            .unwrap_or("PLAINTEXT")
            .to_ascii_uppercase();
        let (tls, sasl) = match protocol.as_str() {
            "PLAINTEXT" => (false, false),
            "SSL" => (true, false),
            "SASL_PLAINTEXT" => (false, true),
            "SASL_SSL" => (true, true),
            other => {
                return Err(bad(format!(
                    "security.protocol={other}: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
                )))
            }
        };
        let sasl = if sasl {
            let mechanism = self
                .mechanism
                .as_deref()
                .unwrap_or("PLAIN")
                .to_ascii_uppercase();
            if !matches!(
                mechanism.as_str(),
                "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512"
            ) {
                return Err(bad(format!(
                    "sasl.mechanism={mechanism}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
                )));
            }
            Some(SaslConfig {
                mechanism,
                username: self.username.ok_or_else(|| {
                    bad(format!("security.protocol={protocol} needs sasl.username"))
                })?,
                password: self.password.ok_or_else(|| {
                    bad(format!("security.protocol={protocol} needs sasl.password"))
                })?,
            })
        } else {
            if let Some(key) = [
                ("sasl.mechanism", &self.mechanism),
                ("sasl.username", &self.username),
                ("sasl.password", &self.password),
            ]
            .iter()
            .find_map(|(k, v)| v.is_some().then_some(*k))
            {
                return Err(bad(format!(
                    "{key} is given but security.protocol={protocol} has no SASL"
                )));
            }
            None
        };
        let tls = if tls {
            let ca = self.ca.as_deref().ok_or_else(|| {
                bad(format!(
                    "security.protocol={protocol} needs ssl.ca.location"
                ))
            })?;
            let files = TlsConfig::from_files(ca, self.certificate.as_deref(), self.key.as_deref())
                .map_err(|e| bad(e.to_string()))?;
            Some(TlsConnector::new(&files).map_err(|e| bad(e.to_string()))?)
        } else {
            if let Some(key) = [
                ("ssl.ca.location", &self.ca),
                ("ssl.certificate.location", &self.certificate),
                ("ssl.key.location", &self.key),
            ]
            .iter()
            .find_map(|(k, v)| v.is_some().then_some(*k))
            {
                return Err(bad(format!(
                    "{key} is given but security.protocol={protocol} has no TLS"
                )));
            }
            None
        };
        Ok((tls, sasl))
    }
}

/// Parses one side's settings. Unknown keys are refused rather than ignored: a security setting
/// silently dropped would be a surprise.
fn clients(pairs: &[(String, String)], source_side: bool, exactly_once: bool) -> Result<Clients> {
    let side = if source_side { "source" } else { "target" };
    let mut security = Security::default();
    let mut c = Clients {
        side,
        tls: None,
        connection: ConnectionConfig {
            client_id: "mk-mirror".into(),
            ..ConnectionConfig::default()
        },
        consumer: ConsumerConfig {
            auto_offset_reset: OffsetReset::Earliest,
            isolation_level: IsolationLevel::ReadCommitted,
            ..ConsumerConfig::default()
        },
        producer: ProducerConfig::default(),
        replication_factor: -1,
    };
    c.producer.batch.max_bytes = 512 * 1024;
    if exactly_once {
        c.producer.transactional_id = Some("mk-mirror".into());
    }
    for (key, value) in pairs {
        if security.take(key, value) {
            continue;
        }
        match (source_side, key.as_str()) {
            (_, "client.id") => c.connection.client_id = value.clone(),
            (true, "isolation.level") => c.consumer.isolation_level = IsolationLevel::parse(value)?,
            (true, "fetch.max.bytes") => c.consumer.max_bytes = number(key, value)?,
            (true, "max.partition.fetch.bytes") => {
                c.consumer.partition_max_bytes = number(key, value)?
            }
            (true, "fetch.max.wait.ms") => {
                c.consumer.max_wait = Duration::from_millis(number(key, value)?)
            }
            (false, "transactional.id") => c.producer.transactional_id = Some(value.clone()),
            (false, "transaction.timeout.ms") => {
                c.producer.transaction_timeout_ms = number(key, value)?
            }
            (false, "compression.type") => {
                c.producer.compression = crate::compression::parse_codec(value)?
            }
            (false, "linger.ms") => {
                c.producer.batch.linger = Duration::from_millis(number(key, value)?)
            }
            (false, "batch.size") => c.producer.batch.max_bytes = number(key, value)?,
            (false, "replication.factor") => c.replication_factor = number(key, value)?,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "{side} config {key}={value} is not supported by mk mirror (see \
                     docs/SCALING.md for the settings it takes)"
                )))
            }
        }
    }
    if !exactly_once {
        c.producer.transactional_id = None;
        // At-least-once: idempotent, so a batch re-sent to a moved leader (I163) or over a new
        // connection after a lost one (I182) is written once.
        c.producer.enable_idempotence = true;
    }
    (c.tls, c.connection.sasl) = security.resolve(side)?;
    c.consumer.connection = c.connection.clone();
    c.producer.connection = c.connection.clone();
    Ok(c)
}

/// True for errors after which a new session (reconnect, reload progress) can succeed.
pub fn is_retriable(err: &Error) -> bool {
    match err {
        Error::Io(_) | Error::ConnectionClosed | Error::ProducerClosed => true,
        Error::Transaction { fatal, cause } => !fatal || is_retriable(cause),
        Error::Kafka { error, .. } => matches!(
            error,
            ResponseError::NotLeaderOrFollower
                | ResponseError::LeaderNotAvailable
                | ResponseError::RequestTimedOut
                | ResponseError::NetworkException
                | ResponseError::NotEnoughReplicas
                | ResponseError::NotEnoughReplicasAfterAppend
                | ResponseError::NotCoordinator
                | ResponseError::CoordinatorNotAvailable
                | ResponseError::CoordinatorLoadInProgress
                | ResponseError::UnknownLeaderEpoch
                | ResponseError::FencedLeaderEpoch
                | ResponseError::KafkaStorageError
        ),
        _ => false,
    }
}

/// Runs the mirror: until caught up with `once`, else until an error a restart cannot cure.
pub async fn run(config: &MirrorConfig) -> Result<Report> {
    let source_clients = clients(&config.source_config, true, config.exactly_once)?;
    let target_clients = clients(&config.target_config, false, config.exactly_once)?;
    if config.batch_records == 0 {
        return Err(Error::InvalidArgument(
            "batch records must be at least 1".into(),
        ));
    }
    let metrics = Metrics::default();
    let _endpoint = match &config.metrics_listener {
        None => None,
        Some(addr) => {
            let listener = smol::net::TcpListener::bind(addr.as_str())
                .await
                .map_err(|e| {
                    Error::InvalidArgument(format!("metrics listener {addr}: cannot listen: {e}"))
                })?;
            if let Ok(local) = listener.local_addr() {
                eprintln!("mk mirror: metrics on http://{local}/metrics");
            }
            Some(smol::spawn(metrics::serve(listener, metrics.clone())))
        }
    };
    let mut state = State {
        report: Report::default(),
        ends: None,
        metrics,
    };
    let mut failures = 0;
    loop {
        let mut session = Session {
            config,
            source: &source_clients,
            target: &target_clients,
            state: &mut state,
            copied_this_session: false,
        };
        match session.run().await {
            Ok(Ended::Done) => return Ok(state.report),
            Ok(Ended::NewTopics(topics)) => {
                state.report.topic_refreshes += 1;
                state.metrics.update(|m| m.topic_refreshes += 1);
                eprintln!(
                    "mk mirror: new topics on the source: {}; starting a new session",
                    topics.join(", ")
                );
            }
            // A stop asked for during a failed session ends the run with the error: the
            // failed window may have reached the target without its progress.
            Err(err)
                if is_retriable(&err) && failures < config.max_restarts && !config.stopping() =>
            {
                if session.copied_this_session {
                    failures = 0;
                }
                failures += 1;
                state.report.restarts += 1;
                state.metrics.update(|m| m.restarts += 1);
                eprintln!(
                    "mk mirror: {err}; restarting from the stored progress ({failures}/{})",
                    config.max_restarts
                );
                smol::Timer::after(Duration::from_millis(500 * u64::from(failures))).await;
            }
            Err(err) => return Err(err),
        }
    }
}

/// How a session ended without an error.
enum Ended {
    /// Caught up (`once`), or nothing more to do.
    Done,
    /// New source topics match: a new session creates and mirrors them.
    NewTopics(Vec<String>),
}

/// Whether a source topic is mirrored: it matches and is neither internal nor the mirror's own.
fn mirrored(config: &MirrorConfig, topic: &admin::TopicMetadata) -> bool {
    let name = topic.name.as_str();
    !(topic.is_internal
        || name.starts_with("__")
        || name.starts_with("mk-mirror.")
        || !config.topics.is_match(name)
        || topic.error_code != 0)
}

struct State {
    metrics: Metrics,
    report: Report,
    /// With `once`: the source's ends taken when the first session started.
    ends: Option<BTreeMap<TopicPartition, i64>>,
}

struct Session<'a> {
    config: &'a MirrorConfig,
    source: &'a Clients,
    target: &'a Clients,
    state: &'a mut State,
    copied_this_session: bool,
}

/// A connection to `addr` with one side's settings: TCP, TLS when asked, then ApiVersions and
/// SASL. A refused certificate or a failed authentication is final (not retriable: a restart
/// would meet it again) and names the side and the address; a lost connection is retriable.
async fn connect(addr: &str, clients: &Clients) -> Result<Connection<TcpStream>> {
    let side = clients.side;
    let stream = PlainTcp::connect(addr).await?;
    stream.set_nodelay(true).ok();
    let stream = match &clients.tls {
        None => MaybeTls::Plain(stream),
        Some(tls) => tls
            .connect(crate::tls::host_of(addr), stream)
            .await
            .map_err(|e| match e.kind() {
                // rustls's verdicts (certificate, protocol version, alert) come as InvalidData.
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput => {
                    Error::Protocol(format!("TLS handshake with the {side} {addr}: {e}"))
                }
                _ => Error::Io(std::sync::Arc::new(e)),
            })?,
    };
    Connection::connect(stream, clients.connection.clone())
        .await
        .map_err(|e| match e {
            Error::Kafka {
                error,
                code,
                context,
            } => Error::Kafka {
                error,
                code,
                context: format!("{side} {addr}: {context}"),
            },
            // A TLS alert after the handshake (TLS 1.3 refuses a missing client certificate
            // here, on the first read): a verdict, not a lost connection.
            Error::Io(e)
                if clients.tls.is_some() && e.kind() == std::io::ErrorKind::InvalidData =>
            {
                Error::Protocol(format!("TLS with the {side} {addr}: {e}"))
            }
            other => other,
        })
}

/// Waits until no transaction is open on `partitions` of the target (last stable offset = high
/// watermark), for at most `timeout` plus a margin; `true` when it had to wait. Kafka's InitProducerId aborts the previous
/// incarnation's open transaction at once; kfake leaves it open until its timeout aborts it,
/// and a commit by the new incarnation before that would commit the killed one's records too.
/// Each partition is asked of its leader (`target` when Metadata named none).
async fn wait_for_stable_target(
    clients: &Clients,
    leaders: &route::Leaders,
    target: &str,
    partitions: &[TopicPartition],
    timeout: Duration,
) -> Result<bool> {
    let deadline = Instant::now() + timeout + Duration::from_secs(5);
    let mut waited = false;
    let mut by_leader: BTreeMap<(String, &str), Vec<(i32, OffsetSpec)>> = BTreeMap::new();
    for tp in partitions {
        by_leader
            .entry((leaders.addr_of(tp, target), &tp.topic))
            .or_default()
            .push((tp.partition, OffsetSpec::Latest));
    }
    let mut conns: BTreeMap<String, Connection<TcpStream>> = BTreeMap::new();
    for ((addr, topic), queries) in by_leader {
        if !conns.contains_key(&addr) {
            conns.insert(addr.clone(), connect(&addr, clients).await?);
        }
        let Some(conn) = conns.get_mut(&addr) else {
            continue;
        };
        loop {
            let stable = admin::list_offsets_at(conn, topic, &queries, 1).await?;
            let end = admin::list_offsets_at(conn, topic, &queries, 0).await?;
            if stable.iter().zip(&end).all(|(s, e)| s.offset == e.offset) {
                break;
            }
            if Instant::now() >= deadline {
                eprintln!("mk mirror: a transaction stays open on {topic} on the target; going on");
                break;
            }
            waited = true;
            smol::Timer::after(Duration::from_millis(100)).await;
        }
    }
    Ok(waited)
}

/// Reads the progress topic from its start to its last stable offset.
async fn load_progress(addr: &str, clients: &Clients) -> Result<OffsetMap> {
    let mut consumer = Consumer::new(
        connect(addr, clients).await?,
        ConsumerConfig {
            isolation_level: IsolationLevel::ReadCommitted,
            auto_offset_reset: OffsetReset::Earliest,
            max_wait: Duration::from_millis(100),
            ..clients.consumer.clone()
        },
    );
    let tp = TopicPartition::new(PROGRESS_TOPIC, 0);
    let end = admin::list_offsets_at(
        consumer.connection(),
        PROGRESS_TOPIC,
        &[(0, OffsetSpec::Latest)],
        1,
    )
    .await?[0]
        .offset
        .unwrap_or(Offset(0));
    consumer.assign([tp.clone()]);
    consumer.seek(&tp, SeekTo::Earliest)?;
    let mut map = OffsetMap::new();
    while consumer.position(&tp).await? < end {
        for record in consumer.poll().await? {
            let (Some(key), Some(value)) = (record.key.as_ref(), record.value.as_ref()) else {
                continue;
            };
            let Some(partition) = parse_progress_key(key) else {
                continue;
            };
            match Progress::decode(value) {
                Ok(progress) => map.entry(partition).or_default().apply(&progress),
                Err(err) => eprintln!(
                    "mk mirror: skipping progress record at {}: {err}",
                    record.offset
                ),
            }
        }
    }
    Ok(map)
}

impl Session<'_> {
    async fn run(&mut self) -> Result<Ended> {
        let config = self.config;
        let mut source_admin = Admin::new(connect(&config.source, self.source).await?);
        let mut target_admin = Admin::new(connect(&config.target, self.target).await?);
        let rf = self.target.replication_factor;
        setup::ensure_progress_topic(&mut target_admin, PROGRESS_TOPIC, rf).await?;
        let mut partitions = Vec::new();
        let mut known = std::collections::BTreeSet::new();
        for topic in source_admin.list_topics().await? {
            let name = topic.name.as_str();
            if !mirrored(config, &topic) {
                continue;
            }
            known.insert(name.to_string());
            if setup::ensure_topic(
                &mut source_admin,
                &mut target_admin,
                &topic,
                rf,
                &mut self.state.report.setup,
            )
            .await?
            {
                partitions.extend(
                    topic
                        .partitions
                        .iter()
                        .map(|p| TopicPartition::new(name, p.partition)),
                );
            }
        }
        let isolation = self.source.consumer.isolation_level.wire();
        if config.once && self.state.ends.is_none() {
            let mut ends = BTreeMap::new();
            let mut by_topic: BTreeMap<&str, Vec<(i32, OffsetSpec)>> = BTreeMap::new();
            for tp in &partitions {
                by_topic
                    .entry(&tp.topic)
                    .or_default()
                    .push((tp.partition, OffsetSpec::Latest));
            }
            for (topic, queries) in by_topic {
                for answer in
                    admin::list_offsets_at(source_admin.connection(), topic, &queries, isolation)
                        .await?
                {
                    ends.insert(
                        TopicPartition::new(topic, answer.partition),
                        answer.offset.map_or(0, |o| o.0),
                    );
                }
            }
            self.state.ends = Some(ends);
        }
        // Reads on the target go to the leaders Metadata names (I162): the progress topic's
        // for the progress, each partition's for its stable offset.
        let mut topics: Vec<&str> = partitions.iter().map(|tp| tp.topic.as_str()).collect();
        topics.push(PROGRESS_TOPIC);
        topics.dedup();
        let leaders = route::leaders(target_admin.connection(), &topics).await?;
        let progress_at = leaders.addr_of(&TopicPartition::new(PROGRESS_TOPIC, 0), &config.target);
        let mut map = load_progress(&progress_at, self.target).await?;
        let mut consumer = Consumer::new(
            connect(&config.source, self.source).await?,
            self.source.consumer.clone(),
        );
        consumer.assign(partitions.iter().cloned());
        for tp in &partitions {
            if let Some(next) = map.get(tp).and_then(|m| m.next_source) {
                consumer.seek(tp, SeekTo::Offset(Offset(next)))?;
            }
        }
        // One routed producer follows the target's leaders (and coordinators) itself (I162):
        // a moved leader is retried in place, in both modes (I163), and so is what a lost
        // connection carried (I182).
        let (mut producer, mut driver) = self.producer(&config.target).await?;
        if config.exactly_once {
            producer.init_transactions().await?;
            let mut waiting = partitions.clone();
            waiting.push(TopicPartition::new(PROGRESS_TOPIC, 0));
            let timeout =
                Duration::from_millis(self.target.producer.transaction_timeout_ms.max(0) as u64);
            if wait_for_stable_target(self.target, &leaders, &config.target, &waiting, timeout)
                .await?
            {
                // The old transaction ended by timeout, which bumps the epoch (fencing the
                // producer just initialised): start again with a fresh one.
                drop(producer);
                driver.await;
                (producer, driver) = self.producer(&config.target).await?;
                producer.init_transactions().await?;
            }
        }
        let mut meter = Meter::new();
        let mut last_group_sync = Instant::now();
        let mut last_refresh = Instant::now();
        let mut ended = Ended::Done;
        loop {
            if config.stopping() {
                break;
            }
            if let Some(ends) = &self.state.ends {
                let mut done = true;
                for tp in &partitions {
                    if consumer.position(tp).await?.0 < ends.get(tp).copied().unwrap_or(0) {
                        done = false;
                        break;
                    }
                }
                if done {
                    break;
                }
            }
            let records = consumer.poll().await?;
            let mut positions = BTreeMap::new();
            for tp in &partitions {
                positions.insert(tp.clone(), consumer.position(tp).await?.0);
            }
            let chunks: Vec<&[ConsumerRecord]> = if records.is_empty() {
                vec![&[]]
            } else {
                records.chunks(config.batch_records).collect()
            };
            let last = chunks.len() - 1;
            for (i, chunk) in chunks.into_iter().enumerate() {
                // Between windows only (a poll can bring many): the last one's records and
                // progress are both stored (I198).
                if config.stopping() {
                    break;
                }
                let next = if i == last {
                    positions.clone()
                } else {
                    let mut next = BTreeMap::new();
                    for r in chunk {
                        next.insert(TopicPartition::new(&*r.topic, r.partition), r.offset.0 + 1);
                    }
                    next
                };
                self.copy_window(&producer, chunk, &next, &mut map).await?;
                meter.add(chunk.len());
            }
            if config.stopping() {
                break;
            }
            let lag = lag(&consumer, &positions);
            self.state.metrics.update(|m| m.lag.clone_from(&lag));
            let interval = config.progress_interval.unwrap_or(Duration::from_secs(5));
            if meter.since.elapsed() >= interval {
                let rate = meter.rate();
                self.state.metrics.update(|m| m.records_per_second = rate);
                if config.progress_interval.is_some() {
                    print_progress(rate, &lag);
                }
                meter = Meter::new();
            }
            if let Some(every) = config.refresh_topics_interval.filter(|_| !config.once) {
                if last_refresh.elapsed() >= every {
                    last_refresh = Instant::now();
                    let new: Vec<String> = source_admin
                        .list_topics()
                        .await?
                        .iter()
                        .filter(|t| mirrored(config, t) && !known.contains(t.name.as_str()))
                        .map(|t| t.name.clone())
                        .collect();
                    if !new.is_empty() {
                        ended = Ended::NewTopics(new);
                        break;
                    }
                }
            }
            if !config.once && last_group_sync.elapsed() >= config.group_sync_interval {
                self.sync_groups(&mut source_admin, &mut target_admin, &map)
                    .await?;
                last_group_sync = Instant::now();
            }
        }
        if config.stopping() {
            eprintln!("mk mirror: stopping: progress stored; syncing the groups");
        }
        producer.flush().await?;
        drop(producer);
        driver.await;
        self.sync_groups(&mut source_admin, &mut target_admin, &map)
            .await?;
        Ok(ended)
    }

    /// The routed producer on the target: `addr` bootstraps it and it connects to every
    /// leader and coordinator the target names (I162). Transactional with --exactly-once,
    /// idempotent otherwise (I163).
    async fn producer(&self, addr: &str) -> Result<(Producer, smol::Task<()>)> {
        let conn = connect(addr, self.target).await?;
        let clients = self.target.clone();
        let connector: Connector<TcpStream> = Box::new(move |addr: String| {
            let clients = clients.clone();
            Box::pin(async move { connect(&addr, &clients).await })
        });
        let (producer, driver) =
            Producer::new_routed(conn, connector, self.target.producer.clone(), SmolRuntime)?;
        Ok((producer, smol::spawn(driver.run())))
    }

    async fn sync_groups(
        &mut self,
        source: &mut Admin<TcpStream>,
        target: &mut Admin<TcpStream>,
        map: &OffsetMap,
    ) -> Result<()> {
        let clients = self.target;
        let synced = groups::sync_groups(
            source.connection(),
            target.connection(),
            |addr: String| async move { connect(&addr, clients).await },
            &self.config.groups,
            map,
        )
        .await?;
        for g in &synced {
            if let Some(why) = &g.skipped {
                eprintln!("mk mirror: group {} not synced: {why}", g.group);
            }
        }
        self.state.report.groups = synced;
        Ok(())
    }

    /// Copies one window and stores its progress: after the records' acknowledgement
    /// (at-least-once), or in the same transaction (exactly-once).
    async fn copy_window(
        &mut self,
        producer: &Producer,
        records: &[ConsumerRecord],
        next: &BTreeMap<TopicPartition, i64>,
        map: &mut OffsetMap,
    ) -> Result<()> {
        let changed: Vec<&TopicPartition> = next
            .iter()
            .filter(|(tp, n)| map.get(*tp).and_then(|m| m.next_source) != Some(**n))
            .map(|(tp, _)| tp)
            .collect();
        if records.is_empty() && changed.is_empty() {
            return Ok(());
        }
        let eos = self.config.exactly_once;
        if eos {
            producer.begin_transaction().await?;
        }
        let mut sent: Vec<(i32, i64, DeliveryFuture)> = Vec::with_capacity(records.len());
        for r in records {
            let record = ProducerRecord {
                topic: r.topic.to_string(),
                partition: Some(r.partition),
                key: r.key.as_ref().map(|k| k.to_vec()),
                value: r.value.as_ref().map(|v| v.to_vec()),
                headers: r
                    .headers
                    .iter()
                    .map(|h| (h.key.clone(), h.value.as_ref().map(|v| v.to_vec())))
                    .collect(),
                timestamp_ms: Some(r.timestamp_ms),
            };
            sent.push((r.partition, r.offset.0, producer.send(record).await?));
        }
        producer.flush().await?;
        let mut windows: BTreeMap<TopicPartition, Window> = BTreeMap::new();
        for (r, (partition, source_offset, delivery)) in records.iter().zip(sent) {
            let delivered = delivery.await?;
            let target_offset = delivered.offset.ok_or_else(|| {
                Error::Protocol("the target acknowledged a record without an offset".into())
            })?;
            windows
                .entry(TopicPartition::new(&*r.topic, partition))
                .or_default()
                .push(source_offset, target_offset.0);
        }
        let mut progress = Vec::new();
        for (tp, next_source) in next {
            let window = windows.get(tp).cloned().unwrap_or_default();
            if window.is_empty() && !changed.contains(&tp) {
                continue;
            }
            let previous = map.get(tp).map_or(0, |m| m.next_target);
            let p = window.progress(*next_source, previous);
            let record = ProducerRecord::new(PROGRESS_TOPIC, p.encode())
                .with_key(progress_key(tp))
                .with_partition(0);
            progress.push((tp.clone(), p, producer.send(record).await?));
        }
        if eos {
            producer.commit_transaction().await?;
        } else {
            producer.flush().await?;
        }
        for (tp, p, delivery) in progress {
            delivery.await?;
            map.entry(tp).or_default().apply(&p);
        }
        let mut copied: BTreeMap<&str, u64> = BTreeMap::new();
        for r in records {
            *copied.entry(&r.topic).or_default() += 1;
        }
        for (topic, n) in &copied {
            *self
                .state
                .report
                .copied
                .entry(topic.to_string())
                .or_default() += n;
        }
        self.state.metrics.update(|m| {
            for (topic, n) in &copied {
                *m.copied.entry(topic.to_string()).or_default() += n;
            }
        });
        if !records.is_empty() {
            self.copied_this_session = true;
        }
        Ok(())
    }
}

/// Records/s and lag on stderr.
struct Meter {
    since: Instant,
    records: usize,
}

impl Meter {
    fn new() -> Meter {
        Meter {
            since: Instant::now(),
            records: 0,
        }
    }

    fn add(&mut self, n: usize) {
        self.records += n;
    }

    /// Records per second since the meter started.
    fn rate(&self) -> f64 {
        self.records as f64 / self.since.elapsed().as_secs_f64().max(1e-3)
    }
}

/// Records behind the source's high watermark, per partition.
fn lag(
    consumer: &Consumer<TcpStream>,
    positions: &BTreeMap<TopicPartition, i64>,
) -> BTreeMap<TopicPartition, i64> {
    positions
        .iter()
        .map(|(tp, position)| {
            let lag = consumer
                .high_watermark(tp)
                .map_or(0, |h| (h.0 - position).max(0));
            (tp.clone(), lag)
        })
        .collect()
}

/// One progress line on stderr: rate and lag.
fn print_progress(rate: f64, lag: &BTreeMap<TopicPartition, i64>) {
    let mut line = format!("mk mirror: {rate:.0} records/s; lag");
    for (tp, n) in lag {
        line.push_str(&format!(" {tp}={n}"));
    }
    line.push_str(&format!(" (total {})", lag.values().sum::<i64>()));
    eprintln!("{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn client_settings_are_applied_or_refused_never_dropped() {
        let source = clients(
            &kv(&[("isolation.level", "read_uncommitted"), ("client.id", "m")]),
            true,
            false,
        )
        .expect("source settings");
        assert_eq!(
            source.consumer.isolation_level,
            IsolationLevel::ReadUncommitted
        );
        assert_eq!(source.consumer.connection.client_id, "m");
        let target = clients(
            &kv(&[("transactional.id", "t"), ("replication.factor", "3")]),
            false,
            true,
        )
        .expect("target settings");
        assert_eq!(target.producer.transactional_id.as_deref(), Some("t"));
        assert_eq!(target.replication_factor, 3);
        // Defaults: read_committed, the target's default replication factor, no transactions
        // without --exactly-once even when an id is given.
        let plain = clients(&kv(&[("transactional.id", "t")]), false, false).expect("target");
        assert_eq!(plain.producer.transactional_id, None);
        assert!(
            plain.producer.enable_idempotence,
            "at-least-once is idempotent (I163)"
        );
        assert_eq!(plain.replication_factor, -1);
        let default = clients(&[], true, false).expect("source");
        assert_eq!(
            default.consumer.isolation_level,
            IsolationLevel::ReadCommitted
        );
        for (pairs, source_side) in [
            (kv(&[("security.protocol", "SASL_SSL")]), true),
            (kv(&[("sasl.mechanism", "PLAIN")]), false),
            (kv(&[("transactional.id", "t")]), true),
            (kv(&[("isolation.level", "read_committed")]), false),
            (kv(&[("linger.ms", "soon")]), false),
        ] {
            assert!(clients(&pairs, source_side, false).is_err(), "{pairs:?}");
        }
    }

    #[test]
    fn security_settings_go_together_or_are_refused() {
        let sasl = clients(
            &kv(&[
                ("security.protocol", "sasl_plaintext"),
                ("sasl.mechanisms", "scram-sha-256"),
                ("sasl.username", "u"),
                ("sasl.password", "p"),
            ]),
            false,
            false,
        )
        .expect("SASL_PLAINTEXT");
        let config = sasl.connection.sasl.as_ref().expect("SASL on");
        assert_eq!(
            (config.mechanism.as_str(), config.username.as_str()),
            ("SCRAM-SHA-256", "u")
        );
        // The consumer and the producer connect with the same credentials.
        assert!(sasl.consumer.connection.sasl.is_some() && sasl.producer.connection.sasl.is_some());
        assert!(sasl.tls.is_none());
        for pairs in [
            // No password; an unknown mechanism; an unknown protocol.
            kv(&[("security.protocol", "SASL_SSL"), ("sasl.username", "u")]),
            kv(&[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "GSSAPI"),
                ("sasl.username", "u"),
                ("sasl.password", "p"),
            ]),
            kv(&[("security.protocol", "TLS")]),
            // TLS without a CA, or with one that cannot be read; a setting the protocol
            // does not use.
            kv(&[("security.protocol", "SSL")]),
            kv(&[
                ("security.protocol", "SSL"),
                ("ssl.ca.location", "/nonexistent/ca.pem"),
            ]),
            kv(&[("ssl.ca.location", "/nonexistent/ca.pem")]),
            kv(&[("security.protocol", "SSL"), ("sasl.password", "p")]),
        ] {
            let err = clients(&pairs, true, false).expect_err("refused");
            assert!(err.to_string().contains("source config"), "{err}");
        }
    }

    #[test]
    fn what_a_restart_can_cure() {
        let kafka = |error: ResponseError| Error::Kafka {
            error,
            code: error.code(),
            context: String::new(),
        };
        assert!(is_retriable(&Error::ConnectionClosed));
        assert!(is_retriable(&kafka(ResponseError::NotLeaderOrFollower)));
        assert!(is_retriable(&kafka(ResponseError::LeaderNotAvailable)));
        assert!(!is_retriable(&kafka(
            ResponseError::TopicAuthorizationFailed
        )));
        assert!(!is_retriable(&kafka(ResponseError::InvalidConfig)));
        assert!(!is_retriable(&Error::Transaction {
            fatal: true,
            cause: Box::new(kafka(ResponseError::ProducerFenced)),
        }));
        assert!(is_retriable(&Error::Transaction {
            fatal: false,
            cause: Box::new(kafka(ResponseError::InvalidTxnState)),
        }));
    }
}
