//! Bad input gets the code that tells the runtime what to do next, and a
//! message naming the resource.

use orrery_plugin_postgres::PostgresPlugin;
use orrery_plugin_sdk::schema::{ErrorCode, Value};
use orrery_testing::{props, PluginEnv};

use crate::common::{env, target_config, unique};

#[tokio::test]
async fn an_unknown_login_is_terminal_invalid_credentials() {
    // The throwaway server trusts every password, so a role that does not
    // exist is the refused login here; a wrong password is SQLSTATE 28P01,
    // mapped the same (error.rs).
    let mut config = target_config();
    config.insert("user".into(), "no_such_login".into());
    config.insert("password".into(), "hunter2-wrong".into());
    let env = PluginEnv::start(PostgresPlugin::default(), config).await;
    let name = unique("role");
    let event = env
        .create("Postgres::Role", props([("name", name.as_str().into())]))
        .await;
    assert_eq!(
        event.error_code,
        Some(ErrorCode::InvalidCredentials),
        "{event:?}"
    );
    assert!(!ErrorCode::InvalidCredentials.is_retryable());
    let message = event.message.unwrap_or_default();
    assert!(
        message.contains(&format!("Postgres::Role `{name}`")),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
}

#[tokio::test]
async fn an_unreachable_server_is_retryable() {
    let mut config = target_config();
    // Port 1 on loopback: nothing listens, the connection is refused.
    config.insert("port".into(), Value::from(1));
    let env = PluginEnv::start(PostgresPlugin::default(), config).await;
    let event = env
        .create("Postgres::Role", props([("name", "r_unreachable".into())]))
        .await;
    let code = event.error_code.clone().expect("a failure");
    assert_eq!(code, ErrorCode::NetworkFailure, "{event:?}");
    assert!(code.is_retryable());
    assert!(event
        .message
        .unwrap_or_default()
        .contains("Postgres::Role `r_unreachable`"));
}

#[tokio::test]
async fn a_name_postgresql_rejects_is_invalid_request_naming_it() {
    let env = env().await;
    let name = format!("pg_{}", unique("reserved"));
    let event = env
        .create("Postgres::Role", props([("name", name.as_str().into())]))
        .await;
    assert_eq!(
        event.error_code,
        Some(ErrorCode::InvalidRequest),
        "{event:?}"
    );
    let message = event.message.unwrap_or_default();
    assert!(
        message.contains(&name) && message.contains("reserved"),
        "{message}"
    );
}

#[tokio::test]
async fn hostile_names_are_quoted_not_executed() {
    let env = env().await;
    let name = format!("{}\"; DROP ROLE postgres; --", unique("q"));
    let event = env
        .create("Postgres::Role", props([("name", name.as_str().into())]))
        .await;
    assert_eq!(event.native_id.as_deref(), Some(name.as_str()), "{event:?}");
    let read = env.read("Postgres::Role", &name).await;
    assert_eq!(read.properties.unwrap()["name"], Value::from(name.as_str()));
    let gone = env.delete("Postgres::Role", &name).await;
    assert_eq!(gone.error_code, None, "{gone:?}");
}

#[tokio::test]
async fn a_bad_target_config_is_invalid_request() {
    let mut config = target_config();
    config.insert("sslmode".into(), "sometimes".into());
    let env = PluginEnv::start(PostgresPlugin::default(), config).await;
    let event = env.read("Postgres::Role", "x").await;
    assert_eq!(
        event.error_code,
        Some(ErrorCode::InvalidRequest),
        "{event:?}"
    );
    assert!(event.message.unwrap_or_default().contains("sslmode"));
}
