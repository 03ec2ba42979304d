-- Read-only snapshot of an RLock-family hash (Lock, FairLock, SpinLock, FencedLock,
-- NonReentrantLock) for queries, settling and error messages.
-- KEYS[1] lock hash; ARGV[1] holder (may be "").
-- Returns {pttl, locked (0/1), hold count of ARGV[1], holder fields...}.
local bad = not_a_lock(KEYS[1])
if bad then return wrong_type(bad) end
local pttl = redis.call('pttl', KEYS[1])
local out = { pttl, pttl == -2 and 0 or 1, tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0') }
for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    out[#out + 1] = field
end
return out
