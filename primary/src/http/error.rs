//! Errors of the HTTP API: a status code and `{"error": "..."}`, with extra
//! fields where a client can use them (the stack errors of a 422, the
//! running command of a 409).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use crate::lease::LeaseError;
use crate::service::{PluginError, ServiceError};
use crate::state::StoreError;

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    /// The status code.
    pub status: StatusCode,
    /// The message, for people.
    pub message: String,
    /// More fields of the body, next to `error`.
    pub extra: Map<String, Value>,
    /// Of a 403: who was refused, and on which stack (for the audit log).
    pub refused: Option<(String, Option<String>)>,
}

impl ApiError {
    /// An error with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            extra: Map::new(),
            refused: None,
        }
    }

    /// 400: the request itself is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// 409: the request conflicts with what is going on.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// Says who was refused (a 403), and on which stack.
    pub fn refusing(mut self, principal: &str, stack: Option<&str>) -> Self {
        self.refused = Some((principal.to_owned(), stack.map(str::to_owned)));
        self
    }

    /// What the audit log records of a 401 or 403 (`audit::refusals`
    /// reads it from the response's extensions).
    pub fn audited(&self) -> Option<super::audit::Refused> {
        let refusal = matches!(
            self.status,
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
        );
        refusal.then(|| super::audit::Refused {
            principal: self.refused.as_ref().map(|(p, _)| p.clone()),
            stack: self.refused.as_ref().and_then(|(_, s)| s.clone()),
            reason: self.message.clone(),
        })
    }

    /// Adds a field to the body.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.extra.insert(key.to_owned(), value);
        self
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = Map::new();
        body.insert("error".into(), json!(self.message));
        let audited = self.audited();
        body.extend(self.extra);
        let mut response = (self.status, Json(Value::Object(body))).into_response();
        if let Some(refused) = audited {
            response.extensions_mut().insert(refused);
        }
        response
    }
}

/// `response` with `Connection: close`: for an answer given before the
/// request's body was read (or read whole). The rest of the body may still
/// be on its way, so the connection cannot carry another request; without
/// the header the server closes it anyway and a client that pooled it
/// fails its next request on it.
pub fn closing(mut response: Response) -> Response {
    response.headers_mut().insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        tracing::error!(error = %e, "state store failed");
        ApiError::internal(e.to_string())
    }
}

impl From<LeaseError> for ApiError {
    fn from(e: LeaseError) -> Self {
        match e {
            LeaseError::Store(e) => e.into(),
            LeaseError::Held {
                ref command_id,
                ref owner,
                expires_ms,
            } => ApiError::conflict(e.to_string())
                .with("command_id", json!(command_id))
                .with("lease_owner", json!(owner))
                .with("lease_expires_ms", json!(expires_ms)),
            LeaseError::StackHeld {
                ref stack,
                ref command_id,
                ref owner,
                expires_ms,
            } => ApiError::conflict(e.to_string())
                .with("stack", json!(stack))
                .with("command_id", json!(command_id))
                .with("lease_owner", json!(owner))
                .with("lease_expires_ms", json!(expires_ms)),
            LeaseError::Contended { .. } => ApiError::conflict(e.to_string()),
        }
    }
}

/// The one place service errors become status codes.
impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        match e {
            // A document past the parser's limits (`stack::limits`) is
            // too large (413); any other problem makes it invalid (422).
            ServiceError::InvalidStack(errors) => {
                let too_large = errors
                    .iter()
                    .any(|e| matches!(e.problem, crate::stack::Problem::TooLarge(_)));
                let (status, message) = if too_large {
                    (
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "the stack document is too large; nothing was changed",
                    )
                } else {
                    (
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "the stack is invalid; nothing was changed",
                    )
                };
                ApiError::new(status, message).with(
                    "errors",
                    Value::Array(errors.iter().map(super::views::stack_error).collect()),
                )
            }
            ServiceError::Plugin(
                e @ (PluginError::NotFound { .. } | PluginError::Misnamed { .. }),
            ) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()),
            // Satellites answered different schemas, or one not signed in
            // its hub package: theirs to fix.
            ServiceError::Plugin(
                e @ (PluginError::Disagreement { .. } | PluginError::Unsigned { .. }),
            ) => ApiError::new(StatusCode::BAD_GATEWAY, e.to_string()),
            ServiceError::Plugin(e) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
            }
            ServiceError::Busy { ref command_id, .. } => {
                let id = command_id.clone();
                ApiError::conflict(e.to_string()).with("command_id", json!(id))
            }
            ServiceError::LeaseHeld(held) => held.into(),
            ServiceError::ShuttingDown => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
            }
            ServiceError::UnknownStack(_) => ApiError::not_found(e.to_string()),
            // The target's operator decides who uses it: a refusal.
            ServiceError::TargetRefused { ref target, .. } => {
                let target = target.clone();
                ApiError::new(StatusCode::FORBIDDEN, e.to_string())
                    .with("code", json!("target_refused"))
                    .with("target", json!(target))
            }
            ServiceError::Selection(_) | ServiceError::UnknownMode(_) => {
                ApiError::bad_request(e.to_string())
            }
            ServiceError::NotResumable { .. } | ServiceError::Protected(_) => {
                ApiError::conflict(e.to_string())
            }
            // A plugin did not read what it manages: the gateway's fault.
            ServiceError::Refresh(ref failures) => {
                let failures = json!(failures);
                ApiError::new(StatusCode::BAD_GATEWAY, e.to_string()).with("failures", failures)
            }
            ServiceError::Store(e) => e.into(),
            ServiceError::Resume(_) | ServiceError::Internal(_) => {
                tracing::error!(error = %e, "command failed");
                ApiError::internal(e.to_string())
            }
        }
    }
}

impl From<tokio::task::JoinError> for ApiError {
    fn from(e: tokio::task::JoinError) -> Self {
        tracing::error!(error = %e, "request task failed");
        ApiError::internal("internal error: the request's task failed")
    }
}

/// The result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;
