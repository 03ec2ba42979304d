-- RFairLock forceUnlock (docs/protocol.md, FairLock): deletes the lock and wakes the queue's head.
-- KEYS[1] lock hash, KEYS[2] queue, KEYS[3] timeouts, KEYS[4] base channel;
-- ARGV[1] message "0"; ARGV[2] now (client epoch ms); ARGV[3] publish command.
-- Returns 1 when a lock was deleted, 0 when there was none.
local bad = not_a_lock(KEYS[1]) or check_fair_keys(KEYS[2], KEYS[3])
if bad then return wrong_type(bad) end
purge_stale_heads(KEYS[2], KEYS[3], tonumber(ARGV[2]))
if redis.call('del', KEYS[1]) == 1 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head then redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1]) end
    return 1
end
return 0
