//! Kafka error codes used by the group coordinator: the crate-wide table
//! ([`crate::error_code::ErrorCode`]), so the broker passes the coordinator's codes to the
//! wire unchanged.

pub use crate::error_code::ErrorCode;
