//! `Postgres::Grant`: the privileges one role holds on objects of one
//! database. Its identity is composite: role × database × object type ×
//! schema × objects, and so is its native id
//! (`role/database/object_type/schema/obj1,obj2`, see `id.rs`).

use orrery_plugin_sdk::schema::{ListRequest, ResourceSchema};
use orrery_plugin_sdk::{field, resource, ListPage, PluginError};
use serde::{Deserialize, Serialize};

use crate::fields::{grant_option, key, privileges};
use crate::privileged::{self, Held, Object, Privileges};
use crate::sql::{ident, qualified};
use crate::{acl, catalog, database, id, Cx};

pub const TYPE: &str = "Postgres::Grant";

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
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
        .field(key("role").describe("Grantee; `public` for PUBLIC"))
        .field(key("database"))
        .field(key("object_type").describe("database, schema, table, sequence or function"))
        .field(field::string("schema").create_only().describe("For schema, table, sequence, function"))
        .field(field::list("objects").create_only().describe("Tables, sequences or functions (`name(argtypes)`) of the schema"))
        .field(privileges().describe("e.g. [SELECT, INSERT]"))
        .field(grant_option())
        .parent(database::TYPE, [("database", "name")])
        .build()
}

impl Privileges for Grant {
    const IDENTITY: &'static str = "role, database, object_type, schema or objects";
    const NONE: &'static str = "no privileges held";

    fn native_id(&self) -> String {
        let mut objects = self.objects.clone().unwrap_or_default();
        objects.sort();
        let schema = self.schema.as_deref().unwrap_or("");
        let parts = [&self.role, &self.database, &self.object_type, schema];
        format!("{}/{}", id::encode(&parts), id::encode_list(&objects))
    }

    fn parse(native_id: &str) -> Result<Grant, PluginError> {
        let raw = id::split(native_id, 5, TYPE)?;
        let [role, database, object_type, schema] = id::parts(&raw[..4].join("/"), TYPE)?;
        let objects = id::decode_list(raw[4], native_id, TYPE)?;
        Ok(Grant {
            role,
            database,
            object_type,
            schema: Some(schema).filter(|s| !s.is_empty()),
            objects: Some(objects).filter(|o| !o.is_empty()),
            ..Grant::default()
        })
    }

    fn what(&self) -> String {
        let db = format!("database `{}`", self.database);
        let on = match (&self.schema, &self.objects) {
            (None, _) => db,
            (Some(s), None) => format!("schema `{s}` of {db}"),
            (Some(s), Some(o)) => {
                format!(
                    "{} {} in schema `{s}` of {db}",
                    self.object_type,
                    o.join(", ")
                )
            }
        };
        format!("{TYPE} of `{}` on {on}", self.role)
    }

    fn scope(&self) -> [&str; 3] {
        [&self.database, &self.role, &self.object_type]
    }

    fn holding(&mut self) -> (&mut Vec<String>, &mut Option<bool>) {
        (&mut self.privileges, &mut self.with_grant_option)
    }

    /// The shape the object type needs: which of schema and objects are set.
    fn check(&self) -> Result<(), PluginError> {
        let schema = self.schema.is_some();
        let objects = self.objects.as_ref().is_some_and(|o| !o.is_empty());
        let ok = match self.object_type.as_str() {
            "database" => !schema && !objects,
            "schema" => schema && !objects,
            "table" | "sequence" | "function" => schema && objects,
            _ => false,
        };
        ok.then_some(()).ok_or_else(|| PluginError::invalid(format!(
            "{}: object_type must be database (no schema, no objects), schema (a schema, no objects) or table, sequence or function (a schema and objects)",
            self.what()
        )))
    }

    fn keep(&mut self, recorded: Grant) {
        self.objects = crate::same_set(recorded.objects, self.objects.take());
    }

    /// Each object's ACL, in the catalog of its kind.
    async fn held(&self, cx: &Cx<'_>) -> Result<Held, PluginError> {
        let unknown = || PluginError::invalid(format!("{}: unknown object_type", self.what()));
        let kind = acl::kind(&self.object_type).ok_or_else(unknown)?;
        let schema = self.schema.clone().unwrap_or_default();
        let (from, (acl, owner), filter) = match kind.name {
            "database" => ("pg_database", ("datacl", "datdba"), "datname = $2"),
            "schema" => ("pg_namespace", ("nspacl", "nspowner"), "nspname = $2"),
            "function" => ("pg_proc", ("proacl", "proowner"), FUNCTION),
            "sequence" => (RELATION, ("c.relacl", "c.relowner"), SEQUENCE),
            _ => (RELATION, ("c.relacl", "c.relowner"), TABLE),
        };
        // An object's ACL, or the one its owner has when never granted on.
        let letter = kind.acldefault;
        let acl = format!(
            "SELECT coalesce({acl}, acldefault('{letter}', {owner})) FROM {from} WHERE {filter}"
        );
        let mut objects: Vec<Object> = match kind.name {
            "database" => vec![(ident(&self.database)?, vec![self.database.clone()])],
            "schema" => vec![(ident(&schema)?, vec![schema.clone()])],
            _ => Vec::new(),
        };
        for object in self.objects.iter().flatten() {
            objects.push(match kind.name {
                "function" => self.function(cx, object).await?,
                _ => (
                    qualified(&schema, object)?,
                    vec![schema.clone(), object.clone()],
                ),
            });
        }
        Ok(Held::new(kind.keyword, acl, objects))
    }
}

const RELATION: &str = "pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace";
const TABLE: &str = "n.nspname = $2 AND c.relname = $3 AND c.relkind IN ('r','v','m','f','p')";
const SEQUENCE: &str = "n.nspname = $2 AND c.relname = $3 AND c.relkind IN ('S')";
const FUNCTION: &str = "oid = to_regprocedure($2)";

impl Grant {
    /// A function, resolved in the catalogs: its name with the argument
    /// types as PostgreSQL spells them, and its signature.
    async fn function(&self, cx: &Cx<'_>, object: &str) -> Result<Object, PluginError> {
        let schema = self.schema.as_deref().unwrap_or_default();
        let (name, args) = object.split_once('(').unwrap_or((object, ")"));
        let signature = format!("{}({args}", qualified(schema, name)?);
        let what = self.what();
        let conn = cx.conn(&self.database, &what).await?;
        let sql = "SELECT oidvectortypes(proargtypes) FROM pg_proc WHERE oid = to_regprocedure($1)";
        let missing = format!(": no function {object}");
        let row = catalog::one(&**conn, (&what, &missing), sql, &[&signature]).await?;
        let name = format!("{}({})", qualified(schema, name)?, row.get::<_, String>(0));
        Ok((name, vec![signature]))
    }
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
        "SELECT current_database()::text AS database, l.object_type, l.schema,
             CASE WHEN l.object IS NULL THEN NULL ELSE ARRAY[l.object] END AS objects,
             CASE WHEN l.grantee = 0 THEN 'public' ELSE pg_get_userbyid(l.grantee)::text END AS role,
             '{{}}'::text[] AS privileges, l.privilege, l.grantable
         FROM ({LIST}) AS l(object_type, schema, object, grantee, privilege, grantable)"
    );
    privileged::list::<Grant>(cx, request, &sql).await
}
