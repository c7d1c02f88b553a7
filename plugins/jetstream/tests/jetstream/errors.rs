//! Bad input and unreachable servers: the right code, a message naming the
//! resource, and never a secret.

use orrery_plugin_jetstream::{stream::TYPE, JetstreamPlugin};
use orrery_plugin_sdk::schema::{ErrorCode, Value};

use crate::common::{config, failed, props, Env, PluginEnv};

#[tokio::test]
async fn a_limit_the_server_refuses_is_terminal_and_names_the_stream() {
    let env = Env::new().await;
    // Three replicas on a server without a cluster.
    let spec = props([("name", "BIG".into()), ("replicas", 3.into())]);
    let message = failed(&env.create(TYPE, spec).await, ErrorCode::InvalidRequest);
    assert!(message.contains("Jetstream::Stream `BIG`"), "{message}");
    let spec = props([("name", "BAD".into()), ("max_age", (-5).into())]);
    failed(&env.create(TYPE, spec).await, ErrorCode::InvalidRequest);
    let spec = props([("name", "BAD".into()), ("storage", "tape".into())]);
    failed(&env.create(TYPE, spec).await, ErrorCode::InvalidRequest);
    let spec = props([("name", "has.dot".into())]);
    failed(&env.create(TYPE, spec).await, ErrorCode::InvalidRequest);
}

#[tokio::test]
async fn an_unreachable_server_is_retryable_and_secrets_stay_out_of_the_message() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("nats://127.0.0.1:{port}");
    let mut target = config(&[&url]);
    target.insert("token".into(), "s3cr3t-token".into());
    let env = PluginEnv::start(JetstreamPlugin::default(), target).await;
    let message = failed(
        &env.create(TYPE, props([("name", "X".into())])).await,
        ErrorCode::NetworkFailure,
    );
    assert!(message.contains(&url), "{message}");
    assert!(!message.contains("s3cr3t"), "{message}");
}

#[tokio::test]
async fn a_bad_target_config_is_an_invalid_request() {
    for target in [
        props([]),
        props([("servers", Value::List(vec![]))]),
        props([
            ("servers", Value::List(vec!["nats://127.0.0.1:1".into()])),
            ("colour", "red".into()),
        ]),
        props([("servers", "nats://127.0.0.1:1".into())]),
    ] {
        let env = PluginEnv::start(JetstreamPlugin::default(), target).await;
        let message = failed(&env.read(TYPE, "X").await, ErrorCode::InvalidRequest);
        assert!(message.contains("target `test`"), "{message}");
    }
    let mut target = config(&["nats://127.0.0.1:1"]);
    target.insert("password".into(), 987_654_321.into());
    let env = PluginEnv::start(JetstreamPlugin::default(), target).await;
    let message = failed(&env.read(TYPE, "X").await, ErrorCode::InvalidRequest);
    assert!(
        message.contains("`password`") && !message.contains("987654321"),
        "{message}"
    );
}

#[test]
fn the_announcement_marks_the_credentials_secret() {
    let announcement = orrery_plugin_sdk::announcement(&JetstreamPlugin::default());
    let secret: Vec<&str> = announcement
        .target_config
        .iter()
        .filter(|f| f.hints.is_secret())
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(secret, ["nkey_seed", "password", "token"]);
    let consumer = announcement
        .resources
        .iter()
        .find(|r| r.type_name == "Jetstream::Consumer")
        .unwrap();
    assert_eq!(
        consumer.parent.as_ref().unwrap().resource_type,
        "Jetstream::Stream"
    );
}
