//! Bounds on request bodies, before any handler reads one: a declared
//! length past the route's limit is refused unread (413), and every body
//! must arrive whole within a deadline from the end of its headers (408),
//! so that a client sending a byte now and then cannot hold a connection,
//! and its buffer, open for as long as it likes (issue #43, attack 3).
//! The bytes of the bodies being received at once are bounded too, for the
//! whole process and per principal ([`InFlight`], issue #44, item 5), so
//! that one token holder's many large bodies cannot take the memory every
//! other principal needs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_LENGTH, RETRY_AFTER, TRANSFER_ENCODING};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::auth::Principal;
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

/// How many bytes of request bodies the primary receives at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InFlightLimits {
    /// For every client together (503 beyond).
    pub total: usize,
    /// For one principal (429 beyond); requests without one share one.
    pub per_principal: usize,
}

impl Default for InFlightLimits {
    fn default() -> Self {
        InFlightLimits {
            total: 256 << 20,
            per_principal: 64 << 20,
        }
    }
}

/// The bytes of bodies being received, counted in KiB: a request reserves
/// its declared length (its route's limit when it declares none) before
/// its body is read, and gives it back with its answer.
pub struct InFlight {
    limits: InFlightLimits,
    total: Arc<Semaphore>,
    /// One budget per principal that sent a body; principals are the
    /// configured ones, so the map is bounded by the tokens file.
    principals: Mutex<HashMap<String, Arc<Semaphore>>>,
}

fn kib(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX)
}

impl InFlight {
    /// Budgets of `limits`, nothing reserved.
    pub fn new(limits: InFlightLimits) -> Self {
        InFlight {
            limits,
            total: Arc::new(Semaphore::new(kib(limits.total) as usize)),
            principals: Mutex::default(),
        }
    }

    fn principal(&self, name: &str) -> Arc<Semaphore> {
        let mut map = self.principals.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(name.to_owned())
            .or_insert_with(|| Arc::new(Semaphore::new(kib(self.limits.per_principal) as usize)))
            .clone()
    }

    /// Reserves `bytes` for `principal`, or the answer refusing the body:
    /// 429 past the principal's budget, 503 past the total.
    #[allow(clippy::result_large_err)]
    fn reserve(
        &self,
        principal: &str,
        bytes: usize,
    ) -> Result<[OwnedSemaphorePermit; 2], Response> {
        let n = kib(bytes).max(1);
        let refuse = |status, message: String| {
            let mut answer = closing(ApiError::new(status, message).into_response());
            answer
                .headers_mut()
                .insert(RETRY_AFTER, axum::http::HeaderValue::from_static("1"));
            answer
        };
        let own = self.principal(principal).try_acquire_many_owned(n).map_err(|_| {
            refuse(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "too many request bodies of `{principal}` are being received at once (at most {} bytes); try again once they are in",
                    self.limits.per_principal
                ),
            )
        })?;
        let all = self.total.clone().try_acquire_many_owned(n).map_err(|_| {
            refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the server is receiving too many request bodies at once (at most {} bytes); try again shortly",
                    self.limits.total
                ),
            )
        })?;
        Ok([own, all])
    }
}

/// The layer inside authentication that reserves a request's body bytes
/// in [`InFlight`] before its handler reads them, and holds them until the
/// answer.
pub async fn in_flight(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let limit = limit_of(&shared, req.uri().path());
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok());
    let bytes = match declared {
        Some(n) => n.min(limit),
        None if req.headers().contains_key(TRANSFER_ENCODING) => limit,
        None => 0,
    };
    if bytes == 0 {
        return next.run(req).await;
    }
    let principal = req
        .extensions()
        .get::<Principal>()
        .map(|p| p.name.clone())
        .unwrap_or_default();
    match shared.bodies.reserve(&principal, bytes) {
        Ok(_held) => next.run(req).await,
        Err(refused) => refused,
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

    #[test]
    fn a_principal_past_its_budget_waits_and_others_go_on_until_the_total() {
        let bodies = InFlight::new(InFlightLimits {
            total: 3 << 20,
            per_principal: 2 << 20,
        });
        let a1 = bodies.reserve("a", 1 << 20).unwrap();
        let _a2 = bodies.reserve("a", 1 << 20).unwrap();
        let refused = bodies.reserve("a", 1).unwrap_err();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        let _b1 = bodies.reserve("b", 1 << 20).unwrap();
        let refused = bodies.reserve("b", 1 << 20).unwrap_err();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(refused.headers().contains_key(RETRY_AFTER));
        // An answered request gives its bytes back.
        drop(a1);
        let _b2 = bodies.reserve("b", 1 << 20).unwrap();
    }
}
