//! `Postgres::Database`: a database, its owner and connection limit.

use orrery_plugin_sdk::schema::{ListRequest, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, field, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use serde::{Deserialize, Serialize};

use crate::catalog::{self, record};
use crate::fields::{connection_limit, defaulted, key, owner};
use crate::sql::{ident, Clauses};
use crate::{page, Cx};

pub const TYPE: &str = "Postgres::Database";

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Database {
    name: String,
    owner: Option<String>,
    encoding: Option<String>,
    /// Not in the catalogs: PostgreSQL forgets what it copied.
    template: Option<String>,
    connection_limit: Option<i32>,
}

pub fn schema() -> ResourceSchema {
    resource(TYPE)
        .describe("A database of the cluster")
        .identifier(["name"])
        .field(key("name"))
        .field(owner())
        .field(defaulted(
            field::string("encoding").create_only(),
            "e.g. UTF8",
        ))
        .field(
            field::string("template")
                .create_only()
                .describe("Database copied (default template1)"),
        )
        .field(connection_limit())
        .build()
}

pub async fn create(cx: &Cx<'_>, properties: &PropertyMap) -> OpResult {
    let desired: Database = from_properties(properties)?;
    let what = crate::named(TYPE, &desired.name);
    let sql = Clauses::new(format!("CREATE DATABASE {}", ident(&desired.name)?))
        .ident("OWNER", desired.owner.as_ref())?
        .literal("ENCODING", desired.encoding.as_ref())?
        .ident("TEMPLATE", desired.template.as_ref())?
        .number("CONNECTION LIMIT", desired.connection_limit);
    cx.exec_admin(&what, &sql.sql()).await?;
    read(cx, &desired.name, properties).await
}

const SELECT: &str = "SELECT d.datname AS name, pg_get_userbyid(d.datdba)::text AS owner,
    pg_encoding_to_char(d.encoding)::text AS encoding, d.datconnlimit AS connection_limit
    FROM pg_database d";

pub async fn read(cx: &Cx<'_>, name: &str, recorded: &PropertyMap) -> OpResult {
    let what = crate::named(TYPE, name);
    let conn = cx.admin(&what).await?;
    let sql = format!("{SELECT} WHERE d.datname = $1 AND NOT d.datistemplate");
    let mut db: Database =
        record(&catalog::one(&**conn, (&what, " does not exist"), &sql, &[&name]).await?)?;
    let recorded: Database = from_properties(recorded).unwrap_or_default();
    db.template = recorded.template;
    // `utf8` and `UTF8` are one encoding.
    if recorded.encoding.as_deref().map(str::to_ascii_uppercase) == db.encoding {
        db.encoding = recorded.encoding;
    }
    done(name, to_properties(&db)?)
}

pub async fn update(cx: &Cx<'_>, name: &str, properties: &PropertyMap) -> OpResult {
    let desired: Database = from_properties(properties)?;
    crate::same_identity("name", name, &desired.name)?;
    let what = crate::named(TYPE, name);
    let current: Database = from_properties(
        &read(cx, name, properties)
            .await?
            .properties
            .unwrap_or_default(),
    )?;
    if let (Some(want), Some(have)) = (&desired.encoding, &current.encoding) {
        if !want.eq_ignore_ascii_case(have) {
            return Err(crate::not_updatable("encoding", have, want));
        }
    }
    let db = ident(name)?;
    if let Some(owner) = &desired.owner {
        let sql = format!("ALTER DATABASE {db} OWNER TO {}", ident(owner)?);
        cx.exec_admin(&what, &sql).await?;
    }
    if let Some(n) = desired.connection_limit {
        let sql = format!("ALTER DATABASE {db} CONNECTION LIMIT {n}");
        cx.exec_admin(&what, &sql).await?;
    }
    read(cx, name, properties).await
}

pub async fn delete(cx: &Cx<'_>, name: &str) -> OpResult {
    let what = crate::named(TYPE, name);
    let conn = cx.admin(&what).await?;
    let sql = "SELECT 1 FROM pg_database WHERE datname = $1";
    catalog::one(&**conn, (&what, " does not exist"), sql, &[&name]).await?;
    // This plugin's own connections to it would keep it busy.
    cx.forget(name);
    let sql = format!("DROP DATABASE {} WITH (FORCE)", ident(name)?);
    catalog::execute(&**conn, &what, &sql).await?;
    deleted(name)
}

pub async fn list(cx: &Cx<'_>, request: &ListRequest) -> Result<ListPage, PluginError> {
    let query = (SELECT, "NOT d.datistemplate", "d.datname");
    page::keyset(cx, request, query, |d: &Database| d.name.clone()).await
}
