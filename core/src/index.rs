//! index (being written)
