-- idem_outbox_delivered.sql: a 2xx answer to delivery p_id.  Recorded even
-- if another dispatcher took it again meanwhile (it was delivered).
-- Returns the milliseconds from the event's commit (its creation) to now,
-- or NULL when it was recorded already.
-- The delivery is found by its id alone: "state <> ALL" rather than
-- "state = 'pending'" (the same rows: the CHECK allows three states), so
-- that the planner cannot read it through a partial index on pending
-- deliveries, which statistics taken while the outbox was drained show
-- empty: it scanned all of a backlog for each call (docs/benchmark.md,
-- the batch-10 slice; tests/direct/outbox_plans.py).
CREATE OR REPLACE FUNCTION idem_outbox_delivered(p_id bigint,
    p_status integer)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
	UPDATE idem_deliveries d SET state = 'delivered', last_status = p_status,
	    last_error = NULL, delivered_at = clock_timestamp(),
	    ended_at = clock_timestamp()
	  FROM idem_events e
	  WHERE d.id = p_id AND d.state <> ALL ('{delivered,dead}')
	    AND e.id = d.event
	  RETURNING (extract(epoch FROM clock_timestamp() - e.created_at)
	    * 1000)::bigint
$$;
