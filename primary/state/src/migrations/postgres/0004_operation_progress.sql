-- What resuming an interrupted command needs: the plugin's identifier and
-- its `InProgress` context (MessagePack) of every operation, and the latest
-- command of one stack without a scan of every command.

ALTER TABLE operations ADD COLUMN native_id TEXT;
ALTER TABLE operations ADD COLUMN context BYTEA;

CREATE INDEX commands_stack_latest ON commands (stack, started_ms DESC, seq DESC);
