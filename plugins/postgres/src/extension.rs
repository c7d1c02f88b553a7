//! `Postgres::Extension`: an extension installed in a database.

use orrery_plugin_sdk::schema::{ListRequest, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, field, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use serde::{Deserialize, Serialize};

use crate::catalog::{self, record};
use crate::fields::{defaulted, key};
use crate::sql::{ident, literal, Clauses};
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
        .field(key("database"))
        .field(key("name"))
        .field(defaulted(field::string("schema"), "Schema of its objects"))
        .field(defaulted(field::string("version"), "Default: the newest"))
        .parent(database::TYPE, [("database", "name")])
        .build()
}

pub async fn create(cx: &Cx<'_>, properties: &PropertyMap) -> OpResult {
    let desired: Extension = from_properties(properties)?;
    let what = crate::named_in(TYPE, &desired.database, &desired.name);
    let sql = Clauses::new(format!("CREATE EXTENSION {}", ident(&desired.name)?))
        .ident("SCHEMA", desired.schema.as_ref())?
        .literal("VERSION", desired.version.as_ref())?;
    cx.exec(&desired.database, &what, &sql.sql()).await?;
    read(cx, &id::encode(&[&desired.database, &desired.name])).await
}

const SELECT: &str = "SELECT current_database()::text AS database, e.extname::text AS name,
    n.nspname::text AS schema, e.extversion AS version
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace";

pub async fn read(cx: &Cx<'_>, native_id: &str) -> OpResult {
    let [database, name] = id::parts(native_id, TYPE)?;
    let what = crate::named_in(TYPE, &database, &name);
    let conn = cx.conn(&database, &what).await?;
    let sql = format!("{SELECT} WHERE e.extname = $1");
    let row = catalog::one(&**conn, (&what, " is not installed"), &sql, &[&name]).await?;
    done(native_id, to_properties(&record::<Extension>(&row)?)?)
}

pub async fn update(cx: &Cx<'_>, native_id: &str, properties: &PropertyMap) -> OpResult {
    let desired: Extension = from_properties(properties)?;
    let [database, name] = id::parts(native_id, TYPE)?;
    if desired.database != database || desired.name != name {
        return Err(crate::not_updatable(
            "database/name",
            native_id,
            &format!("{}/{}", desired.database, desired.name),
        ));
    }
    let what = crate::named_in(TYPE, &database, &name);
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
    let [database, name] = id::parts(native_id, TYPE)?;
    let what = crate::named_in(TYPE, &database, &name);
    let sql = format!("DROP EXTENSION {}", ident(&name)?);
    cx.exec(&database, &what, &sql).await?;
    deleted(native_id)
}

pub async fn list(cx: &Cx<'_>, request: &ListRequest) -> Result<ListPage, PluginError> {
    // plpgsql comes with every database: nobody manages it.
    let sql = format!("{SELECT} WHERE e.extname <> 'plpgsql'");
    page::per_database(cx, request, &sql, |e: &Extension| {
        id::encode(&[&e.database, &e.name])
    })
    .await
}
