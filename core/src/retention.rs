//! retention (being written)
