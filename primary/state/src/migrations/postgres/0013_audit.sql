-- The audit log: command starts (with their plan's hash and, once they
-- end, their outcome), cancels, and refusals (401, 403). `id` only grows;
-- writers prune to the newest N (`--audit-retention`). Names and reasons
-- only: never a token, a password or an output's value.

CREATE TABLE audit (
    id BIGSERIAL PRIMARY KEY,
    time_ms BIGINT NOT NULL,
    principal TEXT,
    action TEXT NOT NULL,
    stack TEXT,
    command_id TEXT COLLATE "C",
    plan_hash TEXT,
    outcome TEXT NOT NULL,
    count INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX audit_by_command ON audit (command_id);
