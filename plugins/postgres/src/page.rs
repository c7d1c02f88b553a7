//! List pages: cut in the server (keyset) or from rows already read.

use orrery_plugin_sdk::paginate::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use orrery_plugin_sdk::schema::{ListedResource, PropertyMap};
use orrery_plugin_sdk::{paginate, ListPage, PluginError};

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

/// A page of resources all read already, cut by native id.
pub fn of_all(all: Vec<ListedResource>, page_size: u32, token: Option<&str>) -> ListPage {
    let (resources, next_page_token) = paginate(all, |r| &r.native_id, page_size, token);
    ListPage {
        resources,
        next_page_token,
    }
}
