-- idem_attention_count.sql: the needs-attention count for /metrics and
-- idemctl stats (partial index).
CREATE OR REPLACE FUNCTION idem_attention_count()
RETURNS bigint
LANGUAGE sql STABLE AS $$
	SELECT count(*) FROM idempotency_keys k
	  WHERE k.state = 'in_progress' AND k.attention_at IS NOT NULL
$$;
