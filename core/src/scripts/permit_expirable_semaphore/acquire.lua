-- RPermitExpirableSemaphore tryAcquire of one permit (docs/protocol.md, PermitExpirableSemaphore).
-- KEYS[1] counter, KEYS[2] timeouts "{name}:timeout", KEYS[3] channel "redisson_sc:{name}".
-- ARGV[1] the new permit's id (hex); ARGV[2] its expiry (epoch ms); ARGV[3] now; ARGV[4] publish
-- command.
-- Returns {1} when taken; otherwise {0, ms until the nearest permit expires, or -1: wait for a
-- release}.
local id = permit_id(ARGV[1])
local expiry = int_arg(ARGV[2], 'the expiry', 1)
local now = int_arg(ARGV[3], 'now', 0)
reclaim(KEYS[1], KEYS[2], KEYS[3], now, ARGV[4], 1)
local available = counter_of(KEYS[1], 'a permit count')
if available ~= nil and available >= 1 then
    redis.call('decrby', KEYS[1], 1)
    redis.call('zadd', KEYS[2], ARGV[2], id)
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end
    return { 1 }
end
local nearest = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if nearest[2] ~= nil and tonumber(nearest[2]) ~= 922337203685477 then
    return { 0, math.max(1, tonumber(nearest[2]) - now) }
end
return { 0, -1 }
