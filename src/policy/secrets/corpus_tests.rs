//! Corpus measurements (filled below).
