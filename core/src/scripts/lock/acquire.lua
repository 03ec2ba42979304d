-- RLock acquire (docs/protocol.md, Lock). Also the spin lock's (same hash, same effect).
-- KEYS[1] lock hash; ARGV[1] lease ms; ARGV[2] holder "<client-uuid>:<n>".
-- Returns nil when acquired or re-entered, otherwise the lock's PTTL in ms.
local lease = ms_arg(ARGV[1], 'the lease')
local held = 0
if redis.call('exists', KEYS[1]) == 1 then
    held = redis.pcall('hexists', KEYS[1], ARGV[2])
    if type(held) == 'table' then return wrong_type(not_a_lock(KEYS[1]) or 'another type of value') end
    if held == 0 then
        local bad = not_a_lock_hash(KEYS[1])
        if bad then return wrong_type(bad) end
        return redis.call('pttl', KEYS[1])
    end
end
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return nil
