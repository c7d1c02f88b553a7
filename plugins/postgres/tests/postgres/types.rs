//! What the conformance suite cannot see: secrets, drift, composite ids,
//! dependent objects, parent-scoped listing.

use std::time::Duration;

use orrery_plugin_sdk::schema::{
    ErrorCode, ListRequest, ListResult, ListedResource, Request, Value,
};
use orrery_plugin_sdk::Answer;
use orrery_testing::{props, PluginEnv};

use crate::common::{env, raw, unique};

#[tokio::test]
async fn a_password_is_set_but_never_returned() {
    let env = env().await;
    let name = unique("pw");
    let created = env
        .create(
            "Postgres::Role",
            props([
                ("name", name.as_str().into()),
                ("login", true.into()),
                ("password", "s3cret-Value".into()),
                ("password_version", 1.into()),
            ]),
        )
        .await;
    let props = created.properties.clone().expect("properties");
    assert!(!props.contains_key("password"), "{created:?}");
    assert!(!format!("{created:?}").contains("s3cret-Value"));
    let admin = raw("postgres").await;
    let row = admin
        .query_one(
            "SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = $1",
            &[&name],
        )
        .await
        .unwrap();
    assert!(row.get::<_, bool>(0), "the password was set");
}

#[tokio::test]
async fn read_sees_changes_made_behind_its_back() {
    let env = env().await;
    let name = unique("drift");
    env.create(
        "Postgres::Role",
        props([("name", name.as_str().into()), ("login", false.into())]),
    )
    .await;
    raw("postgres")
        .await
        .batch_execute(&format!("ALTER ROLE \"{name}\" LOGIN CONNECTION LIMIT 3"))
        .await
        .unwrap();
    let read = env.read("Postgres::Role", &name).await.properties.unwrap();
    assert_eq!(read["login"], Value::from(true));
    assert_eq!(read["connection_limit"], Value::from(3));
}

#[tokio::test]
async fn a_role_owning_objects_is_a_conflict_naming_them_until_drop_owned() {
    let env = env().await;
    let (role, db) = (unique("owner"), unique("owned"));
    env.create("Postgres::Role", props([("name", role.as_str().into())]))
        .await;
    let made = env
        .create("Postgres::Database", props([("name", db.as_str().into())]))
        .await;
    assert_eq!(made.error_code, None, "{made:?}");
    raw(&db)
        .await
        .batch_execute(&format!(
            "CREATE TABLE t (); ALTER TABLE t OWNER TO \"{role}\""
        ))
        .await
        .unwrap();

    let refused = env.delete("Postgres::Role", &role).await;
    assert_eq!(
        refused.error_code,
        Some(ErrorCode::ResourceConflict),
        "{refused:?}"
    );
    let message = refused.message.unwrap_or_default();
    assert!(
        message.contains(&role) && message.contains(&db),
        "names the dependents: {message}"
    );

    // The recorded options ask for the owned objects to go, in every database.
    let mut request = orrery_plugin_sdk::schema::DeleteRequest {
        request_id: "d".into(),
        resource_type: "Postgres::Role".into(),
        target: env.target.clone(),
        native_id: role.clone(),
        properties: props([("name", role.as_str().into()), ("drop_owned", true.into())]),
    };
    let gone = env.send(Request::Delete(request.clone())).await;
    assert_eq!(gone.error_code, None, "{gone:?}");
    let left = raw(&db)
        .await
        .query("SELECT 1 FROM pg_class WHERE relname = 't'", &[])
        .await
        .unwrap();
    assert!(left.is_empty(), "the owned table was dropped");
    request.request_id = "again".into();
    let again = env.send(Request::Delete(request)).await;
    assert_eq!(again.error_code, Some(ErrorCode::NotFound));
}

#[tokio::test]
async fn drop_owned_survives_its_connection_ending_under_it() {
    let env = env().await;
    let (role, db) = (unique("cut"), unique("cut_db"));
    env.create("Postgres::Role", props([("name", role.as_str().into())]))
        .await;
    env.create("Postgres::Database", props([("name", db.as_str().into())]))
        .await;
    let holder = raw(&db).await;
    holder
        .batch_execute(&format!(
            "CREATE TABLE t (); ALTER TABLE t OWNER TO \"{role}\""
        ))
        .await
        .unwrap();
    holder
        .batch_execute("BEGIN; LOCK TABLE t IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let delete = orrery_plugin_sdk::schema::DeleteRequest {
        request_id: "d".into(),
        resource_type: "Postgres::Role".into(),
        target: env.target.clone(),
        native_id: role.clone(),
        properties: props([("name", role.as_str().into()), ("drop_owned", true.into())]),
    };
    // While the plugin's DROP OWNED waits on the lock, its connection is
    // ended (as a forced drop of another database, or an operator, would)
    // and the database is still there: the plugin tries once more.
    let cut = async {
        let admin = raw("postgres").await;
        let waiting = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND application_name = 'orrery-plugin-postgres' \
             AND wait_event_type = 'Lock'";
        let (admin, db) = (&admin, &db);
        orrery_testing::wait_until_async(
            "DROP OWNED waiting on the lock (its backend ended)",
            Duration::from_secs(30),
            move || async move { !admin.query(waiting, &[db]).await.unwrap().is_empty() },
        )
        .await;
        holder.batch_execute("ROLLBACK").await.unwrap();
    };
    let (gone, ()) = tokio::join!(env.send(Request::Delete(delete)), cut);
    assert_eq!(gone.error_code, None, "{gone:?}");
    let left = raw(&db)
        .await
        .query("SELECT 1 FROM pg_class WHERE relname = 't'", &[])
        .await
        .unwrap();
    assert!(left.is_empty(), "the owned table was dropped");
}

#[tokio::test]
async fn table_grants_have_a_composite_id_that_reads_back_as_an_import() {
    let env = env().await;
    let (role, db) = (unique("reader"), unique("grants"));
    env.create("Postgres::Role", props([("name", role.as_str().into())]))
        .await;
    env.create("Postgres::Database", props([("name", db.as_str().into())]))
        .await;
    raw(&db)
        .await
        .batch_execute("CREATE TABLE orders (); CREATE TABLE \"odd/name,x\" ()")
        .await
        .unwrap();
    let objects = Value::List(vec!["orders".into(), "odd/name,x".into()]);
    let grant = props([
        ("role", role.as_str().into()),
        ("database", db.as_str().into()),
        ("object_type", "table".into()),
        ("schema", "public".into()),
        ("objects", objects.clone()),
        ("privileges", Value::List(vec!["SELECT".into()])),
    ]);
    let created = env.create("Postgres::Grant", grant).await;
    let id = created
        .native_id
        .clone()
        .unwrap_or_else(|| panic!("{created:?}"));
    assert_eq!(
        id,
        format!("{role}/{db}/table/public/odd%2Fname%2Cx,orders")
    );

    // Import: only the id is known.
    let imported = env.read("Postgres::Grant", &id).await.properties.unwrap();
    assert_eq!(imported["privileges"], Value::List(vec!["SELECT".into()]));
    assert_eq!(
        imported["objects"],
        Value::List(vec!["odd/name,x".into(), "orders".into()])
    );

    // Out of band: revoked on one table, so not held on all of them.
    raw(&db)
        .await
        .batch_execute(&format!("REVOKE SELECT ON orders FROM \"{role}\""))
        .await
        .unwrap();
    let drifted = env.read("Postgres::Grant", &id).await;
    assert_eq!(drifted.error_code, Some(ErrorCode::NotFound), "{drifted:?}");

    // Discovery lists grants made by hand, one per object, in the database.
    let listed = env.list_all("Postgres::Grant", 0).await;
    let ids: Vec<String> = listed.into_iter().map(|(id, _)| id).collect();
    assert!(
        ids.contains(&format!("{role}/{db}/table/public/odd%2Fname%2Cx")),
        "{ids:?}"
    );
}

#[tokio::test]
async fn children_are_listed_under_the_parent_database_given() {
    let env = env().await;
    let (db, other) = (unique("parent"), unique("other"));
    for name in [&db, &other] {
        env.create(
            "Postgres::Database",
            props([("name", name.as_str().into())]),
        )
        .await;
        raw(name)
            .await
            .batch_execute("CREATE SCHEMA by_hand")
            .await
            .unwrap();
    }
    let page = list_under(&env, "Postgres::Schema", &db).await;
    let ids: Vec<&str> = page
        .resources
        .iter()
        .map(|r| r.native_id.as_str())
        .collect();
    assert_eq!(
        ids,
        [format!("{db}/by_hand"), format!("{db}/public")],
        "only the parent's schemas"
    );
}

/// One page of `resource_type` listed under the database `db`.
async fn list_under(env: &PluginEnv, resource_type: &str, db: &str) -> ListResult {
    let request = Request::List(ListRequest {
        request_id: format!("under-{db}"),
        resource_type: resource_type.into(),
        target: env.target.clone(),
        page_size: 0,
        page_token: None,
        parent: Some(ListedResource {
            native_id: db.into(),
            properties: props([("name", db.into())]),
        }),
    });
    match env
        .client
        .request(&request, Duration::from_secs(30))
        .await
        .unwrap()
    {
        Answer::List(page) => page,
        other => panic!("not a list answer: {other:?}"),
    }
}

#[tokio::test]
async fn a_database_dropped_under_a_listing_is_skipped_not_a_failure() {
    let env = env().await;
    let db = unique("vanishing");
    env.create("Postgres::Database", props([("name", db.as_str().into())]))
        .await;
    // The plugin now holds a pooled connection to `db` ...
    let before = list_under(&env, "Postgres::Schema", &db).await;
    assert_eq!(before.resources.len(), 1, "{before:?}");
    // ... which a forced drop (another tool, another test) terminates.
    raw("postgres")
        .await
        .batch_execute(&format!("DROP DATABASE \"{db}\" WITH (FORCE)"))
        .await
        .unwrap();
    for ty in ["Postgres::Schema", "Postgres::Grant", "Postgres::Extension"] {
        let after = list_under(&env, ty, &db).await;
        assert!(
            after.error_code.is_none() && after.resources.is_empty(),
            "{ty}: {after:?}"
        );
    }
}

#[test]
fn grants_and_default_privileges_share_one_slot_per_database() {
    let plugin = orrery_plugin_postgres::PostgresPlugin::default();
    let schemas = orrery_plugin_sdk::ResourcePlugin::resources(&plugin);
    for ty in ["Postgres::Grant", "Postgres::DefaultPrivileges"] {
        let schema = schemas.iter().find(|s| s.type_name == ty).unwrap();
        let key = schema.concurrency.as_ref().expect("a concurrency key");
        assert_eq!(
            (key.key.as_str(), key.limit),
            ("database:{database}", 1),
            "{ty}"
        );
        assert_eq!(
            schema.parent.as_ref().unwrap().resource_type,
            "Postgres::Database"
        );
    }
    let config = orrery_plugin_sdk::ResourcePlugin::target_config(&plugin);
    let password = config.iter().find(|f| f.name == "password").unwrap();
    assert!(password.hints.is_secret());
}
