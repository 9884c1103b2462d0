-- idem_store_gauges.sql: the store's figures for /metrics, each from an
-- index, scanned from the horizon (idem_evict_horizon, sql/012):
--  oldest_live_age  now() - the oldest created_at of an unexpired key,
--                   looked for among the 1000 oldest rows from created_lo:
--                   when more than 1000 expired rows wait (eviction lags,
--                   and the lag gauge says so) it is the age of the 1000th
--                   oldest row, an upper bound;
--  eviction_lag     now() - the oldest expires_at of a row eviction would
--                   delete: the very predicate of the eviction DELETE
--                   (expires_at <= now() AND idem_free(k)), from
--                   expires_lo (and the records in progress below it, on
--                   their partial index);
--  in_progress, unfinished   counted on the partial index of in-progress
--                   rows, so they cost what is in progress.
CREATE OR REPLACE FUNCTION idem_store_gauges(
    OUT oldest_live_age double precision,
    OUT eviction_lag double precision, OUT in_progress bigint,
    OUT unfinished bigint)
LANGUAGE sql STABLE AS $$
	SELECT
	  coalesce((SELECT extract(epoch FROM now() - min(o.created_at)
	      FILTER (WHERE o.expires_at > now() OR o.n = 1000))
	    FROM (SELECT k.created_at, k.expires_at,
	        row_number() OVER (ORDER BY k.created_at) AS n
	      FROM idempotency_keys k
	      WHERE k.created_at >= coalesce((SELECT h.created_lo
	        FROM idem_evict_horizon h), '-infinity')
	      ORDER BY k.created_at LIMIT 1000) o),
	    0)::float8,
	  coalesce((SELECT extract(epoch FROM now() - min(e.expires_at))
	    FROM ((SELECT k.expires_at FROM idempotency_keys k
	        WHERE k.expires_at >= coalesce((SELECT h.expires_lo
	          FROM idem_evict_horizon h), '-infinity')
	          AND k.expires_at <= now() AND idem_free(k)
	        ORDER BY k.expires_at LIMIT 1)
	      UNION ALL
	      (SELECT min(k.expires_at) FROM idempotency_keys k
	        WHERE k.state = 'in_progress' AND (k.expires_at <
	          (SELECT h.expires_lo FROM idem_evict_horizon h)) IS NOT FALSE
	          AND idem_free(k))) e), 0)::float8,
	  (SELECT count(*) FROM idempotency_keys k
	    WHERE k.state = 'in_progress'),
	  (SELECT count(*) FROM idempotency_keys k
	    WHERE k.state = 'in_progress' AND k.recovery_point <> 'started'
	    AND k.expires_at <= now())
$$;
