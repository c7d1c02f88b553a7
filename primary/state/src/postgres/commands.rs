//! Command listings and the documents applies were started with.

use std::collections::BTreeMap;

use super::Cl;

use super::{execute, query, query_opt, StoreError};
use crate::{CommandDocument, CommandFilter, CommandHead, CommandStatus};

pub(super) async fn commands(
    c: &Cl,
    filter: &CommandFilter,
) -> Result<Vec<CommandHead>, StoreError> {
    let status = filter.status.as_ref().map(|s| s.as_str());
    let limit = i64::try_from(filter.limit).unwrap_or(i64::MAX);
    Ok(query(
        c,
        "SELECT id, stack, kind, status, started_ms, finished_ms,
             (SELECT principal FROM command_principals WHERE command_id = commands.id) FROM commands
             WHERE ($1::text IS NULL OR stack = $1) AND ($2::text IS NULL OR status = $2)
               AND ($4::text IS NULL OR (started_ms, seq) < (SELECT started_ms, seq FROM commands WHERE id = $4))
             ORDER BY started_ms DESC, seq DESC LIMIT $3",
        &[&filter.stack, &status, &limit, &filter.before],
    )
    .await?
    .iter()
    .map(head)
    .collect())
}

/// A command's head from `id, stack, kind, status, started_ms, finished_ms`.
pub(super) fn head(r: &tokio_postgres::Row) -> CommandHead {
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

pub(super) async fn operation_counts(
    c: &Cl,
    command_id: &str,
) -> Result<BTreeMap<String, u64>, StoreError> {
    Ok(query(
        c,
        "SELECT status, count(*) FROM operations WHERE command_id = $1 GROUP BY status",
        &[&command_id],
    )
    .await?
    .iter()
    .map(|r| (r.get(0), r.get::<_, i64>(1) as u64))
    .collect())
}

pub(super) async fn command_stacks(c: &Cl) -> Result<Vec<String>, StoreError> {
    Ok(
        query(c, "SELECT DISTINCT stack FROM commands ORDER BY stack", &[])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect(),
    )
}

pub(super) async fn put_document(
    c: &Cl,
    command_id: &str,
    doc: &CommandDocument,
) -> Result<(), StoreError> {
    execute(
        c,
        "INSERT INTO command_documents (command_id, engine, mode, source, stack_dir, text, selection)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (command_id) DO UPDATE SET engine = EXCLUDED.engine,
             mode = EXCLUDED.mode, source = EXCLUDED.source,
             stack_dir = EXCLUDED.stack_dir, text = EXCLUDED.text,
             selection = EXCLUDED.selection",
        &[
            &command_id,
            &doc.engine,
            &doc.mode,
            &doc.source,
            &doc.stack_dir,
            &doc.text,
            &crate::codec::selection_to_text(&doc.selection),
        ],
    )
    .await?;
    Ok(())
}

pub(super) async fn document(
    c: &Cl,
    command_id: &str,
) -> Result<Option<CommandDocument>, StoreError> {
    query_opt(
        c,
        "SELECT engine, mode, source, stack_dir, text, selection FROM command_documents
             WHERE command_id = $1",
        &[&command_id],
    )
    .await?
    .map(|r| {
        Ok::<_, StoreError>(CommandDocument {
            engine: r.get(0),
            mode: r.get(1),
            source: r.get(2),
            stack_dir: r.get(3),
            text: r.get(4),
            selection: crate::codec::selection_from_text(command_id, r.get(5))?,
        })
    })
    .transpose()
}
