-- RLock acquire (Redisson layout, see shared/reference/redisson-layout.md §2.2).
-- KEYS[1] lock hash; ARGV[1] lease in ms; ARGV[2] holder "<client-uuid>:<n>".
-- Returns nil when acquired or re-entered, otherwise the lock's PTTL in ms.
-- A key of another type makes HEXISTS fail with WRONGTYPE before anything is written.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
