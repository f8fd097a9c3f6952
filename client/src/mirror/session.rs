//! The mirror's sessions: connect, set up topics, load progress, copy windows, sync groups;
//! restarted from the stored progress after retriable errors (contract in the module above).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;
use regex::Regex;
use smol::net::TcpStream;

use super::groups::{self, GroupSync};
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
use crate::producer::{DeliveryFuture, Producer, ProducerConfig, ProducerRecord};
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
        }
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
        Ok(())
    }
}

/// Client settings parsed from `k=v` pairs.
#[derive(Clone, Debug)]
struct Clients {
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

/// Parses one side's settings. Unknown keys are refused rather than ignored: a security setting
/// silently dropped would be a surprise.
fn clients(pairs: &[(String, String)], source_side: bool, exactly_once: bool) -> Result<Clients> {
    let mut c = Clients {
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
        match (source_side, key.as_str()) {
            (_, "client.id") => c.connection.client_id = value.clone(),
            (_, "security.protocol") if value.eq_ignore_ascii_case("PLAINTEXT") => {}
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
                    "{} config {key}={value} is not supported by mk mirror (this client speaks \
                     PLAINTEXT only; see docs/SCALING.md)",
                    if source_side { "source" } else { "target" }
                )))
            }
        }
    }
    if !exactly_once {
        c.producer.transactional_id = None;
    }
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
    let mut state = State {
        report: Report::default(),
        ends: None,
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
            Ok(()) => return Ok(state.report),
            Err(err) if is_retriable(&err) && failures < config.max_restarts => {
                if session.copied_this_session {
                    failures = 0;
                }
                failures += 1;
                state.report.restarts += 1;
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

struct State {
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

async fn connect(addr: &str, config: &ConnectionConfig) -> Result<Connection<TcpStream>> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true).ok();
    Connection::connect(stream, config.clone()).await
}

/// Waits until no transaction is open on `partitions` of the target (last stable offset = high
/// watermark), for at most `timeout` plus a margin; `true` when it had to wait. Kafka's InitProducerId aborts the previous
/// incarnation's open transaction at once; kfake leaves it open until its timeout aborts it,
/// and a commit by the new incarnation before that would commit the killed one's records too.
async fn wait_for_stable_target(
    conn: &mut Connection<TcpStream>,
    partitions: &[TopicPartition],
    timeout: Duration,
) -> Result<bool> {
    let deadline = Instant::now() + timeout + Duration::from_secs(5);
    let mut waited = false;
    let mut by_topic: BTreeMap<&str, Vec<(i32, OffsetSpec)>> = BTreeMap::new();
    for tp in partitions {
        by_topic
            .entry(&tp.topic)
            .or_default()
            .push((tp.partition, OffsetSpec::Latest));
    }
    for (topic, queries) in by_topic {
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
        connect(addr, &clients.connection).await?,
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
    async fn run(&mut self) -> Result<()> {
        let config = self.config;
        let mut source_admin = Admin::new(connect(&config.source, &self.source.connection).await?);
        let mut target_admin = Admin::new(connect(&config.target, &self.target.connection).await?);
        let rf = self.target.replication_factor;
        setup::ensure_progress_topic(&mut target_admin, PROGRESS_TOPIC, rf).await?;
        let mut partitions = Vec::new();
        for topic in source_admin.list_topics().await? {
            let name = topic.name.as_str();
            if topic.is_internal
                || name.starts_with("__")
                || name.starts_with("mk-mirror.")
                || !config.topics.is_match(name)
                || topic.error_code != 0
            {
                continue;
            }
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
        let mut map = load_progress(&config.target, self.target).await?;
        let mut consumer = Consumer::new(
            connect(&config.source, &self.source.connection).await?,
            self.source.consumer.clone(),
        );
        consumer.assign(partitions.iter().cloned());
        for tp in &partitions {
            if let Some(next) = map.get(tp).and_then(|m| m.next_source) {
                consumer.seek(tp, SeekTo::Offset(Offset(next)))?;
            }
        }
        let (mut producer, mut driver) = self.producer(&config.target).await?;
        // At-least-once: one more producer per other broker leading a mirrored partition.
        let mut route = Route::default();
        if !config.exactly_once {
            let mut topics: Vec<&str> = partitions.iter().map(|tp| tp.topic.as_str()).collect();
            topics.push(PROGRESS_TOPIC);
            topics.dedup();
            let leaders = route::leaders(target_admin.connection(), &topics).await?;
            let mut by_node: BTreeMap<i32, usize> = BTreeMap::new();
            for (tp, node) in &leaders.leader {
                let index = match by_node.get(node) {
                    Some(i) => *i,
                    None => {
                        let addr = &leaders.brokers[node];
                        let (p, task) = self.producer(addr).await?;
                        route.others.push((p, task));
                        by_node.insert(*node, route.others.len());
                        route.others.len()
                    }
                };
                route.index.insert(tp.clone(), index);
            }
        }
        if config.exactly_once {
            producer.init_transactions().await?;
            let mut waiting = partitions.clone();
            waiting.push(TopicPartition::new(PROGRESS_TOPIC, 0));
            let timeout =
                Duration::from_millis(self.target.producer.transaction_timeout_ms.max(0) as u64);
            if wait_for_stable_target(target_admin.connection(), &waiting, timeout).await? {
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
        loop {
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
                let next = if i == last {
                    positions.clone()
                } else {
                    let mut next = BTreeMap::new();
                    for r in chunk {
                        next.insert(TopicPartition::new(&*r.topic, r.partition), r.offset.0 + 1);
                    }
                    next
                };
                self.copy_window(&producer, &route, chunk, &next, &mut map)
                    .await?;
                meter.add(chunk.len());
            }
            if let Some(interval) = config.progress_interval {
                if meter.since.elapsed() >= interval {
                    meter.print(&consumer, &positions);
                }
            }
            if !config.once && last_group_sync.elapsed() >= config.group_sync_interval {
                self.sync_groups(&mut source_admin, &mut target_admin, &map)
                    .await?;
                last_group_sync = Instant::now();
            }
        }
        producer.flush().await?;
        drop(producer);
        driver.await;
        route.close().await?;
        self.sync_groups(&mut source_admin, &mut target_admin, &map)
            .await?;
        Ok(())
    }

    async fn producer(&self, addr: &str) -> Result<(Producer, smol::Task<()>)> {
        let (producer, driver) = Producer::new(
            connect(addr, &self.target.connection).await?,
            self.target.producer.clone(),
            SmolRuntime,
        )?;
        Ok((producer, smol::spawn(driver.run())))
    }

    async fn sync_groups(
        &mut self,
        source: &mut Admin<TcpStream>,
        target: &mut Admin<TcpStream>,
        map: &OffsetMap,
    ) -> Result<()> {
        let synced = groups::sync_groups(
            source.connection(),
            target.connection(),
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
        route: &Route,
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
            let to = route.pick(producer, &r.topic, r.partition);
            sent.push((r.partition, r.offset.0, to.send(record).await?));
        }
        route.flush(producer).await?;
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
            let to = route.pick(producer, PROGRESS_TOPIC, 0);
            progress.push((tp.clone(), p, to.send(record).await?));
        }
        if eos {
            producer.commit_transaction().await?;
        } else {
            route.flush(producer).await?;
        }
        for (tp, p, delivery) in progress {
            delivery.await?;
            map.entry(tp).or_default().apply(&p);
        }
        for r in records {
            *self
                .state
                .report
                .copied
                .entry(r.topic.to_string())
                .or_default() += 1;
        }
        if !records.is_empty() {
            self.copied_this_session = true;
        }
        Ok(())
    }
}

/// The at-least-once producers per leading broker (empty: everything goes to the main one).
#[derive(Default)]
struct Route {
    /// Producers connected to the leaders, in the order first needed.
    others: Vec<(Producer, smol::Task<()>)>,
    /// Partition to 1 + its index in `others`.
    index: BTreeMap<TopicPartition, usize>,
}

impl Route {
    fn pick<'a>(&'a self, main: &'a Producer, topic: &str, partition: i32) -> &'a Producer {
        match self.index.get(&TopicPartition::new(topic, partition)) {
            Some(&i) if i > 0 => &self.others[i - 1].0,
            _ => main,
        }
    }

    async fn flush(&self, main: &Producer) -> Result<()> {
        main.flush().await?;
        for (p, _) in &self.others {
            p.flush().await?;
        }
        Ok(())
    }

    async fn close(self) -> Result<()> {
        for (p, task) in self.others {
            p.flush().await?;
            drop(p);
            task.await;
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

    fn print(&mut self, consumer: &Consumer<TcpStream>, positions: &BTreeMap<TopicPartition, i64>) {
        let secs = self.since.elapsed().as_secs_f64().max(1e-3);
        let mut line = format!(
            "mk mirror: {:.0} records/s; lag",
            self.records as f64 / secs
        );
        let mut total = 0;
        for (tp, position) in positions {
            let lag = consumer
                .high_watermark(tp)
                .map_or(0, |h| (h.0 - position).max(0));
            total += lag;
            line.push_str(&format!(" {tp}={lag}"));
        }
        line.push_str(&format!(" (total {total})"));
        eprintln!("{line}");
        *self = Meter::new();
    }
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
