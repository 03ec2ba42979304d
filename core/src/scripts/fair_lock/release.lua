-- RFairLock release (docs/protocol.md, FairLock): as the RLock's, but the unlock message goes only
-- to the head of the queue, on its own channel "redisson_lock__channel:{name}:<head>".
-- KEYS[1] lock hash, KEYS[2] queue, KEYS[3] timeouts, KEYS[4] base channel.
-- ARGV[1] message "0"; ARGV[2] lease ms kept while still held; ARGV[3] holder; ARGV[4] now
-- (client epoch ms); ARGV[5] publish command; ARGV[6] "" or the retry count (see lock/release.lua);
-- ARGV[7] "1" or "all".
-- Returns nil when the caller holds nothing, 0 when a re-entrant hold remains, 1 when released.
local bad = check_fair_keys(KEYS[2], KEYS[3])
if bad then return wrong_type(bad) end
purge_stale_heads(KEYS[2], KEYS[3], tonumber(ARGV[4]))
local function wake_head()
    local head = redis.call('lindex', KEYS[2], 0)
    if head then redis.call(ARGV[5], KEYS[4] .. ':' .. head, ARGV[1]) end
end
local count = redis.pcall('hget', KEYS[1], ARGV[3])
if type(count) == 'table' then return wrong_type(not_a_lock(KEYS[1]) or 'another type of value') end
if ARGV[6] ~= '' then
    local before = tonumber(ARGV[6])
    if count == false then
        if before <= 1 then return 1 end
        return nil
    end
    if tonumber(count) == before - 1 then return 0 end
end
if count == false then
    -- Not ours; if the lock is free, make sure the head knows. A read-write lock, or a hash
    -- that is no lock, is a kind mix, not "not held".
    if redis.call('exists', KEYS[1]) == 0 then
        wake_head()
        return nil
    end
    local bad = not_a_lock_hash(KEYS[1])
    if bad then return wrong_type(bad) end
    return nil
end
if ARGV[7] ~= 'all' and tonumber(count) > 1 then
    ms_arg(ARGV[2], 'the lease')
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
wake_head()
return 1
