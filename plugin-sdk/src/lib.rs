//! The plugin SDK (skeleton).
