-- idem_advance.sql: a phase commit by the owner of the lease p_token: the
-- next recovery point (NULL: only renew) and a lease of p_lease_ms from
-- now.  Returns p_id.
CREATE OR REPLACE FUNCTION idem_advance(p_id bigint, p_token uuid,
    p_point text, p_lease_ms bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	UPDATE idempotency_keys SET
	    recovery_point = coalesce(p_point, recovery_point),
	    locked_at = now(),
	    lease_until = now() + p_lease_ms * interval '1 millisecond'
	  WHERE id = p_id AND lease_token = p_token AND state = 'in_progress';
	IF NOT FOUND THEN
		PERFORM idem_fenced_fail(p_id);
	END IF;
	RETURN p_id;
END
$$;
