//! The router without a socket and without plugins: request handling,
//! error mapping, the endpoints that need only the store. The end-to-end
//! tests with real plugins are in `tests/it/http_api.rs`.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{json, Value};
use tower::ServiceExt;

use super::*;

struct Fixture {
    _dir: tempfile::TempDir,
    primary: Primary,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let primary = Primary::open(Config {
        data_dir: dir.path().join("state"),
        // No plugin binaries anywhere.
        plugin_search: vec![dir.path().join("no-plugins")],
        stack_dir: dir.path().to_owned(),
        max_body_bytes: 4096,
        in_flight_bodies: Default::default(),
        hub_schemas: None,
        max_list_items: super::pages::DEFAULT_MAX_LIST_ITEMS,
        audit_retention: crate::http::DEFAULT_AUDIT_RETENTION,
        options: Options::default(),
        nats: None,
        metrics: None,
        database_url: None,
        discover_every: None,
        drift_every: None,
        lease: crate::lease::LeaseConfig::new(crate::lease::DEFAULT_TTL),
        auth: std::sync::Arc::new(super::auth::Auth::insecure().with_hosts(
            super::auth::HostPolicy::new(&[], std::net::Ipv4Addr::LOCALHOST.into()),
        )),
    })
    .unwrap();
    Fixture { _dir: dir, primary }
}

async fn call(
    f: &Fixture,
    method: Method,
    uri: &str,
    content_type: Option<&str>,
    body: impl Into<Body>,
) -> (StatusCode, Value) {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "127.0.0.1");
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let resp = f
        .primary
        .router()
        .oneshot(req.body(body.into()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)))
    };
    (status, value)
}

async fn get(f: &Fixture, uri: &str) -> (StatusCode, Value) {
    call(f, Method::GET, uri, None, Body::empty()).await
}

async fn post_json(f: &Fixture, uri: &str, body: &str) -> (StatusCode, Value) {
    call(
        f,
        Method::POST,
        uri,
        Some("application/json"),
        body.to_owned(),
    )
    .await
}

#[tokio::test]
async fn health_and_readiness() {
    let f = fixture();
    let (status, body) = get(&f, "/healthz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "ok");
    let (status, body) = get(&f, "/readyz").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ready");
}

#[tokio::test]
async fn unknown_paths_and_methods_answer_json() {
    let f = fixture();
    let (status, body) = get(&f, "/v1/nothing").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body["error"].is_string());
    let (status, body) = get(&f, "/v1/stacks/apply").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(body["error"].is_string());
}

#[tokio::test]
async fn malformed_bodies_are_rejected_with_json_errors() {
    let f = fixture();
    for body in ["{", "[1,", "\u{0}", "null", "42", "{\"document\": 7}", "{}"] {
        let (status, reply) = post_json(&f, "/v1/stacks/plan", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?}: {reply}");
        assert!(reply["error"].is_string(), "{reply}");
    }
    let (status, reply) = post_json(
        &f,
        "/v1/stacks/plan",
        r#"{"document": "stack: s", "mode": "yolo"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(reply["error"].as_str().unwrap().contains("yolo"));
    let (status, _) = post_json(
        &f,
        "/v1/stacks/plan",
        r#"{"document": "stack: s", "stack_dir": "relative"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn posts_must_be_json() {
    let f = fixture();
    let body = json!({"document": "stack: s"}).to_string();
    for ct in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let (status, reply) = call(&f, Method::POST, "/v1/stacks/apply", ct, body.clone()).await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct:?}");
        assert!(reply["error"].is_string());
    }
    let (status, _) = call(
        &f,
        Method::POST,
        "/v1/stacks/s/destroy",
        None,
        Body::empty(),
    )
    .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
}

/// An answer given before the body was read whole says `Connection: close`:
/// the rest of the body may still be on its way, so the server closes the
/// connection, and a client that pooled it would fail its next request on
/// it (`tests/it/http_api.rs` once did, after a 415, on a loaded machine). A
/// body read whole and refused leaves the connection open.
#[tokio::test]
async fn a_body_refused_unread_closes_the_connection_and_one_read_whole_does_not() {
    let f = fixture();
    let connection = |content_type: &'static str, body: String| {
        let router = f.primary.router();
        async move {
            let req = Request::builder()
                .method(Method::POST)
                .uri("/v1/stacks/plan")
                .header("host", "127.0.0.1")
                .header("content-type", content_type)
                .body(Body::from(body))
                .unwrap();
            let resp = router.oneshot(req).await.unwrap();
            let connection = resp
                .headers()
                .get("connection")
                .map(|v| v.to_str().unwrap().to_owned());
            (resp.status(), connection)
        }
    };
    let not_json = connection("text/plain", "{}".into()).await;
    assert_eq!(
        not_json,
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, Some("close".into()))
    );
    let huge = json!({"document": "x".repeat(10_000)}).to_string();
    let too_large = connection("application/json", huge).await;
    assert_eq!(
        too_large,
        (StatusCode::PAYLOAD_TOO_LARGE, Some("close".into()))
    );
    let malformed = connection("application/json", "{\"document\": ".into()).await;
    assert_eq!(malformed, (StatusCode::BAD_REQUEST, None));
}

#[tokio::test]
async fn huge_bodies_are_refused() {
    let f = fixture();
    let body = json!({"document": "x".repeat(10_000)}).to_string();
    let (status, reply) = post_json(&f, "/v1/stacks/plan", &body).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{reply}");
    assert!(reply["error"].is_string());
}

#[tokio::test]
async fn invalid_documents_are_422_with_located_errors() {
    let f = fixture();
    let (status, reply) = post_json(
        &f,
        "/v1/stacks/plan",
        &json!({"document": "stack: [unclosed", "source": "mine.yaml"}).to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{reply}");
    assert_eq!(reply["errors"][0]["file"], "mine.yaml");
    assert!(reply["errors"][0]["message"].is_string());

    // No plugin binary `nope` exists: validation names the target's plugin.
    let doc = "stack: s\ntargets:\n  - name: t\n    plugin: nope\nresources:\n  - label: a\n    type: X::Y\n    target: t\n";
    let (status, reply) = post_json(
        &f,
        "/v1/stacks/apply",
        &json!({ "document": doc }).to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{reply}");
    let text = reply["errors"].to_string();
    assert!(text.contains("nope"), "{text}");

    // A plugin name that is a path is never looked up.
    let doc = doc.replace("plugin: nope", "plugin: ../../bin/sh");
    let (status, _) = post_json(
        &f,
        "/v1/stacks/plan",
        &json!({ "document": doc }).to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    // The document may be given as a JSON object.
    let (status, reply) = post_json(
        &f,
        "/v1/stacks/plan",
        &json!({"document": {"stack": "s", "targets": [{"name": "t", "plugin": "nope"}],
            "resources": [{"label": "a", "type": "X::Y", "target": "t"}]}})
        .to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{reply}");
}

#[tokio::test]
async fn store_backed_endpoints_on_an_empty_store() {
    let f = fixture();
    let (status, reply) = get(&f, "/v1/stacks").await;
    assert_eq!((status, reply), (StatusCode::OK, json!({"stacks": []})));
    let (status, reply) = get(&f, "/v1/resources?stack=none").await;
    assert_eq!((status, reply), (StatusCode::OK, json!({"resources": []})));
    let (status, reply) = get(&f, "/v1/targets").await;
    assert_eq!((status, reply), (StatusCode::OK, json!({"targets": []})));
    let (status, reply) = get(&f, "/v1/commands").await;
    assert_eq!((status, reply), (StatusCode::OK, json!({"commands": []})));
    let (status, reply) = get(&f, "/v1/plugins").await;
    assert_eq!((status, reply), (StatusCode::OK, json!({"plugins": []})));
    let (status, _) = get(&f, "/v1/commands?limit=0").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = get(&f, "/v1/commands?limit=abc").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = get(&f, "/v1/commands/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = post_json(&f, "/v1/commands/nope/cancel", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, reply) = post_json(&f, "/v1/stacks/none/destroy", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{reply}");
    let (status, _) = post_json(&f, "/v1/stacks/none/destroy", "{").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn finished_commands_cannot_be_canceled() {
    let f = fixture();
    let store = &f.primary.shared.store;
    store.begin_command("c1", "s", "apply").unwrap();
    store
        .finish_command("c1", &crate::state::CommandStatus::Completed)
        .unwrap();
    let (status, reply) = post_json(&f, "/v1/commands/c1/cancel", "{}").await;
    assert_eq!(status, StatusCode::CONFLICT, "{reply}");
    assert_eq!(reply["status"], "completed");
    let (status, reply) = get(&f, "/v1/commands/c1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(reply["status"], "completed");
    assert_eq!(reply["active"], false);
    let (status, reply) = get(&f, "/v1/commands?stack=s").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(reply["commands"][0]["id"], "c1");
    let (_, reply) = get(&f, "/v1/stacks").await;
    assert_eq!(reply["stacks"][0]["name"], "s");
    assert_eq!(reply["stacks"][0]["last_command"]["id"], "c1");
}

#[tokio::test]
async fn plan_requests_give_parameter_values_in_vars() {
    let f = fixture();
    let doc = "stack: s\nparameters:\n  n: { type: number, max: 5 }\n";
    let plan = |vars: Value| {
        let body = json!({ "document": doc, "source": "p.yaml", "vars": vars }).to_string();
        let f = &f;
        async move { post_json(f, "/v1/stacks/plan", &body).await }
    };
    let (status, reply) = plan(json!({ "n": 3 })).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    for (vars, message) in [
        (
            json!({}),
            "p.yaml:3: parameter `n`: has no default and no value was given",
        ),
        (
            json!({ "n": "3" }),
            "p.yaml:3: parameter `n`: must be a number, not a string",
        ),
        (
            json!({ "n": 6 }),
            "p.yaml:3: parameter `n`: `6` is more than the maximum 5",
        ),
        (
            json!({ "m": 1 }),
            "p.yaml: parameter `m`: a value was given, but the document declares no such parameter",
        ),
    ] {
        let (status, reply) = plan(vars.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{vars}: {reply}");
        assert_eq!(reply["errors"][0]["text"], message, "{reply}");
    }
}

#[tokio::test]
async fn stack_outputs_are_served_with_secret_ones_masked() {
    use orrery_schema::{PropertyMap, Value as V};
    let f = fixture();
    let (status, reply) = get(&f, "/v1/stacks/web/outputs").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{reply}");
    let entry = |k: &str, v: V| V::Map(PropertyMap::from([(k.to_owned(), v)]));
    let recorded = PropertyMap::from([
        ("url".to_owned(), entry("value", V::from("http://x"))),
        (
            "ports".to_owned(),
            entry("value", V::List(vec![V::Int(80)])),
        ),
        ("token".to_owned(), entry("secret", V::Bool(true))),
    ]);
    f.primary
        .shared
        .store
        .put_outputs("web", &recorded)
        .unwrap();
    let (status, reply) = get(&f, "/v1/stacks/web/outputs").await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(
        reply,
        json!({"stack": "web", "outputs": {"url": "http://x", "ports": [80], "token": {"secret": true}}})
    );
}

#[tokio::test]
async fn the_stacks_answer_is_kept_until_a_write_request_or_its_age_runs_out() {
    let f = fixture();
    let store = &f.primary.shared.store;
    let (_, reply) = get(&f, "/v1/stacks").await;
    assert_eq!(reply, json!({"stacks": []}));
    // Written past this process's API (as a CLI on the same store would):
    // the kept answer does not see it yet...
    store.begin_command("c1", "s", "apply").unwrap();
    let (_, reply) = get(&f, "/v1/stacks").await;
    assert_eq!(reply, json!({"stacks": []}), "answered from what was kept");
    // ...until its age runs out.
    let deadline = std::time::Instant::now() + stacks::MAX_AGE * 5;
    loop {
        let (_, reply) = get(&f, "/v1/stacks").await;
        if reply["stacks"][0]["name"] == "s" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{reply}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // A request that may write (even one refused) makes it stale at once.
    store.begin_command("c2", "t", "apply").unwrap();
    let (status, _) = post_json(&f, "/v1/commands/nope/cancel", "{}").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, reply) = get(&f, "/v1/stacks").await;
    assert_eq!(reply["stacks"][1]["name"], "t", "{reply}");
    assert_eq!(reply["stacks"][1]["last_command"]["id"], "c2", "{reply}");
}
