//! Command listings and the documents applies were started with.

use std::collections::BTreeMap;

use rusqlite::{params, Connection, OptionalExtension};

use super::StoreError;
use crate::{CommandDocument, CommandFilter, CommandHead, CommandStatus};

pub(super) fn commands(
    conn: &Connection,
    filter: &CommandFilter,
) -> Result<Vec<CommandHead>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, stack, kind, status, started_ms, finished_ms,
             (SELECT principal FROM command_principals WHERE command_id = commands.id) FROM commands
         WHERE (?1 IS NULL OR stack = ?1) AND (?2 IS NULL OR status = ?2)
           AND (?4 IS NULL OR (started_ms, rowid) < (SELECT started_ms, rowid FROM commands WHERE id = ?4))
         ORDER BY started_ms DESC, rowid DESC LIMIT ?3",
    )?;
    let status = filter.status.as_ref().map(|s| s.as_str());
    let limit = i64::try_from(filter.limit).unwrap_or(i64::MAX);
    let rows = stmt.query_map(params![filter.stack, status, limit, filter.before], head)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A command's head from `id, stack, kind, status, started_ms, finished_ms`.
pub(super) fn head(r: &rusqlite::Row<'_>) -> rusqlite::Result<CommandHead> {
    Ok(CommandHead {
        id: r.get(0)?,
        stack: r.get(1)?,
        kind: r.get(2)?,
        status: CommandStatus::parse(&r.get::<_, String>(3)?),
        started_ms: r.get(4)?,
        finished_ms: r.get(5)?,
        principal: r.get(6)?,
    })
}

pub(super) fn operation_counts(
    conn: &Connection,
    command_id: &str,
) -> Result<BTreeMap<String, u64>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT status, count(*) FROM operations WHERE command_id = ?1 GROUP BY status",
    )?;
    let rows = stmt.query_map(params![command_id], |r| {
        Ok((r.get(0)?, r.get::<_, i64>(1)? as u64))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn command_stacks(conn: &Connection) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT DISTINCT stack FROM commands ORDER BY stack")?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn put_document(
    conn: &Connection,
    command_id: &str,
    doc: &CommandDocument,
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO command_documents (command_id, engine, mode, source, stack_dir, text, selection)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (command_id) DO UPDATE SET engine = ?2, mode = ?3, source = ?4,
           stack_dir = ?5, text = ?6, selection = ?7",
        params![
            command_id,
            doc.engine,
            doc.mode,
            doc.source,
            doc.stack_dir,
            doc.text,
            crate::codec::selection_to_text(&doc.selection)
        ],
    )?;
    Ok(())
}

pub(super) fn document(
    conn: &Connection,
    command_id: &str,
) -> Result<Option<CommandDocument>, StoreError> {
    conn.query_row(
        "SELECT engine, mode, source, stack_dir, text, selection FROM command_documents
             WHERE command_id = ?1",
        params![command_id],
        |r| {
            Ok((
                CommandDocument {
                    engine: r.get(0)?,
                    mode: r.get(1)?,
                    source: r.get(2)?,
                    stack_dir: r.get(3)?,
                    text: r.get(4)?,
                    selection: Default::default(),
                },
                r.get::<_, Option<String>>(5)?,
            ))
        },
    )
    .optional()?
    .map(|(mut doc, selection)| {
        doc.selection = crate::codec::selection_from_text(command_id, selection.as_deref())?;
        Ok::<_, StoreError>(doc)
    })
    .transpose()
}
