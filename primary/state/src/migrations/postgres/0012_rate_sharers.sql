-- Which primaries want which rate-limit bucket (`namespace/target`) now:
-- each primary that takes a bucket's tokens says so every few hundred
-- milliseconds (`seen_ms`, the database's clock), and takes an equal share
-- of the limit with every primary seen within the window. Rows older than
-- the window are deleted by the next writer.

CREATE TABLE rate_sharers (
    bucket TEXT COLLATE "C" NOT NULL,
    owner TEXT NOT NULL,
    seen_ms BIGINT NOT NULL,
    PRIMARY KEY (bucket, owner)
);
