//! Consumer groups, the client side.
//!
//! - [`member_metadata`]: Kafka's ConsumerProtocol subscription/assignment byte formats.
//! - [`assignor`]: the classic protocol's `range` and `cooperative-sticky` assignors.
//! - [`classic`]: a classic-protocol member as a pure state machine (join, sync, heartbeat,
//!   eager and cooperative rebalances, fencing).
//! - [`consumer_protocol`]: a consumer-protocol (KIP-848) member as a pure state machine
//!   (epochs, revoke-then-assign reconciliation).
//! - [`consumer`]: [`GroupConsumer`], the I/O loop that drives either state machine over a
//!   coordinator connection and fetches with [`crate::Consumer`].
//! - [`admin`]: FindCoordinator, ListGroups, DescribeGroups, DeleteGroups, OffsetFetch,
//!   OffsetCommit — for the consumer and for `mk groups`.
//! - [`lag`]: per-partition lag rows as `kafka-consumer-groups.sh --describe` prints them, and
//!   the offset reset plans of `mk groups reset-offsets`.

pub mod admin;
pub mod assignor;
pub mod classic;
pub mod consumer;
pub mod consumer_protocol;
pub mod lag;
pub mod member_metadata;

pub use assignor::Assignor;
pub use classic::MemberEvent;
pub use consumer::{GroupConfig, GroupConsumer, GroupProtocol, NoListener, RebalanceListener};
