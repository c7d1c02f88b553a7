//! `Postgres::Schema`: a schema (namespace) in a database.

use orrery_plugin_sdk::schema::{ListRequest, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use serde::{Deserialize, Serialize};

use crate::catalog::{self, record};
use crate::fields::{key, owner};
use crate::sql::{ident, Clauses};
use crate::{database, id, page, Cx};

pub const TYPE: &str = "Postgres::Schema";

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Schema {
    database: String,
    name: String,
    owner: Option<String>,
}

pub fn schema() -> ResourceSchema {
    resource(TYPE)
        .describe("A schema in a database; id `database/name`")
        .identifier(["database", "name"])
        .field(key("database"))
        .field(key("name"))
        .field(owner())
        .parent(database::TYPE, [("database", "name")])
        .build()
}

pub async fn create(cx: &Cx<'_>, properties: &PropertyMap) -> OpResult {
    let desired: Schema = from_properties(properties)?;
    let what = crate::named_in(TYPE, &desired.database, &desired.name);
    let sql = Clauses::new(format!("CREATE SCHEMA {}", ident(&desired.name)?))
        .ident("AUTHORIZATION", desired.owner.as_ref())?;
    cx.exec(&desired.database, &what, &sql.sql()).await?;
    read(cx, &id::encode(&[&desired.database, &desired.name])).await
}

const SELECT: &str = "SELECT current_database()::text AS database, nspname::text AS name,
    pg_get_userbyid(nspowner)::text AS owner FROM pg_namespace";

pub async fn read(cx: &Cx<'_>, native_id: &str) -> OpResult {
    let [database, name] = id::parts(native_id, TYPE)?;
    let what = crate::named_in(TYPE, &database, &name);
    let conn = cx.conn(&database, &what).await?;
    let sql = format!("{SELECT} WHERE nspname = $1");
    let row = catalog::one(&**conn, (&what, " does not exist"), &sql, &[&name]).await?;
    done(native_id, to_properties(&record::<Schema>(&row)?)?)
}

pub async fn update(cx: &Cx<'_>, native_id: &str, properties: &PropertyMap) -> OpResult {
    let desired: Schema = from_properties(properties)?;
    let [database, name] = id::parts(native_id, TYPE)?;
    crate::same_identity("database", &database, &desired.database)?;
    crate::same_identity("name", &name, &desired.name)?;
    let what = crate::named_in(TYPE, &database, &name);
    if let Some(owner) = &desired.owner {
        let sql = format!("ALTER SCHEMA {} OWNER TO {}", ident(&name)?, ident(owner)?);
        cx.exec(&database, &what, &sql).await?;
    }
    read(cx, native_id).await
}

pub async fn delete(cx: &Cx<'_>, native_id: &str) -> OpResult {
    read(cx, native_id).await?;
    let [database, name] = id::parts(native_id, TYPE)?;
    let what = crate::named_in(TYPE, &database, &name);
    cx.exec(&database, &what, &format!("DROP SCHEMA {}", ident(&name)?))
        .await?;
    deleted(native_id)
}

pub async fn list(cx: &Cx<'_>, request: &ListRequest) -> Result<ListPage, PluginError> {
    let sql = format!("{SELECT} WHERE nspname !~ '^pg_' AND nspname <> 'information_schema'");
    page::per_database(cx, request, &sql, |s: &Schema| {
        id::encode(&[&s.database, &s.name])
    })
    .await
}
