//! A stack's outputs, as its last apply computed them.

use orrery_schema::PropertyMap;
use rusqlite::{params, Connection, OptionalExtension};

use crate::StoreError;

pub(super) fn put(conn: &Connection, stack: &str, outputs: &PropertyMap) -> Result<(), StoreError> {
    let bytes = orrery_schema::encode(outputs).map_err(|e| StoreError::Corrupt {
        label: stack.to_owned(),
        reason: e.to_string(),
    })?;
    conn.execute(
        "INSERT INTO stack_outputs (stack, outputs) VALUES (?1, ?2)
         ON CONFLICT (stack) DO UPDATE SET outputs = ?2",
        params![stack, bytes],
    )?;
    Ok(())
}

pub(super) fn get(conn: &Connection, stack: &str) -> Result<Option<PropertyMap>, StoreError> {
    let bytes: Option<Vec<u8>> = conn
        .query_row(
            "SELECT outputs FROM stack_outputs WHERE stack = ?1",
            params![stack],
            |r| r.get(0),
        )
        .optional()?;
    bytes
        .map(|b| {
            orrery_schema::decode(&b).map_err(|e| StoreError::Corrupt {
                label: stack.to_owned(),
                reason: e.to_string(),
            })
        })
        .transpose()
}
