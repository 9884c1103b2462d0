-- idem_outbox_pending.sql: the gauges of /metrics: pending deliveries and
-- the age of the oldest (seconds; 0 when none), from the partial indexes.
CREATE OR REPLACE FUNCTION idem_outbox_pending(OUT pending bigint,
    OUT oldest_s double precision)
LANGUAGE sql STABLE AS $$
	SELECT (SELECT count(*) FROM idem_deliveries WHERE state = 'pending'),
	    coalesce((SELECT extract(epoch FROM now() - min(created_at))
	      FROM idem_deliveries WHERE state = 'pending'), 0)::double precision
$$;
