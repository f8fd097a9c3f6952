//! recovery (being written)
