-- remember_size.sql - bytes per remembered key ([route] remember,
-- sql/010): :n completed records of a remembering route, expired, are
-- evicted by idem_evict_batch() as the janitor evicts them (batches of
-- 10,000, the trace written in the same statement), then the table is
-- vacuumed and its size, indexes included, divided by its rows.
--
--   psql -X -v n=100000 -d DB -f tests/bench/remember_size.sql
--
-- DB: a database migrated with idemctl migrate and holding no other
-- traces (a scratch one: its expired keys are evicted too).  Prints rows,
-- total bytes, the heap's and each index's, and bytes per key.

\set ON_ERROR_STOP 1
INSERT INTO api_keys (name, secret_hash)
  VALUES ('remember-size', sha256(convert_to('remember-size-' ||
    clock_timestamp()::text, 'UTF8')));
-- Expiries spread over 50,000 s: the janitor's pace at one eviction a
-- second for :n = 100,000 (forget_at, by the minute, shares entries).
INSERT INTO idempotency_keys (api_key_id, key, request_method, request_path,
    request_fingerprint, state, response_status, response_headers,
    response_body, created_at, expires_at, remember_ms)
  SELECT currval(pg_get_serial_sequence('api_keys', 'id')), 'rs-' || g,
    'POST', '/v1/payments', sha256(convert_to('body ' || g, 'UTF8')),
    'completed', 201, '{}', '\x7b7d', now() - interval '8 days',
    now() - interval '1 day' + g * interval '500 milliseconds',
    30 * 86400000::bigint
  FROM generate_series(1, :n) g;
DO $$
DECLARE
	e record;
BEGIN
	LOOP
		SELECT * INTO e FROM idem_evict_batch(10000);
		EXIT WHEN e.evicted < 10000;
	END LOOP;
END
$$;
VACUUM ANALYZE idem_remembered;
SELECT count(*) AS rows,
    pg_total_relation_size('idem_remembered') AS total_bytes,
    pg_relation_size('idem_remembered') AS heap_bytes,
    pg_relation_size('idem_remembered_key') AS key_index_bytes,
    pg_relation_size('idem_remembered_forget_at') AS forget_index_bytes,
    round(pg_total_relation_size('idem_remembered')::numeric / count(*), 1)
      AS bytes_per_key
  FROM idem_remembered;
