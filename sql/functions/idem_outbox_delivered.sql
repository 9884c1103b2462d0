-- idem_outbox_delivered.sql: a 2xx answer to delivery p_id.  Recorded even
-- if another dispatcher took it again meanwhile (it was delivered).  Its
-- endpoint succeeded now: last_success_at set, failing_since cleared
-- (sql/015).  Returns the milliseconds from the event's commit (its
-- creation) to now, or NULL when it was recorded already.
-- A delivery is found by its id with "state <> ALL ('{delivered,dead}')"
-- rather than "state = 'pending'" (the same rows), so that the planner
-- cannot read it through a partial index on pending deliveries that
-- statistics taken while the outbox was drained show empty (sql/021).
CREATE OR REPLACE FUNCTION idem_outbox_delivered(p_id bigint,
    p_status integer)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
	WITH d AS (
		UPDATE idem_deliveries d SET state = 'delivered',
		    last_status = p_status, last_error = NULL,
		    delivered_at = clock_timestamp(), ended_at = clock_timestamp()
		  FROM idem_events e
		  WHERE d.id = p_id AND d.state <> ALL ('{delivered,dead}') AND e.id = d.event
		  RETURNING d.endpoint, (extract(epoch FROM clock_timestamp() -
		    e.created_at) * 1000)::bigint AS ms),
	w AS (
		UPDATE idem_webhook_endpoints w
		  SET last_success_at = clock_timestamp(), failing_since = NULL
		  FROM d WHERE w.id = d.endpoint)
	SELECT d.ms FROM d
$$;
