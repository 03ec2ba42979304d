-- Watchdog renewal of many read-lock holds in one call (docs/protocol.md, ReadWriteLock).
-- KEYS[i] read-write lock hash; ARGV[1] lease in ms; ARGV[2i] the reader's holder and ARGV[2i + 1]
-- its timeout-key prefix ("{name}", or the name itself when it contains "{").
-- For each: if the holder still has n read holds, (re)sets its timeout keys
-- <prefix>:<holder>:rwlock_timeout:1..n to the lease and makes the hash live at least as long.
-- Returns one 1 (renewed), 0 (gone) or -1 (Redis refused to look: on a cluster node, a key it does
-- not serve) per key.
local out = {}
for i = 1, #KEYS do
    local holder, prefix = ARGV[2 * i], ARGV[2 * i + 1]
    local n = redis.pcall('hget', KEYS[i], holder)
    if type(n) == 'table' and n.err then
        out[i] = -1
    elseif type(n) == 'string' and tonumber(n) and tonumber(n) > 0 then
        for k = 1, tonumber(n) do
            redis.call('set', prefix .. ':' .. holder .. ':rwlock_timeout:' .. k, 1, 'px', ARGV[1])
        end
        if redis.call('pttl', KEYS[i]) < tonumber(ARGV[1]) then
            redis.call('pexpire', KEYS[i], ARGV[1])
        end
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
