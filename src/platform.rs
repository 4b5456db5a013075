//! Platform store and on-disk layout (skeleton; see issue #6).
