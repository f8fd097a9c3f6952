//! What one connection may hold unsent: send-side back-pressure for clients that read slowly
//! or never.
//!
//! Contract:
//! - A connection counts the bytes of its responses that are computed but not yet accepted
//!   by the kernel in a [`ByteBudget`] of [`MAX_UNSENT_BYTES`]. While the count is at or
//!   above it the connection's reader dispatches no new request
//!   ([`ByteBudget::wait_below_limit`]), as Kafka mutes a channel whose response is unsent;
//!   requests already dispatched (at most `MAX_IN_FLIGHT` besides Produce, whose answers are
//!   small) still complete. So a connection holds at most the limit plus its in-flight
//!   responses, whatever its client does (I10).
//! - [`set_send_buffer`] sets `SO_SNDBUF` of an accepted stream (`socket.send.buffer.bytes`),
//!   once here for every backend: left to Linux, the send buffer auto-tunes to megabytes per
//!   connection, all of which a client that never reads gets the broker to compute.
//! - Never: blocks the writer.

pub use super::byte_budget::ByteBudget;

/// Responses computed and not yet sent beyond which a connection's reader stops dispatching
/// requests. One large Fetch answer reaches it alone: the reader then waits for the client to
/// read, as Kafka's broker does after every request.
pub const MAX_UNSENT_BYTES: usize = 1 << 20;

/// Sets `SO_SNDBUF` of `socket` to `bytes` (Linux doubles it for its own bookkeeping). A
/// failure is logged and the OS default kept: the connection still works, only less bounded.
#[cfg(unix)]
pub fn set_send_buffer(socket: std::os::fd::BorrowedFd<'_>, bytes: usize) {
    if let Err(e) = socket2::SockRef::from(&socket).set_send_buffer_size(bytes) {
        tracing::warn!(bytes, reason = %e, "could not set socket.send.buffer.bytes");
    }
}
