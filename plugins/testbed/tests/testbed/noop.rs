//! `Testbed::Noop::Thing`: every answer at once.

use orrery_plugin_sdk::schema::{ErrorCode, OperationStatus, Value};

use crate::common::{failed, ok, props, Env, NOOP_THING};

#[tokio::test]
async fn every_operation_answers_at_once() {
    let env = Env::new(props([])).await;
    let spec = props([("name", "n".into()), ("value", "v".into())]);
    assert_eq!(ok(&env.create(NOOP_THING, spec.clone()).await), spec);
    assert_eq!(ok(&env.read(NOOP_THING, "n").await), spec);
    let changed = props([("name", "n".into()), ("value", Value::Null)]);
    ok(&env.update(NOOP_THING, "n", changed).await);
    ok(&env.delete(NOOP_THING, "n").await);
    failed(&env.read(NOOP_THING, "n").await, ErrorCode::NotFound);
}

#[tokio::test]
async fn the_contract_still_holds() {
    let env = Env::new(props([])).await;
    ok(&env.create(NOOP_THING, props([("name", "n".into())])).await);
    failed(
        &env.create(NOOP_THING, props([("name", "n".into())])).await,
        ErrorCode::AlreadyExists,
    );
    failed(
        &env.update(NOOP_THING, "n", props([("name", "m".into())]))
            .await,
        ErrorCode::NotUpdatable,
    );
    failed(&env.delete(NOOP_THING, "m").await, ErrorCode::NotFound);
    failed(
        &env.create("Testbed::Nope", props([("name", "n".into())]))
            .await,
        ErrorCode::InvalidRequest,
    );
    let created = env.create(NOOP_THING, props([("name", "x".into())])).await;
    assert_eq!(created.status, OperationStatus::Success);
    failed(
        &env.status(orrery_plugin_sdk::schema::Operation::Create, &created)
            .await,
        ErrorCode::InvalidRequest,
    );
}

#[tokio::test]
async fn list_paginates_by_name() {
    let env = Env::new(props([])).await;
    for i in 0..7 {
        ok(&env
            .create(NOOP_THING, props([("name", format!("t{i}").into())]))
            .await);
    }
    let mut names = Vec::new();
    let mut token = None;
    loop {
        let page = env.list(NOOP_THING, 3, token).await;
        assert_eq!(page.status, OperationStatus::Success);
        assert!(page.resources.len() <= 3);
        names.extend(page.resources.into_iter().map(|r| r.native_id));
        match page.next_page_token {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    assert_eq!(names, ["t0", "t1", "t2", "t3", "t4", "t5", "t6"]);
}

#[tokio::test]
async fn a_thing_another_needs_cannot_be_deleted_before_it() {
    let env = Env::new(props([])).await;
    ok(&env.create(NOOP_THING, props([("name", "db".into())])).await);
    let user = props([("name", "user".into()), ("needs", "db".into())]);
    ok(&env.create(NOOP_THING, user).await);
    let refused = failed(
        &env.delete(NOOP_THING, "db").await,
        ErrorCode::ResourceConflict,
    );
    assert!(refused.contains("`user` needs it"), "{refused}");
    ok(&env.delete(NOOP_THING, "user").await);
    ok(&env.delete(NOOP_THING, "db").await);
}
