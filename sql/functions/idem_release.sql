-- idem_release.sql: a phase failed; by the owner of the lease only.  A
-- record that never passed a recovery point is deleted (a retry executes
-- afresh); otherwise its lease ends, so that a retry or the completer
-- resumes it.  Returns whether the caller still owned it.
CREATE OR REPLACE FUNCTION idem_release(p_id bigint, p_token uuid)
RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	DELETE FROM idempotency_keys WHERE id = p_id AND lease_token = p_token
	    AND state = 'in_progress' AND recovery_point = 'started';
	IF FOUND THEN
		RETURN true;
	END IF;
	UPDATE idempotency_keys SET locked_at = NULL, lease_token = NULL,
	    lease_until = NULL
	  WHERE id = p_id AND lease_token = p_token AND state = 'in_progress';
	RETURN FOUND;
END
$$;
