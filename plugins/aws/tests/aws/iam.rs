//! The IAM types against moto: roles, managed policies and their
//! versions, attachments, users and access keys.

use orrery_plugin_sdk::schema::ErrorCode;

use crate::common::*;

const ROLE: &str = "AWS::IAM::Role";
const POLICY: &str = "AWS::IAM::Policy";
const ATTACHMENT: &str = "AWS::IAM::RolePolicyAttachment";
const USER: &str = "AWS::IAM::User";
const KEY: &str = "AWS::IAM::AccessKey";

fn trust(service: &str) -> serde_json::Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]
    })
}

fn allow(action: &str) -> serde_json::Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": action, "Resource": "*"}]
    })
}

#[tokio::test]
async fn a_role_goes_through_its_whole_cycle() {
    let Some(env) = Env::start().await else {
        return;
    };
    let desired = json!({
        "name": "app",
        "path": "/services/",
        "assume_role_policy": trust("ec2.amazonaws.com"),
        "description": "the app",
        "max_session_duration": 7200,
        "tags": {"team": "app"},
    });
    let created = env.create(ROLE, props(desired.clone())).await;
    assert_eq!(created.native_id.as_deref(), Some("app"));
    let got = json_of(&ok(&created));
    has(&ok(&created), &desired);
    assert_eq!(
        got["arn"], "arn:aws:iam::123456789012:role/services/app",
        "{got:#}"
    );
    failed(
        &env.create(ROLE, props(desired.clone())).await,
        ErrorCode::AlreadyExists,
    );

    let changed = json!({
        "name": "app",
        "path": "/services/",
        "assume_role_policy": trust("lambda.amazonaws.com"),
        "description": "the app, on lambda",
        "max_session_duration": 3600,
        "tags": {"team": "platform"},
    });
    has(
        &ok(&env.update(ROLE, "app", props(changed.clone())).await),
        &changed,
    );
    has(&ok(&env.read(ROLE, "app").await), &changed);

    replaces(ROLE, "name");
    replaces(ROLE, "path");
    let moved = env.update(ROLE, "app", props(json!({"name": "app", "path": "/other/", "assume_role_policy": trust("lambda.amazonaws.com")}))).await;
    failed(&moved, ErrorCode::NotUpdatable);

    // Out of band: the trust policy replaced directly.
    env.raw
        .iam
        .update_assume_role_policy()
        .role_name("app")
        .policy_document(trust("ecs-tasks.amazonaws.com").to_string())
        .send()
        .await
        .unwrap();
    let drifted = json_of(&ok(&env.read(ROLE, "app").await));
    assert_eq!(
        drifted["assume_role_policy"],
        trust("ecs-tasks.amazonaws.com")
    );
    has(
        &ok(&env.update(ROLE, "app", props(changed.clone())).await),
        &changed,
    );

    assert!(env
        .list_all(ROLE, 1)
        .await
        .iter()
        .any(|(id, _)| id == "app"));
    ok(&env.delete(ROLE, "app").await);
    failed(&env.read(ROLE, "app").await, ErrorCode::NotFound);
    failed(&env.delete(ROLE, "app").await, ErrorCode::NotFound);
}

#[tokio::test]
async fn a_policy_change_makes_a_new_default_version_and_keeps_at_most_five() {
    let Some(env) = Env::start().await else {
        return;
    };
    let desired = json!({"name": "read-logs", "policy": allow("logs:Get*"), "description": "logs", "tags": {"a": "b"}});
    let created = env.create(POLICY, props(desired.clone())).await;
    let arn = created.native_id.clone().unwrap();
    assert_eq!(arn, "arn:aws:iam::123456789012:policy/read-logs");
    has(&ok(&created), &desired);
    failed(
        &env.create(POLICY, props(desired.clone())).await,
        ErrorCode::AlreadyExists,
    );

    for i in 0..7 {
        let changed = json!({"name": "read-logs", "policy": allow(&format!("logs:Action{i}")), "description": "logs"});
        let got = ok(&env.update(POLICY, &arn, props(changed.clone())).await);
        has(&got, &changed);
        assert!(json_of(&got).get("tags").is_none(), "tags removed: {got:?}");
        let versions = env
            .raw
            .iam
            .list_policy_versions()
            .policy_arn(&arn)
            .send()
            .await
            .unwrap();
        assert!(
            versions.versions().len() <= 5,
            "{} versions",
            versions.versions().len()
        );
    }
    replaces(POLICY, "description");
    failed(
        &env.update(
            POLICY,
            &arn,
            props(json!({"name": "read-logs", "policy": allow("x:Y"), "description": "other"})),
        )
        .await,
        ErrorCode::NotUpdatable,
    );

    // Out of band: an older version made the default again directly.
    let versions = env
        .raw
        .iam
        .list_policy_versions()
        .policy_arn(&arn)
        .send()
        .await
        .unwrap();
    let older = versions
        .versions()
        .iter()
        .find(|v| !v.is_default_version())
        .and_then(|v| v.version_id())
        .unwrap()
        .to_owned();
    env.raw
        .iam
        .set_default_policy_version()
        .policy_arn(&arn)
        .version_id(&older)
        .send()
        .await
        .unwrap();
    let drifted = json_of(&ok(&env.read(POLICY, &arn).await));
    assert_eq!(drifted["default_version_id"], older.as_str());
    assert_ne!(drifted["policy"], allow("logs:Action6"), "{drifted:#}");
    let repaired =
        json!({"name": "read-logs", "policy": allow("logs:Action6"), "description": "logs"});
    has(
        &ok(&env.update(POLICY, &arn, props(repaired.clone())).await),
        &repaired,
    );

    assert!(env
        .list_all(POLICY, 0)
        .await
        .iter()
        .any(|(id, _)| id == &arn));
    ok(&env.delete(POLICY, &arn).await);
    failed(&env.read(POLICY, &arn).await, ErrorCode::NotFound);
}

#[tokio::test]
async fn a_role_policy_attachment_is_known_by_role_and_policy_arn() {
    let Some(env) = Env::start().await else {
        return;
    };
    ok(&env
        .create(
            ROLE,
            props(json!({"name": "worker", "assume_role_policy": trust("ec2.amazonaws.com")})),
        )
        .await);
    let policy = env
        .create(
            POLICY,
            props(json!({"name": "work", "policy": allow("sqs:*")})),
        )
        .await;
    let arn = policy.native_id.unwrap();
    let desired = json!({"role": "worker", "policy_arn": arn});
    let created = env.create(ATTACHMENT, props(desired.clone())).await;
    let id = format!("worker/{arn}");
    assert_eq!(created.native_id.as_deref(), Some(id.as_str()));
    has(&ok(&created), &desired);
    has(&ok(&env.read(ATTACHMENT, &id).await), &desired);
    failed(
        &env.create(ATTACHMENT, props(desired.clone())).await,
        ErrorCode::AlreadyExists,
    );
    replaces(ATTACHMENT, "role");
    replaces(ATTACHMENT, "policy_arn");
    failed(
        &env.update(
            ATTACHMENT,
            &id,
            props(json!({"role": "other", "policy_arn": arn})),
        )
        .await,
        ErrorCode::NotUpdatable,
    );
    assert_eq!(
        env.list_all(ATTACHMENT, 0)
            .await
            .into_iter()
            .map(|(i, _)| i)
            .collect::<Vec<_>>(),
        vec![id.clone()]
    );

    // Out of band: detached directly.
    env.raw
        .iam
        .detach_role_policy()
        .role_name("worker")
        .policy_arn(&arn)
        .send()
        .await
        .unwrap();
    failed(&env.read(ATTACHMENT, &id).await, ErrorCode::NotFound);
    ok(&env.create(ATTACHMENT, props(desired.clone())).await);
    ok(&env.delete(ATTACHMENT, &id).await);
    failed(&env.delete(ATTACHMENT, &id).await, ErrorCode::NotFound);
    failed(
        &env.read(ATTACHMENT, "no-slash").await,
        ErrorCode::InvalidRequest,
    );
}

#[tokio::test]
async fn a_user_and_its_access_key_whose_secret_is_answered_once_and_never_read() {
    let Some(env) = Env::start().await else {
        return;
    };
    let desired = json!({"name": "ci", "path": "/bots/", "tags": {"team": "ci"}});
    let created = env.create(USER, props(desired.clone())).await;
    has(&ok(&created), &desired);
    failed(
        &env.create(USER, props(desired.clone())).await,
        ErrorCode::AlreadyExists,
    );
    let changed = json!({"name": "ci", "path": "/robots/"});
    let updated = ok(&env.update(USER, "ci", props(changed.clone())).await);
    has(&updated, &changed);
    assert!(json_of(&updated).get("tags").is_none());
    replaces(USER, "name");
    // Out of band: a tag added directly.
    let tag = aws_sdk_iam::types::Tag::builder()
        .key("x")
        .value("y")
        .build()
        .unwrap();
    env.raw
        .iam
        .tag_user()
        .user_name("ci")
        .tags(tag)
        .send()
        .await
        .unwrap();
    has(
        &ok(&env.read(USER, "ci").await),
        &json!({"tags": {"x": "y"}}),
    );

    let key = env.create(KEY, props(json!({"user": "ci"}))).await;
    let id = key.native_id.clone().unwrap();
    let answered = json_of(&ok(&key));
    let secret = answered["secret"]
        .as_str()
        .expect("the secret, once")
        .to_owned();
    assert!(secret.len() >= 20, "{answered:#}");
    assert_eq!(answered["access_key_id"], id.as_str());
    let secret_field = schema(KEY).field("secret").unwrap().hints.clone();
    assert!(
        secret_field.is_secret() && secret_field.read_only,
        "{secret_field:?}"
    );

    let read = ok(&env.read(KEY, &id).await);
    has(
        &read,
        &json!({"user": "ci", "status": "Active", "access_key_id": id}),
    );
    let listed = env.list_all(KEY, 0).await;
    assert_eq!(listed.len(), 1);
    for shown in [format!("{read:?}"), format!("{listed:?}")] {
        assert!(!shown.contains("secret"), "{shown}");
        assert!(!shown.contains(&secret), "{shown}");
    }

    has(
        &ok(&env
            .update(KEY, &id, props(json!({"user": "ci", "status": "Inactive"})))
            .await),
        &json!({"status": "Inactive"}),
    );
    replaces(KEY, "user");
    // Out of band: reactivated directly.
    env.raw
        .iam
        .update_access_key()
        .user_name("ci")
        .access_key_id(&id)
        .status(aws_sdk_iam::types::StatusType::Active)
        .send()
        .await
        .unwrap();
    has(&ok(&env.read(KEY, &id).await), &json!({"status": "Active"}));

    ok(&env.delete(KEY, &id).await);
    failed(&env.read(KEY, &id).await, ErrorCode::NotFound);
    ok(&env.delete(USER, "ci").await);
    failed(&env.read(USER, "ci").await, ErrorCode::NotFound);
}
