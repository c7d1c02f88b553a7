//! The satellite (skeleton).
