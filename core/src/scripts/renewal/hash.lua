-- Watchdog renewal of many RLock-family holds in one call (docs/protocol.md, renewal).
-- KEYS[i] lock hash; ARGV[1] lease in ms; ARGV[i + 1] the holder expected in KEYS[i].
-- Returns one 1 (renewed), 0 (gone: expired, deleted or taken over) or -1 (Redis refused to look:
-- on a cluster node, a key it does not serve) per key.
local out = {}
for i = 1, #KEYS do
    local held = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
    if type(held) == 'table' and held.err then
        out[i] = -1
    elseif held == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
