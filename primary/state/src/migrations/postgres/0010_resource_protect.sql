-- `protect: true` recorded with the resource, so that a delete is refused
-- after the resource's entry left the document. Rows from before are
-- unprotected.

ALTER TABLE resources ADD COLUMN protected BOOLEAN NOT NULL DEFAULT FALSE;
