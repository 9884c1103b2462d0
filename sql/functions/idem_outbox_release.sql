-- idem_outbox_release.sql: a dispatcher that stops gives back delivery
-- p_id, taken for attempt p_attempts and not attempted: due at once, the
-- attempt not counted.
-- The delivery is found by its id alone: "state <> ALL" rather than
-- "state = 'pending'" (the same rows: the CHECK allows three states), so
-- that the planner cannot read it through a partial index on pending
-- deliveries, which statistics taken while the outbox was drained show
-- empty: it scanned all of a backlog for each call (docs/benchmark.md,
-- the batch-10 slice; tests/direct/outbox_plans.py).
CREATE OR REPLACE FUNCTION idem_outbox_release(p_id bigint,
    p_attempts integer)
RETURNS boolean
LANGUAGE sql VOLATILE AS $$
	UPDATE idem_deliveries d SET attempts = d.attempts - 1,
	    next_attempt_at = now()
	  WHERE d.id = p_id AND d.state <> ALL ('{delivered,dead}')
	    AND d.attempts = p_attempts
	  RETURNING true
$$;
