//! List pages: cut in the server (keyset) or from rows already read.

use orrery_plugin_sdk::paginate::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use orrery_plugin_sdk::schema::{ListRequest, ListedResource, PropertyMap};
use orrery_plugin_sdk::{paginate, to_properties, ListPage, PluginError};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::catalog::record;
use crate::Cx;

/// The page size served for `asked` (0: the plugin's choice).
pub fn size(asked: u32) -> usize {
    match asked as usize {
        0 => DEFAULT_PAGE_SIZE,
        n => n.min(MAX_PAGE_SIZE),
    }
}

/// A page of `rows` read with `LIMIT size + 1`, ordered by `key`.
pub fn of_rows<T>(
    mut rows: Vec<T>,
    size: usize,
    key: impl Fn(&T) -> String,
    properties: impl Fn(T) -> Result<PropertyMap, PluginError>,
) -> Result<ListPage, PluginError> {
    let more = rows.len() > size;
    rows.truncate(size);
    let next_page_token = if more { rows.last().map(&key) } else { None };
    let resources = rows
        .into_iter()
        .map(|r| {
            let native_id = key(&r);
            Ok(ListedResource {
                native_id,
                properties: properties(r)?,
            })
        })
        .collect::<Result<_, PluginError>>()?;
    Ok(ListPage {
        resources,
        next_page_token,
    })
}

/// One page of a cluster-wide catalog (roles, databases), keyset-paged in
/// the server so that 10,000 rows are never all read at once: `select`'s
/// rows that pass `filter`, after the request's token in `key`'s byte
/// order, each read as a `T` (see [`record`]) and named by `id`.
pub async fn keyset<T: Serialize + DeserializeOwned>(
    cx: &Cx<'_>,
    request: &ListRequest,
    (select, filter, key): (&str, &str, &str),
    id: impl Fn(&T) -> String,
) -> Result<ListPage, PluginError> {
    let what = format!("listing {}", request.resource_type);
    let conn = cx.admin(&what).await?;
    let sql = format!(
        "{select} WHERE {filter} AND {key} COLLATE \"C\" > $1 ORDER BY {key} COLLATE \"C\" LIMIT $2"
    );
    let size = size(request.page_size);
    let after = request.page_token.clone().unwrap_or_default();
    let rows = conn
        .query(&sql, &[&after, &(size as i64 + 1)])
        .await
        .map_err(cx.err(&what))?;
    let records = rows.iter().map(record).collect::<Result<_, _>>()?;
    of_rows(records, size, id, |r: T| to_properties(&r))
}

/// One page of a child type listed in every database `request` covers
/// (see [`crate::databases_listed`]): `sql`'s rows, each read as a `T`
/// (see [`record`]) and named by `id`.
pub async fn per_database<T: Serialize + DeserializeOwned>(
    cx: &Cx<'_>,
    request: &ListRequest,
    sql: &str,
    id: impl Fn(&T) -> String,
) -> Result<ListPage, PluginError> {
    let mut all = Vec::new();
    for database in crate::databases_listed(cx, request).await? {
        let ty = &request.resource_type;
        let what = format!("listing {ty} in database `{database}`");
        let Some(rows) = cx.list_rows(&database, &what, sql).await? else {
            continue;
        };
        for row in rows {
            let resource: T = record(&row)?;
            let (native_id, properties) = (id(&resource), to_properties(&resource)?);
            all.push(ListedResource {
                native_id,
                properties,
            });
        }
    }
    Ok(of_all(
        all,
        request.page_size,
        request.page_token.as_deref(),
    ))
}

/// A page of resources all read already, cut by native id.
pub fn of_all(all: Vec<ListedResource>, page_size: u32, token: Option<&str>) -> ListPage {
    let (resources, next_page_token) = paginate(all, |r| &r.native_id, page_size, token);
    ListPage {
        resources,
        next_page_token,
    }
}
