-- Who ran each command (the audit): the HTTP API's principal, or
-- `local:<user>` for the CLI. Commands from before have none.

CREATE TABLE command_principals (
    command_id TEXT COLLATE "C" PRIMARY KEY,
    principal TEXT NOT NULL
);
