//! `Postgres::DefaultPrivileges`: what a grantee gets on objects a role
//! creates later in a database (or one schema of it). Id
//! `database/owner/schema/object_type/grantee` (schema empty: all).

use orrery_plugin_sdk::schema::{ListRequest, ResourceSchema};
use orrery_plugin_sdk::{field, resource, ListPage, PluginError};
use serde::{Deserialize, Serialize};

use crate::fields::{grant_option, key, privileges};
use crate::privileged::{self, Held, Privileges};
use crate::sql::ident;
use crate::{acl, database, id, Cx};

pub const TYPE: &str = "Postgres::DefaultPrivileges";

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefaultPrivileges {
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
        .field(key("database"))
        .field(key("owner").describe("The role creating the objects"))
        .field(field::string("schema").create_only().describe("Absent: every schema"))
        .field(key("object_type").describe("table, sequence, function or type"))
        .field(key("grantee").describe("`public` for PUBLIC"))
        .field(privileges())
        .field(grant_option())
        .parent(database::TYPE, [("database", "name")])
        .build()
}

/// `pg_default_acl.defaclobjtype` and the word ALTER DEFAULT PRIVILEGES takes.
fn kind(object_type: &str) -> Option<(&'static str, String)> {
    let kind = acl::kind(object_type)?;
    Some((kind.defaults?, format!("{}S", kind.keyword)))
}

/// The one ACL default privileges are in.
const ACL: &str = "SELECT x.defaclacl FROM pg_default_acl x
    WHERE x.defaclrole = (SELECT oid FROM pg_roles WHERE rolname = $2)
      AND x.defaclnamespace = CASE WHEN $3 = '' THEN 0 ELSE (SELECT oid FROM pg_namespace WHERE nspname = $3) END
      AND x.defaclobjtype::text = $4";

impl Privileges for DefaultPrivileges {
    const IDENTITY: &'static str = "database, owner, schema, object_type or grantee";
    const NONE: &'static str = "none set";

    fn native_id(&self) -> String {
        let schema = self.schema.as_deref().unwrap_or("");
        let (owner, object_type) = (&self.owner, &self.object_type);
        id::encode(&[&self.database, owner, schema, object_type, &self.grantee])
    }

    fn parse(native_id: &str) -> Result<Self, PluginError> {
        let [database, owner, schema, object_type, grantee] = id::parts(native_id, TYPE)?;
        let schema = Some(schema).filter(|s| !s.is_empty());
        let (privileges, with_grant_option) = (Vec::new(), None);
        Ok(DefaultPrivileges {
            database,
            owner,
            schema,
            object_type,
            grantee,
            privileges,
            with_grant_option,
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

    fn scope(&self) -> [&str; 3] {
        [&self.database, &self.grantee, &self.object_type]
    }

    fn holding(&mut self) -> (&mut Vec<String>, &mut Option<bool>) {
        (&mut self.privileges, &mut self.with_grant_option)
    }

    async fn held(&self, _cx: &Cx<'_>) -> Result<Held, PluginError> {
        let unknown = || PluginError::invalid(format!("{}: unknown object_type", self.what()));
        let (objtype, keyword) = kind(&self.object_type).ok_or_else(unknown)?;
        let schema = self.schema.clone().unwrap_or_default();
        let params = vec![self.owner.clone(), schema, objtype.into()];
        let objects = vec![(String::new(), params)];
        Ok(Held::new(&keyword, ACL.into(), objects))
    }

    /// `ALTER DEFAULT PRIVILEGES FOR ROLE o [IN SCHEMA s] `.
    fn prefix(&self) -> Result<String, PluginError> {
        if kind(&self.object_type).is_none() {
            return Err(PluginError::invalid(format!(
                "{}: object_type must be table, sequence, function or type",
                self.what()
            )));
        }
        let mut sql = format!("ALTER DEFAULT PRIVILEGES FOR ROLE {} ", ident(&self.owner)?);
        if let Some(s) = &self.schema {
            sql.push_str(&format!("IN SCHEMA {} ", ident(s)?));
        }
        Ok(sql)
    }
}

const LIST: &str = "SELECT current_database()::text AS database,
    pg_get_userbyid(x.defaclrole)::text AS owner, n.nspname::text AS schema,
    CASE x.defaclobjtype WHEN 'r' THEN 'table' WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'function' WHEN 'T' THEN 'type' END AS object_type,
    CASE WHEN a.grantee = 0 THEN 'public' ELSE pg_get_userbyid(a.grantee)::text END AS grantee,
    '{}'::text[] AS privileges, a.privilege_type, a.is_grantable
    FROM pg_default_acl x LEFT JOIN pg_namespace n ON n.oid = x.defaclnamespace, aclexplode(x.defaclacl) a
    WHERE x.defaclobjtype <> 'n' AND a.grantee <> x.defaclrole";

pub async fn list(cx: &Cx<'_>, request: &ListRequest) -> Result<ListPage, PluginError> {
    privileged::list::<DefaultPrivileges>(cx, request, LIST).await
}
