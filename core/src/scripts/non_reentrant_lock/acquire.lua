-- Non-reentrant lock acquire (docs/protocol.md, NonReentrantLock): as the RLock's, but a second
-- acquire by the holder is refused with the error NON_REENTRANT_REACQUIRE (Redisson's reply).
-- KEYS[1] lock hash; ARGV[1] lease ms; ARGV[2] holder. Returns nil when acquired, else the PTTL.
local lease = ms_arg(ARGV[1], 'the lease')
if redis.call('exists', KEYS[1]) == 1 then
    local held = redis.pcall('hexists', KEYS[1], ARGV[2])
    if type(held) == 'table' then return wrong_type(not_a_lock(KEYS[1]) or 'another type of value') end
    if held == 1 then return redis.error_reply('NON_REENTRANT_REACQUIRE ' .. ARGV[2]) end
    local bad = not_a_lock_hash(KEYS[1])
    if bad then return wrong_type(bad) end
    return redis.call('pttl', KEYS[1])
end
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return nil
