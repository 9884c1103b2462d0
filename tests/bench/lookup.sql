-- lookup.sql - pgbench script for tests/bench/run: the reference of the
-- replay path, the lookup part of the middleware's CTE alone (one
-- statement, one round trip, no transaction block) on a key of the pool
-- "pool-0" .. "pool-(pool-1)" that the run has created through the app.
--
-- Variables (pgbench -D): hash (hex of SHA-256 of the secret), pool.
\set i random(0, :pool - 1)
SELECT k.id, k.request_method, k.request_path,
    k.request_fingerprint, k.state, k.response_status,
    k.response_headers::text, k.response_body,
    k.expires_at > now() AS live, k.recovery_point,
    k.locked_at < now() - 300000::bigint * interval '1 millisecond'
  FROM idempotency_keys k, api_keys t
  WHERE t.secret_hash = '\x:hash'::bytea AND t.revoked_at IS NULL
    AND k.api_key_id = t.id AND k.key = 'pool-:i';
