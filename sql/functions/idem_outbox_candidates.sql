-- idem_outbox_candidates.sql: what a dispatcher may take next: each
-- endpoint's next due delivery (with p_ordered its first pending one, if
-- due; else its earliest due), none of the endpoints in p_busy (its calls
-- in flight), with the endpoint's tenant and the delivery's rank among
-- the tenant's candidates (1: due first).  Up to p_limit, by rank, then
-- round-robin by tenant after p_after (the tenant served last), so that
-- every tenant's first candidate comes before any tenant's second.  The
-- endpoints are found by a skip scan of the pending deliveries' endpoints
-- (one index descent each, whatever their backlog); nothing is locked:
-- idem_outbox_take takes the ones chosen (lib/pure/delivery.c).
CREATE OR REPLACE FUNCTION idem_outbox_candidates(p_ordered boolean,
    p_busy bigint[], p_after bigint, p_limit bigint)
RETURNS TABLE (id bigint, tenant bigint, rank bigint)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
	RETURN QUERY
	WITH RECURSIVE eps AS (
		(SELECT d.endpoint FROM idem_deliveries d
		  WHERE d.state = 'pending' AND d.endpoint IS NOT NULL
		  ORDER BY d.endpoint LIMIT 1)
		UNION ALL
		SELECT n.endpoint FROM eps e,
		  LATERAL (SELECT d.endpoint FROM idem_deliveries d
		    WHERE d.state = 'pending' AND d.endpoint > e.endpoint
		    ORDER BY d.endpoint LIMIT 1) n),
	next AS (
		SELECT f.id, f.next_attempt_at, e.endpoint FROM eps e,
		  -- Two branches, one of them off: each walks its own index
		  -- (idem_deliveries_endpoint, idem_deliveries_endpoint_due).
		  LATERAL ((SELECT d.id, d.next_attempt_at FROM idem_deliveries d
		      WHERE p_ordered AND d.state = 'pending'
		        AND d.endpoint = e.endpoint ORDER BY d.id LIMIT 1)
		    UNION ALL
		    (SELECT d.id, d.next_attempt_at FROM idem_deliveries d
		      WHERE NOT p_ordered AND d.state = 'pending'
		        AND d.endpoint = e.endpoint
		      ORDER BY d.next_attempt_at, d.id LIMIT 1)) f
		WHERE NOT (e.endpoint = ANY (p_busy))),
	ranked AS (
		SELECT x.id, w.api_key_id AS tenant, row_number() OVER (
		    PARTITION BY w.api_key_id ORDER BY x.next_attempt_at, x.id)
		    AS rank
		FROM next x JOIN idem_webhook_endpoints w ON w.id = x.endpoint
		WHERE x.next_attempt_at <= now())
	SELECT r.id, r.tenant, r.rank FROM ranked r
	ORDER BY r.rank, r.tenant <= p_after, r.tenant
	LIMIT p_limit;
END
$$;
