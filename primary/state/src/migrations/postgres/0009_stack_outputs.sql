-- A stack's outputs as its last apply computed them: one MessagePack map
-- per stack, name -> { value } (or { secret: true }, the value never kept).

CREATE TABLE stack_outputs (
    stack TEXT COLLATE "C" PRIMARY KEY,
    outputs BYTEA NOT NULL
);
