-- RPermitExpirableSemaphore availablePermits / acquiredPermits / getLeaseTime, after reclaiming
-- expired permits. KEYS[1] counter, KEYS[2] timeouts, KEYS[3] channel; ARGV[1] now; ARGV[2]
-- publish command; ARGV[3] an id (hex) or "".
-- Returns {available, acquired, the id's expiry score (-1: no such permit)}.
reclaim(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), ARGV[2], nil)
local score = -1
if ARGV[3] ~= '' then
    score = tonumber(redis.call('zscore', KEYS[2], permit_id(ARGV[3])) or '-1')
end
return { counter_of(KEYS[1], 'a permit count') or 0, redis.call('zcard', KEYS[2]), score }
