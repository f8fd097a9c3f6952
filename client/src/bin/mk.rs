//! `mk`: a command-line Kafka tool in the spirit of kcat and Kafka's console tools.
//!
//! ```text
//! mk [-b HOST:PORT] topics create NAME --partitions N [--config k=v]...
//! mk [-b HOST:PORT] topics list | describe NAME | delete NAME
//! mk [-b HOST:PORT] topics alter NAME [--config k=v]... [--delete-config k]... [--validate-only]
//! mk [-b HOST:PORT] records delete TOPIC --partition P --before OFFSET|end
//! mk [-b HOST:PORT] configs describe (--broker N | --broker-default | --topic T)
//! mk [-b HOST:PORT] configs alter (--broker N | --broker-default | --topic T)
//!                                 [--config k=v]... [--delete-config k]... [--validate-only]
//! mk [-b HOST:PORT] produce TOPIC [--key-separator SEP] [--header k=v]... [--partition P]
//!                                 [--acks 0|1|all] [--compression none|gzip|snappy|lz4|zstd]
//!                                 [--transactional-id ID [--abort]]
//! mk [-b HOST:PORT] consume TOPIC [--from beginning|end|OFFSET|@TIMESTAMP_MS] [--partition P]
//!                                 [--group G] [--follow] [--count N] [--format FMT]
//!                                 [--isolation read_uncommitted|read_committed]
//! mk [-b HOST:PORT] offsets TOPIC
//! mk [-b HOST:PORT] transactions list [--state S]... [--producer-id P]... [--duration-ms MS]
//! mk [-b HOST:PORT] transactions describe ID
//! mk [-b HOST:PORT] transactions abort --topic T --partition P --producer-id P
//!                                      --producer-epoch E --coordinator-epoch C
//! mk [-b HOST:PORT] acls list [--topic T | --group G | --cluster | --transactional-id X]
//!                             [--prefixed | --match] [--principal P] [--host H]
//!                             [--operation OP] [--permission allow|deny]
//! mk [-b HOST:PORT] acls add (--topic T | --group G | --cluster | --transactional-id X)
//!                            [--prefixed] --principal P [--host H] --operation OP
//!                            [--permission allow|deny]
//! mk [-b HOST:PORT] acls remove (the filter of `acls list`)
//! mk [-b HOST:PORT] groups list | describe G | delete G
//! mk [-b HOST:PORT] groups reset-offsets G (--topic T[:P,P..]... | --all-topics)
//!        (--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-datetime T) [--dry-run]
//! mk schemas [--registry URL] list [--deleted] | get SUBJECT [--version V] | get --id ID
//!        | register SUBJECT FILE [--type AVRO|JSON|PROTOBUF] | compat SUBJECT FILE [--version V]
//!        | delete SUBJECT [--version V] [--permanent]
//! ```
//!
//! `schemas` talks to a Confluent-compatible schema registry's REST API (minikafka's built-in
//! one by default, `http://127.0.0.1:8081`): `get` prints the schema text, `register` the id,
//! `compat` `compatible` or exits 1 with the reasons, `delete` the versions it deleted (soft,
//! or permanent after a soft delete); FILE `-` is stdin.
//!
//! `consume --group G` joins group G (classic protocol, `range`; `--from` beginning/end is the
//! reset policy when the group has no committed offset), prints what the group assigns, commits
//! what it printed after each batch, and without `--follow` stops once it has caught up with the
//! end offsets seen at start on its assignment. `groups describe` prints per-partition lag as
//! `kafka-consumer-groups.sh --describe` does; `groups reset-offsets` moves committed offsets of
//! an inactive group (clamped into each log) and only prints the plan with `--dry-run`.
//!
//! `topics alter` and `configs alter` change settings with IncrementalAlterConfigs (SET for
//! `--config`, DELETE for `--delete-config`; the others are kept), as `kafka-configs --alter
//! --add-config/--delete-config` does; `--broker-default` is the cluster-wide default
//! (`--entity-default`). `configs describe` prints `name=value (SOURCE)` per setting, marking
//! the read-only ones. `records delete` moves the partition's log start offset to OFFSET
//! (`end`: the high watermark), deleting every record below it, and prints the new low
//! watermark.
//!
//! `offsets` prints each partition's earliest offset, latest offset (the high watermark) and
//! LSO (the last stable offset: ListOffsets latest under read_committed, which stops before
//! the first open transaction). `transactions` is `kafka-transactions.sh`: `list` prints one
//! row per transactional id (filtered by state, producer id, or running longer than
//! `--duration-ms`), `describe` its producer, state, timeout, start and partitions, and
//! `abort` ends a hanging transaction in one partition by writing an ABORT marker there
//! (WriteTxnMarkers), for a producer that will never end it.
//!
//! `produce` sends one record per stdin line and waits for every acknowledgement; with
//! `--transactional-id ID` all of them form one transaction, committed at the end of input (or
//! aborted: with `--abort`, or when a record failed). `consume --isolation read_committed` skips
//! aborted transactions and stops at the last stable offset; `read_uncommitted` (the default)
//! prints every data record; neither prints transaction markers. `consume`
//! prints one line per record with `--format` (placeholders `%o` offset, `%p` partition, `%k`
//! key, `%v` value, `%T` timestamp, `%h` headers as `k=v,…`, `%t` topic, `%%`; escapes `\n`,
//! `\t`, `\\`) and stops at the end offsets seen at start unless `--follow`. Errors print one
//! line on stderr and exit with status 1. Runs on smol.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use futures::{AsyncBufReadExt, StreamExt};
use minikafka_client::acls;
use minikafka_client::admin::{Admin, OffsetSpec};
use minikafka_client::compression::parse_codec;
use minikafka_client::configs::{ConfigChange, ConfigResource};
use minikafka_client::consumer::{ConsumerRecord, OffsetReset};
use minikafka_client::group::admin::{self as group_admin, Committer};
use minikafka_client::group::lag::{
    describe_table, lag_rows, parse_datetime, plan_reset, reset_table, PartitionRange, ResetSpec,
};
use minikafka_client::producer::DeliveryFuture;
use minikafka_client::tls::{MaybeTls, TlsConfig, TlsConnector};
use minikafka_client::txn_admin;
use minikafka_client::{
    Acks, Connection, ConnectionConfig, Consumer, ConsumerConfig, Error, GroupConfig,
    GroupConsumer, IsolationLevel, Offset, Producer, ProducerConfig, ProducerRecord, SeekTo,
    SmolRuntime, TopicPartition,
};
use smol::net::TcpStream;

/// What every command talks over: TCP, or TLS over it (`--security-protocol SSL|SASL_SSL`).
type Stream = MaybeTls<TcpStream>;

#[derive(Parser, Debug)]
#[command(
    name = "mk",
    about = "Talk to a Kafka-protocol broker (minikafka or Kafka)"
)]
struct Cli {
    /// Broker address.
    #[arg(
        short = 'b',
        long = "bootstrap-server",
        default_value = "127.0.0.1:9092"
    )]
    bootstrap_server: String,
    /// Kafka's `security.protocol`: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
    #[arg(long, default_value = "PLAINTEXT")]
    security_protocol: String,
    /// librdkafka's `ssl.ca.location`: a PEM file of the CAs that vouch for the broker (SSL,
    /// SASL_SSL). The broker's certificate must name the host of --bootstrap-server.
    #[arg(long)]
    ssl_ca_location: Option<String>,
    /// librdkafka's `ssl.certificate.location`: the client certificate (PEM) for mutual TLS.
    #[arg(long)]
    ssl_certificate_location: Option<String>,
    /// librdkafka's `ssl.key.location`: the client certificate's key (PEM, unencrypted).
    #[arg(long)]
    ssl_key_location: Option<String>,
    /// Kafka's `sasl.mechanism`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(long, default_value = "PLAIN")]
    sasl_mechanism: String,
    /// Kafka's `sasl.username`.
    #[arg(long)]
    sasl_username: Option<String>,
    /// Kafka's `sasl.password` (or the environment variable MK_SASL_PASSWORD, which keeps it
    /// out of the process list).
    #[arg(long)]
    sasl_password: Option<String>,
    #[command(subcommand)]
    command: Command,
}

/// The connection settings every command uses (SASL from the global flags).
static CONNECTION: std::sync::OnceLock<ConnectionConfig> = std::sync::OnceLock::new();

fn connection_config() -> ConnectionConfig {
    CONNECTION.get().cloned().unwrap_or_default()
}

/// The TLS connector every command uses (`None`: PLAINTEXT or SASL_PLAINTEXT).
static TLS: std::sync::OnceLock<Option<TlsConnector>> = std::sync::OnceLock::new();

/// The connection settings the global flags ask for, and the TLS connector if TLS is on.
fn connection_from(cli: &Cli) -> CliResult<(ConnectionConfig, Option<TlsConnector>)> {
    let protocol = cli.security_protocol.to_ascii_uppercase();
    let (tls, sasl) = match protocol.as_str() {
        "PLAINTEXT" => (false, false),
        "SSL" => (true, false),
        "SASL_PLAINTEXT" => (false, true),
        "SASL_SSL" => (true, true),
        other => {
            return Err(format!(
                "--security-protocol {other}: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
            ))
        }
    };
    let sasl = if sasl {
        Some(minikafka_client::sasl::SaslConfig {
            mechanism: cli.sasl_mechanism.to_ascii_uppercase(),
            username: cli.sasl_username.clone().ok_or(format!(
                "--security-protocol {protocol} needs --sasl-username"
            ))?,
            password: cli
                .sasl_password
                .clone()
                .or_else(|| std::env::var("MK_SASL_PASSWORD").ok())
                .ok_or(format!(
                    "--security-protocol {protocol} needs --sasl-password"
                ))?,
        })
    } else {
        None
    };
    let tls = if tls {
        let ca = cli.ssl_ca_location.as_deref().ok_or(format!(
            "--security-protocol {protocol} needs --ssl-ca-location"
        ))?;
        let config = TlsConfig::from_files(
            ca,
            cli.ssl_certificate_location.as_deref(),
            cli.ssl_key_location.as_deref(),
        )
        .map_err(|e| e.to_string())?;
        Some(TlsConnector::new(&config).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let config = ConnectionConfig {
        sasl,
        ..ConnectionConfig::default()
    };
    Ok((config, tls))
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create, list, describe or delete topics.
    Topics {
        #[command(subcommand)]
        action: TopicsAction,
    },
    /// Produce stdin lines as records.
    Produce {
        /// Topic to write to.
        topic: String,
        /// Split each line at the first SEP into key and value.
        #[arg(long)]
        key_separator: Option<String>,
        /// Header added to every record (repeatable).
        #[arg(long = "header", value_name = "K=V")]
        headers: Vec<String>,
        /// Write every record to this partition.
        #[arg(long)]
        partition: Option<i32>,
        /// Acknowledgements: 0, 1 or all.
        #[arg(long, default_value = "all")]
        acks: String,
        /// Codec: none, gzip, snappy, lz4 or zstd.
        #[arg(long, default_value = "none")]
        compression: String,
        /// Linger before sealing a batch.
        #[arg(long, default_value_t = 5)]
        linger_ms: u64,
        /// Produce every line in one transaction of this `transactional.id`, committed at the
        /// end of input (acks must be all).
        #[arg(long, value_name = "ID")]
        transactional_id: Option<String>,
        /// With --transactional-id: abort the transaction at the end instead of committing.
        #[arg(long, requires = "transactional_id")]
        abort: bool,
    },
    /// Print records.
    Consume {
        /// Topic to read.
        topic: String,
        /// beginning, end, an offset, or @TIMESTAMP_MS.
        #[arg(long, default_value = "beginning")]
        from: String,
        /// Only this partition.
        #[arg(long)]
        partition: Option<i32>,
        /// Keep waiting for new records instead of stopping at the end.
        #[arg(long)]
        follow: bool,
        /// Stop after this many records.
        #[arg(long)]
        count: Option<u64>,
        /// Output format per record.
        #[arg(long, default_value = "%v")]
        format: String,
        /// Consume as a member of this consumer group (committing what is printed).
        #[arg(long, conflicts_with = "partition")]
        group: Option<String>,
        /// read_uncommitted (every record) or read_committed (only committed transactions;
        /// without --follow it stops at the last stable offset).
        #[arg(long, default_value = "read_uncommitted")]
        isolation: String,
    },
    /// List, describe, delete consumer groups, or reset their offsets.
    Groups {
        #[command(subcommand)]
        action: GroupsAction,
    },
    /// Print earliest, latest and last stable offsets per partition.
    Offsets {
        /// Topic.
        topic: String,
    },
    /// List, describe or abort transactions (like kafka-transactions.sh).
    Transactions {
        #[command(subcommand)]
        action: TransactionsAction,
    },
    /// Delete records.
    Records {
        #[command(subcommand)]
        action: RecordsAction,
    },
    /// Describe or alter the configuration of the broker or of a topic.
    Configs {
        #[command(subcommand)]
        action: ConfigsAction,
    },
    /// Copy topics, records and consumer positions to another broker (docs/SCALING.md).
    /// SIGINT or SIGTERM stops it between windows, with the progress stored and the groups
    /// synced (a second one exits at once).
    Mirror(MirrorArgs),
    /// List, read, register, test and delete schemas in a schema registry.
    Schemas {
        /// The registry's URL.
        #[arg(long, default_value = "http://127.0.0.1:8081")]
        registry: String,
        #[command(subcommand)]
        action: SchemasAction,
    },
    /// List, add or remove ACLs (the broker needs `authorizer.class.name`).
    Acls {
        #[command(subcommand)]
        action: AclsAction,
    },
    /// List, add or delete SCRAM users (SCRAM-SHA-256, SCRAM-SHA-512).
    Users {
        #[command(subcommand)]
        action: UsersAction,
    },
    /// Describe or alter client quotas (producer_byte_rate, consumer_byte_rate) per user
    /// and/or client id, as `kafka-configs.sh --entity-type users/clients` does.
    Quotas {
        #[command(subcommand)]
        action: QuotasAction,
    },
}

#[derive(Subcommand, Debug)]
enum SchemasAction {
    /// List the subjects.
    List {
        /// Soft-deleted subjects too.
        #[arg(long)]
        deleted: bool,
    },
    /// Print a schema: a subject's version, or the schema with an id.
    Get {
        /// The subject.
        #[arg(required_unless_present = "id")]
        subject: Option<String>,
        /// The version (a number or latest).
        #[arg(long, default_value = "latest")]
        version: String,
        /// The schema id instead of a subject.
        #[arg(long, conflicts_with = "subject")]
        id: Option<i32>,
    },
    /// Register the schema in FILE (`-`: stdin) under SUBJECT; prints its id.
    Register {
        /// The subject.
        subject: String,
        /// The schema file.
        file: String,
        /// AVRO, JSON or PROTOBUF.
        #[arg(long = "type", default_value = "AVRO")]
        schema_type: String,
    },
    /// Test the schema in FILE against SUBJECT (one version, or per its compatibility level).
    Compat {
        /// The subject.
        subject: String,
        /// The schema file.
        file: String,
        /// Test against this version only.
        #[arg(long)]
        version: Option<String>,
        /// AVRO, JSON or PROTOBUF.
        #[arg(long = "type", default_value = "AVRO")]
        schema_type: String,
    },
    /// Delete a subject, or one of its versions: soft, or permanent after a soft delete.
    Delete {
        /// The subject.
        subject: String,
        /// Only this version.
        #[arg(long)]
        version: Option<String>,
        /// Delete permanently (the subject or version must be soft-deleted first).
        #[arg(long)]
        permanent: bool,
    },
}

/// `mk mirror`'s arguments (the work is in `minikafka_client::mirror`).
#[derive(clap::Args, Debug)]
struct MirrorArgs {
    /// Source broker, HOST:PORT.
    #[arg(long)]
    source: String,
    /// Target broker, HOST:PORT.
    #[arg(long)]
    target: String,
    /// Topics to mirror (a regex matched against the whole name).
    #[arg(long, default_value = ".*")]
    topics: String,
    /// Groups whose committed offsets are translated (a regex matched against the whole id).
    #[arg(long, default_value = ".*")]
    groups: String,
    /// Copy until caught up with the source's ends taken at start, sync offsets, report, exit.
    #[arg(long)]
    once: bool,
    /// Records and progress in one transaction on the target.
    #[arg(long)]
    exactly_once: bool,
    /// Source client setting k=v (repeatable), by librdkafka's names: security.protocol,
    /// sasl.mechanism, sasl.username, sasl.password, ssl.ca.location,
    /// ssl.certificate.location, ssl.key.location, client.id, isolation.level, fetch.max.bytes,
    /// max.partition.fetch.bytes, fetch.max.wait.ms. (The global --security-protocol and
    /// friends are refused with mirror: each side has its own.)
    #[arg(long = "source-config", value_name = "K=V")]
    source_config: Vec<String>,
    /// Target client setting k=v (repeatable): the security settings as for the source, and
    /// client.id, transactional.id, transaction.timeout.ms, compression.type, linger.ms,
    /// batch.size, replication.factor.
    #[arg(long = "target-config", value_name = "K=V")]
    target_config: Vec<String>,
    /// Most records per window (progress is stored after each; bounds duplicates on a crash).
    #[arg(long, default_value_t = 20_000)]
    batch_records: usize,
    /// Seconds between lag lines on stderr (0: none).
    #[arg(long, default_value_t = 5)]
    progress_secs: u64,
    /// Seconds between group offset syncs while mirroring continuously.
    #[arg(long, default_value_t = 10)]
    sync_group_secs: u64,
    /// Seconds between readings of the source's topic list while mirroring continuously; a new
    /// matching topic is created on the target and mirrored (0: never; MirrorMaker 2's
    /// refresh.topics.interval.seconds is 600 too).
    #[arg(long = "refresh-topics-s", default_value_t = 600)]
    refresh_topics_s: u64,
    /// HOST:PORT for a Prometheus endpoint (GET /metrics): lag per partition, records copied,
    /// records/s, restarts.
    #[arg(long, value_name = "HOST:PORT")]
    metrics_listener: Option<String>,
}

#[derive(Subcommand, Debug)]
enum AclsAction {
    /// Print the ACLs the filter selects (all of them without one).
    List {
        #[command(flatten)]
        filter: AclArgs,
    },
    /// Add one ACL.
    Add {
        #[command(flatten)]
        acl: AclArgs,
    },
    /// Remove the ACLs the filter selects, printing them.
    Remove {
        #[command(flatten)]
        filter: AclArgs,
    },
}

/// An ACL, or a filter of ACLs (`kafka-acls.sh`'s options).
#[derive(clap::Args, Debug)]
struct AclArgs {
    /// A topic (`*` for every topic).
    #[arg(long, value_name = "T", group = "acl_resource")]
    topic: Option<String>,
    /// A consumer group.
    #[arg(long, value_name = "G", group = "acl_resource")]
    group: Option<String>,
    /// The cluster.
    #[arg(long, group = "acl_resource")]
    cluster: bool,
    /// A transactional id.
    #[arg(long, value_name = "X", group = "acl_resource")]
    transactional_id: Option<String>,
    /// The name is a prefix (PREFIXED).
    #[arg(long)]
    prefixed: bool,
    /// Filter only: every ACL that covers the name (LITERAL, PREFIXED, `*`).
    #[arg(long = "match", conflicts_with = "prefixed")]
    match_name: bool,
    /// The principal, `User:alice`.
    #[arg(long, value_name = "P")]
    principal: Option<String>,
    /// The client host (an IP address); `*` by default when adding.
    #[arg(long, value_name = "H")]
    host: Option<String>,
    /// The operation: read, write, create, delete, alter, describe, cluster-action,
    /// describe-configs, alter-configs, idempotent-write, all.
    #[arg(long, value_name = "OP")]
    operation: Option<String>,
    /// allow or deny (allow by default when adding).
    #[arg(long, value_name = "allow|deny")]
    permission: Option<String>,
}

impl AclArgs {
    fn resource(&self) -> Option<(acls::ResourceType, String)> {
        use acls::ResourceType as R;
        if let Some(t) = &self.topic {
            Some((R::Topic, t.clone()))
        } else if let Some(g) = &self.group {
            Some((R::Group, g.clone()))
        } else if self.cluster {
            Some((R::Cluster, "kafka-cluster".to_string()))
        } else {
            self.transactional_id
                .as_ref()
                .map(|x| (R::TransactionalId, x.clone()))
        }
    }

    fn operation(&self) -> CliResult<Option<acls::Operation>> {
        self.operation
            .as_deref()
            .map(|op| {
                acls::parse_operation(op)
                    .ok_or_else(|| format!("--operation {op:?}: not an operation"))
            })
            .transpose()
    }

    fn permission(&self) -> CliResult<Option<acls::Permission>> {
        self.permission
            .as_deref()
            .map(|p| {
                acls::parse_permission(p)
                    .ok_or_else(|| format!("--permission {p:?}: allow or deny"))
            })
            .transpose()
    }

    fn filter(&self) -> CliResult<acls::AclFilter> {
        let resource = self.resource();
        let pattern = if self.match_name {
            acls::PatternFilter::Match
        } else if self.prefixed {
            acls::PatternFilter::Exactly(acls::PatternType::Prefixed)
        } else if resource.is_some() {
            acls::PatternFilter::Exactly(acls::PatternType::Literal)
        } else {
            acls::PatternFilter::Any
        };
        Ok(acls::AclFilter {
            resource_type: resource.as_ref().map(|r| r.0),
            resource_name: resource.map(|r| r.1),
            pattern,
            principal: self.principal.clone(),
            host: self.host.clone(),
            operation: self.operation()?,
            permission: self.permission()?,
        })
    }

    fn binding(&self) -> CliResult<acls::AclBinding> {
        let (resource_type, resource_name) = self
            .resource()
            .ok_or("acls add: one of --topic, --group, --cluster, --transactional-id")?;
        if self.match_name {
            return Err("acls add: --match is for filters".into());
        }
        Ok(acls::AclBinding {
            resource_type,
            pattern_type: if self.prefixed {
                acls::PatternType::Prefixed
            } else {
                acls::PatternType::Literal
            },
            resource_name,
            principal: self
                .principal
                .clone()
                .ok_or("acls add: --principal User:NAME")?,
            host: self.host.clone().unwrap_or_else(|| "*".to_string()),
            operation: self.operation()?.ok_or("acls add: --operation OP")?,
            permission: self.permission()?.unwrap_or(acls::Permission::Allow),
        })
    }
}

#[derive(Subcommand, Debug)]
enum UsersAction {
    /// Every SCRAM user with its mechanisms and iterations (or only those named).
    List {
        /// Users to describe (all when none).
        users: Vec<String>,
    },
    /// Create a user's credential, or replace it (a new password). The password is salted
    /// and iterated here; the broker never sees it.
    Add {
        /// Username.
        user: String,
        /// The password; `-` reads one line from stdin (keeps it out of the process list).
        #[arg(long)]
        password: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
        /// PBKDF2 iterations, 4096..16384.
        #[arg(long, default_value_t = minikafka_client::scram_users::DEFAULT_ITERATIONS)]
        iterations: u32,
    },
    /// Delete a user's credential for one mechanism.
    Delete {
        /// Username.
        user: String,
        /// SCRAM-SHA-256 or SCRAM-SHA-512.
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
    },
}

#[derive(Subcommand, Debug)]
enum QuotasAction {
    /// Every entity's quotas, or those of the entity named (exactly that entity).
    Describe {
        #[command(flatten)]
        entity: QuotaEntityArgs,
    },
    /// Set and/or delete quotas of one entity.
    Alter {
        #[command(flatten)]
        entity: QuotaEntityArgs,
        /// `key=value,...` to set (`producer_byte_rate=1048576`).
        #[arg(long, value_name = "K=V,...")]
        add_config: Option<String>,
        /// `key,...` to delete.
        #[arg(long, value_name = "K,...")]
        delete_config: Option<String>,
        /// Check only; change nothing.
        #[arg(long)]
        validate_only: bool,
    },
}

/// A quota entity: a user and/or a client id (each a name or the default), or an IP.
#[derive(clap::Args, Debug)]
struct QuotaEntityArgs {
    /// The user (principal name).
    #[arg(long, conflicts_with = "user_default")]
    user: Option<String>,
    /// The default user (`<default>`).
    #[arg(long)]
    user_default: bool,
    /// The client id.
    #[arg(long, conflicts_with = "client_default")]
    client: Option<String>,
    /// The default client id (`<default>`).
    #[arg(long)]
    client_default: bool,
    /// An IP address (its quota is `connection_creation_rate`, enforced per connection, I160).
    #[arg(long, conflicts_with = "ip_default")]
    ip: Option<String>,
    /// The default IP.
    #[arg(long)]
    ip_default: bool,
}

impl QuotaEntityArgs {
    fn entity(&self) -> minikafka_client::quotas::QuotaEntity {
        let mut parts = Vec::new();
        for (kind, name, default) in [
            ("user", &self.user, self.user_default),
            ("client-id", &self.client, self.client_default),
            ("ip", &self.ip, self.ip_default),
        ] {
            if let Some(name) = name {
                parts.push((kind.to_string(), Some(name.clone())));
            } else if default {
                parts.push((kind.to_string(), None));
            }
        }
        minikafka_client::quotas::QuotaEntity(parts)
    }
}

#[derive(Subcommand, Debug)]
enum RecordsAction {
    /// Delete a partition's records below an offset (DeleteRecords).
    Delete {
        /// Topic.
        topic: String,
        /// Partition.
        #[arg(long)]
        partition: i32,
        /// The new log start offset, or `end` for the high watermark.
        #[arg(long, value_name = "OFFSET|end")]
        before: String,
    },
}

/// Which resource `configs` works on: exactly one of these.
#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
struct ResourceArgs {
    /// The broker with this node id.
    #[arg(long, value_name = "N")]
    broker: Option<i32>,
    /// The cluster-wide broker default.
    #[arg(long)]
    broker_default: bool,
    /// A topic.
    #[arg(long, value_name = "T")]
    topic: Option<String>,
}

impl ResourceArgs {
    fn resource(&self) -> ConfigResource {
        match (&self.topic, self.broker) {
            (Some(topic), _) => ConfigResource::Topic(topic.clone()),
            (None, Some(id)) => ConfigResource::Broker(Some(id)),
            (None, None) => ConfigResource::Broker(None),
        }
    }
}

/// The changes `--config` and `--delete-config` ask for.
#[derive(clap::Args, Debug)]
struct ChangeArgs {
    /// Set a setting (repeatable).
    #[arg(long = "config", value_name = "K=V")]
    configs: Vec<String>,
    /// Remove a setting, back to its default (repeatable).
    #[arg(long = "delete-config", value_name = "K")]
    delete_configs: Vec<String>,
    /// Let the broker check the changes without applying them.
    #[arg(long)]
    validate_only: bool,
}

impl ChangeArgs {
    fn changes(&self) -> CliResult<Vec<ConfigChange>> {
        let mut out = Vec::new();
        for c in &self.configs {
            let (k, v) = split_kv(c, "config")?;
            out.push(ConfigChange::Set(k, v));
        }
        out.extend(
            self.delete_configs
                .iter()
                .cloned()
                .map(ConfigChange::Delete),
        );
        if out.is_empty() {
            return Err("name at least one --config or --delete-config".into());
        }
        Ok(out)
    }
}

#[derive(Subcommand, Debug)]
enum ConfigsAction {
    /// Print every setting with its value and source.
    Describe {
        #[command(flatten)]
        resource: ResourceArgs,
    },
    /// Set or remove settings.
    Alter {
        #[command(flatten)]
        resource: ResourceArgs,
        #[command(flatten)]
        changes: ChangeArgs,
    },
}

#[derive(Subcommand, Debug)]
enum TopicsAction {
    /// Create a topic.
    Create {
        /// Topic name.
        name: String,
        /// Number of partitions.
        #[arg(long, default_value_t = 1)]
        partitions: i32,
        /// Topic config (repeatable).
        #[arg(long = "config", value_name = "K=V")]
        configs: Vec<String>,
    },
    /// List topics.
    List,
    /// Show a topic's partitions and configs.
    Describe {
        /// Topic name.
        name: String,
    },
    /// Delete a topic.
    Delete {
        /// Topic name.
        name: String,
    },
    /// Set or remove a topic's settings (the others are kept).
    Alter {
        /// Topic name.
        name: String,
        #[command(flatten)]
        changes: ChangeArgs,
    },
}

#[derive(Subcommand, Debug)]
enum TransactionsAction {
    /// One row per transactional id: id, producer id, state.
    List {
        /// Only transactions in this state (repeatable), e.g. Ongoing.
        #[arg(long = "state", value_name = "STATE")]
        states: Vec<String>,
        /// Only this producer id (repeatable).
        #[arg(long = "producer-id", value_name = "ID")]
        producer_ids: Vec<i64>,
        /// Only transactions running longer than this.
        #[arg(long, value_name = "MS")]
        duration_ms: Option<i64>,
    },
    /// The producer, state, timeout, start time and partitions of a transactional id.
    Describe {
        /// Transactional id.
        transactional_id: String,
    },
    /// Abort a hanging transaction in one partition (an ABORT marker, WriteTxnMarkers).
    Abort {
        /// Topic.
        #[arg(long)]
        topic: String,
        /// Partition.
        #[arg(long)]
        partition: i32,
        /// Producer id of the hanging transaction.
        #[arg(long)]
        producer_id: i64,
        /// Its producer epoch.
        #[arg(long)]
        producer_epoch: i16,
        /// Coordinator epoch written in the marker.
        #[arg(long)]
        coordinator_epoch: i32,
    },
}

#[derive(Subcommand, Debug)]
enum GroupsAction {
    /// List group ids.
    List,
    /// Per-partition committed offsets, log end offsets, lag and owners.
    Describe {
        /// Group id.
        group: String,
    },
    /// Delete a group (it must have no members).
    Delete {
        /// Group id.
        group: String,
    },
    /// Move the committed offsets of an inactive group.
    ResetOffsets {
        /// Group id.
        group: String,
        /// A topic, or TOPIC:P,P,... for some partitions (repeatable).
        #[arg(long = "topic", value_name = "TOPIC[:PARTITIONS]")]
        topics: Vec<String>,
        /// Every topic the group has committed offsets for.
        #[arg(long, conflicts_with = "topics")]
        all_topics: bool,
        #[command(flatten)]
        spec: ResetSpecArgs,
        /// Print the plan without committing it.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
struct ResetSpecArgs {
    /// The log start offset.
    #[arg(long)]
    to_earliest: bool,
    /// The log end offset.
    #[arg(long)]
    to_latest: bool,
    /// This offset.
    #[arg(long, value_name = "N")]
    to_offset: Option<i64>,
    /// The committed offset plus N (N may be negative).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    shift_by: Option<i64>,
    /// The first offset at or after YYYY-MM-DDTHH:mm:SS.sss (UTC).
    #[arg(long, value_name = "T")]
    to_datetime: Option<String>,
}

impl ResetSpecArgs {
    fn spec(&self) -> CliResult<ResetSpec> {
        if self.to_earliest {
            return Ok(ResetSpec::ToEarliest);
        }
        if self.to_latest {
            return Ok(ResetSpec::ToLatest);
        }
        if let Some(n) = self.to_offset {
            return Ok(ResetSpec::ToOffset(n));
        }
        if let Some(n) = self.shift_by {
            return Ok(ResetSpec::ShiftBy(n));
        }
        if let Some(t) = &self.to_datetime {
            return parse_datetime(t)
                .map(ResetSpec::ToDatetime)
                .ok_or_else(|| format!("--to-datetime {t:?}: expected YYYY-MM-DDTHH:mm:SS.sss"));
        }
        Err("name one of --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime".into())
    }
}

/// A failure to report: one line on stderr.
type CliResult<T> = Result<T, String>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match connection_from(&cli) {
        Ok((config, tls)) => {
            let _ = CONNECTION.set(config);
            let _ = TLS.set(tls);
        }
        Err(message) => {
            eprintln!("mk: error: {message}");
            return ExitCode::FAILURE;
        }
    }
    match smol::block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mk: error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn kafka(err: Error) -> String {
    err.to_string()
}

async fn connect_tcp(addr: &str) -> CliResult<TcpStream> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    stream.set_nodelay(true).ok();
    Ok(stream)
}

/// A connection to the broker, in TLS when `--security-protocol` says so.
async fn connect_stream(addr: &str) -> CliResult<Stream> {
    let stream = connect_tcp(addr).await?;
    match TLS.get().and_then(Option::as_ref) {
        None => Ok(MaybeTls::Plain(stream)),
        Some(tls) => tls
            .connect(minikafka_client::tls::host_of(addr), stream)
            .await
            .map_err(|e| format!("TLS handshake with {addr} failed: {e}")),
    }
}

async fn connect(addr: &str) -> CliResult<Connection<Stream>> {
    let stream = connect_stream(addr).await?;
    Connection::connect(stream, connection_config())
        .await
        .map_err(|e| format!("cannot talk to {addr}: {e}"))
}

async fn mirror(args: MirrorArgs) -> CliResult<()> {
    use minikafka_client::mirror::{run, MirrorConfig};
    let anchored = |re: &str| {
        regex::Regex::new(&format!("^(?:{re})$")).map_err(|e| format!("bad regex {re:?}: {e}"))
    };
    let pairs = |list: &[String]| {
        list.iter()
            .map(|kv| split_kv(kv, "config"))
            .collect::<CliResult<Vec<_>>>()
    };
    let mut config = MirrorConfig::new(args.source, args.target);
    config.topics = anchored(&args.topics)?;
    config.groups = anchored(&args.groups)?;
    config.once = args.once;
    config.exactly_once = args.exactly_once;
    config.source_config = pairs(&args.source_config)?;
    config.target_config = pairs(&args.target_config)?;
    config.batch_records = args.batch_records;
    config.group_sync_interval = Duration::from_secs(args.sync_group_secs);
    config.progress_interval =
        (args.progress_secs > 0).then(|| Duration::from_secs(args.progress_secs));
    config.refresh_topics_interval =
        (args.refresh_topics_s > 0).then(|| Duration::from_secs(args.refresh_topics_s));
    config.metrics_listener = args.metrics_listener;
    // The first SIGINT/SIGTERM asks for a stop between windows (I198); a second one, while
    // stopping, exits at once as the default action would.
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 1, config.stop.clone())
            .and_then(|_| signal_hook::flag::register(signal, config.stop.clone()))
            .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    }
    let report = run(&config).await.map_err(kafka)?;
    print!("{report}");
    Ok(())
}

fn split_kv(text: &str, what: &str) -> CliResult<(String, String)> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{what} {text:?} is not of the form k=v"))
}

async fn run(cli: Cli) -> CliResult<()> {
    let addr = cli.bootstrap_server.as_str();
    match cli.command {
        Command::Mirror(args) => {
            // Each side has its own settings: the global flags would be silently ignored.
            if !cli.security_protocol.eq_ignore_ascii_case("PLAINTEXT")
                || cli.sasl_username.is_some()
                || cli.ssl_ca_location.is_some()
            {
                return Err("mk mirror takes each side's security settings as \
                     --source-config/--target-config k=v (security.protocol=..., sasl.*, \
                     ssl.*), not the global --security-protocol flags"
                    .into());
            }
            mirror(args).await
        }
        Command::Topics { action } => topics(addr, action).await,
        Command::Produce {
            topic,
            key_separator,
            headers,
            partition,
            acks,
            compression,
            linger_ms,
            transactional_id,
            abort,
        } => {
            let mut config = ProducerConfig {
                acks: Acks::parse(&acks).map_err(kafka)?,
                compression: parse_codec(&compression).map_err(kafka)?,
                transactional_id,
                connection: connection_config(),
                ..ProducerConfig::default()
            };
            let end = match (&config.transactional_id, abort) {
                (None, _) => TxnEnd::None,
                (Some(_), false) => TxnEnd::Commit,
                (Some(_), true) => TxnEnd::Abort,
            };
            config.batch.linger = Duration::from_millis(linger_ms);
            let headers = headers
                .iter()
                .map(|h| split_kv(h, "header"))
                .collect::<CliResult<Vec<_>>>()?;
            produce(addr, &topic, key_separator, headers, partition, config, end).await
        }
        Command::Consume {
            topic,
            from,
            follow,
            count,
            format,
            group: Some(group),
            isolation,
            ..
        } => {
            let reading = Reading {
                follow,
                count,
                format: &format,
                isolation: IsolationLevel::parse(&isolation).map_err(kafka)?,
            };
            consume_group(addr, &topic, &group, &from, reading).await
        }
        Command::Consume {
            topic,
            from,
            partition,
            follow,
            count,
            format,
            group: None,
            isolation,
        } => {
            let isolation = IsolationLevel::parse(&isolation).map_err(kafka)?;
            let reading = Reading {
                follow,
                count,
                format: &format,
                isolation,
            };
            consume(addr, &topic, &from, partition, reading).await
        }
        Command::Offsets { topic } => offsets(addr, &topic).await,
        Command::Transactions { action } => transactions(addr, action).await,
        Command::Groups { action } => groups(addr, action).await,
        Command::Records { action } => records(addr, action).await,
        Command::Configs { action } => configs(addr, action).await,
        Command::Schemas { registry, action } => schemas(&registry, action).await,
        Command::Acls { action } => acls_command(addr, action).await,
        Command::Users { action } => users(addr, action).await,
        Command::Quotas { action } => quotas_command(addr, action).await,
    }
}

/// The schema text in `file` (`-`: stdin).
fn read_schema_file(file: &str) -> CliResult<String> {
    if file == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| format!("reading stdin: {e}"))?;
        return Ok(text);
    }
    std::fs::read_to_string(file).map_err(|e| format!("reading {file}: {e}"))
}

fn schema_body(file: &str, schema_type: &str) -> CliResult<serde_json::Value> {
    let schema = read_schema_file(file)?;
    let schema_type = schema_type.to_ascii_uppercase();
    Ok(serde_json::json!({ "schema": schema, "schemaType": schema_type }))
}

async fn schemas(registry: &str, action: SchemasAction) -> CliResult<()> {
    use minikafka_client::schemas::{call, encode_segment, parse_url};
    let url = parse_url(registry).map_err(|e| e.to_string())?;
    let (method, path, body) = match &action {
        SchemasAction::List { deleted } => ("GET", format!("/subjects?deleted={deleted}"), None),
        SchemasAction::Get { id: Some(id), .. } => ("GET", format!("/schemas/ids/{id}"), None),
        SchemasAction::Get {
            subject, version, ..
        } => {
            let subject = encode_segment(subject.as_deref().unwrap_or_default());
            let version = encode_segment(version);
            (
                "GET",
                format!("/subjects/{subject}/versions/{version}"),
                None,
            )
        }
        SchemasAction::Register {
            subject,
            file,
            schema_type,
        } => {
            let path = format!("/subjects/{}/versions", encode_segment(subject));
            ("POST", path, Some(schema_body(file, schema_type)?))
        }
        SchemasAction::Compat {
            subject,
            file,
            version,
            schema_type,
        } => {
            let against = version
                .as_deref()
                .map_or_else(String::new, |v| format!("/{}", encode_segment(v)));
            let path = format!(
                "/compatibility/subjects/{}/versions{against}?verbose=true",
                encode_segment(subject)
            );
            ("POST", path, Some(schema_body(file, schema_type)?))
        }
        SchemasAction::Delete {
            subject,
            version,
            permanent,
        } => {
            let version = version
                .as_deref()
                .map_or_else(String::new, |v| format!("/versions/{}", encode_segment(v)));
            let path = format!(
                "/subjects/{}{version}?permanent={permanent}",
                encode_segment(subject)
            );
            ("DELETE", path, None)
        }
    };
    // The schema registry speaks plain HTTP whatever the broker's listener speaks.
    let stream = connect_tcp(&url.authority).await?;
    let answer = call(stream, &url, method, &path, body.as_ref())
        .await
        .map_err(|e| format!("schema registry {registry}: {e}"))?;
    let mut out = std::io::stdout().lock();
    let io = |e: std::io::Error| e.to_string();
    match action {
        SchemasAction::List { .. } => {
            for subject in answer.as_array().into_iter().flatten() {
                writeln!(out, "{}", subject.as_str().unwrap_or_default()).map_err(io)?;
            }
        }
        SchemasAction::Get { .. } => {
            let schema = answer["schema"].as_str().unwrap_or_default();
            writeln!(out, "{schema}").map_err(io)?;
        }
        SchemasAction::Register { .. } => writeln!(out, "id {}", answer["id"]).map_err(io)?,
        SchemasAction::Compat { .. } => {
            if answer["is_compatible"] != serde_json::Value::Bool(true) {
                return Err(format!("incompatible: {}", answer["messages"]));
            }
            writeln!(out, "compatible").map_err(io)?;
        }
        SchemasAction::Delete { subject, .. } => {
            let versions = match &answer {
                serde_json::Value::Array(versions) => versions
                    .iter()
                    .map(serde_json::Value::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                other => other.to_string(),
            };
            writeln!(out, "deleted {subject} versions {versions}").map_err(io)?;
        }
    }
    Ok(())
}

async fn users(addr: &str, action: UsersAction) -> CliResult<()> {
    use minikafka_client::scram_users::parse_mechanism;
    let mut admin = Admin::new(connect(addr).await?);
    match action {
        UsersAction::List { users } => {
            for user in admin.describe_scram_users(&users).await.map_err(kafka)? {
                let creds: Vec<String> = user
                    .credentials
                    .iter()
                    .map(|(m, i)| format!("{m}(iterations={i})"))
                    .collect();
                println!("{}\t{}", user.name, creds.join(","));
            }
        }
        UsersAction::Add {
            user,
            password,
            mechanism,
            iterations,
        } => {
            let password = if password == "-" {
                let mut line = String::new();
                std::io::stdin()
                    .read_line(&mut line)
                    .map_err(|e| format!("reading the password: {e}"))?;
                line.trim_end_matches(['\r', '\n']).to_string()
            } else {
                password
            };
            let m = parse_mechanism(&mechanism).map_err(kafka)?;
            admin
                .upsert_scram_user(&user, m, &password, iterations)
                .await
                .map_err(kafka)?;
            println!("user {user}: {} set", m.name());
        }
        UsersAction::Delete { user, mechanism } => {
            let m = parse_mechanism(&mechanism).map_err(kafka)?;
            admin.delete_scram_user(&user, m).await.map_err(kafka)?;
            println!("user {user}: {} deleted", m.name());
        }
    }
    Ok(())
}

async fn quotas_command(addr: &str, action: QuotasAction) -> CliResult<()> {
    use minikafka_client::quotas::Match;
    let mut admin = Admin::new(connect(addr).await?);
    match action {
        QuotasAction::Describe { entity } => {
            let entity = entity.entity();
            let components: Vec<(String, Match)> = entity
                .0
                .iter()
                .map(|(t, n)| {
                    let m = n.clone().map_or(Match::Default, Match::Exact);
                    (t.clone(), m)
                })
                .collect();
            let strict = !components.is_empty();
            for quota in admin
                .describe_client_quotas(&components, strict)
                .await
                .map_err(kafka)?
            {
                let values: Vec<String> = quota
                    .values
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                println!("{}\t{}", quota.entity, values.join(","));
            }
        }
        QuotasAction::Alter {
            entity,
            add_config,
            delete_config,
            validate_only,
        } => {
            let entity = entity.entity();
            if entity.0.is_empty() {
                return Err(
                    "quotas alter: name an entity (--user, --client, their defaults)".into(),
                );
            }
            let mut set = Vec::new();
            for pair in add_config
                .iter()
                .flat_map(|c| c.split(','))
                .filter(|p| !p.is_empty())
            {
                let (k, v) = pair
                    .split_once('=')
                    .ok_or_else(|| format!("quotas alter: {pair:?} is not key=value"))?;
                let v: f64 = v
                    .trim()
                    .parse()
                    .map_err(|_| format!("quotas alter: {v:?} is not a number"))?;
                set.push((k.trim().to_string(), v));
            }
            let remove: Vec<String> = delete_config
                .iter()
                .flat_map(|c| c.split(','))
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty())
                .collect();
            if set.is_empty() && remove.is_empty() {
                return Err("quotas alter: --add-config and/or --delete-config".into());
            }
            admin
                .alter_client_quotas(&entity, &set, &remove, validate_only)
                .await
                .map_err(kafka)?;
            let what = if validate_only { "valid" } else { "altered" };
            println!("quotas of {entity}: {what}");
        }
    }
    Ok(())
}

async fn acls_command(addr: &str, action: AclsAction) -> CliResult<()> {
    let mut admin = Admin::new(connect(addr).await?);
    match action {
        AclsAction::List { filter } => {
            for acl in admin
                .describe_acls(&filter.filter()?)
                .await
                .map_err(kafka)?
            {
                println!("{}", acls::describe(&acl));
            }
        }
        AclsAction::Add { acl } => {
            let binding = acl.binding()?;
            admin
                .create_acls(std::slice::from_ref(&binding))
                .await
                .map_err(kafka)?;
            println!("added {}", acls::describe(&binding));
        }
        AclsAction::Remove { filter } => {
            for acl in admin.delete_acls(&filter.filter()?).await.map_err(kafka)? {
                println!("removed {}", acls::describe(&acl));
            }
        }
    }
    Ok(())
}

async fn records(addr: &str, action: RecordsAction) -> CliResult<()> {
    let RecordsAction::Delete {
        topic,
        partition,
        before,
    } = action;
    let before = match before.as_str() {
        "end" => None,
        n => Some(Offset(
            n.parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| format!("--before {n:?}: expected an offset (0 or more) or end"))?,
        )),
    };
    let mut admin = Admin::new(connect(addr).await?);
    let low = admin
        .delete_records(&topic, partition, before)
        .await
        .map_err(kafka)?;
    println!(
        "deleted records of {topic}-{partition}: log start offset {}",
        low.0
    );
    Ok(())
}

async fn configs(addr: &str, action: ConfigsAction) -> CliResult<()> {
    let mut admin = Admin::new(connect(addr).await?);
    let mut out = std::io::stdout().lock();
    let io = |e: std::io::Error| format!("writing output: {e}");
    match action {
        ConfigsAction::Describe { resource } => {
            for c in admin
                .describe_configs(&resource.resource())
                .await
                .map_err(kafka)?
            {
                let value = c.value.as_deref().unwrap_or("<null>");
                let read_only = if c.read_only { ", read-only" } else { "" };
                writeln!(out, "{}={} ({}{read_only})", c.name, value, c.source.name())
                    .map_err(io)?;
            }
        }
        ConfigsAction::Alter { resource, changes } => {
            alter(&mut admin, &resource.resource(), &changes, &mut out).await?;
        }
    }
    Ok(())
}

async fn alter(
    admin: &mut Admin<Stream>,
    resource: &ConfigResource,
    changes: &ChangeArgs,
    out: &mut impl Write,
) -> CliResult<()> {
    let list = changes.changes()?;
    admin
        .alter_configs(resource, &list, changes.validate_only)
        .await
        .map_err(kafka)?;
    let verb = if changes.validate_only {
        "validated"
    } else {
        "altered"
    };
    let what = match resource {
        ConfigResource::Topic(name) => format!("topic {name}"),
        ConfigResource::Broker(Some(id)) => format!("broker {id}"),
        ConfigResource::Broker(None) => "the broker default".to_string(),
    };
    writeln!(out, "{verb} {} setting(s) of {what}", list.len())
        .map_err(|e| format!("writing output: {e}"))
}

async fn topics(addr: &str, action: TopicsAction) -> CliResult<()> {
    let mut admin = Admin::new(connect(addr).await?);
    let mut out = std::io::stdout().lock();
    let io = |e: std::io::Error| format!("writing output: {e}");
    match action {
        TopicsAction::Create {
            name,
            partitions,
            configs,
        } => {
            if partitions < 1 {
                return Err("--partitions must be at least 1".into());
            }
            let configs = configs
                .iter()
                .map(|c| split_kv(c, "config"))
                .collect::<CliResult<Vec<_>>>()?;
            admin
                .create_topic(&name, partitions, &configs)
                .await
                .map_err(kafka)?;
            writeln!(out, "created topic {name} with {partitions} partitions").map_err(io)?;
        }
        TopicsAction::List => {
            for t in admin.list_topics().await.map_err(kafka)? {
                writeln!(out, "{}", t.name).map_err(io)?;
            }
        }
        TopicsAction::Describe { name } => {
            let d = admin.describe_topic(&name).await.map_err(kafka)?;
            writeln!(
                out,
                "Topic: {}\tPartitionCount: {}",
                d.metadata.name,
                d.metadata.partition_count()
            )
            .map_err(io)?;
            for p in &d.metadata.partitions {
                writeln!(out, "\tPartition: {}\tLeader: {}", p.partition, p.leader).map_err(io)?;
            }
            if !d.configs.is_empty() {
                writeln!(out, "Configs:").map_err(io)?;
                for c in &d.configs {
                    let marker = if c.is_default { " (default)" } else { "" };
                    let value = c.value.as_deref().unwrap_or("<null>");
                    writeln!(out, "\t{}={}{}", c.name, value, marker).map_err(io)?;
                }
            }
        }
        TopicsAction::Delete { name } => {
            admin.delete_topic(&name).await.map_err(kafka)?;
            writeln!(out, "deleted topic {name}").map_err(io)?;
        }
        TopicsAction::Alter { name, changes } => {
            alter(&mut admin, &ConfigResource::Topic(name), &changes, &mut out).await?;
        }
    }
    Ok(())
}

async fn produce(
    addr: &str,
    topic: &str,
    key_separator: Option<String>,
    headers: Vec<(String, String)>,
    partition: Option<i32>,
    config: ProducerConfig,
    end: TxnEnd,
) -> CliResult<()> {
    if key_separator.as_deref() == Some("") {
        return Err("--key-separator must not be empty".into());
    }
    let stream = connect_stream(addr).await?;
    let (producer, driver) = Producer::connect(stream, config, SmolRuntime)
        .await
        .map_err(|e| format!("cannot talk to {addr}: {e}"))?;
    let driver = smol::spawn(driver.run());
    if end != TxnEnd::None {
        producer.init_transactions().await.map_err(kafka)?;
        producer.begin_transaction().await.map_err(kafka)?;
    }
    let stdin = smol::Unblock::new(std::io::stdin());
    let mut lines = futures::io::BufReader::new(stdin).lines();
    let mut pending: VecDeque<DeliveryFuture> = VecDeque::new();
    let mut line_number = 0u64;
    let mut failure: Option<String> = None;
    while let Some(line) = lines.next().await {
        let line = line.map_err(|e| format!("reading stdin: {e}"))?;
        line_number += 1;
        let mut record = ProducerRecord {
            topic: topic.to_string(),
            partition,
            ..ProducerRecord::default()
        };
        match key_separator.as_deref() {
            Some(sep) => {
                let (key, value) = line
                    .split_once(sep)
                    .ok_or_else(|| format!("line {line_number} has no key separator {sep:?}"))?;
                record.key = Some(key.as_bytes().to_vec());
                record.value = Some(value.as_bytes().to_vec());
            }
            None => record.value = Some(line.into_bytes()),
        }
        record.headers = headers
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.as_bytes().to_vec())))
            .collect();
        pending.push_back(producer.send(record).await.map_err(kafka)?);
        // Bound the futures kept: wait for the oldest half once many are outstanding.
        if pending.len() >= 10_000 {
            for _ in 0..5_000 {
                if let Some(delivery) = pending.pop_front() {
                    if let Err(e) = delivery.await {
                        failure.get_or_insert_with(|| e.to_string());
                    }
                }
            }
        }
    }
    producer.flush().await.map_err(kafka)?;
    for delivery in pending {
        if let Err(e) = delivery.await {
            failure.get_or_insert_with(|| e.to_string());
        }
    }
    match end {
        TxnEnd::None => {}
        // A failed record leaves the transaction abortable: abort it rather than commit.
        TxnEnd::Commit if failure.is_none() => {
            producer.commit_transaction().await.map_err(kafka)?;
        }
        TxnEnd::Commit | TxnEnd::Abort => {
            producer.abort_transaction().await.map_err(kafka)?;
        }
    }
    drop(producer);
    driver.await;
    match failure {
        Some(message) => Err(message),
        None => Ok(()),
    }
}

fn parse_from(from: &str) -> CliResult<SeekTo> {
    match from {
        "beginning" | "earliest" => Ok(SeekTo::Earliest),
        "end" | "latest" => Ok(SeekTo::Latest),
        _ => {
            if let Some(ts) = from.strip_prefix('@') {
                let ms = ts
                    .parse::<i64>()
                    .map_err(|_| format!("--from {from:?}: bad timestamp"))?;
                return Ok(SeekTo::Timestamp(ms));
            }
            let offset = from
                .parse::<i64>()
                .ok()
                .filter(|o| *o >= 0)
                .ok_or_else(|| {
                    format!("--from {from:?}: expected beginning, end, an offset or @TIMESTAMP_MS")
                })?;
            Ok(SeekTo::Offset(Offset(offset)))
        }
    }
}

/// Expands `%` placeholders and `\` escapes of `format` for `record`.
fn format_record(format: &str, record: &ConsumerRecord, out: &mut Vec<u8>) {
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        match c {
            '%' => match chars.next() {
                Some('o') => out.extend_from_slice(record.offset.0.to_string().as_bytes()),
                Some('p') => out.extend_from_slice(record.partition.to_string().as_bytes()),
                Some('k') => out.extend_from_slice(record.key.as_deref().unwrap_or_default()),
                Some('v') => out.extend_from_slice(record.value.as_deref().unwrap_or_default()),
                Some('T') => out.extend_from_slice(record.timestamp_ms.to_string().as_bytes()),
                Some('t') => out.extend_from_slice(record.topic.as_bytes()),
                Some('h') => {
                    for (i, h) in record.headers.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(h.key.as_bytes());
                        out.push(b'=');
                        out.extend_from_slice(h.value.as_deref().unwrap_or_default());
                    }
                }
                Some('%') => out.push(b'%'),
                Some(other) => {
                    out.push(b'%');
                    out.extend_from_slice(other.to_string().as_bytes());
                }
                None => out.push(b'%'),
            },
            '\\' => match chars.next() {
                Some('n') => out.push(b'\n'),
                Some('t') => out.push(b'\t'),
                Some('\\') => out.push(b'\\'),
                Some(other) => {
                    out.push(b'\\');
                    out.extend_from_slice(other.to_string().as_bytes());
                }
                None => out.push(b'\\'),
            },
            _ => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
}

/// How `mk consume` reads and prints.
struct Reading<'a> {
    follow: bool,
    count: Option<u64>,
    format: &'a str,
    isolation: IsolationLevel,
}

/// The end offsets of every partition of `topic`: the log end, or with read_committed the last
/// stable offset (what such a consumer can reach).
async fn end_offsets(
    addr: &str,
    topic: &str,
    isolation: IsolationLevel,
) -> CliResult<Vec<minikafka_client::admin::PartitionOffset>> {
    let mut conn = connect(addr).await?;
    let meta = minikafka_client::admin::topic_metadata(&mut conn, topic, false)
        .await
        .map_err(kafka)?;
    let queries: Vec<(i32, OffsetSpec)> = meta
        .partitions
        .iter()
        .map(|p| (p.partition, OffsetSpec::Latest))
        .collect();
    minikafka_client::admin::list_offsets_at(&mut conn, topic, &queries, isolation.wire())
        .await
        .map_err(kafka)
}

async fn consume(
    addr: &str,
    topic: &str,
    from: &str,
    partition: Option<i32>,
    reading: Reading<'_>,
) -> CliResult<()> {
    let Reading {
        follow,
        count,
        format,
        isolation,
    } = reading;
    let seek = parse_from(from)?;
    let ends = end_offsets(addr, topic, isolation).await?;
    let mut end_of: BTreeMap<TopicPartition, Offset> = BTreeMap::new();
    for p in ends {
        if partition.is_none_or(|only| only == p.partition) {
            end_of.insert(
                TopicPartition::new(topic, p.partition),
                p.offset.unwrap_or(Offset(0)),
            );
        }
    }
    if end_of.is_empty() {
        return Err(format!(
            "topic {topic} has no partition {}",
            partition.unwrap_or(-1)
        ));
    }
    let config = ConsumerConfig {
        auto_offset_reset: OffsetReset::Earliest,
        isolation_level: isolation,
        connection: connection_config(),
        ..ConsumerConfig::default()
    };
    let mut consumer = Consumer::new(connect(addr).await?, config);
    consumer.assign(end_of.keys().cloned());
    for tp in end_of.keys() {
        consumer.seek(tp, seek).map_err(kafka)?;
    }
    let stdout = std::io::stdout();
    let mut printed = 0u64;
    let mut line = Vec::new();
    loop {
        if count.is_some_and(|n| printed >= n) {
            return Ok(());
        }
        if !follow {
            let mut at_end = true;
            for (tp, end) in &end_of {
                if consumer.position(tp).await.map_err(kafka)? < *end {
                    at_end = false;
                }
            }
            if at_end {
                return Ok(());
            }
        }
        let records = consumer.poll().await.map_err(kafka)?;
        let mut out = stdout.lock();
        for record in &records {
            if count.is_some_and(|n| printed >= n) {
                break;
            }
            if !follow
                && end_of.get(&TopicPartition::new(topic, record.partition)) <= Some(&record.offset)
            {
                continue;
            }
            line.clear();
            format_record(format, record, &mut line);
            line.push(b'\n');
            out.write_all(&line)
                .map_err(|e| format!("writing output: {e}"))?;
            printed += 1;
        }
        out.flush().map_err(|e| format!("writing output: {e}"))?;
    }
}

/// How `mk produce` ends: no transaction, or one committed or aborted at the end of input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxnEnd {
    None,
    Commit,
    Abort,
}

/// How long `consume --group` without `--follow` waits for the group to assign it anything.
const GROUP_IDLE_EXIT: Duration = Duration::from_secs(15);

async fn consume_group(
    addr: &str,
    topic: &str,
    group: &str,
    from: &str,
    reading: Reading<'_>,
) -> CliResult<()> {
    let Reading {
        follow,
        count,
        format,
        isolation,
    } = reading;
    let mut config = GroupConfig::new(group, vec![topic.to_string()]);
    config.consumer.isolation_level = isolation;
    config.auto_offset_reset = match parse_from(from)? {
        SeekTo::Earliest => OffsetReset::Earliest,
        SeekTo::Latest => OffsetReset::Latest,
        _ => return Err("with --group, --from is beginning or end (the reset policy)".into()),
    };
    // What is printed is committed explicitly, so nothing unprinted is ever committed.
    config.auto_commit_interval = None;
    config.consumer.connection.client_id = "mk".to_string();
    let mut end_of: BTreeMap<TopicPartition, Offset> = BTreeMap::new();
    for p in end_offsets(addr, topic, isolation).await? {
        end_of.insert(
            TopicPartition::new(topic, p.partition),
            p.offset.unwrap_or(Offset(0)),
        );
    }
    let mut consumer = GroupConsumer::connect(
        connect_stream(addr).await?,
        connect_stream(addr).await?,
        config,
        SmolRuntime,
    )
    .await
    .map_err(|e| format!("cannot join group {group}: {e}"))?;
    let started = std::time::Instant::now();
    let stdout = std::io::stdout();
    let mut printed = 0u64;
    let mut line = Vec::new();
    let result: CliResult<()> = async {
        loop {
            if count.is_some_and(|n| printed >= n) {
                return Ok(());
            }
            let records = consumer.poll().await.map_err(kafka)?;
            let mut done: BTreeMap<TopicPartition, Offset> = BTreeMap::new();
            {
                let mut out = stdout.lock();
                for record in &records {
                    if count.is_some_and(|n| printed >= n) {
                        break;
                    }
                    line.clear();
                    format_record(format, record, &mut line);
                    line.push(b'\n');
                    out.write_all(&line)
                        .map_err(|e| format!("writing output: {e}"))?;
                    printed += 1;
                    done.insert(
                        TopicPartition::new(&*record.topic, record.partition),
                        record.offset.plus(1),
                    );
                }
                out.flush().map_err(|e| format!("writing output: {e}"))?;
            }
            consumer.commit(&done).await.map_err(kafka)?;
            if follow {
                continue;
            }
            let assigned = consumer.assignment();
            if assigned.is_empty() {
                if started.elapsed() > GROUP_IDLE_EXIT {
                    return Ok(());
                }
                continue;
            }
            let mut caught_up = true;
            for tp in &assigned {
                let end = end_of.get(tp).copied().unwrap_or(Offset(0));
                if consumer.position(tp).await.map_err(kafka)? < end {
                    caught_up = false;
                }
            }
            if caught_up {
                // Partitions with nothing new get their position committed too, so the group
                // shows no lag for them.
                let mut positions = BTreeMap::new();
                for tp in &assigned {
                    positions.insert(tp.clone(), consumer.position(tp).await.map_err(kafka)?);
                }
                consumer.commit(&positions).await.map_err(kafka)?;
                return Ok(());
            }
        }
    }
    .await;
    let closed = consumer.close().await.map_err(kafka);
    result.and(closed)
}

async fn groups(addr: &str, action: GroupsAction) -> CliResult<()> {
    let mut conn = connect(addr).await?;
    let mut out = std::io::stdout().lock();
    let io = |e: std::io::Error| format!("writing output: {e}");
    match action {
        GroupsAction::List => {
            for g in group_admin::list_groups(&mut conn).await.map_err(kafka)? {
                writeln!(out, "{}", g.group_id).map_err(io)?;
            }
        }
        GroupsAction::Describe { group } => {
            let description = group_admin::describe_group(&mut conn, &group)
                .await
                .map_err(kafka)?;
            let committed = group_admin::fetch_offsets(&mut conn, &group, None)
                .await
                .map_err(kafka)?;
            if description.state == "Dead" && committed.is_empty() {
                return Err(format!("consumer group '{group}' does not exist"));
            }
            let mut partitions: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            let assigned = description.members.iter().flat_map(|m| m.assignment.iter());
            for tp in committed.keys().chain(assigned) {
                partitions
                    .entry(tp.topic.clone())
                    .or_default()
                    .push(tp.partition);
            }
            let mut log_end = BTreeMap::new();
            for (topic, mut list) in partitions {
                list.sort_unstable();
                list.dedup();
                let queries: Vec<(i32, OffsetSpec)> =
                    list.iter().map(|p| (*p, OffsetSpec::Latest)).collect();
                let answers = minikafka_client::admin::list_offsets(&mut conn, &topic, &queries)
                    .await
                    .map_err(kafka)?;
                for a in answers {
                    if let Some(offset) = a.offset {
                        log_end.insert(TopicPartition::new(topic.clone(), a.partition), offset);
                    }
                }
            }
            if description.members.is_empty() {
                writeln!(out, "\nConsumer group '{group}' has no active members.").map_err(io)?;
            }
            let rows = lag_rows(&group, &committed, &log_end, &description.members);
            writeln!(out).map_err(io)?;
            write!(out, "{}", describe_table(&rows)).map_err(io)?;
        }
        GroupsAction::Delete { group } => {
            group_admin::delete_group(&mut conn, &group)
                .await
                .map_err(kafka)?;
            writeln!(
                out,
                "Deletion of requested consumer groups ('{group}') was successful."
            )
            .map_err(io)?;
        }
        GroupsAction::ResetOffsets {
            group,
            topics,
            all_topics,
            spec,
            dry_run,
        } => {
            let spec = spec.spec()?;
            let description = group_admin::describe_group(&mut conn, &group)
                .await
                .map_err(kafka)?;
            if !matches!(description.state.as_str(), "Empty" | "Dead") {
                return Err(format!(
                    "assignments can only be reset if the group '{group}' is inactive, but the \
                     current state is {}",
                    description.state
                ));
            }
            let committed = group_admin::fetch_offsets(&mut conn, &group, None)
                .await
                .map_err(kafka)?;
            let mut wanted: BTreeMap<String, Option<Vec<i32>>> = BTreeMap::new();
            if all_topics {
                for tp in committed.keys() {
                    wanted.insert(tp.topic.clone(), None);
                }
            } else if topics.is_empty() {
                return Err("name --topic T (repeatable) or --all-topics".into());
            }
            for t in &topics {
                match t.split_once(':') {
                    Some((topic, list)) => {
                        let parts = list
                            .split(',')
                            .map(|p| p.trim().parse::<i32>())
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|_| format!("--topic {t:?}: bad partition list"))?;
                        wanted.insert(topic.to_string(), Some(parts));
                    }
                    None => {
                        wanted.insert(t.clone(), None);
                    }
                }
            }
            let mut ranges = BTreeMap::new();
            for (topic, parts) in wanted {
                let parts = match parts {
                    Some(p) => p,
                    None => minikafka_client::admin::topic_metadata(&mut conn, &topic, false)
                        .await
                        .map_err(kafka)?
                        .partitions
                        .iter()
                        .map(|p| p.partition)
                        .collect(),
                };
                let ask = |spec: OffsetSpec| parts.iter().map(|p| (*p, spec)).collect::<Vec<_>>();
                let list = minikafka_client::admin::list_offsets;
                let earliest = list(&mut conn, &topic, &ask(OffsetSpec::Earliest))
                    .await
                    .map_err(kafka)?;
                let latest = list(&mut conn, &topic, &ask(OffsetSpec::Latest))
                    .await
                    .map_err(kafka)?;
                let at_time = match spec {
                    ResetSpec::ToDatetime(ms) => Some(
                        list(&mut conn, &topic, &ask(OffsetSpec::Timestamp(ms)))
                            .await
                            .map_err(kafka)?,
                    ),
                    _ => None,
                };
                for (i, p) in parts.iter().enumerate() {
                    ranges.insert(
                        TopicPartition::new(topic.clone(), *p),
                        PartitionRange {
                            earliest: earliest[i].offset.unwrap_or(Offset(0)),
                            latest: latest[i].offset.unwrap_or(Offset(0)),
                            at_time: at_time.as_ref().and_then(|a| a[i].offset),
                        },
                    );
                }
            }
            let plan = plan_reset(spec, &committed, &ranges);
            writeln!(out).map_err(io)?;
            write!(out, "{}", reset_table(&group, &plan)).map_err(io)?;
            if !dry_run {
                group_admin::commit_offsets_checked(&mut conn, &group, &Committer::admin(), &plan)
                    .await
                    .map_err(kafka)?;
            }
        }
    }
    Ok(())
}

async fn offsets(addr: &str, topic: &str) -> CliResult<()> {
    let mut admin = Admin::new(connect(addr).await?);
    let earliest = admin
        .list_offsets(topic, OffsetSpec::Earliest)
        .await
        .map_err(kafka)?;
    let latest = admin
        .list_offsets(topic, OffsetSpec::Latest)
        .await
        .map_err(kafka)?;
    // Latest under read_committed: the last stable offset.
    let queries: Vec<(i32, OffsetSpec)> = latest
        .iter()
        .map(|l| (l.partition, OffsetSpec::Latest))
        .collect();
    let stable = minikafka_client::admin::list_offsets_at(admin.connection(), topic, &queries, 1)
        .await
        .map_err(kafka)?;
    let mut out = std::io::stdout().lock();
    let io = |e: std::io::Error| format!("writing output: {e}");
    writeln!(out, "partition\tearliest\tlatest\tlso").map_err(io)?;
    for ((e, l), s) in earliest.iter().zip(latest.iter()).zip(stable.iter()) {
        let show = |o: Option<Offset>| o.map_or("-".to_string(), |o| o.0.to_string());
        writeln!(
            out,
            "{}\t{}\t{}\t{}",
            e.partition,
            show(e.offset),
            show(l.offset),
            show(s.offset)
        )
        .map_err(io)?;
    }
    Ok(())
}

async fn transactions(addr: &str, action: TransactionsAction) -> CliResult<()> {
    let mut conn = connect(addr).await?;
    let mut out = std::io::stdout().lock();
    let io = |e: std::io::Error| format!("writing output: {e}");
    match action {
        TransactionsAction::List {
            states,
            producer_ids,
            duration_ms,
        } => {
            let filter = txn_admin::ListFilter {
                states,
                producer_ids,
                min_duration_ms: duration_ms,
            };
            let listed = txn_admin::list_transactions(&mut conn, &filter)
                .await
                .map_err(kafka)?;
            writeln!(out, "TransactionalId\tProducerId\tTransactionState").map_err(io)?;
            for t in listed {
                writeln!(
                    out,
                    "{}\t{}\t{}",
                    t.transactional_id, t.producer_id, t.state
                )
                .map_err(io)?;
            }
        }
        TransactionsAction::Describe { transactional_id } => {
            let described = txn_admin::describe_transactions(
                &mut conn,
                std::slice::from_ref(&transactional_id),
            )
            .await
            .map_err(kafka)?;
            writeln!(
                out,
                "TransactionalId\tProducerId\tProducerEpoch\tTransactionState\t\
                 TransactionTimeoutMs\tCurrentTransactionStartTimeMs\tTopicPartitions"
            )
            .map_err(io)?;
            for t in described {
                let partitions: Vec<String> = t
                    .partitions
                    .iter()
                    .map(|(topic, p)| format!("{topic}-{p}"))
                    .collect();
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    t.transactional_id,
                    t.producer_id,
                    t.producer_epoch,
                    t.state,
                    t.timeout_ms,
                    t.start_time_ms,
                    partitions.join(",")
                )
                .map_err(io)?;
            }
        }
        TransactionsAction::Abort {
            topic,
            partition,
            producer_id,
            producer_epoch,
            coordinator_epoch,
        } => {
            let spec = txn_admin::AbortSpec {
                topic,
                partition,
                producer_id,
                producer_epoch,
                coordinator_epoch,
            };
            txn_admin::abort_transaction(&mut conn, &spec)
                .await
                .map_err(kafka)?;
            writeln!(
                out,
                "Aborted the transaction of producer {producer_id} (epoch {producer_epoch}) in \
                 {}-{partition}.",
                spec.topic
            )
            .map_err(io)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use minikafka_client::consumer::RecordHeader;

    #[test]
    fn format_expands_every_placeholder() {
        let record = ConsumerRecord {
            topic: "t".into(),
            partition: 2,
            offset: Offset(41),
            timestamp_ms: 1_700,
            key: Some(Bytes::from_static(b"k1")),
            value: Some(Bytes::from_static(b"v1")),
            headers: vec![
                RecordHeader {
                    key: "a".into(),
                    value: Some(Bytes::from_static(b"1")),
                },
                RecordHeader {
                    key: "b".into(),
                    value: None,
                },
            ],
        };
        let mut out = Vec::new();
        format_record("%t/%p@%o %k=%v ts=%T [%h] 100%% %x\\t.", &record, &mut out);
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "t/2@41 k1=v1 ts=1700 [a=1,b=] 100% %x\t."
        );
    }

    #[test]
    fn from_parses_every_form() {
        assert_eq!(parse_from("beginning").expect("b"), SeekTo::Earliest);
        assert_eq!(parse_from("end").expect("e"), SeekTo::Latest);
        assert_eq!(parse_from("17").expect("o"), SeekTo::Offset(Offset(17)));
        assert_eq!(parse_from("@1000").expect("t"), SeekTo::Timestamp(1000));
        assert!(parse_from("-3").is_err());
        assert!(parse_from("@soon").is_err());
    }
}
