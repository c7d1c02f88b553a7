-- Discovery's key-only views (`managed_keys`, `discovered_keys`) look up the
-- resources of one type on one target without a scan of every resource.

CREATE INDEX resources_by_target_type ON resources (target, resource_type);
