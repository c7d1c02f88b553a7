//! The postgres plugin against a real server (run under
//! `scripts/with-postgres.sh`, which sets `ORRERY_TEST_DATABASE_URL`).

mod common;
mod conformance;
mod errors;
mod trust_passwords;
mod types;
