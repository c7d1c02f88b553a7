-- `command(None)` (the latest command) without a scan of every command.

CREATE INDEX commands_latest ON commands (started_ms DESC, seq DESC);
