//! A stack's outputs, as its last apply computed them.

use orrery_schema::PropertyMap;

use super::Cl;
use super::{execute, query_opt, StoreError};

pub(super) async fn put(c: &Cl, stack: &str, outputs: &[u8]) -> Result<(), StoreError> {
    execute(
        c,
        "INSERT INTO stack_outputs (stack, outputs) VALUES ($1, $2)
         ON CONFLICT (stack) DO UPDATE SET outputs = EXCLUDED.outputs",
        &[&stack, &outputs],
    )
    .await?;
    Ok(())
}

pub(super) async fn get(c: &Cl, stack: &str) -> Result<Option<PropertyMap>, StoreError> {
    let Some(row) = query_opt(
        c,
        "SELECT outputs FROM stack_outputs WHERE stack = $1",
        &[&stack],
    )
    .await?
    else {
        return Ok(None);
    };
    orrery_schema::decode(row.get::<_, &[u8]>(0))
        .map(Some)
        .map_err(|e| StoreError::Corrupt {
            label: stack.to_owned(),
            reason: e.to_string(),
        })
}
