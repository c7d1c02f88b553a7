//! The primary (skeleton).
