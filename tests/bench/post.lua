-- post.lua - wrk script for tests/bench/run: POST a payment, with an
-- Idempotency-Key chosen by MODE; count the answers that are not the
-- expected status; measure each request's latency itself.
--
--   wrk -t N -c N ... -s post.lua URL -- SECRET PATH MODE TAG EXPECT [POOL|KEY]
--
--   MODE fresh  a new key per request: TAG, thread id, counter, random
--        pool   cycle over the keys "pool-0" .. "pool-(POOL-1)" (created
--               beforehand, so every request is a replay)
--        fixed  the one key KEY for every request (held in flight -> 409)
--   EXPECT      the status every answer should have (201, 409, ...)
--
-- Latency: wrk's own latency statistics disagree with Little's law on the
-- machine this was written on (a mean of 8 ms where 8 connections at
-- 5,000 requests/s allow 1.6 ms), so each request is timed here, from
-- request() to response(), with CLOCK_MONOTONIC (LuaJIT FFI).  That needs
-- one connection per thread (-t N -c N): request() and response() of a
-- thread then alternate.
--
-- done() prints one machine-readable line:
--   BENCH requests=N duration_us=N rps=X p50_us=N p99_us=N mean_us=N
--         little_us=N ok=N bad=N s409=N errors=N replayed=N clock=lua|wrk
-- (little_us: connections x duration / requests, what the mean must be;
-- bad: answers with another status than EXPECT, s409 of them 409; errors:
-- socket errors and timeouts; replayed: "Idempotent-Replayed: true";
-- clock=wrk: no FFI, the percentiles are wrk's own)

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
-- latency histogram: microseconds -> count (10 us buckets from 1 ms,
-- 100 us from 10 ms, 1 ms from 100 ms)
hist = {}

local have_ffi, ffi = pcall(require, "ffi")
local now
if have_ffi then
	ffi.cdef[[
		typedef struct { long tv_sec; long tv_nsec; } idem_timespec;
		int clock_gettime(int, idem_timespec *);
	]]
	local ts = ffi.new("idem_timespec")
	now = function()
		ffi.C.clock_gettime(1, ts)	-- CLOCK_MONOTONIC
		return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
	end
end
local t0 = nil

local function bucket(us)
	us = math.floor(us)
	if us < 1000 then return us end
	if us < 10000 then return us - us % 10 end
	if us < 100000 then return us - us % 100 end
	return us - us % 1000
end

function init(args)
	local secret = args[1]
	path = args[2]
	mode = args[3]
	tag = args[4]
	expect = tonumber(args[5])
	if mode == "pool" then
		pool = tonumber(args[6])
	elseif mode == "fixed" then
		fixed = args[6] or "fixed"
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
	if now then t0 = now() end
	return wrk.format("POST", path, hdr, body)
end

function response(status, headers, rbody)
	if t0 then
		local b = bucket(now() - t0)
		hist[b] = (hist[b] or 0) + 1
		t0 = nil
	end
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
	local all, n, sum = {}, 0, 0
	for _, t in ipairs(threads) do
		ok = ok + (t:get("n_ok") or 0)
		bad = bad + (t:get("n_bad") or 0)
		s409 = s409 + (t:get("n_409") or 0)
		rep = rep + (t:get("n_replayed") or 0)
		for k, v in pairs(t:get("hist") or {}) do
			all[k] = (all[k] or 0) + v
			n = n + v
			sum = sum + k * v
		end
	end
	local keys = {}
	for k in pairs(all) do table.insert(keys, k) end
	table.sort(keys)
	local function pct(p)
		local rank, acc = math.ceil(n * p / 100), 0
		for _, k in ipairs(keys) do
			acc = acc + all[k]
			if acc >= rank then return k end
		end
		return 0
	end
	local p50, p99, mean, clock
	if n > 0 then
		p50, p99, mean, clock = pct(50), pct(99), sum / n, "lua"
	else
		p50, p99, mean, clock = latency:percentile(50),
		    latency:percentile(99), latency.mean, "wrk"
	end
	local e = summary.errors
	local errors = e.connect + e.read + e.write + e.timeout
	local little = 0
	if summary.requests > 0 then
		little = #threads * summary.duration / summary.requests
	end
	io.write(string.format("BENCH requests=%d duration_us=%d rps=%.1f " ..
	    "p50_us=%d p99_us=%d mean_us=%d little_us=%d ok=%d bad=%d " ..
	    "s409=%d errors=%d replayed=%d clock=%s\n",
	    summary.requests, summary.duration,
	    summary.requests / (summary.duration / 1e6), p50, p99, mean,
	    little, ok, bad, s409, errors, rep, clock))
end
