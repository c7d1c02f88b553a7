//! The web dashboard at `/ui` (`docs/http-api.md`, "Dashboard"):
//! server-rendered HTML (maud, which escapes every value) with a small
//! script and style sheet embedded in the binary.
//!
//! Authentication is the API's (`auth.rs`): the login page takes a token
//! (or the client certificate) and sets a session cookie ([`session`]).
//! Every page reads its data through the API's own handlers, so that role
//! checks and filtering are the same. State-changing forms (cancel,
//! logout) carry the session's CSRF token; every answer carries a strict
//! Content-Security-Policy (no inline script or style).

mod command;
mod commands;
mod fleet;
mod graph;
mod layout;

pub use layout::utc;
mod login;
mod plans;
pub mod session;
mod stacks;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Request, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, LOCATION, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

pub use plans::Plans;
use session::Session;

use super::error::ApiError;
use super::{auth, Shared};

/// The policy of every dashboard answer: only this origin's script and
/// style files, nothing inline, no framing, forms post only here.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self'; connect-src 'self'; object-src 'none'; frame-ancestors 'none'; \
    base-uri 'none'; form-action 'self'";

/// Marks requests that came over TLS (put in by the listener): the session
/// cookie is then `Secure`.
#[derive(Clone, Copy, Debug)]
pub struct ServedOverTls;

const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");
const FAVICON: &str = include_str!("assets/favicon.svg");

/// The dashboard's routes, guarded by [`guard`].
pub fn routes(shared: Arc<Shared>) -> Router<Arc<Shared>> {
    Router::new()
        .route("/ui", get(|| async { see_other("/ui/commands") }))
        .route("/ui/", get(|| async { see_other("/ui/commands") }))
        .route("/ui/login", get(login::page).post(login::submit))
        .route("/ui/logout", post(login::logout))
        .route(
            "/ui/assets/app.js",
            get(|| asset(APP_JS, "text/javascript")),
        )
        .route("/ui/assets/app.css", get(|| asset(APP_CSS, "text/css")))
        .route(
            "/ui/assets/favicon.svg",
            get(|| asset(FAVICON, "image/svg+xml")),
        )
        .route("/ui/commands", get(commands::page))
        .route("/ui/commands/{id}", get(command::page))
        .route("/ui/commands/{id}/graph", get(graph::page))
        .route("/ui/commands/{id}/events", get(command::events))
        .route("/ui/commands/{id}/cancel", post(command::cancel))
        .route("/ui/stacks", get(stacks::page))
        .route("/ui/fleet", get(fleet::page))
        // Forms are bytes: the API's document limit is not theirs.
        .layer(axum::extract::DefaultBodyLimit::max(
            super::body::FORM_MAX_BYTES.min(shared.config.max_body_bytes),
        ))
        .layer(axum::middleware::from_fn_with_state(shared, guard))
}

async fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, content_type),
            (CACHE_CONTROL, "private, max-age=300"),
        ],
        body,
    )
        .into_response()
}

/// A `303 See Other` to `to`.
pub fn see_other(to: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(LOCATION, v);
    }
    r
}

fn now() -> SystemTime {
    SystemTime::now()
}

/// Checks `Host`/`Origin` as the API does, then the session cookie: pages
/// without one redirect to the login page. Puts the [`Principal`] and the
/// [`Session`] in the request; adds the security headers to every answer.
///
/// [`Principal`]: auth::Principal
async fn guard(State(shared): State<Arc<Shared>>, mut req: Request, next: Next) -> Response {
    let mut response = match auth::check_host(&shared.config.auth, &req) {
        Err(refused) => *refused,
        Ok(()) => {
            let path = req.uri().path();
            let open = path == "/ui/login" || path.starts_with("/ui/assets/");
            let session = session::cookie_value(req.headers())
                .and_then(|id| shared.ui_sessions.get(&id, now()));
            match session {
                Some(s) => {
                    req.extensions_mut().insert(s.principal.clone());
                    req.extensions_mut().insert(s);
                    next.run(req).await
                }
                None if open => next.run(req).await,
                None if req.method() == Method::GET => see_other("/ui/login"),
                None => UiError(ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "not signed in (or the session expired)",
                ))
                .into_response(),
            }
        }
    };
    let h = response.headers_mut();
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Not `no-referrer`: under it a browser sends `Origin: null` with the
    // page's own form posts, which the Origin check refuses.
    h.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if !h.contains_key(CACHE_CONTROL) {
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// The CSRF token of a state-changing form, checked against the session's.
pub fn check_csrf(session: &Session, presented: Option<&str>) -> Result<(), UiError> {
    match presented {
        Some(t) if session.csrf_ok(t) => Ok(()),
        _ => Err(UiError(ApiError::new(
            StatusCode::FORBIDDEN,
            "the form's CSRF token is missing or wrong: reload the page",
        ))),
    }
}

/// An API error shown as a page.
#[derive(Debug)]
pub struct UiError(pub ApiError);

impl From<ApiError> for UiError {
    fn from(e: ApiError) -> Self {
        UiError(e)
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let status = self.0.status;
        let audited = self.0.audited();
        let page = layout::bare(
            status.canonical_reason().unwrap_or("Error"),
            maud::html! {
                h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
                p.error role="alert" { (self.0.message) }
                p { a href="/ui/commands" { "Back to the dashboard" } }
            },
        );
        let mut response = (status, page).into_response();
        if let Some(refused) = audited {
            response.extensions_mut().insert(refused);
        }
        response
    }
}

/// A page's result.
pub type UiResult<T = Response> = Result<T, UiError>;
