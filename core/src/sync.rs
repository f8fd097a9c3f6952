//! sync (being written)
