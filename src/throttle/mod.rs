//! Rate limits. (being written)
