//! The JetStream JSON API (`$JS.API.*`), called raw: every type's requests
//! and errors go through [`call`], so an error code means the same for all.

use async_nats::jetstream::context::RequestErrorKind;
use async_nats::jetstream::response::Response;
use async_nats::jetstream::Context;
use orrery_plugin_sdk::schema::ErrorCode;
use orrery_plugin_sdk::PluginError;
use serde_json::{json, Value};

/// JetStream's own error codes that have an Orrery meaning of their own.
const STREAM_NAME_IN_USE: u64 = 10058;
const CONSUMER_ALREADY_EXISTS: u64 = 10148;
const CONSUMER_NAME_EXISTS: u64 = 10013;
const INSUFFICIENT_RESOURCES: u64 = 10023;
const STORAGE_RESOURCES_EXCEEDED: u64 = 10047;
const ACCOUNT_RESOURCES_EXCEEDED: u64 = 10002;
const MAXIMUM_STREAMS_LIMIT: u64 = 10027;
const MAXIMUM_CONSUMERS_LIMIT: u64 = 10026;
/// Refusals of a config, which JetStream answers with a 500 status.
const REPLICAS_NOT_SUPPORTED: u64 = 10074;
const STREAM_INVALID_CONFIG: u64 = 10052;
const CONSUMER_CREATE: u64 = 10012;
const BAD_REQUEST: u64 = 10003;

/// Sends `payload` to `$JS.API.<subject>`; `what` names the resource in
/// errors (e.g. "Jetstream::Stream `orders`").
pub async fn call(
    js: &Context,
    what: &str,
    subject: &str,
    payload: Value,
) -> Result<Value, PluginError> {
    let response: Response<Value> =
        js.request(subject.to_owned(), &payload)
            .await
            .map_err(|e| {
                let (code, why) = match e.kind() {
                    RequestErrorKind::TimedOut => (ErrorCode::ServiceTimeout, "timed out"),
                    RequestErrorKind::NoResponders => (
                        ErrorCode::GeneralServiceException,
                        "JetStream is not enabled on the server",
                    ),
                    RequestErrorKind::InvalidSubject => (ErrorCode::InvalidRequest, "invalid name"),
                    RequestErrorKind::Other => (ErrorCode::NetworkFailure, "request failed"),
                };
                PluginError::new(code, format!("{what}: JetStream API `{subject}`: {why}"))
            })?;
    match response {
        Response::Ok(value) => Ok(value),
        Response::Err { error } => {
            let code = match (error.code(), error.error_code().0) {
                (_, STREAM_NAME_IN_USE | CONSUMER_ALREADY_EXISTS | CONSUMER_NAME_EXISTS) => {
                    ErrorCode::AlreadyExists
                }
                (
                    _,
                    INSUFFICIENT_RESOURCES
                    | STORAGE_RESOURCES_EXCEEDED
                    | ACCOUNT_RESOURCES_EXCEEDED
                    | MAXIMUM_STREAMS_LIMIT
                    | MAXIMUM_CONSUMERS_LIMIT,
                ) => ErrorCode::ServiceLimitExceeded,
                (
                    _,
                    REPLICAS_NOT_SUPPORTED | STREAM_INVALID_CONFIG | CONSUMER_CREATE | BAD_REQUEST,
                )
                | (400, _) => ErrorCode::InvalidRequest,
                (404, _) => ErrorCode::NotFound,
                (401 | 403, _) => ErrorCode::AccessDenied,
                (503, _) => ErrorCode::GeneralServiceException,
                _ => ErrorCode::ServiceInternalError,
            };
            Err(PluginError::new(
                code,
                format!("{what}: the server refused: {error}"),
            ))
        }
    }
}

/// An empty request body.
pub fn empty() -> Value {
    json!({})
}

/// All names a paged `*.NAMES` endpoint lists (`key`: `streams` or
/// `consumers`), following JetStream's offsets.
pub async fn names(
    js: &Context,
    what: &str,
    subject: &str,
    key: &str,
) -> Result<Vec<String>, PluginError> {
    let mut all = Vec::new();
    loop {
        let page = call(js, what, subject, json!({ "offset": all.len() })).await?;
        let names: Vec<String> = page[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let total = page["total"].as_u64().unwrap_or(0) as usize;
        let got = names.len();
        all.extend(names);
        if got == 0 || all.len() >= total {
            all.sort();
            return Ok(all);
        }
    }
}

/// Nanoseconds (JetStream's durations) to whole seconds, and back.
pub fn secs(nanos: &Value) -> Value {
    json!(nanos.as_i64().unwrap_or(0) / 1_000_000_000)
}

/// See [`secs`].
pub fn nanos(secs: &Value) -> Value {
    json!(secs.as_i64().unwrap_or(0).saturating_mul(1_000_000_000))
}
