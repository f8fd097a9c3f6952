//! The values the caller and the coordinator exchange to match outputs with inputs: the
//! request token a response comes back with, the id an append's outcome is reported under,
//! and the caller's time. Their own module because both the coordinator and the group data
//! it drives (`classic`) name them, and neither owns the other.

/// Milliseconds since the Unix epoch, as the caller's clock reads them.
pub type Millis = i64;

/// The caller's handle for one request; its answer comes back with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestToken(pub u64);

/// Names one [`Append`](super::Append); report its outcome with
/// [`Coordinator::handle_appended`](super::Coordinator::handle_appended).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppendId(pub u64);
