//! `Postgres::DefaultPrivileges`: what a grantee gets on objects a role
//! creates later in a database (or one schema of it). Id
//! `database/owner/schema/object_type/grantee` (schema empty: all).

use orrery_plugin_sdk::schema::{ListRequest, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, field, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use serde::{Deserialize, Serialize};

use crate::sql::{grantee, ident};
use crate::{acl, database, id, Cx};

pub const TYPE: &str = "Postgres::DefaultPrivileges";

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DefaultPrivileges {
    database: String,
    owner: String,
    schema: Option<String>,
    object_type: String,
    grantee: String,
    privileges: Vec<String>,
    with_grant_option: Option<bool>,
}

pub fn schema() -> ResourceSchema {
    resource(TYPE)
        .describe("Privileges granted on objects a role creates from now on; id `database/owner/schema/object_type/grantee`")
        .identifier(["database", "owner", "schema", "object_type", "grantee"])
        .field(field::string("database").required().create_only())
        .field(field::string("owner").required().create_only().describe("The role creating the objects"))
        .field(field::string("schema").create_only().describe("Absent: every schema"))
        .field(field::string("object_type").required().create_only().describe("table, sequence, function or type"))
        .field(field::string("grantee").required().create_only().describe("`public` for PUBLIC"))
        .field(field::list("privileges").required())
        .field(field::boolean("with_grant_option").provider_default())
        .parent(database::TYPE, [("database", "name")])
        .build()
}

/// `pg_default_acl.defaclobjtype` and the word ALTER DEFAULT PRIVILEGES takes.
fn kind(object_type: &str) -> Option<(&'static str, &'static str)> {
    Some(match object_type {
        "table" => ("r", "TABLES"),
        "sequence" => ("S", "SEQUENCES"),
        "function" => ("f", "FUNCTIONS"),
        "type" => ("T", "TYPES"),
        _ => return None,
    })
}

impl DefaultPrivileges {
    fn native_id(&self) -> String {
        let schema = self.schema.as_deref().unwrap_or("");
        id::encode(&[
            &self.database,
            &self.owner,
            schema,
            &self.object_type,
            &self.grantee,
        ])
    }

    fn parse(native_id: &str) -> Result<Self, PluginError> {
        let p = id::decode(native_id, 5, TYPE)?;
        Ok(DefaultPrivileges {
            database: p[0].clone(),
            owner: p[1].clone(),
            schema: Some(p[2].clone()).filter(|s| !s.is_empty()),
            object_type: p[3].clone(),
            grantee: p[4].clone(),
            ..Default::default()
        })
    }

    fn what(&self) -> String {
        let scope = self
            .schema
            .as_ref()
            .map_or("every schema".into(), |s| format!("schema `{s}`"));
        format!(
            "{TYPE} of `{}` on {}s `{}` creates in {scope} of database `{}`",
            self.grantee, self.object_type, self.owner, self.database
        )
    }

    /// `FOR ROLE o [IN SCHEMA s]`, and the objects word.
    fn scope(&self) -> Result<(String, &'static str), PluginError> {
        let (_, word) = kind(&self.object_type).ok_or_else(|| {
            PluginError::invalid(format!(
                "{}: object_type must be table, sequence, function or type",
                self.what()
            ))
        })?;
        let mut sql = format!("ALTER DEFAULT PRIVILEGES FOR ROLE {}", ident(&self.owner)?);
        if let Some(s) = &self.schema {
            sql.push_str(&format!(" IN SCHEMA {}", ident(s)?));
        }
        Ok((sql, word))
    }
}

pub async fn create(cx: &Cx<'_>, properties: &PropertyMap) -> OpResult {
    let desired: DefaultPrivileges = from_properties(properties)?;
    let native_id = desired.native_id();
    let read = || read(cx, &native_id, properties);
    acl::create_unless_held(
        &desired.what(),
        &native_id,
        read,
        apply(cx, &desired, false),
    )
    .await
}

async fn apply(cx: &Cx<'_>, d: &DefaultPrivileges, replace: bool) -> Result<(), PluginError> {
    let what = d.what();
    let (scope, word) = d.scope()?;
    let privileges = acl::checked(&what, &d.object_type, &d.privileges)?.join(", ");
    let to = grantee(&d.grantee)?;
    let prefix = format!("{scope} ");
    let sql = acl::grant_sql(
        &prefix,
        (&privileges, word, &to),
        d.with_grant_option,
        replace,
    );
    cx.exec(&d.database, &what, &sql).await
}

pub async fn read(cx: &Cx<'_>, native_id: &str, recorded: &PropertyMap) -> OpResult {
    let mut d = DefaultPrivileges::parse(native_id)?;
    let what = d.what();
    let (objtype, _) = kind(&d.object_type)
        .ok_or_else(|| PluginError::invalid(format!("{what}: unknown object_type")))?;
    let conn = cx.conn(&d.database, &what).await?;
    let sql = format!(
        "SELECT a.privilege_type, a.is_grantable FROM pg_default_acl x, aclexplode(x.defaclacl) a
         WHERE x.defaclrole = (SELECT oid FROM pg_roles WHERE rolname = $2)
           AND x.defaclnamespace = CASE WHEN $3 = '' THEN 0 ELSE (SELECT oid FROM pg_namespace WHERE nspname = $3) END
           AND x.defaclobjtype::text = $4 AND a.grantee = {}",
        acl::grantee_oid(1)
    );
    let schema = d.schema.clone().unwrap_or_default();
    let rows = conn
        .query(&sql, &[&d.grantee, &d.owner, &schema, &objtype])
        .await
        .map_err(cx.err(&what))?;
    let (held, grantable) = acl::held(&rows);
    if held.is_empty() {
        return Err(PluginError::not_found(format!("{what}: none set")));
    }
    let recorded: Option<DefaultPrivileges> = from_properties(recorded).ok();
    d.privileges = acl::echo(recorded.map(|r| r.privileges), held);
    d.with_grant_option = Some(grantable);
    done(native_id, to_properties(&d)?)
}

pub async fn update(cx: &Cx<'_>, native_id: &str, properties: &PropertyMap) -> OpResult {
    let desired: DefaultPrivileges = from_properties(properties)?;
    if desired.native_id() != native_id {
        return Err(crate::not_updatable(
            "database, owner, schema, object_type or grantee",
            native_id,
            &desired.native_id(),
        ));
    }
    apply(cx, &desired, true).await?;
    read(cx, native_id, properties).await
}

pub async fn delete(cx: &Cx<'_>, native_id: &str) -> OpResult {
    read(cx, native_id, &PropertyMap::new()).await?;
    let d = DefaultPrivileges::parse(native_id)?;
    let what = d.what();
    let (scope, word) = d.scope()?;
    let sql = format!("{scope} REVOKE ALL ON {word} FROM {}", grantee(&d.grantee)?);
    cx.exec(&d.database, &what, &sql).await?;
    deleted(native_id)
}

const LIST: &str = "SELECT pg_get_userbyid(x.defaclrole)::text, coalesce(n.nspname::text, ''),
    CASE x.defaclobjtype WHEN 'r' THEN 'table' WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'function' WHEN 'T' THEN 'type' END,
    CASE WHEN a.grantee = 0 THEN 'public' ELSE pg_get_userbyid(a.grantee)::text END,
    a.privilege_type, a.is_grantable
    FROM pg_default_acl x LEFT JOIN pg_namespace n ON n.oid = x.defaclnamespace, aclexplode(x.defaclacl) a
    WHERE x.defaclobjtype <> 'n' AND a.grantee <> x.defaclrole";

pub async fn list(cx: &Cx<'_>, request: &ListRequest) -> Result<ListPage, PluginError> {
    acl::list_holding(cx, request, LIST, 4, |database, row| DefaultPrivileges {
        database: database.to_owned(),
        owner: row.get(0),
        schema: Some(row.get::<_, String>(1)).filter(|s| !s.is_empty()),
        object_type: row.get(2),
        grantee: row.get(3),
        privileges: Vec::new(),
        with_grant_option: Some(true),
    })
    .await
}

acl::holding!(DefaultPrivileges);
