-- Which primary runs (or resumes) a command, until when: a row per leased
-- command; a primary takes a free or expired lease and renews it while the
-- command runs, so two primaries sharing this database never resume the
-- same command. Expiry is Unix milliseconds on the database's clock.
-- And the running commands (what a starting primary resumes) without a
-- scan of every command.

CREATE TABLE command_leases (
    command_id TEXT COLLATE "C" PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_ms BIGINT NOT NULL
);

CREATE INDEX commands_running ON commands (started_ms DESC, seq DESC) WHERE status = 'running';
