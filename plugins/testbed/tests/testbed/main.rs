//! Tests of the testbed plugin through the in-process harness (and, in
//! `binary`, through the real binary, for the crash injection).

mod asynchronous;
mod binary;
mod cloud;
mod common;
mod faults;
mod fixtures;
mod noop;
mod store;
