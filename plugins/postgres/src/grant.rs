//! `Postgres::Grant`: the privileges one role holds on objects of one
//! database. Its identity is composite: role × database × object type ×
//! schema × objects, and so is its native id
//! (`role/database/object_type/schema/obj1,obj2`, see `id.rs`).

use orrery_plugin_sdk::schema::{ListRequest, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, field, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use serde::{Deserialize, Serialize};

use crate::sql::{grantee, ident, qualified};
use crate::{acl, database, id, Cx};

pub const TYPE: &str = "Postgres::Grant";

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Grant {
    role: String,
    database: String,
    object_type: String,
    schema: Option<String>,
    objects: Option<Vec<String>>,
    privileges: Vec<String>,
    with_grant_option: Option<bool>,
}

pub fn schema() -> ResourceSchema {
    resource(TYPE)
        .describe("Privileges of a role on a database, a schema, or tables, sequences or functions of a schema; id `role/database/object_type/schema/objects`")
        .identifier(["role", "database", "object_type", "schema", "objects"])
        .field(field::string("role").required().create_only().describe("Grantee; `public` for PUBLIC"))
        .field(field::string("database").required().create_only())
        .field(field::string("object_type").required().create_only().describe("database, schema, table, sequence or function"))
        .field(field::string("schema").create_only().describe("For schema, table, sequence, function"))
        .field(field::list("objects").create_only().describe("Tables, sequences or functions (`name(argtypes)`) of the schema"))
        .field(field::list("privileges").required().describe("e.g. [SELECT, INSERT]"))
        .field(field::boolean("with_grant_option").provider_default())
        .parent(database::TYPE, [("database", "name")])
        .build()
}

impl Grant {
    fn native_id(&self) -> String {
        let mut objects = self.objects.clone().unwrap_or_default();
        objects.sort();
        let parts = [
            &self.role,
            &self.database,
            &self.object_type,
            self.schema.as_deref().unwrap_or(""),
        ];
        format!("{}/{}", id::encode(&parts), id::encode_list(&objects))
    }

    fn parse(native_id: &str) -> Result<Grant, PluginError> {
        let raw = id::split(native_id, 5, TYPE)?;
        let head = id::decode(&raw[..4].join("/"), 4, TYPE)?;
        let objects = id::decode_list(raw[4], native_id, TYPE)?;
        Ok(Grant {
            role: head[0].clone(),
            database: head[1].clone(),
            object_type: head[2].clone(),
            schema: Some(head[3].clone()).filter(|s| !s.is_empty()),
            objects: Some(objects).filter(|o| !o.is_empty()),
            ..Grant::default()
        })
    }

    fn what(&self) -> String {
        let on = match (&self.schema, &self.objects) {
            (None, _) => format!("database `{}`", self.database),
            (Some(s), None) => format!("schema `{s}` of database `{}`", self.database),
            (Some(s), Some(o)) => format!(
                "{} {} in schema `{s}` of database `{}`",
                self.object_type,
                o.join(", "),
                self.database
            ),
        };
        format!("{TYPE} of `{}` on {on}", self.role)
    }

    /// The shape the object type needs: which of schema and objects are set.
    fn check(&self) -> Result<(), PluginError> {
        let objects = self.objects.as_ref().is_some_and(|o| !o.is_empty());
        let ok = match self.object_type.as_str() {
            "database" => self.schema.is_none() && !objects,
            "schema" => self.schema.is_some() && !objects,
            "table" | "sequence" | "function" => self.schema.is_some() && objects,
            _ => false,
        };
        if ok {
            return Ok(());
        }
        Err(PluginError::invalid(format!(
            "{}: object_type must be database (no schema, no objects), schema (a schema, no objects) or table, sequence or function (a schema and objects)",
            self.what()
        )))
    }

    /// Each object's SQL name and the query for its ACL (`$1`: the role).
    async fn targets(
        &self,
        cx: &Cx<'_>,
    ) -> Result<Vec<(String, String, Vec<String>)>, PluginError> {
        let schema = self.schema.clone().unwrap_or_default();
        let owner = |kind: &str, acl: &str, own: &str| {
            format!("coalesce({acl}, acldefault('{kind}', {own}))")
        };
        Ok(match self.object_type.as_str() {
            "database" => vec![(
                ident(&self.database)?,
                format!(
                    "SELECT {} FROM pg_database WHERE datname = $2",
                    owner("d", "datacl", "datdba")
                ),
                vec![self.database.clone()],
            )],
            "schema" => vec![(
                ident(&schema)?,
                format!(
                    "SELECT {} FROM pg_namespace WHERE nspname = $2",
                    owner("n", "nspacl", "nspowner")
                ),
                vec![schema],
            )],
            "function" => {
                let mut out = Vec::new();
                for object in self.objects.iter().flatten() {
                    let (name, args) = object.split_once('(').unwrap_or((object, ")"));
                    let signature = format!("{}({args}", qualified(&schema, name)?);
                    let what = self.what();
                    let conn = cx.conn(&self.database, &what).await?;
                    let row = conn
                        .query_opt("SELECT oidvectortypes(proargtypes) FROM pg_proc WHERE oid = to_regprocedure($1)", &[&signature])
                        .await
                        .map_err(cx.err(&what))?;
                    let row = row.ok_or_else(|| {
                        PluginError::not_found(format!("{what}: no function {object}"))
                    })?;
                    let args: String = row.get(0);
                    out.push((
                        format!("{}({args})", qualified(&schema, name)?),
                        format!(
                            "SELECT {} FROM pg_proc WHERE oid = to_regprocedure($2)",
                            owner("f", "proacl", "proowner")
                        ),
                        vec![signature],
                    ));
                }
                out
            }
            kind => {
                let (acl_kind, relkinds) = if kind == "sequence" {
                    ("s", "'S'")
                } else {
                    ("r", "'r','v','m','f','p'")
                };
                let sql = format!(
                    "SELECT {} FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $2 AND c.relname = $3 AND c.relkind IN ({relkinds})",
                    owner(acl_kind, "c.relacl", "c.relowner")
                );
                let mut out = Vec::new();
                for object in self.objects.iter().flatten() {
                    out.push((
                        qualified(&schema, object)?,
                        sql.clone(),
                        vec![schema.clone(), object.clone()],
                    ));
                }
                out
            }
        })
    }

    fn keyword(&self) -> &'static str {
        match self.object_type.as_str() {
            "database" => "DATABASE",
            "schema" => "SCHEMA",
            "sequence" => "SEQUENCE",
            "function" => "FUNCTION",
            _ => "TABLE",
        }
    }
}

pub async fn create(cx: &Cx<'_>, properties: &PropertyMap) -> OpResult {
    let desired: Grant = from_properties(properties)?;
    desired.check()?;
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

/// Grants what `grant` asks, after revoking what was there when `replace`.
async fn apply(cx: &Cx<'_>, grant: &Grant, replace: bool) -> Result<(), PluginError> {
    let what = grant.what();
    let privileges = acl::checked(&what, &grant.object_type, &grant.privileges)?.join(", ");
    let to = grantee(&grant.role)?;
    let objects: Vec<String> = grant.targets(cx).await?.into_iter().map(|t| t.0).collect();
    let on = format!("{} {}", grant.keyword(), objects.join(", "));
    let sql = acl::grant_sql(
        "",
        (&privileges, &on, &to),
        grant.with_grant_option,
        replace,
    );
    cx.exec(&grant.database, &what, &sql).await
}

pub async fn read(cx: &Cx<'_>, native_id: &str, recorded: &PropertyMap) -> OpResult {
    let mut grant = Grant::parse(native_id)?;
    grant.check()?;
    let what = grant.what();
    let targets = grant.targets(cx).await?;
    let conn = cx.conn(&grant.database, &what).await?;
    let mut common: Option<(Vec<String>, bool)> = None;
    for (_, acl_sql, params) in targets {
        let sql = format!(
            "SELECT a.privilege_type, a.is_grantable FROM ({acl_sql}) AS o(acl), aclexplode(o.acl) a WHERE a.grantee = {}",
            acl::grantee_oid(1)
        );
        let mut args: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&grant.role];
        args.extend(
            params
                .iter()
                .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync)),
        );
        let rows = conn.query(&sql, &args).await.map_err(cx.err(&what))?;
        let (held, grantable) = acl::held(&rows);
        common = Some(match common {
            None => (held, grantable),
            Some((before, g)) => (
                before.into_iter().filter(|p| held.contains(p)).collect(),
                g && grantable,
            ),
        });
    }
    let (held, grantable) = common.unwrap_or_default();
    if held.is_empty() {
        return Err(PluginError::not_found(format!(
            "{what}: no privileges held"
        )));
    }
    let recorded: Option<Grant> = from_properties(recorded).ok();
    grant.privileges = acl::echo(recorded.as_ref().map(|r| r.privileges.clone()), held);
    grant.objects = crate::same_set(recorded.and_then(|r| r.objects), grant.objects);
    grant.with_grant_option = Some(grantable);
    done(native_id, to_properties(&grant)?)
}

pub async fn update(cx: &Cx<'_>, native_id: &str, properties: &PropertyMap) -> OpResult {
    let desired: Grant = from_properties(properties)?;
    desired.check()?;
    if desired.native_id() != native_id {
        return Err(crate::not_updatable(
            "role, database, object_type, schema or objects",
            native_id,
            &desired.native_id(),
        ));
    }
    apply(cx, &desired, true).await?;
    read(cx, native_id, properties).await
}

pub async fn delete(cx: &Cx<'_>, native_id: &str) -> OpResult {
    read(cx, native_id, &PropertyMap::new()).await?;
    let grant = Grant::parse(native_id)?;
    let what = grant.what();
    let objects: Vec<String> = grant.targets(cx).await?.into_iter().map(|t| t.0).collect();
    let sql = format!(
        "REVOKE ALL ON {} {} FROM {}",
        grant.keyword(),
        objects.join(", "),
        grantee(&grant.role)?
    );
    cx.exec(&grant.database, &what, &sql).await?;
    deleted(native_id)
}

/// Every (role, object) with privileges in the database, one grant each;
/// an object's owner holds its privileges implicitly and is left out.
const LIST: &str = "
SELECT 'database', NULL, NULL, a.grantee, a.privilege_type, a.is_grantable
  FROM pg_database d, aclexplode(d.datacl) a WHERE d.datname = current_database() AND a.grantee <> d.datdba
UNION ALL
SELECT 'schema', n.nspname::text, NULL, a.grantee, a.privilege_type, a.is_grantable
  FROM pg_namespace n, aclexplode(n.nspacl) a WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' AND a.grantee <> n.nspowner
UNION ALL
SELECT CASE WHEN c.relkind = 'S' THEN 'sequence' ELSE 'table' END, n.nspname::text, c.relname::text, a.grantee, a.privilege_type, a.is_grantable
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, aclexplode(c.relacl) a
  WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' AND a.grantee <> c.relowner
UNION ALL
SELECT 'function', n.nspname::text, p.proname || '(' || oidvectortypes(p.proargtypes) || ')', a.grantee, a.privilege_type, a.is_grantable
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace, aclexplode(p.proacl) a
  WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' AND a.grantee <> p.proowner";

pub async fn list(cx: &Cx<'_>, request: &ListRequest) -> Result<ListPage, PluginError> {
    let sql = format!(
        "SELECT l.*, CASE WHEN l.grantee = 0 THEN 'public' ELSE pg_get_userbyid(l.grantee)::text END FROM ({LIST}) AS l(object_type, schema, object, grantee, privilege, grantable)"
    );
    acl::list_holding(cx, request, &sql, 4, |database, row| Grant {
        role: row.get(6),
        database: database.to_owned(),
        object_type: row.get(0),
        schema: row.get(1),
        objects: row.get::<_, Option<String>>(2).map(|o| vec![o]),
        privileges: Vec::new(),
        with_grant_option: Some(true),
    })
    .await
}

acl::holding!(Grant);
