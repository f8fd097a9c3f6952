//! `mk mirror`: copies topics, records and consumer positions from one Kafka-protocol broker to
//! another, built on this crate's consumer, producer and admin calls (no JVM).
//!
//! Contract:
//! - Topics matching `topics` (never internal ones, `__*` or the mirror's own) are created on
//!   the target when missing (module `setup`: partition count, topic configs, refusals
//!   reported) (I83).
//! - Records are copied partition to partition, in order, with keys, values, headers and
//!   timestamps unchanged. The source is read with read_committed unless the source config
//!   says otherwise, so only committed transactional data arrives.
//! - Work goes in windows of at most `batch_records` records. After a window's records are
//!   acknowledged by the target, one progress record per partition (module `offset_map`) goes
//!   to the compacted `mk-mirror.progress` topic ON THE TARGET; a restart resumes from it, so
//!   at-least-once duplicates are bounded by one window (I86). With `exactly_once` the records
//!   and the progress records are one transaction on the target: a kill never duplicates in the
//!   target's read_committed view.
//! - A stop (`MirrorConfig::stop`, set by `mk mirror` on SIGINT/SIGTERM) is acted on between
//!   windows: the last window's records and progress are both stored, the groups synced, and
//!   the run returns its report, so nothing is copied twice by the next run (I198).
//! - Committed offsets of source groups matching `groups` are translated through the offset map
//!   and committed on the target for groups with no member there (module `groups`) (I85).
//! - Errors a retry can cure (an admin or consumer connection lost, timeouts, a leader or
//!   broker that stays away longer than the producer retries) restart the session from the
//!   durable progress, up to `max_restarts` times in a row. The producer's own lost
//!   connections do not: it re-sends what they carried over new ones (I182).
//! - Targets with several brokers (module `route`): one routed producer (I162) is
//!   bootstrapped from the given address and follows the target itself: Produce to each
//!   partition's leader and, with `exactly_once`, transactional requests to the transaction
//!   coordinator and TxnOffsetCommit to the group coordinator, each over its own connection.
//!   A moved leader (NOT_LEADER_OR_FOLLOWER) or coordinator is looked up again and the request
//!   retried in place, without a restart. At-least-once the producer is idempotent (I163): the
//!   re-sent batch keeps its producer id, epoch and sequence, so it is written once (this
//!   replaced one producer per leading broker and a session restart at each move, with up to
//!   a window of repeats). With `exactly_once` it is transactional and the retry stays inside
//!   the transaction (this replaced I123's refusal of such targets). In both modes the
//!   progress is read from the progress topic's leader and the stable offsets from each
//!   partition's, and each group is synced at its coordinator.
//! - Security (I121): each side's `k=v` settings carry librdkafka's `security.protocol`,
//!   `sasl.*` and `ssl.*`; every connection of that side runs TLS and SASL with them. A failed
//!   authentication or a refused certificate ends the run (not retried).
//! - While mirroring continuously the source's topics are listed again every
//!   `refresh_topics_interval`; a new matching topic ends the session cleanly and the next one
//!   creates and mirrors it.
//! - Metrics (module `metrics`, I122): lag, records copied, records/s, restarts, served to
//!   Prometheus when `metrics_listener` is set.

//!
//! Module `offset_map` is sans-IO (built without a runtime too: the fuzz targets decode its
//! progress records); the others run on smol.

#[cfg(feature = "smol")]
pub mod groups;
#[cfg(feature = "smol")]
pub mod metrics;
pub mod offset_map;
#[cfg(feature = "smol")]
pub mod route;
#[cfg(feature = "smol")]
mod session;
#[cfg(feature = "smol")]
pub mod setup;

/// What the mirror's connections run over: TCP, or TLS over it (`security.protocol` SSL or
/// SASL_SSL on that side).
#[cfg(feature = "smol")]
pub type Stream = crate::tls::MaybeTls<smol::net::TcpStream>;

#[cfg(feature = "smol")]
pub use session::{is_retriable, run, MirrorConfig, Report, PROGRESS_TOPIC};
