-- post.lua - wrk script for tests/bench/run: POST a payment, with an
-- Idempotency-Key chosen by MODE, and count the answers that are not the
-- expected status.
--
--   wrk ... -s post.lua URL -- SECRET PATH MODE TAG EXPECT [POOL|KEY]
--
--   MODE fresh  a new key per request: TAG, thread id, counter, random
--        pool   cycle over the keys "pool-0" .. "pool-(POOL-1)" (created
--               beforehand, so every request is a replay)
--        fixed  the one key KEY for every request (held in flight -> 409)
--   EXPECT      the status every answer should have (201, 409, ...)
--
-- done() prints one machine-readable line:
--   BENCH requests=N duration_us=N rps=X p50_us=N p99_us=N ok=N bad=N
--         s409=N errors=N replayed=N
-- (bad: answers with another status than EXPECT, of which s409 were 409;
-- errors: socket errors and timeouts; replayed: Idempotent-Replayed: true)

local threads = {}

function setup(thread)
	table.insert(threads, thread)
	thread:set("tid", #threads)
end

-- The body of every request; the replay pool is created with the same one.
local body = '{"amount":1234,"currency":"eur","description":"benchmark"}'

local hdr, mode, tag, pool, fixed, path
local counter = 0
n_ok, n_bad, n_409, n_replayed, expect = 0, 0, 0, 0, 0

function init(args)
	local secret = args[1]
	path = args[2]
	mode = args[3]
	tag = args[4]
	expect = tonumber(args[5])
	if mode == "pool" then
		pool = tonumber(args[6])
	elseif mode == "fixed" then
		fixed = args[6]
	end
	math.randomseed(os.time() * 1000 + (tid or 0) * 7919)
	-- Threads start at different places of the pool.
	counter = ((tid or 1) - 1) * 104729
	hdr = {
		["Authorization"] = "Bearer " .. secret,
		["Content-Type"] = "application/json",
	}
end

function request()
	local key
	counter = counter + 1
	if mode == "fresh" then
		key = string.format("w-%s-%d-%d-%d", tag, tid, counter,
		    math.random(0, 999999))
	elseif mode == "pool" then
		key = "pool-" .. (counter % pool)
	else
		key = fixed
	end
	-- An RFC 8941 sf-string, as the Idempotency-Key draft specifies.
	hdr["Idempotency-Key"] = '"' .. key .. '"'
	return wrk.format("POST", path, hdr, body)
end

function response(status, headers, rbody)
	if status == expect then
		n_ok = n_ok + 1
	else
		n_bad = n_bad + 1
		if status == 409 then
			n_409 = n_409 + 1
		end
	end
	if headers["Idempotent-Replayed"] == "true" or
	    headers["idempotent-replayed"] == "true" then
		n_replayed = n_replayed + 1
	end
end

function done(summary, latency, requests)
	local ok, bad, s409, rep = 0, 0, 0, 0
	for _, t in ipairs(threads) do
		ok = ok + (t:get("n_ok") or 0)
		bad = bad + (t:get("n_bad") or 0)
		s409 = s409 + (t:get("n_409") or 0)
		rep = rep + (t:get("n_replayed") or 0)
	end
	local e = summary.errors
	local errors = e.connect + e.read + e.write + e.timeout
	io.write(string.format("BENCH requests=%d duration_us=%d rps=%.1f " ..
	    "p50_us=%d p99_us=%d ok=%d bad=%d s409=%d errors=%d replayed=%d\n",
	    summary.requests, summary.duration,
	    summary.requests / (summary.duration / 1e6),
	    latency:percentile(50), latency:percentile(99), ok, bad, s409,
	    errors, rep))
end
