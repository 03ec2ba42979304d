-- Watchdog renewal of many group lock holds in one call (docs/protocol.md, GroupLock).
-- KEYS[i] a group's hash; ARGV[1] lease ms; ARGV[2] now (epoch ms); ARGV[2i + 1] the holder
-- expected in KEYS[i], ARGV[2i + 2] its fields, comma-separated.
-- Per key: 1 when the holder still owns every field (each expiry becomes now + lease, the hash
-- lives at least the lease), 0 when one is gone or taken over, -1 when Redis refused to look (on a
-- cluster node, a key it does not serve).
local out = {}
local until_ms = string.format('%d', tonumber(ARGV[2]) + tonumber(ARGV[1]))
for i = 1, #KEYS do
    local holder, list = ARGV[2 * i + 1], ARGV[2 * i + 2]
    local fields = {}
    local state = 1
    for field in string.gmatch(list, '[^,]+') do
        local owner = redis.pcall('hget', KEYS[i], field)
        if type(owner) == 'table' and owner.err then
            state = -1
            break
        end
        if owner ~= holder then
            state = 0
            break
        end
        fields[#fields + 1] = field
    end
    if state == 1 then
        for _, field in ipairs(fields) do
            redis.call('hset', KEYS[i], field .. ':' .. holder .. ':expire_time', until_ms)
        end
        if redis.call('pttl', KEYS[i]) < tonumber(ARGV[1]) then redis.call('pexpire', KEYS[i], ARGV[1]) end
    end
    out[i] = state
end
return out
