//! Command listings and the documents applies were started with.

use std::collections::BTreeMap;

use postgres::Client;

use super::StoreError;
use crate::{CommandDocument, CommandFilter, CommandHead, CommandStatus};

pub(super) fn commands(
    c: &mut Client,
    filter: &CommandFilter,
) -> Result<Vec<CommandHead>, StoreError> {
    let status = filter.status.as_ref().map(|s| s.as_str());
    let limit = i64::try_from(filter.limit).unwrap_or(i64::MAX);
    Ok(c.query(
        "SELECT id, stack, kind, status, started_ms, finished_ms,
             (SELECT principal FROM command_principals WHERE command_id = commands.id) FROM commands
             WHERE ($1::text IS NULL OR stack = $1) AND ($2::text IS NULL OR status = $2)
             ORDER BY started_ms DESC, seq DESC LIMIT $3",
        &[&filter.stack, &status, &limit],
    )?
    .iter()
    .map(head)
    .collect())
}

/// A command's head from `id, stack, kind, status, started_ms, finished_ms`.
pub(super) fn head(r: &postgres::Row) -> CommandHead {
    CommandHead {
        id: r.get(0),
        stack: r.get(1),
        kind: r.get(2),
        status: CommandStatus::parse(r.get(3)),
        started_ms: r.get(4),
        finished_ms: r.get(5),
        principal: r.get(6),
    }
}

pub(super) fn operation_counts(
    c: &mut Client,
    command_id: &str,
) -> Result<BTreeMap<String, u64>, StoreError> {
    Ok(c.query(
        "SELECT status, count(*) FROM operations WHERE command_id = $1 GROUP BY status",
        &[&command_id],
    )?
    .iter()
    .map(|r| (r.get(0), r.get::<_, i64>(1) as u64))
    .collect())
}

pub(super) fn command_stacks(c: &mut Client) -> Result<Vec<String>, StoreError> {
    Ok(
        c.query("SELECT DISTINCT stack FROM commands ORDER BY stack", &[])?
            .iter()
            .map(|r| r.get(0))
            .collect(),
    )
}

pub(super) fn put_document(
    c: &mut Client,
    command_id: &str,
    doc: &CommandDocument,
) -> Result<(), StoreError> {
    c.execute(
        "INSERT INTO command_documents (command_id, engine, mode, source, stack_dir, text)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (command_id) DO UPDATE SET engine = EXCLUDED.engine,
             mode = EXCLUDED.mode, source = EXCLUDED.source,
             stack_dir = EXCLUDED.stack_dir, text = EXCLUDED.text",
        &[
            &command_id,
            &doc.engine,
            &doc.mode,
            &doc.source,
            &doc.stack_dir,
            &doc.text,
        ],
    )?;
    Ok(())
}

pub(super) fn document(
    c: &mut Client,
    command_id: &str,
) -> Result<Option<CommandDocument>, StoreError> {
    Ok(c.query_opt(
        "SELECT engine, mode, source, stack_dir, text FROM command_documents
             WHERE command_id = $1",
        &[&command_id],
    )?
    .map(|r| CommandDocument {
        engine: r.get(0),
        mode: r.get(1),
        source: r.get(2),
        stack_dir: r.get(3),
        text: r.get(4),
    }))
}
