//! `orrery-state`'s integration tests, one binary (issue 41): the store
//! conformance suite on SQLite and PostgreSQL, and a store call that waits
//! without holding up the runtime.

mod off_worker;
mod store_conformance;
