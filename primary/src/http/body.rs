//! Bounds on request bodies, before any handler reads one: a declared
//! length past the route's limit is refused unread (413), and every body
//! must arrive whole within a deadline from the end of its headers (408),
//! so that a client sending a byte now and then cannot hold a connection,
//! and its buffer, open for as long as it likes (issue #43, attack 3).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::CONTENT_LENGTH;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::error::{closing, ApiError};
use super::Shared;

/// Largest form the dashboard takes (a login or a CSRF form is bytes).
pub const FORM_MAX_BYTES: usize = 16 << 10;

/// A body that did not arrive whole within its deadline.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct BodyTimedOut(pub Duration);

/// Whether `error`, or an error it was caused by, is [`BodyTimedOut`].
pub fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut at = Some(error);
    while let Some(e) = at {
        if e.is::<BodyTimedOut>() {
            return true;
        }
        at = e.source();
    }
    false
}

/// `body`, failing with [`BodyTimedOut`] unless it ends within `limit`.
pub fn with_deadline(body: Body, limit: Duration) -> Body {
    let deadline = tokio::time::Instant::now() + limit;
    let frames = body.into_data_stream();
    Body::from_stream(futures::stream::unfold(
        Some(frames),
        move |frames| async move {
            let mut frames = frames?;
            match tokio::time::timeout_at(deadline, frames.next()).await {
                Ok(Some(Ok(bytes))) => Some((Ok(bytes), Some(frames))),
                Ok(Some(Err(e))) => Some((Err(axum::BoxError::from(e)), None)),
                Ok(None) => None,
                // The rest of the body is dropped unread: the connection
                // closes after the answer.
                Err(_) => Some((Err(BodyTimedOut(limit).into()), None)),
            }
        },
    ))
}

/// The layer the listener puts on every connection's requests: bodies
/// with a deadline.
pub async fn deadline(State(limit): State<Duration>, req: Request, next: Next) -> Response {
    next.run(req.map(|b| with_deadline(b, limit))).await
}

/// The largest body a request to `path` may carry.
pub fn limit_of(shared: &Shared, path: &str) -> usize {
    if path == "/ui" || path.starts_with("/ui/") {
        FORM_MAX_BYTES.min(shared.config.max_body_bytes)
    } else {
        shared.config.max_body_bytes
    }
}

/// Refuses a request whose `Content-Length` is past its route's limit
/// before anything reads it (413, the connection closed). A body without
/// a length (chunked) is held to the same limit as it is read.
pub async fn declared_length(
    State(shared): State<Arc<Shared>>,
    req: Request,
    next: Next,
) -> Response {
    let limit = limit_of(&shared, req.uri().path());
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        Some(n) if n > limit as u64 => closing(
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is too large (at most {limit} bytes here)"),
            )
            .into_response(),
        ),
        _ => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_that_never_ends_times_out() {
        let (tx, rx) =
            futures::channel::mpsc::channel::<Result<axum::body::Bytes, std::io::Error>>(1);
        let body = with_deadline(Body::from_stream(rx), Duration::from_millis(100));
        let error = axum::body::to_bytes(body, 1024)
            .await
            .expect_err("times out");
        assert!(timed_out(&error), "{error:?}");
        drop(tx);
        let whole = axum::body::to_bytes(
            with_deadline(Body::from("abc"), Duration::from_secs(1)),
            1024,
        )
        .await
        .unwrap();
        assert_eq!(&whole[..], b"abc");
    }
}
