-- textbook.sql - pgbench script for tests/bench/run: the design
-- document's textbook idempotent create, NOT idem's SQL.  One statement
-- per round trip (six): look the key up FOR UPDATE, insert it in
-- progress, insert the payment, mark the key completed with the response,
-- commit.  It is the reference idem's create must beat through HTTP, a
-- web server and FastCGI (issue "performance at the database's ceiling").
-- The payment row and the response are those of create.sql.
--
-- Variables (pgbench -D): n (0, a per-client counter), run (a tag of the
-- run, so that runs never reuse keys), tenant (api_keys.id), created
-- (epoch seconds).
\set n :n + 1
\set p1 random(100000000000, 999999999999)
\set p2 random(100000000000, 999999999999)
BEGIN;
SELECT id, state, response_status, response_body FROM idempotency_keys
  WHERE api_key_id = :tenant AND key = 't-:run-:client_id-:n' FOR UPDATE;
INSERT INTO idempotency_keys (api_key_id, key, request_method, request_path,
    request_fingerprint, state, locked_at, expires_at)
  VALUES (:tenant, 't-:run-:client_id-:n', 'POST', '/v1/payments',
    '\x5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592'::bytea,
    'in_progress', now(), now() + interval '24 hours')
  RETURNING id AS key_id \gset
INSERT INTO payments (id, api_key_id, amount, currency, status,
    description, customer, metadata, created_at, idem_key_id)
  VALUES ('pay_:p1:p2', :tenant, 1234, 'eur', 'succeeded', 'benchmark',
    NULL, '{}'::jsonb, to_timestamp(:created), :key_id)
  RETURNING id;
UPDATE idempotency_keys SET state = 'completed', response_status = 201,
    response_headers = '{"Content-Type":"application/json","Location":"/v1/payments/pay_:p1:p2"}'::jsonb,
    response_body = '{"id":"pay_:p1:p2","object":"payment","amount":1234,"currency":"eur","status":"succeeded","amount_refunded":0,"description":"benchmark","customer":null,"metadata":{},"created":1700000000}'::bytea,
    locked_at = NULL
  WHERE id = :key_id;
COMMIT;
