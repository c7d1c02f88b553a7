//! Tests of the local plugin through the in-process harness (and, in
//! `binary`, through the real binary).

mod authoring;
mod binary;
mod common;
mod confinement;
mod directory;
mod escapes;
mod file;
mod fixtures;
mod no_openat2;
mod symlink;
