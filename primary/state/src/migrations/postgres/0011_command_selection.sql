-- The part of the stack an apply runs (--target, --exclude, --replace), as
-- JSON, so that a resumed command runs the same subset. NULL: all of it
-- (and every document recorded before this column).

ALTER TABLE command_documents ADD COLUMN selection TEXT;
