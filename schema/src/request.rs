//! Requests a host sends to a plugin, and the answers that are not a
//! [`crate::ProgressEvent`].

use serde::{Deserialize, Serialize};

use crate::codec::DecodeError;
use crate::envelope::{Envelope, MessageKind};
use crate::error_code::ErrorCode;
use crate::progress::{Operation, OperationStatus};
use crate::value::{PropertyMap, Value};

/// The target an operation acts on: a name and the plugin's configuration
/// for it (a root directory, a region, an account).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Target {
    /// The target's name, unique within a deployment.
    pub name: String,
    /// The plugin-specific configuration of the target.
    pub config: PropertyMap,
    /// The stack the operation is made for, when it is made for one. A
    /// satellite whose operator holds the target's configuration refuses a
    /// request whose stack that operator did not allow on the target; a
    /// request without it is refused there too. Absent on the wire when
    /// `None`, so older peers see the same bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
}

/// Parts of a configuration key name that mark its value as possibly
/// secret (compared in lower case). Plugins declare their secret target
/// fields; the name still counts for nested keys, for plugins that declare
/// nothing, and as a second line of defence.
const SECRET_KEY_PARTS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "secret",
    "token",
    "credential",
    "key",
    "private",
    "auth",
    "cookie",
    "session",
    "signature",
    "cert",
];

/// Whether a configuration key's name says its value may be a secret.
pub fn secret_looking_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    SECRET_KEY_PARTS.iter().any(|s| k.contains(s))
}

/// Create a resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CreateRequest {
    /// Idempotency key: the same for every retry of this operation.
    pub request_id: String,
    /// The resource type, as announced.
    pub resource_type: String,
    /// The resource's label in its stack (for naming and tagging).
    pub label: String,
    /// Where to create it.
    pub target: Target,
    /// Desired properties, write-only ones included.
    pub properties: PropertyMap,
}

/// Read a resource's current properties.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReadRequest {
    /// Idempotency key of this operation.
    pub request_id: String,
    /// The resource type.
    pub resource_type: String,
    /// Where the resource lives.
    pub target: Target,
    /// The plugin's identifier of the resource.
    pub native_id: String,
    /// Last known properties, for plugins that need more than the native id.
    pub properties: PropertyMap,
}

/// Update a resource in place.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UpdateRequest {
    /// Idempotency key of this operation.
    pub request_id: String,
    /// The resource type.
    pub resource_type: String,
    /// The resource's label in its stack.
    pub label: String,
    /// Where the resource lives.
    pub target: Target,
    /// The plugin's identifier of the resource.
    pub native_id: String,
    /// The properties as last recorded.
    pub prior_properties: PropertyMap,
    /// The desired properties.
    pub properties: PropertyMap,
}

/// Delete a resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DeleteRequest {
    /// Idempotency key of this operation.
    pub request_id: String,
    /// The resource type.
    pub resource_type: String,
    /// Where the resource lives.
    pub target: Target,
    /// The plugin's identifier of the resource.
    pub native_id: String,
    /// The properties as last recorded.
    pub properties: PropertyMap,
}

/// Poll an operation that answered `InProgress`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusRequest {
    /// The request id of the operation being polled.
    pub request_id: String,
    /// The operation being polled.
    pub operation: Operation,
    /// The resource type.
    pub resource_type: String,
    /// Where the resource lives.
    pub target: Target,
    /// The native id the `InProgress` answer carried.
    pub native_id: String,
    /// The `context` the `InProgress` answer carried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
}

/// List one page of the resources of a type on a target.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ListRequest {
    /// Idempotency key of this operation.
    pub request_id: String,
    /// The resource type.
    pub resource_type: String,
    /// Where to list.
    pub target: Target,
    /// Most resources wanted in this page; 0 lets the plugin choose.
    pub page_size: u32,
    /// The `next_page_token` of the previous page; absent for the first page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
    /// For a type with a [`crate::ParentScope`], the parent whose children
    /// to list (as its own list returned it); absent for other types.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<ListedResource>,
}

/// One resource in a list page.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ListedResource {
    /// The plugin's identifier of the resource.
    pub native_id: String,
    /// Its current properties (never write-only fields).
    pub properties: PropertyMap,
}

/// One page of a list.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ListResult {
    /// The request id of the list request.
    pub request_id: String,
    /// The resource type listed.
    pub resource_type: String,
    /// `Success` or `Failure`.
    pub status: OperationStatus,
    /// Why listing failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<ErrorCode>,
    /// A human-readable explanation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The resources in this page.
    pub resources: Vec<ListedResource>,
    /// Pass back as `page_token` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

/// Cancel the request named by the envelope's `correlation`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Cancel {
    /// Why, for logs.
    pub reason: String,
}

/// The answer to a message that could not be understood at all.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProtocolError {
    /// `MalformedMessage`, `UnsupportedOperation`, `UnsupportedProtocol`, …
    pub code: ErrorCode,
    /// What was wrong, for a human.
    pub message: String,
}

/// Any operation request, typed.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// Create.
    Create(CreateRequest),
    /// Read.
    Read(ReadRequest),
    /// Update.
    Update(UpdateRequest),
    /// Delete.
    Delete(DeleteRequest),
    /// Status.
    Status(StatusRequest),
    /// List.
    List(ListRequest),
}

/// Why an envelope is not an operation request this release understands.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The kind is not an operation request.
    #[error("message kind `{0}` is not an operation request")]
    NotARequest(MessageKind),
    /// The body did not decode.
    #[error("body of `{kind}` request: {source}")]
    Body {
        /// The envelope's kind.
        kind: MessageKind,
        /// The decode failure.
        #[source]
        source: DecodeError,
    },
}

impl Request {
    /// The envelope kind that carries this request.
    pub fn kind(&self) -> MessageKind {
        match self {
            Request::Create(_) => MessageKind::Create,
            Request::Read(_) => MessageKind::Read,
            Request::Update(_) => MessageKind::Update,
            Request::Delete(_) => MessageKind::Delete,
            Request::Status(_) => MessageKind::Status,
            Request::List(_) => MessageKind::List,
        }
    }

    /// The operation requested.
    pub fn operation(&self) -> Operation {
        match self {
            Request::Create(_) => Operation::Create,
            Request::Read(_) => Operation::Read,
            Request::Update(_) => Operation::Update,
            Request::Delete(_) => Operation::Delete,
            Request::Status(_) => Operation::Status,
            Request::List(_) => Operation::List,
        }
    }

    /// The request id (idempotency key).
    pub fn request_id(&self) -> &str {
        match self {
            Request::Create(r) => &r.request_id,
            Request::Read(r) => &r.request_id,
            Request::Update(r) => &r.request_id,
            Request::Delete(r) => &r.request_id,
            Request::Status(r) => &r.request_id,
            Request::List(r) => &r.request_id,
        }
    }

    /// The resource type the request is about.
    pub fn resource_type(&self) -> &str {
        match self {
            Request::Create(r) => &r.resource_type,
            Request::Read(r) => &r.resource_type,
            Request::Update(r) => &r.resource_type,
            Request::Delete(r) => &r.resource_type,
            Request::Status(r) => &r.resource_type,
            Request::List(r) => &r.resource_type,
        }
    }

    /// The target the request acts on.
    pub fn target(&self) -> &Target {
        match self {
            Request::Create(r) => &r.target,
            Request::Read(r) => &r.target,
            Request::Update(r) => &r.target,
            Request::Delete(r) => &r.target,
            Request::Status(r) => &r.target,
            Request::List(r) => &r.target,
        }
    }

    /// Wraps the request in a new envelope.
    ///
    /// # Errors
    ///
    /// As [`Envelope::new`]: the request is over the message limit.
    pub fn to_envelope(&self) -> Result<Envelope, crate::codec::EncodeError> {
        match self {
            Request::Create(r) => Envelope::new(self.kind(), r),
            Request::Read(r) => Envelope::new(self.kind(), r),
            Request::Update(r) => Envelope::new(self.kind(), r),
            Request::Delete(r) => Envelope::new(self.kind(), r),
            Request::Status(r) => Envelope::new(self.kind(), r),
            Request::List(r) => Envelope::new(self.kind(), r),
        }
    }

    /// Decodes the request an envelope carries.
    ///
    /// # Errors
    ///
    /// [`RequestError::NotARequest`] when the envelope's kind is not one of the
    /// six operation requests; [`RequestError::Body`] when its body does not
    /// decode as that request.
    pub fn from_envelope(envelope: &Envelope) -> Result<Request, RequestError> {
        let body = |e: DecodeError| RequestError::Body {
            kind: envelope.kind.clone(),
            source: e,
        };
        Ok(match envelope.kind {
            MessageKind::Create => Request::Create(envelope.body().map_err(body)?),
            MessageKind::Read => Request::Read(envelope.body().map_err(body)?),
            MessageKind::Update => Request::Update(envelope.body().map_err(body)?),
            MessageKind::Delete => Request::Delete(envelope.body().map_err(body)?),
            MessageKind::Status => Request::Status(envelope.body().map_err(body)?),
            MessageKind::List => Request::List(envelope.body().map_err(body)?),
            ref other => return Err(RequestError::NotARequest(other.clone())),
        })
    }
}
