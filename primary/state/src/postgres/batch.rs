//! A batch of writes as at most three statements, whatever its size: one
//! multi-row upsert of operations, one of resources and one delete, each
//! over arrays (`unnest`). Per-statement work on the server (bind, plan,
//! execute, one index probe per row batch) is what made a write per
//! statement the PostgreSQL store's bottleneck.
//!
//! One statement cannot touch a row twice (`ON CONFLICT DO UPDATE`
//! refuses), so writes of one key fold into one row with the effect of all
//! of them applied in order: an operation's `InProgress` then `Success`
//! within one flush is its `Success`; a resource recorded twice is upserted
//! once with its version raised by two; one removed and then recorded again
//! is deleted first (the delete runs before the upsert) and starts over.

use std::collections::HashMap;

use super::{Encoded, NOW_MS, RECORD_FORMAT};

/// The columns of the operations upserted.
#[derive(Default)]
pub(super) struct Operations<'a> {
    command_id: Vec<&'a str>,
    label: Vec<&'a str>,
    operation: Vec<&'a str>,
    request_id: Vec<&'a str>,
    status: Vec<&'a str>,
    attempts: Vec<i64>,
    error_code: Vec<Option<&'a str>>,
    message: Vec<Option<&'a str>>,
    native_id: Vec<Option<&'a str>>,
    context: Vec<Option<&'a [u8]>>,
}

/// The columns of the resources upserted.
#[derive(Default)]
pub(super) struct Resources<'a> {
    stack: Vec<&'a str>,
    label: Vec<&'a str>,
    resource_type: Vec<&'a str>,
    target: Vec<&'a str>,
    plugin: Vec<&'a str>,
    native_id: Vec<&'a str>,
    properties: Vec<&'a [u8]>,
    secret_hashes: Vec<&'a str>,
    deps: Vec<&'a str>,
    managed: Vec<bool>,
    /// Writes folded into the row: its version rises by as many.
    bumps: Vec<i64>,
}

/// The keys of the resources removed.
#[derive(Default)]
pub(super) struct Removals<'a> {
    stack: Vec<&'a str>,
    label: Vec<&'a str>,
}

/// A batch split into the columns of its three statements.
#[derive(Default)]
pub(super) struct Columns<'a> {
    pub operations: Operations<'a>,
    pub resources: Resources<'a>,
    pub removals: Removals<'a>,
}

impl<'a> Columns<'a> {
    /// The columns of `writes`, each key folded into one row.
    pub fn of(writes: &'a [Encoded<'a>]) -> Self {
        #[derive(Default)]
        struct Fold<'a> {
            removed: bool,
            bumps: i64,
            last: Option<&'a Encoded<'a>>,
        }
        let mut operations: Vec<&'a Encoded<'a>> = Vec::new();
        let mut operation_at: HashMap<(&str, &str, &str), usize> = HashMap::new();
        let mut resources: Vec<((&str, &str), Fold<'a>)> = Vec::new();
        let mut resource_at: HashMap<(&str, &str), usize> = HashMap::new();
        for write in writes {
            let key = match write {
                Encoded::Operation {
                    command_id, record, ..
                } => {
                    let key = (
                        *command_id,
                        record.label.as_str(),
                        record.operation.as_str(),
                    );
                    match operation_at.get(&key) {
                        Some(&i) => operations[i] = write,
                        None => {
                            operation_at.insert(key, operations.len());
                            operations.push(write);
                        }
                    }
                    continue;
                }
                Encoded::Resource { r, .. } => (r.stack.as_str(), r.label.as_str()),
                Encoded::Removal { stack, label } => (*stack, *label),
            };
            let i = *resource_at.entry(key).or_insert_with(|| {
                resources.push((key, Fold::default()));
                resources.len() - 1
            });
            let fold = &mut resources[i].1;
            if let Encoded::Removal { .. } = write {
                *fold = Fold {
                    removed: true,
                    ..Fold::default()
                };
            } else {
                fold.bumps += 1;
                fold.last = Some(write);
            }
        }
        let mut c = Columns::default();
        for write in operations {
            if let Encoded::Operation {
                command_id,
                record,
                status,
                context,
            } = write
            {
                let o = &mut c.operations;
                o.command_id.push(command_id);
                o.label.push(&record.label);
                o.operation.push(&record.operation);
                o.request_id.push(&record.request_id);
                o.status.push(status);
                o.attempts.push(record.attempts);
                o.error_code.push(record.error_code.as_deref());
                o.message.push(record.message.as_deref());
                o.native_id.push(record.native_id.as_deref());
                o.context.push(context.as_deref());
            }
        }
        for ((stack, label), fold) in resources {
            if fold.removed {
                c.removals.stack.push(stack);
                c.removals.label.push(label);
            }
            if let Some(Encoded::Resource {
                r,
                props,
                hashes,
                deps,
            }) = fold.last
            {
                let s = &mut c.resources;
                s.stack.push(&r.stack);
                s.label.push(&r.label);
                s.resource_type.push(&r.resource_type);
                s.target.push(&r.target);
                s.plugin.push(&r.plugin);
                s.native_id.push(&r.native_id);
                s.properties.push(props);
                s.secret_hashes.push(hashes);
                s.deps.push(deps);
                s.managed.push(r.managed);
                s.bumps.push(fold.bumps);
            }
        }
        c
    }
}

type Param<'p> = &'p (dyn tokio_postgres::types::ToSql + Sync);

impl Operations<'_> {
    pub fn is_empty(&self) -> bool {
        self.label.is_empty()
    }

    pub fn params(&self) -> Vec<Param<'_>> {
        vec![
            &self.command_id,
            &self.label,
            &self.operation,
            &self.request_id,
            &self.status,
            &self.attempts,
            &self.error_code,
            &self.message,
            &self.native_id,
            &self.context,
        ]
    }

    pub fn sql() -> String {
        format!(
            "INSERT INTO operations (command_id, label, operation, request_id, status, attempts,
                 error_code, message, updated_ms, native_id, context)
             SELECT u.command_id, u.label, u.operation, u.request_id, u.status, u.attempts,
                 u.error_code, u.message, {NOW_MS}, u.native_id, u.context
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                 $6::bigint[], $7::text[], $8::text[], $9::text[], $10::bytea[])
                 AS u(command_id, label, operation, request_id, status, attempts,
                      error_code, message, native_id, context)
             ON CONFLICT (command_id, label, operation) DO UPDATE SET
                 request_id = EXCLUDED.request_id, status = EXCLUDED.status,
                 attempts = EXCLUDED.attempts, error_code = EXCLUDED.error_code,
                 message = EXCLUDED.message, updated_ms = EXCLUDED.updated_ms,
                 native_id = EXCLUDED.native_id, context = EXCLUDED.context"
        )
    }
}

impl Resources<'_> {
    pub fn is_empty(&self) -> bool {
        self.label.is_empty()
    }

    pub fn params(&self) -> Vec<Param<'_>> {
        vec![
            &self.stack,
            &self.label,
            &self.resource_type,
            &self.target,
            &self.plugin,
            &self.native_id,
            &self.properties,
            &self.secret_hashes,
            &self.deps,
            &self.managed,
            &self.bumps,
            &RECORD_FORMAT,
        ]
    }

    pub fn sql() -> String {
        format!(
            "INSERT INTO resources (stack, label, resource_type, target, plugin, native_id,
                 properties, secret_hashes, deps, managed, version, format, updated_ms)
             SELECT u.stack, u.label, u.resource_type, u.target, u.plugin, u.native_id,
                 u.properties, u.secret_hashes, u.deps, u.managed, u.bumps, $12, {NOW_MS}
             FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                 $6::text[], $7::bytea[], $8::text[], $9::text[], $10::boolean[],
                 $11::bigint[])
                 AS u(stack, label, resource_type, target, plugin, native_id,
                      properties, secret_hashes, deps, managed, bumps)
             ON CONFLICT (stack, label) DO UPDATE SET resource_type = EXCLUDED.resource_type,
                 target = EXCLUDED.target, plugin = EXCLUDED.plugin,
                 native_id = EXCLUDED.native_id, properties = EXCLUDED.properties,
                 secret_hashes = EXCLUDED.secret_hashes, deps = EXCLUDED.deps,
                 managed = EXCLUDED.managed, version = resources.version + EXCLUDED.version,
                 format = EXCLUDED.format, updated_ms = EXCLUDED.updated_ms"
        )
    }
}

impl Removals<'_> {
    pub fn is_empty(&self) -> bool {
        self.label.is_empty()
    }

    pub fn params(&self) -> Vec<Param<'_>> {
        vec![&self.stack, &self.label]
    }

    pub const SQL: &'static str = "DELETE FROM resources r
         USING unnest($1::text[], $2::text[]) AS u(stack, label)
         WHERE r.stack = u.stack AND r.label = u.label";
}
