-- idem_webhook_recover.sql: endpoint p_endpoint's failed and dead
-- deliveries created since p_since put back in the queue, due now, with
-- their event (so their webhook-id) unchanged.  A dead one starts its
-- schedule again (attempts 0); a pending one that failed keeps its count
-- and skips its backoff (as idemctl events retry).  Delivered ones stay.
-- p_tenant: the endpoint's tenant, or NULL for any (the operator's).
-- outcome: 'requeued' (requeued: how many), 'not_found' (no live endpoint
-- of that tenant with that id) or 'disabled' (enable it first: the
-- dispatcher does not deliver to a disabled endpoint).
CREATE OR REPLACE FUNCTION idem_webhook_recover(p_endpoint bigint,
    p_tenant bigint, p_since timestamptz)
RETURNS TABLE (outcome text, requeued bigint)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
	v_disabled	boolean;
	v_n		bigint;
BEGIN
	-- Held to the commit: a concurrent delete waits, then kills what
	-- this requeued (its pending deliveries die with it).
	SELECT w.disabled_at IS NOT NULL INTO v_disabled
	  FROM idem_webhook_endpoints w
	  WHERE w.id = p_endpoint AND w.deleted_at IS NULL
	    AND (p_tenant IS NULL OR w.api_key_id = p_tenant)
	  FOR SHARE;
	IF NOT FOUND THEN
		RETURN QUERY SELECT 'not_found'::text, 0::bigint;
		RETURN;
	END IF;
	IF v_disabled THEN
		RETURN QUERY SELECT 'disabled'::text, 0::bigint;
		RETURN;
	END IF;
	WITH t AS (
		SELECT d.id, d.state FROM idem_deliveries d
		WHERE d.endpoint = p_endpoint AND d.created_at >= p_since
		  AND d.state <> 'delivered'
		  AND (d.state = 'dead' OR (d.attempts > 0 AND
		    (d.last_status IS NOT NULL OR d.last_error IS NOT NULL)))
		ORDER BY d.id FOR UPDATE OF d),
	u AS (
		UPDATE idem_deliveries d SET state = 'pending', ended_at = NULL,
		    attempts = CASE WHEN t.state = 'dead' THEN 0
		      ELSE d.attempts END,
		    next_attempt_at = now()
		FROM t WHERE d.id = t.id RETURNING 1)
	SELECT count(*) INTO v_n FROM u;
	RETURN QUERY SELECT 'requeued'::text, v_n;
END
$$;
