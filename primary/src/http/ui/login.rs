//! Signing in (a token, or the client certificate) and out.

use std::sync::Arc;

use axum::extract::rejection::FormRejection;
use axum::extract::{Extension, State};
use axum::http::header::SET_COOKIE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Form;
use maud::html;
use serde::Deserialize;

use super::layout;
use super::session::{self, Session};
use super::{check_csrf, see_other, ServedOverTls, UiError, UiResult};
use crate::http::auth::{ClientCertificate, Role};
use crate::http::error::{closing, ApiError};
use crate::http::extract;
use crate::http::Shared;

/// The login form.
#[derive(Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    token: Option<String>,
}

/// The logout (and every state-changing) form's CSRF field.
#[derive(Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    pub csrf: Option<String>,
}

fn form(message: Option<&str>, cert: bool) -> axum::response::Html<String> {
    layout::bare(
        "Sign in",
        html! {
            h1 { "Orrery" }
            p { "Sign in with an API token (" code { "--auth-tokens" } ") or your client certificate." }
            @if let Some(m) = message {
                p.error role="alert" { (m) }
            }
            form.login method="post" action="/ui/login" {
                label for="token" { "API token" }
                input #token type="password" name="token" autocomplete="current-password" required autofocus;
                button type="submit" { "Sign in" }
            }
            @if cert {
                form.login method="post" action="/ui/login" {
                    button type="submit" { "Sign in with the client certificate" }
                }
            }
        },
    )
}

/// `GET /ui/login`.
pub async fn page(
    session: Option<Extension<Session>>,
    cert: Option<Extension<ClientCertificate>>,
) -> Response {
    if session.is_some() {
        return see_other("/ui/commands");
    }
    form(None, cert.is_some()).into_response()
}

/// `POST /ui/login`: a session for the token's (or the certificate's)
/// principal.
pub async fn submit(
    State(shared): State<Arc<Shared>>,
    tls: Option<Extension<ServedOverTls>>,
    cert: Option<Extension<ClientCertificate>>,
    login: Result<Form<LoginForm>, FormRejection>,
) -> Response {
    let Form(login) = match login {
        Ok(form) => form,
        // Too large, too slow or broken off: the rest of the body is
        // not read, so the connection closes.
        Err(FormRejection::BytesRejection(e)) => {
            return closing(UiError(extract::unread(&e)).into_response())
        }
        Err(e) => return UiError(ApiError::new(e.status(), e.body_text())).into_response(),
    };
    let cert = cert.map(|Extension(c)| c);
    let signed_in = shared
        .config
        .auth
        .sign_in(login.token.as_deref(), cert.as_ref())
        .and_then(|p| {
            // The dashboard shows stacks: a principal that may read none
            // (the `metrics` scrape role) has nothing to sign in to.
            if p.may_some(Role::Viewer) {
                Ok(p)
            } else {
                Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "`{}` may not sign in to the dashboard (it is no viewer of any stack)",
                        p.name
                    ),
                )
                .refusing(&p.name, None))
            }
        });
    let principal = match signed_in {
        Ok(p) => p,
        Err(e) => {
            let audited = e.audited();
            let message = if e.status == StatusCode::UNAUTHORIZED {
                "That token is not valid here.".to_owned()
            } else {
                e.message
            };
            let mut response = (e.status, form(Some(&message), cert.is_some())).into_response();
            if let Some(refused) = audited {
                response.extensions_mut().insert(refused);
            }
            return response;
        }
    };
    let id = match shared.ui_sessions.create(principal, super::now()) {
        Ok(id) => id,
        Err(e) => return UiError(ApiError::internal(e.to_string())).into_response(),
    };
    let secure = if tls.is_some() { "; Secure" } else { "" };
    let cookie = format!(
        "{}={id}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
        session::COOKIE,
        session::LIFETIME.as_secs()
    );
    let mut r = see_other("/ui/commands");
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(SET_COOKIE, v);
    }
    r
}

/// `POST /ui/logout`.
pub async fn logout(
    State(shared): State<Arc<Shared>>,
    Extension(s): Extension<Session>,
    headers: axum::http::HeaderMap,
    Form(f): Form<CsrfForm>,
) -> UiResult {
    check_csrf(&s, f.csrf.as_deref())?;
    if let Some(id) = session::cookie_value(&headers) {
        shared.ui_sessions.remove(&id);
    }
    let mut r = see_other("/ui/login");
    r.headers_mut().insert(
        SET_COOKIE,
        HeaderValue::from_str(&format!(
            "{}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0",
            session::COOKIE
        ))
        .map_err(|e| UiError(ApiError::internal(e.to_string())))?,
    );
    Ok(r)
}
