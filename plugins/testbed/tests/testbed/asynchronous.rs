//! `Testbed::Async::Thing`: InProgress, status polls, Success.

use orrery_plugin_sdk::schema::{ErrorCode, Operation, OperationStatus, Value};

use crate::common::{failed, ok, props, Env, ASYNC_THING};

#[tokio::test]
async fn create_and_delete_finish_after_two_polls_by_default() {
    let env = Env::new(props([])).await;
    let spec = props([
        ("name", "a".into()),
        ("value", Value::List(vec![1.into(), "two".into()])),
        ("secret", "hunter2".into()),
    ]);
    let started = env.create(ASYNC_THING, spec).await;
    assert_eq!(started.status, OperationStatus::InProgress, "{started:?}");
    assert_eq!(started.native_id.as_deref(), Some("a"));
    assert_eq!(started.request_id, "create");
    assert_eq!(
        started.retry_after_ms,
        Some(orrery_plugin_testbed::POLL_AFTER_MS)
    );
    assert!(started.context.is_some());

    let first = env.status(Operation::Create, &started).await;
    assert_eq!(first.status, OperationStatus::InProgress, "{first:?}");
    assert_eq!(first.operation, Operation::Create);
    let second = env.status(Operation::Create, &first).await;
    let state = ok(&second);
    assert_eq!(second.native_id.as_deref(), Some("a"));
    assert_eq!(second.operation, Operation::Create);
    assert_eq!(state["name"], Value::from("a"));
    assert!(!state.contains_key("secret"), "write-only field returned");
    assert_eq!(ok(&env.read(ASYNC_THING, "a").await), state);

    let deleting = env.delete(ASYNC_THING, "a").await;
    assert_eq!(deleting.status, OperationStatus::InProgress);
    assert_eq!(deleting.native_id.as_deref(), Some("a"));
    let (gone, polls) = env.settle(Operation::Delete, deleting).await;
    ok(&gone);
    assert_eq!(polls, 2);
    failed(&env.read(ASYNC_THING, "a").await, ErrorCode::NotFound);
    failed(&env.delete(ASYNC_THING, "a").await, ErrorCode::NotFound);
}

#[tokio::test]
async fn polls_come_from_the_target_config() {
    let env = Env::new(props([("polls", 5.into())])).await;
    let started = env
        .create(ASYNC_THING, props([("name", "slow".into())]))
        .await;
    let (done, polls) = env.settle(Operation::Create, started).await;
    ok(&done);
    assert_eq!(polls, 5);

    let env = Env::new(props([("polls", 0.into())])).await;
    ok(&env
        .create(ASYNC_THING, props([("name", "fast".into())]))
        .await);
    ok(&env.delete(ASYNC_THING, "fast").await);
}

#[tokio::test]
async fn a_thing_exists_from_the_moment_its_create_is_accepted() {
    let env = Env::new(props([])).await;
    let started = env.create(ASYNC_THING, props([("name", "a".into())])).await;
    assert_eq!(started.status, OperationStatus::InProgress);
    failed(
        &env.create(ASYNC_THING, props([("name", "a".into())])).await,
        ErrorCode::AlreadyExists,
    );
}

#[tokio::test]
async fn update_is_immediate_and_name_is_create_only() {
    let env = Env::new(props([("polls", 0.into())])).await;
    ok(&env
        .create(
            ASYNC_THING,
            props([("name", "a".into()), ("value", 1.into())]),
        )
        .await);
    let updated = env
        .update(
            ASYNC_THING,
            "a",
            props([
                ("name", "a".into()),
                ("value", 2.into()),
                ("secret", "s".into()),
            ]),
        )
        .await;
    let state = ok(&updated);
    assert_eq!(state["value"], Value::from(2));
    assert!(!state.contains_key("secret"));
    failed(
        &env.update(ASYNC_THING, "a", props([("name", "b".into())]))
            .await,
        ErrorCode::NotUpdatable,
    );
    failed(
        &env.update(ASYNC_THING, "zz", props([("name", "zz".into())]))
            .await,
        ErrorCode::NotFound,
    );
    failed(
        &env.create(
            ASYNC_THING,
            props([("name", "c".into()), ("secret", 3.into())]),
        )
        .await,
        ErrorCode::InvalidRequest,
    );
    failed(
        &env.create(ASYNC_THING, props([])).await,
        ErrorCode::InvalidRequest,
    );
}

#[tokio::test]
async fn bad_status_contexts_are_invalid_requests() {
    let env = Env::new(props([])).await;
    let mut started = env.create(ASYNC_THING, props([("name", "a".into())])).await;
    started.context = Some(Value::from("garbage"));
    failed(
        &env.status(Operation::Create, &started).await,
        ErrorCode::InvalidRequest,
    );
    started.context = None;
    failed(
        &env.status(Operation::Create, &started).await,
        ErrorCode::InvalidRequest,
    );
}

#[tokio::test]
async fn targets_are_separate() {
    let mut env = Env::new(props([("polls", 0.into())])).await;
    ok(&env.create(ASYNC_THING, props([("name", "a".into())])).await);
    env.target.name = "other".into();
    failed(&env.read(ASYNC_THING, "a").await, ErrorCode::NotFound);
    ok(&env.create(ASYNC_THING, props([("name", "a".into())])).await);
    assert_eq!(env.list(ASYNC_THING, 0, None).await.resources.len(), 1);
}
