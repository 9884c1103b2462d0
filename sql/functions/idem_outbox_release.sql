-- idem_outbox_release.sql: a dispatcher that stops gives back delivery
-- p_id, taken for attempt p_attempts and not attempted: due at once, the
-- attempt not counted.
CREATE OR REPLACE FUNCTION idem_outbox_release(p_id bigint,
    p_attempts integer)
RETURNS boolean
LANGUAGE sql VOLATILE AS $$
	UPDATE idem_deliveries d SET attempts = d.attempts - 1,
	    next_attempt_at = now()
	  WHERE d.id = p_id AND d.state = 'pending'
	    AND d.attempts = p_attempts
	  RETURNING true
$$;
