-- 014_idem_outbox_ordered.sql: the ordered take ([webhooks] ordered = on)
-- looks at each endpoint's first pending delivery only, instead of asking
-- of every pending one whether an earlier one of its endpoint is pending.
--
-- With ordered on, a delivery is due only when no earlier delivery to its
-- endpoint is pending (waiting for a retry, or taken and in flight: a
-- taken one stays pending, its next_attempt_at past the hold).  So the
-- only candidates are the heads: each endpoint's lowest pending id.  The
-- take of 013 walked the pending deliveries in schedule order and ran a
-- NOT EXISTS for each, so behind an endpoint with a backlog it stepped
-- over that whole backlog on every call (183 ms at 15,000 pending,
-- docs/benchmark.md "The outbox").  The heads are found here by a skip
-- scan of idem_deliveries_endpoint ((endpoint, id) WHERE pending): one
-- index descent per endpoint that has pending deliveries, whatever their
-- number.  The unordered take selects as 013's did.  Same signature, same
-- results.
--
-- Two dispatchers: a head another one has locked is skipped (SKIP
-- LOCKED), and one it has taken and committed is seen with its new
-- next_attempt_at when locked here (the lock re-reads the row and
-- rechecks "due"), so an endpoint's later delivery is never taken while
-- its head is in flight.

CREATE OR REPLACE FUNCTION idem_outbox_take(p_limit bigint, p_hold_ms bigint,
    p_ordered boolean)
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
			  WHERE d.state = 'pending'
			  ORDER BY d.endpoint, d.id LIMIT 1)
			UNION ALL
			SELECT n.endpoint, n.id FROM heads h,
			  LATERAL (SELECT d.endpoint, d.id FROM idem_deliveries d
			    WHERE d.state = 'pending' AND d.endpoint > h.endpoint
			    ORDER BY d.endpoint, d.id LIMIT 1) n)
		SELECT array_agg(t.id) INTO v_due FROM (
			SELECT d.id FROM idem_deliveries d
			WHERE d.id = ANY (ARRAY(SELECT heads.id FROM heads))
			  AND d.state = 'pending' AND d.next_attempt_at <= now()
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
