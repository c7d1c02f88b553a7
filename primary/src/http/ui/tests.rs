//! The dashboard through the real router: sign-in, sessions, CSRF, roles,
//! the security headers, escaping. The browser test is
//! `tests/it/dashboard_browser.rs`.

use axum::body::Body;
use axum::http::header::{CONTENT_SECURITY_POLICY, LOCATION, SET_COOKIE};
use axum::http::{Method, Request, StatusCode};
use tower::ServiceExt;

use super::session::COOKIE;
use super::CSP;
use crate::discovery::{Drift, DRIFT_KEY, UNMANAGED_STACK};
use crate::http::auth::{Auth, Grant, HostPolicy, Role};
use crate::http::{Config, Primary};
use crate::state::StoredResource;

const VIEWER: &str = "orr_viewer_token_0123456789abcdef";
const OPERATOR: &str = "orr_operator_token_0123456789abcdef";

struct Fixture {
    _dir: tempfile::TempDir,
    primary: Primary,
}

fn grant(role: Role) -> Vec<Grant> {
    vec![Grant {
        role,
        stacks: "*".into(),
    }]
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut auth = Auth::new();
    auth.add_token("viewer", VIEWER, grant(Role::Viewer));
    auth.add_token("operator", OPERATOR, grant(Role::Operator));
    let auth = auth.with_hosts(HostPolicy::new(&[], std::net::Ipv4Addr::LOCALHOST.into()));
    let primary = Primary::open(Config {
        data_dir: dir.path().join("state"),
        plugin_search: vec![dir.path().join("no-plugins")],
        stack_dir: dir.path().to_owned(),
        max_body_bytes: 4096,
        in_flight_bodies: Default::default(),
        hub_schemas: None,
        max_list_items: crate::http::DEFAULT_MAX_LIST_ITEMS,
        audit_retention: crate::http::DEFAULT_AUDIT_RETENTION,
        options: Default::default(),
        nats: None,
        metrics: None,
        database_url: None,
        discover_every: None,
        drift_every: None,
        lease: crate::lease::LeaseConfig::new(crate::lease::DEFAULT_TTL),
        auth: std::sync::Arc::new(auth),
    })
    .unwrap();
    Fixture { _dir: dir, primary }
}

struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

async fn send(f: &Fixture, req: axum::http::request::Builder, body: &str) -> Answer {
    let req = req.header("host", "127.0.0.1:8080");
    let resp = f
        .primary
        .router()
        .oneshot(req.body(Body::from(body.to_owned())).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 22)
        .await
        .unwrap();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

async fn get(f: &Fixture, uri: &str, cookie: Option<&str>) -> Answer {
    let mut req = Request::builder().method(Method::GET).uri(uri);
    if let Some(c) = cookie {
        req = req.header("cookie", format!("{COOKIE}={c}"));
    }
    send(f, req, "").await
}

async fn post_form(f: &Fixture, uri: &str, cookie: Option<&str>, body: &str) -> Answer {
    let mut req = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", "http://127.0.0.1:8080");
    if let Some(c) = cookie {
        req = req.header("cookie", format!("{COOKIE}={c}"));
    }
    send(f, req, body).await
}

/// Signs in with `token`; the session id and the page's CSRF token.
async fn sign_in(f: &Fixture, token: &str) -> (String, String) {
    let a = post_form(f, "/ui/login", None, &format!("token={token}")).await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    let cookie = a.headers[SET_COOKIE].to_str().unwrap().to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/ui", "Max-Age="] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "no TLS here: {cookie}");
    let id = cookie
        .strip_prefix(&format!("{COOKIE}="))
        .and_then(|r| r.split(';').next())
        .unwrap()
        .to_owned();
    let page = get(f, "/ui/commands", Some(&id)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let csrf = page
        .body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_owned();
    (id, csrf)
}

#[tokio::test]
async fn unauthenticated_pages_redirect_to_the_login_with_the_csp() {
    let f = fixture();
    for uri in ["/ui/commands", "/ui/stacks", "/ui/fleet", "/ui/commands/x"] {
        let a = get(&f, uri, None).await;
        assert_eq!(a.status, StatusCode::SEE_OTHER, "{uri}");
        assert_eq!(a.headers[LOCATION], "/ui/login", "{uri}");
        assert_eq!(a.headers[CONTENT_SECURITY_POLICY], CSP);
    }
    let forged = get(&f, "/ui/commands", Some(&"0".repeat(64))).await;
    assert_eq!(forged.status, StatusCode::SEE_OTHER);
    let login = get(&f, "/ui/login", None).await;
    assert_eq!(login.status, StatusCode::OK);
    assert_eq!(login.headers[CONTENT_SECURITY_POLICY], CSP);
    assert!(login.body.contains("type=\"password\""));
    assert!(!login.body.contains("<script>"), "no inline script");
    assert!(!login.body.contains("style="), "no inline style");
    let js = get(&f, "/ui/assets/app.js", None).await;
    assert_eq!(js.status, StatusCode::OK);
    assert!(js.body.contains("EventSource"));
    let posted = post_form(&f, "/ui/logout", None, "").await;
    assert_eq!(posted.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_wrong_token_is_refused_and_a_right_one_signs_in() {
    let f = fixture();
    let a = post_form(&f, "/ui/login", None, "token=orr_wrong").await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert!(a.headers.get(SET_COOKIE).is_none());
    assert!(a.body.contains("not valid"), "{}", a.body);
    // No token, no certificate, not insecure: refused too.
    let a = post_form(&f, "/ui/login", None, "").await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    let (id, _) = sign_in(&f, VIEWER).await;
    let page = get(&f, "/ui/commands", Some(&id)).await;
    assert!(page.body.contains("viewer"), "the principal is shown");
    assert_eq!(page.headers[CONTENT_SECURITY_POLICY], CSP);
    // A login form posted from another site is refused by the Origin check.
    let req = Request::builder()
        .method(Method::POST)
        .uri("/ui/login")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("origin", "http://evil.example");
    let a = send(&f, req, &format!("token={VIEWER}")).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(a.headers.get(SET_COOKIE).is_none());
}

#[tokio::test]
async fn cancel_needs_an_operator_and_the_csrf_token() {
    let f = fixture();
    let (viewer, viewer_csrf) = sign_in(&f, VIEWER).await;
    let a = post_form(
        &f,
        "/ui/commands/c1/cancel",
        Some(&viewer),
        &format!("csrf={viewer_csrf}"),
    )
    .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.body);
    assert!(a.body.contains("operator"), "{}", a.body);
    let (operator, csrf) = sign_in(&f, OPERATOR).await;
    let a = post_form(&f, "/ui/commands/c1/cancel", Some(&operator), "").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(a.body.contains("CSRF"), "{}", a.body);
    let a = post_form(&f, "/ui/commands/c1/cancel", Some(&operator), "csrf=0000").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    // Another session's token is no good either.
    let a = post_form(
        &f,
        "/ui/commands/c1/cancel",
        Some(&operator),
        &format!("csrf={viewer_csrf}"),
    )
    .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    // The right one passes the check: the command does not exist.
    let a = post_form(
        &f,
        "/ui/commands/c1/cancel",
        Some(&operator),
        &format!("csrf={csrf}"),
    )
    .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.body);
    // Logout needs it too, then the session is gone.
    let a = post_form(&f, "/ui/logout", Some(&operator), "csrf=nope").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    let a = post_form(&f, "/ui/logout", Some(&operator), &format!("csrf={csrf}")).await;
    assert_eq!(a.status, StatusCode::SEE_OTHER);
    assert!(a.headers[SET_COOKIE]
        .to_str()
        .unwrap()
        .contains("Max-Age=0"));
    let a = get(&f, "/ui/commands", Some(&operator)).await;
    assert_eq!(a.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn stacks_show_drift_and_unmanaged_resources_and_escape_properties() {
    let f = fixture();
    let evil = "<script>alert(1)</script>";
    f.primary
        .shared
        .store
        .put_resource(&StoredResource {
            stack: "xss".into(),
            label: format!("web{evil}"),
            resource_type: "Testbed::Thing".into(),
            target: "t".into(),
            plugin: "testbed".into(),
            native_id: "n1".into(),
            properties: [(
                "value".to_owned(),
                orrery_schema::Value::String(evil.into()),
            )]
            .into(),
            managed: true,
            ..Default::default()
        })
        .unwrap();
    // A drifted resource, and one discovery found that no stack manages.
    let drifted = StoredResource {
        stack: "xss".into(),
        label: "gone".into(),
        resource_type: "Testbed::Thing".into(),
        target: "t".into(),
        native_id: "n2".into(),
        managed: true,
        secret_hashes: [(DRIFT_KEY.to_owned(), Drift::Deleted.encode())].into(),
        ..Default::default()
    };
    let found = StoredResource {
        stack: UNMANAGED_STACK.into(),
        label: "found".into(),
        resource_type: "Testbed::Thing".into(),
        target: "t".into(),
        native_id: "found-1".into(),
        managed: false,
        ..Default::default()
    };
    for r in [drifted, found] {
        f.primary.shared.store.put_resource(&r).unwrap();
    }
    let (id, _) = sign_in(&f, VIEWER).await;
    let page = get(&f, "/ui/stacks", Some(&id)).await;
    assert!(page.body.contains("drift: deleted"), "{}", page.body);
    assert!(page.body.contains("1 drifted"), "{}", page.body);
    assert!(page.body.contains("Unmanaged resources"), "{}", page.body);
    assert!(
        page.body
            .contains("orrery import --type Testbed::Thing --target t --native-id found-1"),
        "{}",
        page.body
    );
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("xss"), "{}", page.body);
    assert!(
        page.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{}",
        page.body
    );
    assert!(!page.body.contains(evil), "{}", page.body);
    assert!(!page.body.contains("<script>"), "no inline script at all");
}
