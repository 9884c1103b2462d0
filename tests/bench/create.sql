-- create.sql - pgbench script for tests/bench/run: the SQL of one
-- POST /v1/payments with a new key, as lib/request/idempotency.c and
-- apps/payments/payments.c send it, in the same two round trips:
--   flight 1: BEGIN; sql_lookup (idem_claim(): the lookup and the lock)
--   flight 2: the deferred INSERT INTO payments; the payment.succeeded
--             event (idem_outbox_enqueue(), lib/runtime/outbox.c: the
--             tenant has no endpoint, so the event row only; with the
--             request's trace context, as the app always sends one); sql_complete
--             (idem_complete(): the key record, written once); COMMIT
-- Statements joined by \; go to the server as one message (one round
-- trip), like the app's pipelined flights.  The statements are the app's
-- text with each $N replaced by a literal (pgbench -M simple).
-- tests/bench/run warns when the source no longer has these statements:
-- mirrors: sql_lookup=b2a5e3c4dbca sql_complete=2c1f682dc611 payments_insert=80dbe98ed42f outbox_enqueue=ab2f2cee2109
--
-- Variables (pgbench -D): n (0, a per-client counter), run (a tag of the
-- run, so that runs never reuse keys), tenant (api_keys.id), hash (hex of
-- SHA-256 of the secret), created (epoch seconds).
\set n :n + 1
\set lock random(-4611686018427387903, 4611686018427387903)
\set p1 random(100000000000, 999999999999)
\set p2 random(100000000000, 999999999999)
BEGIN \;
SELECT * FROM idem_claim('\x:hash'::bytea, 'p-:run-:client_id-:n', 'POST',
    '/v1/payments',
    '\x5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592'::bytea,
    604800000::bigint, :lock::bigint, 300000::bigint, false::boolean, NULL,
    NULL::bigint);
INSERT INTO payments (id, api_key_id, amount, currency, status,
    description, customer, metadata, created_at, idem_key_id)
  VALUES ('pay_:p1:p2', :tenant, 1234, 'eur', 'succeeded', 'benchmark',
    NULL, coalesce('{}'::jsonb, '{}'), to_timestamp(:created), NULL) \;
SELECT idem_outbox_enqueue('evt_:run-:client_id-:n-5d41402abc4b2a76b9719d911017c5925d41402abc4b2a7',
    :tenant, 'payment.succeeded',
    '{"id":"evt_:run-:client_id-:n-5d41402abc4b2a76b9719d911017c5925d41402abc4b2a7","type":"payment.succeeded","created":1700000000,"data":{"id":"pay_:p1:p2","object":"payment","amount":1234,"currency":"eur","status":"succeeded","amount_refunded":0,"description":"benchmark","customer":null,"metadata":{},"created":1700000000}}',
    '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01') \;
SELECT idem_complete(:tenant::bigint, 'p-:run-:client_id-:n', 'POST',
    '/v1/payments',
    '\x5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592'::bytea,
    604800000::bigint, 201::integer,
    '{"Content-Type":"application/json","Location":"/v1/payments/pay_:p1:p2"}'::jsonb,
    '{"id":"pay_:p1:p2","object":"payment","amount":1234,"currency":"eur","status":"succeeded","amount_refunded":0,"description":"benchmark","customer":null,"metadata":{},"created":1700000000}'::bytea, NULL::bigint) \;
COMMIT;
