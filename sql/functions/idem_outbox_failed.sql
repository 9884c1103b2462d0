-- idem_outbox_failed.sql: attempt p_attempts of delivery p_id failed
-- (status: NULL when there was no answer): the next one p_delay_ms from
-- now, or with p_dead the delivery given up.  Only while it is pending and
-- still this attempt's (a dispatcher whose hold lapsed does not overwrite
-- the next attempt's outcome).  The endpoint, if enabled, is failing from
-- now unless it was already (failing_since, sql/015).  Returns for how
-- many milliseconds it has been failing, 0 from now; NULL when nothing
-- was recorded or the endpoint is deleted or disabled.
-- A delivery is found by its id with "state <> ALL ('{delivered,dead}')"
-- rather than "state = 'pending'" (the same rows), so that the planner
-- cannot read it through a partial index on pending deliveries that
-- statistics taken while the outbox was drained show empty (sql/021).
CREATE OR REPLACE FUNCTION idem_outbox_failed(p_id bigint,
    p_attempts integer, p_status integer, p_error text, p_delay_ms bigint,
    p_dead boolean)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
	WITH d AS (
		UPDATE idem_deliveries d SET last_status = p_status,
		    last_error = left(p_error, 500),
		    next_attempt_at = now() + p_delay_ms * interval '1 millisecond',
		    state = CASE WHEN p_dead THEN 'dead' ELSE 'pending' END,
		    ended_at = CASE WHEN p_dead THEN clock_timestamp() END
		  WHERE d.id = p_id AND d.state <> ALL ('{delivered,dead}')
		    AND d.attempts = p_attempts
		  RETURNING d.endpoint),
	w AS (
		UPDATE idem_webhook_endpoints w
		  SET failing_since = coalesce(w.failing_since, clock_timestamp())
		  FROM d WHERE w.id = d.endpoint AND w.deleted_at IS NULL
		    AND w.disabled_at IS NULL
		  RETURNING w.failing_since)
	SELECT (extract(epoch FROM clock_timestamp() - w.failing_since)
	    * 1000)::bigint FROM w
$$;
