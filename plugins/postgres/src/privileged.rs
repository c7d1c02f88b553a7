//! The lifecycle of a resource that is privileges held by a grantee (a
//! grant, default privileges). Its type says where the privileges are
//! ([`Privileges::held`]) and how its statements start; creating, reading,
//! updating, deleting and listing are the same for both.

use std::collections::BTreeMap;
use std::future::Future;

use orrery_plugin_sdk::schema::{ErrorCode, ListRequest, ListedResource, PropertyMap};
use orrery_plugin_sdk::{deleted, done, from_properties, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_postgres::types::ToSql;

use crate::catalog::record_of;
use crate::sql::grantee;
use crate::{acl, page, Cx};

/// Where a resource's privileges are.
pub struct Held {
    /// What GRANT calls the objects' kind (`TABLE`, `TABLES`).
    pub keyword: String,
    /// The query of one object's ACL: `$1` is the grantee, the object's
    /// parameters follow.
    pub acl: String,
    /// The objects.
    pub objects: Vec<Object>,
}

/// An object privileges are held on: its SQL name (empty when the keyword
/// alone names the objects, as in default privileges) and the parameters
/// of its ACL's query.
pub type Object = (String, Vec<String>);

impl Held {
    /// Privileges held on `objects` of a kind GRANT calls `keyword`, each
    /// object's ACL read by `acl`.
    pub fn new(keyword: &str, acl: String, objects: Vec<Object>) -> Held {
        let keyword = keyword.to_owned();
        Held {
            keyword,
            acl,
            objects,
        }
    }

    /// What GRANT names: `TABLE "s"."a", "s"."b"`.
    fn on(&self) -> String {
        let names: Vec<&str> = self.objects.iter().map(|(name, _)| name.as_str()).collect();
        let names = names
            .into_iter()
            .filter(|n| !n.is_empty())
            .collect::<Vec<_>>();
        match names.is_empty() {
            true => self.keyword.clone(),
            false => format!("{} {}", self.keyword, names.join(", ")),
        }
    }
}

/// A resource type that is privileges held.
pub trait Privileges: Serialize + DeserializeOwned + Sync {
    /// The fields of its identity, named when an update would change them.
    const IDENTITY: &'static str;
    /// Said of it, after [`Privileges::what`], when none are held.
    const NONE: &'static str;

    /// Its native id.
    fn native_id(&self) -> String;
    /// The resource a native id names, without privileges.
    fn parse(native_id: &str) -> Result<Self, PluginError>;
    /// How errors name it.
    fn what(&self) -> String;
    /// Its database, grantee and object type.
    fn scope(&self) -> [&str; 3];
    /// Its privileges and grant option, to fill in.
    fn holding(&mut self) -> (&mut Vec<String>, &mut Option<bool>);
    /// Where its privileges are.
    fn held(&self, cx: &Cx<'_>) -> impl Future<Output = Result<Held, PluginError>> + Send;

    /// Refuses a shape its type cannot have, before anything is asked.
    fn check(&self) -> Result<(), PluginError> {
        Ok(())
    }
    /// What its GRANT and REVOKE statements start with.
    fn prefix(&self) -> Result<String, PluginError> {
        Ok(String::new())
    }
    /// Takes from `recorded` what the catalogs spell another way.
    fn keep(&mut self, _recorded: Self) {}
}

/// Privileges already held there are `AlreadyExists` (an author imports
/// them as the native id); otherwise they are granted, then read.
pub async fn create<P: Privileges>(cx: &Cx<'_>, properties: &PropertyMap) -> OpResult {
    let mut desired: P = from_properties(properties)?;
    desired.check()?;
    let native_id = desired.native_id();
    match read::<P>(cx, &native_id, properties).await {
        Ok(_) => Err(PluginError::new(
            ErrorCode::AlreadyExists,
            format!(
                "{}: already held; import it as `{native_id}`",
                desired.what()
            ),
        )),
        Err(e) if e.code == ErrorCode::NotFound => {
            apply(cx, &mut desired, false).await?;
            read::<P>(cx, &native_id, properties).await
        }
        Err(e) => Err(e),
    }
}

/// Grants what `p` asks, after revoking what was there when `replace`.
async fn apply<P: Privileges>(cx: &Cx<'_>, p: &mut P, replace: bool) -> Result<(), PluginError> {
    let (what, prefix) = (p.what(), p.prefix()?);
    let (privileges, grant_option) = p.holding();
    let (privileges, grant_option) = (privileges.clone(), *grant_option);
    let [database, to, object_type] = p.scope();
    let privileges = acl::checked(&what, object_type, &privileges)?.join(", ");
    let to = grantee(to)?;
    let on = p.held(cx).await?.on();
    let statement = (privileges.as_str(), on.as_str(), to.as_str());
    let sql = acl::grant_sql(&prefix, statement, grant_option, replace);
    cx.exec(database, &what, &sql).await
}

/// The privileges held as `native_id` says, common to all its objects; the
/// author's spelling of them (`recorded`) when it means the same.
pub async fn read<P: Privileges>(cx: &Cx<'_>, native_id: &str, recorded: &PropertyMap) -> OpResult {
    let mut p = P::parse(native_id)?;
    p.check()?;
    let what = p.what();
    let held = p.held(cx).await?;
    let [database, grantee, _] = p.scope();
    let conn = cx.conn(database, &what).await?;
    let sql = format!(
        "SELECT a.privilege_type, a.is_grantable FROM ({}) AS o(acl), aclexplode(o.acl) a WHERE a.grantee = {}",
        held.acl,
        acl::grantee_oid(1)
    );
    let grantee = grantee.to_owned();
    let mut common: Option<(Vec<String>, bool)> = None;
    for (_, params) in held.objects {
        let mut args: Vec<&(dyn ToSql + Sync)> = vec![&grantee];
        args.extend(params.iter().map(|p| p as &(dyn ToSql + Sync)));
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
        return Err(PluginError::not_found(format!("{what}: {}", P::NONE)));
    }
    let mut recorded: Option<P> = from_properties(recorded).ok();
    let echoed = recorded.as_mut().map(|r| std::mem::take(r.holding().0));
    let (privileges, grant_option) = p.holding();
    *privileges = acl::echo(echoed, held);
    *grant_option = Some(grantable);
    if let Some(recorded) = recorded {
        p.keep(recorded);
    }
    done(native_id, to_properties(&p)?)
}

/// Replaces the privileges held with the desired ones, in one transaction.
pub async fn update<P: Privileges>(
    cx: &Cx<'_>,
    native_id: &str,
    properties: &PropertyMap,
) -> OpResult {
    let mut desired: P = from_properties(properties)?;
    desired.check()?;
    crate::same_identity(P::IDENTITY, native_id, &desired.native_id())?;
    apply(cx, &mut desired, true).await?;
    read::<P>(cx, native_id, properties).await
}

/// Revokes every privilege the grantee holds there.
pub async fn delete<P: Privileges>(cx: &Cx<'_>, native_id: &str) -> OpResult {
    read::<P>(cx, native_id, &PropertyMap::new()).await?;
    let p = P::parse(native_id)?;
    let (what, prefix) = (p.what(), p.prefix()?);
    let on = p.held(cx).await?.on();
    let [database, to, _] = p.scope();
    let sql = format!("{prefix}REVOKE ALL ON {on} FROM {}", grantee(to)?);
    cx.exec(database, &what, &sql).await?;
    deleted(native_id)
}

/// Lists a privilege catalog in every database `request` covers: `sql`
/// yields one row per privilege held, its columns named as `P`'s fields
/// (see [`record_of`]; `privileges` empty) then the privilege and whether
/// it is grantable; rows of one native id are gathered into one resource.
pub async fn list<P: Privileges>(
    cx: &Cx<'_>,
    request: &ListRequest,
    sql: &str,
) -> Result<ListPage, PluginError> {
    let mut found: BTreeMap<String, P> = BTreeMap::new();
    for database in crate::databases_listed(cx, request).await? {
        let ty = &request.resource_type;
        let what = format!("listing {ty} in database `{database}`");
        let Some(rows) = cx.list_rows(&database, &what, sql).await? else {
            continue;
        };
        for row in rows {
            let at = row.len().saturating_sub(2);
            let mut resource: P = record_of(&row, at)?;
            *resource.holding().1 = Some(true);
            let entry = found.entry(resource.native_id()).or_insert(resource);
            let (privileges, grant_option) = entry.holding();
            privileges.push(row.get(at));
            *grant_option = Some(*grant_option == Some(true) && row.get::<_, bool>(at + 1));
        }
    }
    let all = found
        .into_iter()
        .map(|(native_id, mut resource)| {
            resource.holding().0.sort();
            Ok(ListedResource {
                native_id,
                properties: to_properties(&resource)?,
            })
        })
        .collect::<Result<Vec<_>, PluginError>>()?;
    let token = request.page_token.as_deref();
    Ok(page::of_all(all, request.page_size, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_names_the_objects_after_their_keyword_and_default_privileges_the_keyword_alone() {
        let objects = vec![
            ("\"s\".\"a\"".into(), vec![]),
            ("\"s\".\"b\"".into(), vec![]),
        ];
        assert_eq!(
            Held::new("TABLE", String::new(), objects).on(),
            "TABLE \"s\".\"a\", \"s\".\"b\""
        );
        let defaults = vec![(String::new(), vec!["owner".into()])];
        assert_eq!(Held::new("TABLES", String::new(), defaults).on(), "TABLES");
    }
}
