//! # orrery-schema
//!
//! Every message that crosses an Orrery process boundary, the resource schema
//! model, the error-code vocabulary and the one [`encode`]/[`decode`] pair
//! they all go through. No I/O.
//!
//! Layout:
//! - [`codec`]: `encode`/`decode` and their limits.
//! - [`envelope`]: the [`Envelope`] around every message, [`MessageKind`], trace context.
//! - [`frame`]: length-prefixed frames on the plugin stdio link.
//! - [`request`]: operation requests, list pages, cancel, protocol errors.
//! - [`progress`]: [`ProgressEvent`], [`Operation`], [`OperationStatus`].
//! - [`error_code`]: [`ErrorCode`] and its retry classification.
//! - [`announce`]: the plugin's [`Announcement`].
//! - [`resource_schema`]: [`ResourceSchema`], [`FieldSchema`], [`FieldHint`], [`EdgeKind`].
//! - [`value`]: property values ([`Value`], [`PropertyMap`]).
//! - [`docs`]: the generated tables of `docs/protocol.md`.
//!
//! Compatibility rules (see `docs/protocol.md`): structs are maps keyed by
//! field name; unknown fields are ignored; missing fields take defaults;
//! unknown enum values decode into `Unknown`; fixtures under
//! `schema/tests/fixtures/` are only ever added.

// Plugin authors read these docs: every public item has one, says how it
// fails (and panics), and an item marked `pub` is one they can reach. (The
// workspace's [lints] table cannot be added to per crate, hence here.)
#![deny(missing_docs, unreachable_pub)]
#![deny(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod open_enum;

pub mod announce;
pub mod codec;
pub mod docs;
pub mod envelope;
pub mod error_code;
pub mod frame;
pub mod progress;
pub mod request;
pub mod resource_schema;
pub mod value;

pub use announce::{
    Announcement, Capability, Condition, DiscoveryFilter, LabelConfig, MatchOp, RateLimit,
};
pub use codec::{decode, encode, DecodeError, EncodeError, MAX_DEPTH, MAX_MESSAGE_BYTES};
pub use envelope::{Envelope, MessageKind, TraceContext, PROTOCOL_MAJOR};
pub use error_code::ErrorCode;
pub use frame::{encode_frame, FrameDecoder, FrameError, FRAME_HEADER_BYTES, MAX_FRAME_BYTES};
pub use progress::{Operation, OperationStatus, ProgressEvent};
pub use request::{
    secret_looking_key, Cancel, CreateRequest, DeleteRequest, ListRequest, ListResult,
    ListedResource, ProtocolError, ReadRequest, Request, RequestError, StatusRequest, Target,
    UpdateRequest,
};
pub use resource_schema::{
    ConcurrencyKey, EdgeKind, FieldHint, FieldSchema, FieldType, ParentScope, ResourceSchema,
    UpdateMethod,
};
pub use uuid::Uuid;
pub use value::{PropertyMap, Value};
