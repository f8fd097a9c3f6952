//! Kafka error codes used by the group coordinator: the crate-wide table.

pub use crate::error_code::ErrorCode;
