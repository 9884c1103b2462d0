-- idem_outbox_failed.sql: attempt p_attempts of delivery p_id failed
-- (status: NULL when there was no answer): the next one p_delay_ms from
-- now, or with p_dead the delivery given up.  Only while it is pending and
-- still this attempt's (a dispatcher whose hold lapsed does not overwrite
-- the next attempt's outcome).  Returns whether it is dead.
-- The delivery is found by its id alone: "state <> ALL" rather than
-- "state = 'pending'" (the same rows: the CHECK allows three states), so
-- that the planner cannot read it through a partial index on pending
-- deliveries, which statistics taken while the outbox was drained show
-- empty: it scanned all of a backlog for each call (docs/benchmark.md,
-- the batch-10 slice; tests/direct/outbox_plans.py).
CREATE OR REPLACE FUNCTION idem_outbox_failed(p_id bigint,
    p_attempts integer, p_status integer, p_error text, p_delay_ms bigint,
    p_dead boolean)
RETURNS boolean
LANGUAGE sql VOLATILE AS $$
	UPDATE idem_deliveries d SET last_status = p_status,
	    last_error = left(p_error, 500),
	    next_attempt_at = now() + p_delay_ms * interval '1 millisecond',
	    state = CASE WHEN p_dead THEN 'dead' ELSE 'pending' END,
	    ended_at = CASE WHEN p_dead THEN clock_timestamp() END
	  WHERE d.id = p_id AND d.state <> ALL ('{delivered,dead}')
	    AND d.attempts = p_attempts
	  RETURNING d.state = 'dead'
$$;
