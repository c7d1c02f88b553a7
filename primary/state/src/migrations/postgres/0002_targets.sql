-- A stack's targets, recorded so the stack can be destroyed without its
-- document.

CREATE TABLE targets (
    stack TEXT COLLATE "C" NOT NULL,
    name TEXT COLLATE "C" NOT NULL,
    plugin TEXT NOT NULL,
    config BYTEA NOT NULL,          -- MessagePack (orrery_schema::encode)
    PRIMARY KEY (stack, name)
);
