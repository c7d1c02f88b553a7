//! `Postgres::Extension`: an extension installed in a database.

use orrery_plugin_sdk::schema::{ListRequest, ListedResource, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, field, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use serde::{Deserialize, Serialize};

use crate::sql::{ident, literal};
use crate::{database, id, page, Cx};

pub const TYPE: &str = "Postgres::Extension";

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Extension {
    database: String,
    name: String,
    schema: Option<String>,
    version: Option<String>,
}

pub fn schema() -> ResourceSchema {
    resource(TYPE)
        .describe("An extension in a database; id `database/name`")
        .identifier(["database", "name"])
        .field(field::string("database").required().create_only())
        .field(field::string("name").required().create_only())
        .field(
            field::string("schema")
                .provider_default()
                .describe("Schema of its objects"),
        )
        .field(
            field::string("version")
                .provider_default()
                .describe("Default: the newest"),
        )
        .parent(database::TYPE, [("database", "name")])
        .build()
}

fn parse(native_id: &str) -> Result<(String, String), PluginError> {
    let mut parts = id::decode(native_id, 2, TYPE)?.into_iter();
    Ok((
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    ))
}

fn what(database: &str, name: &str) -> String {
    format!("{TYPE} `{name}` in database `{database}`")
}

pub async fn create(cx: &Cx<'_>, properties: &PropertyMap) -> OpResult {
    let desired: Extension = from_properties(properties)?;
    let what = what(&desired.database, &desired.name);
    let mut sql = format!("CREATE EXTENSION {}", ident(&desired.name)?);
    if let Some(schema) = &desired.schema {
        sql.push_str(&format!(" SCHEMA {}", ident(schema)?));
    }
    if let Some(version) = &desired.version {
        sql.push_str(&format!(" VERSION {}", literal(version)?));
    }
    cx.exec(&desired.database, &what, &sql).await?;
    read(cx, &id::encode(&[&desired.database, &desired.name])).await
}

const SELECT: &str = "SELECT e.extname::text, n.nspname::text, e.extversion
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace";

pub async fn read(cx: &Cx<'_>, native_id: &str) -> OpResult {
    let (database, name) = parse(native_id)?;
    let what = what(&database, &name);
    let conn = cx.conn(&database, &what).await?;
    let sql = format!("{SELECT} WHERE e.extname = $1");
    let row = conn
        .query_opt(&sql, &[&name])
        .await
        .map_err(cx.err(&what))?;
    let row = row.ok_or_else(|| PluginError::not_found(format!("{what} is not installed")))?;
    let (schema, version) = (row.get(1), row.get(2));
    done(
        native_id,
        to_properties(&Extension {
            database,
            name,
            schema,
            version,
        })?,
    )
}

pub async fn update(cx: &Cx<'_>, native_id: &str, properties: &PropertyMap) -> OpResult {
    let desired: Extension = from_properties(properties)?;
    let (database, name) = parse(native_id)?;
    if desired.database != database || desired.name != name {
        return Err(crate::not_updatable(
            "database/name",
            native_id,
            &format!("{}/{}", desired.database, desired.name),
        ));
    }
    let what = what(&database, &name);
    let ext = ident(&name)?;
    if let Some(version) = &desired.version {
        let sql = format!("ALTER EXTENSION {ext} UPDATE TO {}", literal(version)?);
        cx.exec(&database, &what, &sql).await?;
    }
    if let Some(schema) = &desired.schema {
        let current = read(cx, native_id).await?.properties.unwrap_or_default();
        if current.get("schema").and_then(|s| s.as_str()) != Some(schema.as_str()) {
            let sql = format!("ALTER EXTENSION {ext} SET SCHEMA {}", ident(schema)?);
            cx.exec(&database, &what, &sql).await?;
        }
    }
    read(cx, native_id).await
}

pub async fn delete(cx: &Cx<'_>, native_id: &str) -> OpResult {
    read(cx, native_id).await?;
    let (database, name) = parse(native_id)?;
    let what = what(&database, &name);
    cx.exec(
        &database,
        &what,
        &format!("DROP EXTENSION {}", ident(&name)?),
    )
    .await?;
    deleted(native_id)
}

pub async fn list(cx: &Cx<'_>, request: &ListRequest) -> Result<ListPage, PluginError> {
    let mut all = Vec::new();
    for database in crate::databases_listed(cx, request).await? {
        let what = format!("listing {TYPE} in database `{database}`");
        // plpgsql comes with every database: nobody manages it.
        let sql = format!("{SELECT} WHERE e.extname <> 'plpgsql'");
        let Some(rows) = cx.list_rows(&database, &what, &sql).await? else {
            continue;
        };
        for row in rows {
            let (name, schema, version) = (row.get(0), row.get(1), row.get(2));
            let e = Extension {
                database: database.clone(),
                name,
                schema,
                version,
            };
            let native_id = id::encode(&[&e.database, &e.name]);
            all.push(ListedResource {
                native_id,
                properties: to_properties(&e)?,
            });
        }
    }
    Ok(page::of_all(
        all,
        request.page_size,
        request.page_token.as_deref(),
    ))
}
