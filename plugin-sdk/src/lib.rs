//! # orrery-plugin-sdk
//!
//! Write an Orrery plugin by implementing [`ResourcePlugin`] and calling
//! [`serve`] from `main`. The SDK speaks the frame protocol on stdin/stdout
//! (`docs/protocol.md`), serves requests concurrently, enforces deadlines
//! and cancellation, turns handler panics into `InternalFailure` results and
//! logs to stderr.
//!
//! - [`plugin`]: the trait.
//! - [`result`]: what handlers return ([`done`], [`in_progress`], [`PluginError`]).
//! - [`properties`]: typed properties.
//! - [`schema_builder`]: declare schemas ([`resource`], [`field`]).
//! - [`paginate()`]: key-based list pages.
//! - [`server`]: the provided main.
//! - [`client`]: the host side of the link (the harness uses it too).
//! - [`harness`]: run a plugin in-process.
//! - `process` (feature `host`): start a plugin binary as a child process.
//! - `conformance` (feature `conformance`): the conformance suite.
//! - `Allocator` (feature `mimalloc`): the global allocator Orrery's own
//!   plugins use.
//!
//! Features: a plugin's default build has what a plugin needs; `host`,
//! `conformance`, `otlp` (OTLP export of traces and metrics) and
//! `mimalloc` are for Orrery's own crates (a plugin may take `mimalloc`
//! too).
//!
//! The SDK knows nothing of NATS: it speaks only the stdio link.

// Plugin authors read these docs: every public item has one, says how it
// fails (and panics), and an item marked `pub` is one they can reach. (The
// workspace's [lints] table cannot be added to per crate, hence here.)
#![deny(missing_docs, unreachable_pub)]
#![deny(clippy::missing_errors_doc, clippy::missing_panics_doc)]

#[cfg(feature = "mimalloc")]
mod allocator;
pub mod client;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod frame_io;
pub mod harness;
mod logging;
pub mod paginate;
pub mod plugin;
#[cfg(feature = "host")]
pub mod process;
pub mod properties;
pub mod result;
pub mod schema_builder;
pub mod server;
mod stdio;
pub mod telemetry;

#[cfg(feature = "mimalloc")]
pub use allocator::Allocator;
pub use client::{Answer, Answered, CallError, ConnectError, PluginClient};
pub use logging::LOG_FORMAT_ENV;
pub use orrery_schema as schema;
pub use paginate::paginate;
pub use plugin::{PluginInfo, ResourcePlugin};
pub use properties::{check_create_only, from_properties, from_value, to_properties, to_value};
pub use result::{deleted, done, in_progress, ListPage, OpResult, PluginError};
pub use schema_builder::{field, resource, FieldBuilder, ResourceBuilder};
pub use server::{announcement, serve, serve_io};
