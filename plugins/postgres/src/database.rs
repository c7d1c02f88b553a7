//! `Postgres::Database`: a database, its owner and connection limit.

use orrery_plugin_sdk::schema::{ListRequest, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, field, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;

use crate::sql::{ident, literal};
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
        .field(field::string("name").required().create_only())
        .field(
            field::string("owner")
                .provider_default()
                .describe("Owning role"),
        )
        .field(
            field::string("encoding")
                .create_only()
                .provider_default()
                .describe("e.g. UTF8"),
        )
        .field(
            field::string("template")
                .create_only()
                .describe("Database copied (default template1)"),
        )
        .field(
            field::integer("connection_limit")
                .provider_default()
                .describe("-1: none"),
        )
        .build()
}

fn what(name: &str) -> String {
    format!("{TYPE} `{name}`")
}

pub async fn create(cx: &Cx<'_>, properties: &PropertyMap) -> OpResult {
    let desired: Database = from_properties(properties)?;
    let what = what(&desired.name);
    let mut sql = format!("CREATE DATABASE {}", ident(&desired.name)?);
    if let Some(owner) = &desired.owner {
        sql.push_str(&format!(" OWNER {}", ident(owner)?));
    }
    if let Some(encoding) = &desired.encoding {
        sql.push_str(&format!(" ENCODING {}", literal(encoding)?));
    }
    if let Some(template) = &desired.template {
        sql.push_str(&format!(" TEMPLATE {}", ident(template)?));
    }
    if let Some(n) = desired.connection_limit {
        sql.push_str(&format!(" CONNECTION LIMIT {n}"));
    }
    cx.exec(&cx.config.database, &what, &sql).await?;
    read(cx, &desired.name, properties).await
}

const SELECT: &str = "SELECT d.datname, pg_get_userbyid(d.datdba)::text,
    pg_encoding_to_char(d.encoding)::text, d.datconnlimit FROM pg_database d";

fn of_row(row: &Row) -> Database {
    Database {
        name: row.get(0),
        owner: row.get(1),
        encoding: row.get(2),
        connection_limit: row.get(3),
        template: None,
    }
}

pub async fn read(cx: &Cx<'_>, name: &str, recorded: &PropertyMap) -> OpResult {
    let what = what(name);
    let conn = cx.admin(&what).await?;
    let sql = format!("{SELECT} WHERE d.datname = $1 AND NOT d.datistemplate");
    let row = conn
        .query_opt(&sql, &[&name])
        .await
        .map_err(cx.err(&what))?;
    let row = row.ok_or_else(|| PluginError::not_found(format!("{what} does not exist")))?;
    let mut db = of_row(&row);
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
    if desired.name != name {
        return Err(crate::not_updatable("name", name, &desired.name));
    }
    let what = what(name);
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
        cx.exec(&cx.config.database, &what, &sql).await?;
    }
    if let Some(n) = desired.connection_limit {
        let sql = format!("ALTER DATABASE {db} CONNECTION LIMIT {n}");
        cx.exec(&cx.config.database, &what, &sql).await?;
    }
    read(cx, name, properties).await
}

pub async fn delete(cx: &Cx<'_>, name: &str) -> OpResult {
    let what = what(name);
    let conn = cx.admin(&what).await?;
    let exists = conn
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await
        .map_err(cx.err(&what))?;
    if exists.is_none() {
        return Err(PluginError::not_found(format!("{what} does not exist")));
    }
    // This plugin's own connections to it would keep it busy.
    cx.forget(name);
    conn.batch_execute(&format!("DROP DATABASE {} WITH (FORCE)", ident(name)?))
        .await
        .map_err(cx.err(&what))?;
    deleted(name)
}

pub async fn list(cx: &Cx<'_>, request: &ListRequest) -> Result<ListPage, PluginError> {
    let query = (SELECT, "NOT d.datistemplate", "d.datname");
    page::keyset(cx, request, query, of_row, |d| d.name.clone()).await
}
