-- Read-only snapshot of whatever crosslock/Redisson object lives at a name (docs/protocol.md), for
-- the inspector. Changes nothing.
-- KEYS[1] the name; KEYS[2] fair queue "redisson_lock_queue:{name}"; KEYS[3] fair deadlines
-- "redisson_lock_timeout:{name}"; KEYS[4] fencing counter "redisson_lock_token:{name}"; KEYS[5]
-- permit deadlines "{name}:timeout". ARGV[1] the read-lock timeout key prefix "{name}" (each
-- reader's keys are ARGV[1] .. ':' .. <holder> .. ':rwlock_timeout:' .. k).
-- Returns {type, pttl, hash fields and values, string value or false, queue, deadlines (member,
-- score, ...), token or false, permits (id, score, ...), reader leases (holder, "pttl,pttl,...", ...)}.
local function of_type(key, want)
    return redis.call('type', key)['ok'] == want
end
local kind = redis.call('type', KEYS[1])['ok']
local pttl = redis.call('pttl', KEYS[1])
local hash, value = {}, false
if kind == 'hash' then
    hash = redis.call('hgetall', KEYS[1])
elseif kind == 'string' then
    value = redis.call('get', KEYS[1])
end
local queue = of_type(KEYS[2], 'list') and redis.call('lrange', KEYS[2], 0, -1) or {}
local deadlines = of_type(KEYS[3], 'zset') and redis.call('zrange', KEYS[3], 0, -1, 'withscores') or {}
local token = of_type(KEYS[4], 'string') and redis.call('get', KEYS[4]) or false
local permits = of_type(KEYS[5], 'zset') and redis.call('zrange', KEYS[5], 0, -1, 'withscores') or {}
local leases = {}
if kind == 'hash' and redis.call('hexists', KEYS[1], 'mode') == 1 then
    for i = 1, #hash, 2 do
        local field, count = hash[i], tonumber(hash[i + 1])
        if field ~= 'mode' and string.sub(field, -6) ~= ':write' and count then
            local each = {}
            for k = 1, math.min(count, 1000) do
                each[#each + 1] = redis.call('pttl', ARGV[1] .. ':' .. field .. ':rwlock_timeout:' .. k)
            end
            leases[#leases + 1] = field
            leases[#leases + 1] = table.concat(each, ',')
        end
    end
end
return { kind, pttl, hash, value, queue, deadlines, token, permits, leases }
