//! The progress record: what every operation answers.

use serde::{Deserialize, Serialize};

use crate::error_code::ErrorCode;
use crate::open_enum::open_enum;
use crate::value::{PropertyMap, Value};

open_enum! {
    /// A resource operation.
    #[derive(Default)]
    pub enum Operation {
        /// Create a resource from desired properties.
        Create = "create",
        /// Read a resource's current properties by native id.
        Read = "read" [default],
        /// Change a resource's properties in place.
        Update = "update",
        /// Delete a resource.
        Delete = "delete",
        /// Ask how an operation that answered `InProgress` is going.
        Status = "status",
        /// List the resources of a type on a target, one page at a time.
        List = "list",
    }
}

open_enum! {
    /// Where an operation stands.
    #[derive(Default)]
    pub enum OperationStatus {
        /// The operation finished and took effect.
        Success = "Success",
        /// The operation failed; `error_code` says why.
        Failure = "Failure" [default],
        /// The operation continues; poll with a `status` request.
        InProgress = "InProgress",
        /// The operation was accepted but has not started.
        Pending = "Pending",
        /// The operation was canceled before it finished.
        Canceled = "Canceled",
    }
}

impl OperationStatus {
    /// Whether no further progress will follow this status.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, OperationStatus::InProgress | OperationStatus::Pending)
    }
}

/// The answer to create, read, update, delete and status requests.
///
/// Invariants a well-behaved plugin keeps (the conformance suite checks
/// them): `InProgress` carries `request_id` and `native_id`; `Failure`
/// carries a known `error_code`; `Success` of create/read/update carries
/// `native_id` and `properties`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProgressEvent {
    /// The operation this reports on (for `status`, the operation being polled).
    pub operation: Operation,
    /// Where the operation stands.
    pub status: OperationStatus,
    /// The request id (idempotency key) of the operation.
    pub request_id: String,
    /// The resource type.
    pub resource_type: String,
    /// The plugin's identifier of the resource, once known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub native_id: Option<String>,
    /// The resource's properties after the operation (never write-only fields).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub properties: Option<PropertyMap>,
    /// Why the operation failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<ErrorCode>,
    /// A human-readable explanation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// For `InProgress`: wait this long before polling; for `Throttling`:
    /// wait at least this long before retrying.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// Opaque plugin state returned with `InProgress` and handed back in the
    /// next `status` request, so plugins need not keep it themselves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
}

impl ProgressEvent {
    /// Decodes a progress event from untrusted bytes: [`codec::decode`].
    ///
    /// # Errors
    ///
    /// As [`codec::decode`].
    ///
    /// [`codec::decode`]: crate::codec::decode
    pub fn decode(bytes: &[u8]) -> Result<Self, crate::DecodeError> {
        crate::codec::decode(bytes)
    }

    /// Encodes the event: [`codec::encode`].
    ///
    /// # Errors
    ///
    /// As [`codec::encode`]: over
    /// [`MAX_MESSAGE_BYTES`](crate::MAX_MESSAGE_BYTES), or cannot be
    /// serialized.
    ///
    /// [`codec::encode`]: crate::codec::encode
    pub fn encode(&self) -> Result<Vec<u8>, crate::EncodeError> {
        crate::codec::encode(self)
    }

    /// A successful result.
    pub fn success(
        operation: Operation,
        request_id: impl Into<String>,
        resource_type: impl Into<String>,
        native_id: impl Into<String>,
        properties: PropertyMap,
    ) -> Self {
        ProgressEvent {
            operation,
            status: OperationStatus::Success,
            request_id: request_id.into(),
            resource_type: resource_type.into(),
            native_id: Some(native_id.into()),
            properties: Some(properties),
            ..Default::default()
        }
    }

    /// A failed result with a code and message.
    pub fn failure(
        operation: Operation,
        request_id: impl Into<String>,
        resource_type: impl Into<String>,
        code: ErrorCode,
        message: impl Into<String>,
    ) -> Self {
        ProgressEvent {
            operation,
            status: OperationStatus::Failure,
            request_id: request_id.into(),
            resource_type: resource_type.into(),
            error_code: Some(code),
            message: Some(message.into()),
            ..Default::default()
        }
    }
}
