-- idem_forget_batch.sql: one batch of traces whose window has passed,
-- oldest first, deleted (under the same eviction lock).  Returns how many.
CREATE OR REPLACE FUNCTION idem_forget_batch(p_limit bigint)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
	WITH gone AS (
		DELETE FROM idem_remembered WHERE ctid = ANY (ARRAY(
		    SELECT r.ctid FROM idem_remembered r
		      WHERE r.forget_at <= now()
		      ORDER BY r.forget_at LIMIT p_limit))
		  RETURNING 1)
	SELECT count(*) FROM gone
$$;
