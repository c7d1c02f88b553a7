//! Tests of the AWS plugin against a real moto_server each test starts
//! (ORRERY_MOTO_SERVER, or scripts/ensure-moto.sh's). Without one on the
//! machine a test prints SKIP; scripts/test.sh always provides one.

mod bucket;
mod common;
mod conformance;
mod credentials;
mod iam;
mod queue;
mod throttling;
