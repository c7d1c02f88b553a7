//! What handlers return, and shortcuts to build it.

use orrery_schema::{
    ErrorCode, ListedResource, OperationStatus, ProgressEvent, PropertyMap, Value,
};

/// The result of a create, read, update, delete or status handler.
pub type OpResult = Result<ProgressEvent, PluginError>;

/// A failed operation: a code from the shared vocabulary and a message.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct PluginError {
    /// Why it failed; decides whether the runtime retries.
    pub code: ErrorCode,
    /// What happened, for a human. Never include secrets.
    pub message: String,
    /// For `Throttling`: how long to wait before retrying.
    pub retry_after_ms: Option<u64>,
}

impl PluginError {
    /// An error with a code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        PluginError {
            code,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// `InvalidRequest`: the request's properties are wrong.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    /// `NotFound`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// `Throttling`, asking the runtime to wait `retry_after_ms` first.
    pub fn throttled(message: impl Into<String>, retry_after_ms: u64) -> Self {
        PluginError {
            retry_after_ms: Some(retry_after_ms),
            ..Self::new(ErrorCode::Throttling, message)
        }
    }
}

impl From<std::io::Error> for PluginError {
    /// Maps I/O failures onto the vocabulary, for plugins that touch files
    /// or sockets directly.
    fn from(e: std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let code = match e.kind() {
            K::NotFound => ErrorCode::NotFound,
            K::PermissionDenied => ErrorCode::AccessDenied,
            K::AlreadyExists => ErrorCode::AlreadyExists,
            K::InvalidInput | K::InvalidData => ErrorCode::InvalidRequest,
            K::TimedOut => ErrorCode::ServiceTimeout,
            K::ConnectionRefused | K::ConnectionReset | K::ConnectionAborted => {
                ErrorCode::NetworkFailure
            }
            _ => ErrorCode::GeneralServiceException,
        };
        PluginError::new(code, e.to_string())
    }
}

/// A finished operation: the resource's native id and current properties.
///
/// # Errors
///
/// Never: always `Ok`. The [`OpResult`] lets a handler end with
/// `return done(id, properties);`.
pub fn done(native_id: impl Into<String>, properties: PropertyMap) -> OpResult {
    Ok(ProgressEvent {
        status: OperationStatus::Success,
        native_id: Some(native_id.into()),
        properties: Some(properties),
        ..Default::default()
    })
}

/// A deleted resource: success without properties.
///
/// # Errors
///
/// Never: always `Ok` (see [`done`]).
pub fn deleted(native_id: impl Into<String>) -> OpResult {
    Ok(ProgressEvent {
        status: OperationStatus::Success,
        native_id: Some(native_id.into()),
        ..Default::default()
    })
}

/// An operation still running: the runtime polls `status` after
/// `retry_after_ms`, handing `context` back.
///
/// # Errors
///
/// Never: always `Ok` (see [`done`]).
pub fn in_progress(native_id: impl Into<String>, context: Value, retry_after_ms: u64) -> OpResult {
    Ok(ProgressEvent {
        status: OperationStatus::InProgress,
        native_id: Some(native_id.into()),
        context: Some(context),
        retry_after_ms: Some(retry_after_ms),
        ..Default::default()
    })
}

/// One page of a list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListPage {
    /// The resources in the page.
    pub resources: Vec<ListedResource>,
    /// The token of the next page; `None` on the last page.
    pub next_page_token: Option<String>,
}
