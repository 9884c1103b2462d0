-- lookup.sql - pgbench script for tests/bench/run: the reference of the
-- replay path.  The lookup part of the middleware's statement (idem_claim()
-- in sql/004_idem_claim.sql without "lk" and "ins": the tenant "t" and the key "cur", with
-- their output), alone: one statement, one round trip, no transaction
-- block, on a key of the pool "pool-0" .. "pool-(pool-1)" that the run
-- has created through the app.  Each $N of the app's text is a literal.
--
-- Variables (pgbench -D): hash (hex of SHA-256 of the secret), pool.
\set i random(0, :pool - 1)
WITH t AS (SELECT id, secret_hash FROM api_keys
    WHERE secret_hash = '\x:hash'::bytea AND revoked_at IS NULL),
 cur AS MATERIALIZED (SELECT k.id, k.request_method, k.request_path,
    k.request_fingerprint, k.state, k.response_status,
    k.response_headers::text, k.response_body,
    k.expires_at > now() AS live, k.recovery_point,
    coalesce(k.locked_at < now() - 300000::bigint *
      interval '1 millisecond', true) AS stale
  FROM idempotency_keys k, t
  WHERE k.api_key_id = t.id AND k.key = 'pool-:i')
 SELECT (SELECT id FROM t), cur.*, (SELECT secret_hash FROM t)
 FROM (SELECT 1) AS one LEFT JOIN cur ON true;
