-- Read-only snapshot of a lock hash for queries and error messages.
-- KEYS[1] lock hash; ARGV[1] holder (may be empty).
-- Returns {pttl, hold count of ARGV[1], holder fields...}; fails with WRONGTYPE on a non-hash key.
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'hash' and kind ~= 'none' then
    return redis.error_reply('WRONGTYPE key holds a ' .. kind .. ', not a lock hash')
end
local out = { redis.call('pttl', KEYS[1]), tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0') }
for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    out[#out + 1] = field
end
return out
