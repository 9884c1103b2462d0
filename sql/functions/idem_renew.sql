-- idem_renew.sql: one statement renews every lease a process holds.  A
-- process's heartbeat calls it every third of a lease with the records its
-- live requests own: each lease is extended by its own length from now, by
-- the database's clock, and only while p_tokens still name the owner: a
-- lease taken over, released or completed is not touched (fencing).  Only
-- lease_until moves: locked_at stays when the lease was taken or a phase
-- last committed.  Returns the ids renewed; the caller counts the others as
-- lost.
CREATE OR REPLACE FUNCTION idem_renew(p_ids bigint[], p_tokens uuid[],
    p_lease_ms bigint[])
RETURNS SETOF bigint
LANGUAGE sql VOLATILE AS $$
	UPDATE idempotency_keys k
	    SET lease_until = now() + u.ms * interval '1 millisecond'
	  FROM unnest(p_ids, p_tokens, p_lease_ms) AS u(id, token, ms)
	  WHERE k.id = u.id AND k.lease_token = u.token
	    AND k.state = 'in_progress'
	  RETURNING k.id
$$;
