-- Resources, commands and their operations, and the store's own keys.
-- Identifiers sort bytewise (COLLATE "C"), as SQLite's BINARY does, so both
-- backends list in the same order whatever the database's locale.

CREATE TABLE meta (
    key TEXT COLLATE "C" PRIMARY KEY,
    value BYTEA NOT NULL
);

CREATE TABLE resources (
    stack TEXT COLLATE "C" NOT NULL,
    label TEXT COLLATE "C" NOT NULL,
    resource_type TEXT NOT NULL,
    target TEXT NOT NULL,
    plugin TEXT NOT NULL,
    native_id TEXT NOT NULL,
    properties BYTEA NOT NULL,      -- MessagePack (orrery_schema::encode)
    secret_hashes TEXT NOT NULL,    -- JSON object, field -> keyed hash
    deps TEXT NOT NULL,             -- JSON array of labels
    managed BOOLEAN NOT NULL,
    version BIGINT NOT NULL,
    format BIGINT NOT NULL,         -- RECORD_FORMAT it was written with
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (stack, label)
);

CREATE TABLE commands (
    seq BIGSERIAL NOT NULL UNIQUE,  -- insertion order: breaks ties of started_ms
    id TEXT COLLATE "C" PRIMARY KEY,
    stack TEXT COLLATE "C" NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    started_ms BIGINT NOT NULL,
    finished_ms BIGINT,
    format BIGINT NOT NULL
);

CREATE TABLE operations (
    command_id TEXT COLLATE "C" NOT NULL,
    label TEXT COLLATE "C" NOT NULL,
    operation TEXT COLLATE "C" NOT NULL,
    request_id TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    error_code TEXT,
    message TEXT,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (command_id, label, operation)
);
