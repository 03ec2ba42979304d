-- Watchdog renewal of many permits of permit-expirable semaphores in one call.
-- KEYS[i] a semaphore's timeouts "{name}:timeout"; ARGV[1] lease ms; ARGV[2] now (epoch ms);
-- ARGV[i + 2] the permit id (hex) expected in KEYS[i].
-- For each permit still there and not expired, its expiry becomes now + lease (1); else 0, or -1
-- when Redis refused to look (on a cluster node, a key it does not serve).
local out = {}
local expiry = tonumber(ARGV[2]) + tonumber(ARGV[1])
for i = 1, #KEYS do
    local id = permit_id(ARGV[i + 2])
    local score = redis.pcall('zscore', KEYS[i], id)
    if type(score) == 'table' and score.err then
        out[i] = -1
    elseif type(score) == 'string' and tonumber(score) > tonumber(ARGV[2]) then
        redis.call('zadd', KEYS[i], 'xx', string.format('%d', expiry), id)
        out[i] = 1
    else
        out[i] = 0
    end
end
return out
