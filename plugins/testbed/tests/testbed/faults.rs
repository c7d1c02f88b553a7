//! Fault injection through the target config.

use std::time::{Duration, Instant};

use orrery_plugin_sdk::schema::{ErrorCode, OperationStatus, ProgressEvent};

use crate::common::{failed, ok, props, Env, NOOP_THING};

fn codes(events: &[ProgressEvent]) -> Vec<Option<ErrorCode>> {
    events.iter().map(|e| e.error_code.clone()).collect()
}

#[tokio::test]
async fn every_nth_request_is_throttled() {
    let env = Env::new(props([("throttle_every", 3.into())])).await;
    let mut events = Vec::new();
    for i in 0..6 {
        events.push(
            env.create(NOOP_THING, props([("name", format!("t{i}").into())]))
                .await,
        );
    }
    let throttled = Some(ErrorCode::Throttling);
    assert_eq!(
        codes(&events),
        [None, None, throttled.clone(), None, None, throttled]
    );
    assert_eq!(events[2].retry_after_ms, Some(10));
    assert!(events[2]
        .message
        .as_deref()
        .unwrap_or("")
        .contains("throttl"));
    // The throttled create did nothing; a retry goes through.
    ok(&env.create(NOOP_THING, props([("name", "t2".into())])).await);
}

#[tokio::test]
async fn every_nth_request_fails_with_the_configured_code() {
    let env = Env::new(props([
        ("fail_code", "ServiceInternalError".into()),
        ("fail_every", 2.into()),
    ]))
    .await;
    ok(&env.create(NOOP_THING, props([("name", "a".into())])).await);
    failed(
        &env.read(NOOP_THING, "a").await,
        ErrorCode::ServiceInternalError,
    );
    ok(&env.read(NOOP_THING, "a").await);

    let env = Env::new(props([("fail_code", "NetworkFailure".into())])).await;
    failed(
        &env.create(NOOP_THING, props([("name", "a".into())])).await,
        ErrorCode::NetworkFailure,
    );
    let list = env.list(NOOP_THING, 0, None).await;
    assert_eq!(list.status, OperationStatus::Failure);
    assert_eq!(list.error_code, Some(ErrorCode::NetworkFailure));
}

#[tokio::test]
async fn a_panicking_handler_fails_that_request_only() {
    let env = Env::new(props([("panic_on", "read".into())])).await;
    ok(&env.create(NOOP_THING, props([("name", "a".into())])).await);
    let message = failed(&env.read(NOOP_THING, "a").await, ErrorCode::InternalFailure);
    assert!(message.contains("injected panic on read"), "{message}");
    // The plugin still serves other operations, and the state survived.
    ok(&env
        .update(NOOP_THING, "a", props([("name", "a".into())]))
        .await);
    failed(&env.read(NOOP_THING, "a").await, ErrorCode::InternalFailure);
}

#[tokio::test]
async fn delay_holds_the_answer_back() {
    let env = Env::new(props([("delay_ms", 150.into())])).await;
    let start = Instant::now();
    ok(&env.create(NOOP_THING, props([("name", "a".into())])).await);
    assert!(
        start.elapsed() >= Duration::from_millis(150),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn a_bad_config_is_an_invalid_request() {
    for config in [
        props([("crash_on", "explode".into())]),
        props([("panic_on", "everything".into())]),
        props([("polls", "two".into())]),
        props([("throttle_every", (-1).into())]),
    ] {
        let env = Env::new(config).await;
        let message = failed(
            &env.create(NOOP_THING, props([("name", "a".into())])).await,
            ErrorCode::InvalidRequest,
        );
        assert!(message.contains("config of target `test`"), "{message}");
    }
}
