//! `Postgres::Schema`: a schema (namespace) in a database.

use orrery_plugin_sdk::schema::{ListRequest, ListedResource, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, field, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use serde::{Deserialize, Serialize};

use crate::sql::ident;
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
        .field(field::string("database").required().create_only())
        .field(field::string("name").required().create_only())
        .field(
            field::string("owner")
                .provider_default()
                .describe("Owning role"),
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
    let desired: Schema = from_properties(properties)?;
    let what = what(&desired.database, &desired.name);
    let mut sql = format!("CREATE SCHEMA {}", ident(&desired.name)?);
    if let Some(owner) = &desired.owner {
        sql.push_str(&format!(" AUTHORIZATION {}", ident(owner)?));
    }
    cx.exec(&desired.database, &what, &sql).await?;
    read(cx, &id::encode(&[&desired.database, &desired.name])).await
}

const SELECT: &str = "SELECT nspname::text, pg_get_userbyid(nspowner)::text FROM pg_namespace";

pub async fn read(cx: &Cx<'_>, native_id: &str) -> OpResult {
    let (database, name) = parse(native_id)?;
    let what = what(&database, &name);
    let conn = cx.conn(&database, &what).await?;
    let sql = format!("{SELECT} WHERE nspname = $1");
    let row = conn
        .query_opt(&sql, &[&name])
        .await
        .map_err(cx.err(&what))?;
    let row = row.ok_or_else(|| PluginError::not_found(format!("{what} does not exist")))?;
    let owner = row.get(1);
    done(
        native_id,
        to_properties(&Schema {
            database,
            name,
            owner,
        })?,
    )
}

pub async fn update(cx: &Cx<'_>, native_id: &str, properties: &PropertyMap) -> OpResult {
    let desired: Schema = from_properties(properties)?;
    let (database, name) = parse(native_id)?;
    if desired.database != database {
        return Err(crate::not_updatable(
            "database",
            &database,
            &desired.database,
        ));
    }
    if desired.name != name {
        return Err(crate::not_updatable("name", &name, &desired.name));
    }
    let what = what(&database, &name);
    if let Some(owner) = &desired.owner {
        let sql = format!("ALTER SCHEMA {} OWNER TO {}", ident(&name)?, ident(owner)?);
        cx.exec(&database, &what, &sql).await?;
    }
    read(cx, native_id).await
}

pub async fn delete(cx: &Cx<'_>, native_id: &str) -> OpResult {
    read(cx, native_id).await?;
    let (database, name) = parse(native_id)?;
    let what = what(&database, &name);
    cx.exec(&database, &what, &format!("DROP SCHEMA {}", ident(&name)?))
        .await?;
    deleted(native_id)
}

pub async fn list(cx: &Cx<'_>, request: &ListRequest) -> Result<ListPage, PluginError> {
    let mut all = Vec::new();
    for database in crate::databases_listed(cx, request).await? {
        let what = format!("listing {TYPE} in database `{database}`");
        let sql = format!("{SELECT} WHERE nspname !~ '^pg_' AND nspname <> 'information_schema'");
        let Some(rows) = cx.list_rows(&database, &what, &sql).await? else {
            continue;
        };
        for row in rows {
            let s = Schema {
                database: database.clone(),
                name: row.get(0),
                owner: row.get(1),
            };
            let native_id = id::encode(&[&s.database, &s.name]);
            all.push(ListedResource {
                native_id,
                properties: to_properties(&s)?,
            });
        }
    }
    Ok(page::of_all(
        all,
        request.page_size,
        request.page_token.as_deref(),
    ))
}
