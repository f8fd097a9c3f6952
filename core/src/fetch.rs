//! fetch (being written)
