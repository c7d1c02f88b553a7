-- The stack document each apply was started with, so that a primary can
-- resume an interrupted apply without being sent the document again.

CREATE TABLE command_documents (
    command_id TEXT COLLATE "C" PRIMARY KEY,
    engine TEXT NOT NULL,       -- `embedded` or `nats`
    mode TEXT NOT NULL,         -- `reconcile` or `patch`
    source TEXT NOT NULL,       -- how errors name the document
    stack_dir TEXT NOT NULL,    -- the value of ${stack_dir}
    text TEXT NOT NULL
);
