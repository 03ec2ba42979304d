-- Read-only snapshot of a read-write lock hash for queries and messages.
-- KEYS[1] lock hash; ARGV[1] the asking holder's field (may be ""); ARGV[2] "read" or "write".
-- Returns {pttl, locked (0/1), hold count of ARGV[1], holder fields...}: the read lock counts as
-- locked when readers hold it (mode read, or the writer also reading), the write lock when a
-- writer does.
local bad = not_a_rwlock(KEYS[1])
if bad then return wrong_type(bad) end
local pttl = redis.call('pttl', KEYS[1])
local mode = redis.call('hget', KEYS[1], 'mode')
local locked
if ARGV[2] == 'write' then
    locked = mode == 'write'
else
    locked = mode == 'read' or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2)
end
local out = { pttl, locked and 1 or 0, tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0') }
for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    if field ~= 'mode' then out[#out + 1] = field end
end
return out
