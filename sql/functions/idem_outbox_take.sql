-- idem_outbox_take.sql: up to p_limit due deliveries, taken for one attempt
-- each: attempts counted now and next_attempt_at moved p_hold_ms ahead, so
-- that no other dispatcher takes them meanwhile.  With p_ordered
-- ([webhooks] ordered = on) only each endpoint's first pending delivery
-- (its head) is a candidate, found by a skip scan of
-- idem_deliveries_endpoint, one index descent per endpoint whatever its
-- backlog (sql/014).  A head another dispatcher has locked is skipped (SKIP
-- LOCKED), and one it has taken and committed is seen with its new
-- next_attempt_at, so an endpoint's later delivery is never taken while its
-- head is in flight.  One statement for each mode, so that each keeps a
-- plan of its own; the rows are looked up by id (sql/013).  Which index
-- each statement may use is set by its conditions, not by statistics that
-- may show the pending deliveries' indexes empty (sql/021): the walk over
-- the endpoints states endpoint IS NOT NULL (idem_deliveries_endpoint),
-- the heads are looked up by id alone ("state <> ALL", the same rows as
-- state = 'pending'), and the take of due deliveries has
-- idem_deliveries_due only.
CREATE OR REPLACE FUNCTION idem_outbox_take(p_limit bigint,
    p_hold_ms bigint, p_ordered boolean)
RETURNS TABLE (id bigint, event_id text, type text, body text, url text,
    secret text, endpoint_deleted boolean, attempts integer, age_ms bigint)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
	v_due	bigint[];
BEGIN
	-- The due deliveries, locked: one statement for each mode, so that
	-- each keeps a plan of its own.
	IF p_ordered THEN
		WITH RECURSIVE heads AS (
			(SELECT d.endpoint, d.id FROM idem_deliveries d
			  WHERE d.state = 'pending' AND d.endpoint IS NOT NULL
			  ORDER BY d.endpoint, d.id LIMIT 1)
			UNION ALL
			SELECT n.endpoint, n.id FROM heads h,
			  LATERAL (SELECT d.endpoint, d.id FROM idem_deliveries d
			    WHERE d.state = 'pending' AND d.endpoint > h.endpoint
			    ORDER BY d.endpoint, d.id LIMIT 1) n)
		SELECT array_agg(t.id) INTO v_due FROM (
			SELECT d.id FROM idem_deliveries d
			WHERE d.id = ANY (ARRAY(SELECT heads.id FROM heads))
			  AND d.state <> ALL ('{delivered,dead}')
			  AND d.next_attempt_at <= now()
			ORDER BY d.next_attempt_at, d.id
			LIMIT p_limit
			FOR UPDATE OF d SKIP LOCKED) t;
	ELSE
		SELECT array_agg(t.id) INTO v_due FROM (
			SELECT d.id FROM idem_deliveries d
			WHERE d.state = 'pending' AND d.next_attempt_at <= now()
			ORDER BY d.next_attempt_at, d.id
			LIMIT p_limit
			FOR UPDATE OF d SKIP LOCKED) t;
	END IF;
	IF v_due IS NULL THEN
		RETURN;
	END IF;
	RETURN QUERY
	UPDATE idem_deliveries d SET attempts = d.attempts + 1,
	    next_attempt_at = now() + p_hold_ms * interval '1 millisecond'
	  FROM idem_events e, idem_webhook_endpoints w
	  WHERE d.id = ANY (v_due) AND e.id = d.event AND w.id = d.endpoint
	  RETURNING d.id, e.event_id, e.type, e.body, w.url, w.secret,
	    w.deleted_at IS NOT NULL, d.attempts,
	    (extract(epoch FROM clock_timestamp() - e.created_at) * 1000)::bigint;
END
$$;
