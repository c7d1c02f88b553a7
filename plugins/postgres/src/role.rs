//! `Postgres::Role`: a role of the cluster, its attributes and memberships.

use orrery_plugin_sdk::schema::{ListRequest, PropertyMap, ResourceSchema, Value};
use orrery_plugin_sdk::{deleted, done, field, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;

use crate::sql::{ident, literal};
use crate::{page, Cx};

pub const TYPE: &str = "Postgres::Role";

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Role {
    name: String,
    login: Option<bool>,
    superuser: Option<bool>,
    createdb: Option<bool>,
    createrole: Option<bool>,
    inherit: Option<bool>,
    replication: Option<bool>,
    connection_limit: Option<i32>,
    valid_until: Option<String>,
    member_of: Option<Vec<String>>,
    #[serde(skip_serializing)]
    password: Option<String>,
    /// Not in the catalogs: changing it sends `password` again.
    password_version: Option<Value>,
    drop_owned: Option<bool>,
    reassign_owned_to: Option<String>,
}

pub fn schema() -> ResourceSchema {
    let flag = |name: &str, what: &str| field::boolean(name).provider_default().describe(what);
    resource(TYPE)
        .describe("A role (user or group) of the cluster")
        .identifier(["name"])
        .field(field::string("name").required().create_only())
        .field(flag("login", "May log in (default false)"))
        .field(flag("superuser", "Bypasses every check"))
        .field(flag("createdb", "May create databases"))
        .field(flag("createrole", "May create roles"))
        .field(flag(
            "inherit",
            "Inherits its roles' privileges (default true)",
        ))
        .field(flag("replication", "May stream replication"))
        .field(
            field::integer("connection_limit")
                .provider_default()
                .describe("-1: none"),
        )
        .field(field::string("valid_until").describe("Password expiry, a timestamp or `infinity`"))
        .field(
            field::list("member_of")
                .provider_default()
                .describe("Roles it is a member of"),
        )
        .field(field::string("password").write_only().opaque())
        .field(field::any("password_version").describe("Change it to set `password` again"))
        .field(
            field::boolean("drop_owned").describe("On delete, drop what it owns in every database"),
        )
        .field(
            field::string("reassign_owned_to")
                .describe("On delete, give what it owns to this role, in every database"),
        )
        .build()
}

fn what(name: &str) -> String {
    format!("{TYPE} `{name}`")
}

/// The `WITH ...` options of CREATE/ALTER ROLE for the fields given.
fn options(r: &Role) -> Result<String, PluginError> {
    let mut out = String::new();
    let flags = [
        (r.login, "LOGIN"),
        (r.superuser, "SUPERUSER"),
        (r.createdb, "CREATEDB"),
        (r.createrole, "CREATEROLE"),
        (r.inherit, "INHERIT"),
        (r.replication, "REPLICATION"),
    ];
    for (value, word) in flags {
        if let Some(on) = value {
            out.push_str(if on { " " } else { " NO" });
            out.push_str(word);
        }
    }
    if let Some(n) = r.connection_limit {
        out.push_str(&format!(" CONNECTION LIMIT {n}"));
    }
    if let Some(t) = &r.valid_until {
        out.push_str(&format!(" VALID UNTIL {}", literal(t)?));
    }
    if let Some(p) = &r.password {
        out.push_str(&format!(" PASSWORD {}", literal(p)?));
    }
    Ok(out)
}

pub async fn create(cx: &Cx<'_>, properties: &PropertyMap) -> OpResult {
    let desired: Role = from_properties(properties)?;
    let what = what(&desired.name);
    let mut sql = format!(
        "CREATE ROLE {} WITH{}",
        ident(&desired.name)?,
        options(&desired)?
    );
    if let Some(roles) = desired.member_of.as_ref().filter(|r| !r.is_empty()) {
        let roles: Result<Vec<_>, _> = roles.iter().map(|r| ident(r)).collect();
        sql.push_str(&format!(" IN ROLE {}", roles?.join(", ")));
    }
    cx.exec(&cx.config.database, &what, &sql).await?;
    read(cx, &desired.name, properties).await
}

const SELECT: &str = "SELECT r.rolname, r.rolcanlogin, r.rolsuper, r.rolcreatedb, r.rolcreaterole,
    r.rolinherit, r.rolreplication, r.rolconnlimit, r.rolvaliduntil::text,
    array(SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
          WHERE m.member = r.oid ORDER BY 1) AS member_of
    FROM pg_roles r";

fn of_row(row: &Row) -> Role {
    Role {
        name: row.get(0),
        login: row.get(1),
        superuser: row.get(2),
        createdb: row.get(3),
        createrole: row.get(4),
        inherit: row.get(5),
        replication: row.get(6),
        connection_limit: row.get(7),
        valid_until: row.get(8),
        member_of: row.get(9),
        ..Role::default()
    }
}

pub async fn read(cx: &Cx<'_>, name: &str, recorded: &PropertyMap) -> OpResult {
    let what = what(name);
    let conn = cx.admin(&what).await?;
    let sql = format!("{SELECT} WHERE r.rolname = $1");
    let row = conn
        .query_opt(&sql, &[&name])
        .await
        .map_err(cx.err(&what))?;
    let mut role =
        of_row(&row.ok_or_else(|| PluginError::not_found(format!("{what} does not exist")))?);
    // What is not in the catalogs, or is spelled another way there, comes
    // back as recorded when it means the same.
    let recorded: Role = from_properties(recorded).unwrap_or_default();
    if let (Some(want), Some(_)) = (&recorded.valid_until, &role.valid_until) {
        let same: bool = conn
            .query_one(
                "SELECT $1::text::timestamptz = $2::text::timestamptz",
                &[want, &role.valid_until],
            )
            .await
            .map_err(cx.err(&what))?
            .get(0);
        if same {
            role.valid_until = recorded.valid_until;
        }
    }
    role.member_of = crate::same_set(recorded.member_of, role.member_of);
    role.password_version = recorded.password_version;
    role.drop_owned = recorded.drop_owned;
    role.reassign_owned_to = recorded.reassign_owned_to;
    done(name, to_properties(&role)?)
}

pub async fn update(cx: &Cx<'_>, name: &str, properties: &PropertyMap) -> OpResult {
    let desired: Role = from_properties(properties)?;
    if desired.name != name {
        return Err(crate::not_updatable("name", name, &desired.name));
    }
    let what = what(name);
    let mut conn = cx.admin(&what).await?;
    let tx = conn.transaction().await.map_err(cx.err(&what))?;
    let role = ident(name)?;
    let opts = options(&desired)?;
    if !opts.is_empty() {
        tx.batch_execute(&format!("ALTER ROLE {role} WITH{opts}"))
            .await
            .map_err(cx.err(&what))?;
    }
    if let Some(want) = &desired.member_of {
        let sql = format!("{SELECT} WHERE r.rolname = $1");
        let row = tx.query_opt(&sql, &[&name]).await.map_err(cx.err(&what))?;
        let row = row.ok_or_else(|| PluginError::not_found(format!("{what} does not exist")))?;
        let have = of_row(&row).member_of.unwrap_or_default();
        for g in want.iter().filter(|g| !have.contains(g)) {
            tx.batch_execute(&format!("GRANT {} TO {role}", ident(g)?))
                .await
                .map_err(cx.err(&what))?;
        }
        for g in have.iter().filter(|g| !want.contains(g)) {
            tx.batch_execute(&format!("REVOKE {} FROM {role}", ident(g)?))
                .await
                .map_err(cx.err(&what))?;
        }
    }
    tx.commit().await.map_err(cx.err(&what))?;
    drop(conn);
    read(cx, name, properties).await
}

pub async fn delete(cx: &Cx<'_>, name: &str, recorded: &PropertyMap) -> OpResult {
    let what = what(name);
    let options: Role = from_properties(recorded).unwrap_or_default();
    let role = ident(name)?;
    read(cx, name, recorded).await?;
    if options.drop_owned == Some(true) || options.reassign_owned_to.is_some() {
        for database in crate::databases(cx, &what).await? {
            if let Some(to) = &options.reassign_owned_to {
                let sql = format!("REASSIGN OWNED BY {role} TO {}", ident(to)?);
                cx.exec_unless_gone(&database, &what, &sql).await?;
            }
            if options.drop_owned == Some(true) {
                cx.exec_unless_gone(&database, &what, &format!("DROP OWNED BY {role}"))
                    .await?;
            }
        }
    }
    cx.exec(&cx.config.database, &what, &format!("DROP ROLE {role}"))
        .await?;
    deleted(name)
}

pub async fn list(cx: &Cx<'_>, request: &ListRequest) -> Result<ListPage, PluginError> {
    let query = (SELECT, "r.rolname !~ '^pg_'", "r.rolname");
    page::keyset(cx, request, query, of_row, |r| r.name.clone()).await
}
