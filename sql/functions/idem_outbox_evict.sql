-- idem_outbox_evict.sql: up to p_limit events of which no delivery is
-- pending and none ended within p_retention_ms (without deliveries: made
-- that long ago), deleted with their deliveries.  Several processes may
-- evict at once (SKIP LOCKED).  Returns the number of events deleted.
CREATE OR REPLACE FUNCTION idem_outbox_evict(p_retention_ms bigint,
    p_limit bigint)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
	WITH old AS (
		SELECT e.id FROM idem_events e
		WHERE e.created_at < now() - p_retention_ms * interval '1 millisecond'
		  AND NOT EXISTS (
		    SELECT 1 FROM idem_deliveries d
		    WHERE d.event = e.id AND (d.state = 'pending' OR d.ended_at >=
		      now() - p_retention_ms * interval '1 millisecond'))
		ORDER BY e.created_at
		LIMIT p_limit
		FOR UPDATE OF e SKIP LOCKED),
	gone AS (
		DELETE FROM idem_events e USING old WHERE e.id = old.id
		RETURNING 1)
	SELECT count(*) FROM gone
$$;
