-- create.sql - pgbench script for tests/bench/run: the SQL of one
-- POST /v1/payments with a new key, as lib/idempotency.c and
-- apps/payments/payments.c send it, in the same two round trips:
--   flight 1: BEGIN; sql_lookup (the lookup/lock/insert CTE)
--   flight 2: the deferred INSERT INTO payments; sql_store; COMMIT
-- Statements joined by \; go to the server as one message (one round
-- trip), like the app's pipelined flights.  The statements are the app's
-- text with each $N replaced by a literal (pgbench -M simple), plus one
-- statement the app does not send: "SELECT lastval()" at the end of
-- flight 1, because pgbench can only \gset the last result of a flight
-- and the CTE's columns are unnamed; the app reads the new key record's
-- id from the CTE instead.
-- tests/bench/run warns when the source no longer has these statements:
-- mirrors: sql_lookup=7b5de28f6969 sql_store=12e97d778f2d payments_insert=c227a8eea060
--
-- Variables (pgbench -D): n (0, a per-client counter), run (a tag of the
-- run, so that runs never reuse keys), tenant (api_keys.id), hash (hex of
-- SHA-256 of the secret), created (epoch seconds).
\set n :n + 1
\set lock random(-4611686018427387903, 4611686018427387903)
\set p1 random(100000000000, 999999999999)
\set p2 random(100000000000, 999999999999)
BEGIN \;
WITH t AS (SELECT id, secret_hash FROM api_keys
    WHERE secret_hash = '\x:hash'::bytea AND revoked_at IS NULL),
 cur AS MATERIALIZED (SELECT k.id, k.request_method, k.request_path,
    k.request_fingerprint, k.state, k.response_status,
    k.response_headers::text, k.response_body,
    k.expires_at > now() AS live, k.recovery_point,
    coalesce(k.locked_at < now() - 300000::bigint *
      interval '1 millisecond', true) AS stale
  FROM idempotency_keys k, t
  WHERE k.api_key_id = t.id AND k.key = 'p-:run-:client_id-:n'),
 lk AS MATERIALIZED (SELECT CASE
    WHEN NOT EXISTS (SELECT 1 FROM t) THEN NULL
    WHEN EXISTS (SELECT 1 FROM cur WHERE live AND
      NOT (state = 'in_progress' AND stale)) THEN NULL
    ELSE pg_try_advisory_xact_lock(:lock::bigint) END AS got),
 ins AS (INSERT INTO idempotency_keys AS k (api_key_id, key,
    request_method, request_path, request_fingerprint, state,
    recovery_point, locked_at, created_at, expires_at)
  SELECT t.id, 'p-:run-:client_id-:n', 'POST', '/v1/payments',
    '\x5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592'::bytea,
    'in_progress', 'started', now(), now(),
    now() + 604800000::bigint * interval '1 millisecond'
  FROM t, lk WHERE lk.got
    AND NOT EXISTS (SELECT 1 FROM cur WHERE cur.live)
  ON CONFLICT (api_key_id, key) DO UPDATE SET
    id = nextval(pg_get_serial_sequence('idempotency_keys', 'id')),
    request_method = EXCLUDED.request_method,
    request_path = EXCLUDED.request_path,
    request_fingerprint = EXCLUDED.request_fingerprint,
    state = 'in_progress', recovery_point = 'started',
    response_status = NULL, response_headers = NULL,
    response_body = NULL, locked_at = now(), created_at = now(),
    expires_at = EXCLUDED.expires_at
  WHERE k.expires_at <= now()
  RETURNING k.id)
 SELECT (SELECT id FROM t), (SELECT id FROM ins), cur.*,
  (SELECT secret_hash FROM t), (SELECT got FROM lk)
 FROM (SELECT 1) AS one LEFT JOIN cur ON true \;
SELECT lastval() AS ins_id
\gset
INSERT INTO payments (id, api_key_id, amount, currency, status,
    description, customer, metadata, created_at, idem_key_id)
  VALUES ('pay_:p1:p2', :tenant, 1234, 'eur', 'succeeded', 'benchmark',
    NULL, '{}'::jsonb, to_timestamp(:created), NULL) \;
UPDATE idempotency_keys SET state = 'completed',
 response_status = 201,
 response_headers = '{"Content-Type":"application/json","Location":"/v1/payments/pay_:p1:p2"}'::jsonb,
 response_body = '{"id":"pay_:p1:p2","object":"payment","amount":1234,"currency":"eur","status":"succeeded","amount_refunded":0,"description":"benchmark","customer":null,"metadata":{},"created":1700000000}'::bytea,
 locked_at = NULL, recovery_point = 'finished'
 WHERE id = :ins_id \;
COMMIT;
