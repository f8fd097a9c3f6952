//! wakeup (being written)
