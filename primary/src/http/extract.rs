//! Request extractors whose every rejection is a JSON error.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use super::error::{closing, ApiError};

/// Whether the request says its body is JSON. Every `POST` must: browsers
/// cannot send `application/json` across sites without a CORS preflight,
/// which this server never grants, so a web page cannot make a visitor's
/// browser apply or destroy anything.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| {
            let mime = mime.trim().to_ascii_lowercase();
            mime == "application/json"
                || mime
                    .strip_prefix("application/")
                    .and_then(|sub| sub.strip_suffix("+json"))
                    .is_some_and(|name| !name.is_empty())
        })
}

/// Why a body was refused. [`BodyRejection::Unread`] answers before the
/// body was read whole, so its answer closes the connection.
#[derive(Debug)]
pub enum BodyRejection {
    /// Not JSON, too large, or not readable: refused before (or while)
    /// reading it.
    Unread(ApiError),
    /// Read whole, and not what the endpoint takes.
    Invalid(ApiError),
}

impl IntoResponse for BodyRejection {
    fn into_response(self) -> Response {
        match self {
            BodyRejection::Unread(e) => closing(e.into_response()),
            BodyRejection::Invalid(e) => e.into_response(),
        }
    }
}

async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, BodyRejection> {
    if !is_json(req.headers()) {
        return Err(BodyRejection::Unread(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "requests with a body must say `Content-Type: application/json`",
        )));
    }
    Bytes::from_request(req, state)
        .await
        .map_err(|e| BodyRejection::Unread(unread(&e)))
}

/// The answer to a body that could not be read whole: too large (413),
/// too slow (408), or broken off.
pub fn unread(e: &axum::extract::rejection::BytesRejection) -> ApiError {
    let status = e.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(status, "the request body is too large")
    } else if super::body::timed_out(e) {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "the request body did not arrive in time",
        )
    } else {
        ApiError::new(status, format!("cannot read the request body: {e}"))
    }
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyRejection> {
    serde_json::from_slice(bytes).map_err(|e| {
        BodyRejection::Invalid(ApiError::bad_request(format!(
            "malformed request body: {e}"
        )))
    })
}

/// A JSON body, decoded into `T`. Unknown fields are ignored, as everywhere
/// in Orrery, so that newer clients keep working.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = BodyRejection;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = body_bytes(req, state).await?;
        decode(&bytes).map(JsonBody)
    }
}

/// A JSON body that may be empty (then `T::default()`); the content type
/// must still be JSON.
pub struct OptionalJsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJsonBody<T> {
    type Rejection = BodyRejection;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = body_bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJsonBody(T::default()));
        }
        decode(&bytes).map(OptionalJsonBody)
    }
}

/// Query parameters, decoded into `T`.
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| QueryParams(q.0))
            .map_err(|e| ApiError::bad_request(format!("bad query parameters: {}", e.body_text())))
    }
}

/// One path parameter.
pub struct PathParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<String>::from_request_parts(parts, state)
            .await
            .map(|p| PathParam(p.0))
            .map_err(|e| ApiError::bad_request(format!("bad path: {}", e.body_text())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(ct: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_bytes(ct.as_bytes()).unwrap(),
        );
        h
    }

    #[test]
    fn json_content_types() {
        assert!(is_json(&headers("application/json")));
        assert!(is_json(&headers("Application/JSON; charset=utf-8")));
        assert!(is_json(&headers("application/merge-patch+json")));
        assert!(!is_json(&headers("text/plain")));
        assert!(!is_json(&headers("application/x-www-form-urlencoded")));
        assert!(!is_json(&headers("multipart/form-data; boundary=x")));
        assert!(!is_json(&headers("+json")));
        assert!(!is_json(&headers("application/+json")));
        assert!(!is_json(&headers("applicationé/json")));
        assert!(!is_json(&HeaderMap::new()));
    }
}
