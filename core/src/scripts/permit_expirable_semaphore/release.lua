-- RPermitExpirableSemaphore tryRelease of one permit by id (docs/protocol.md): anyone may.
-- KEYS[1] counter, KEYS[2] channel, KEYS[3] timeouts; ARGV[1] id (hex); ARGV[2] now; ARGV[3]
-- publish command.
-- Returns 1 when released, 0 when no such permit (already released or reclaimed), -1 when it had
-- expired (it is counted back all the same, as Redisson does, but reported as a failure).
local id = permit_id(ARGV[1])
-- The counter's type first: a permit released on another kind's key is a kind mix, not "no
-- such permit".
counter_of(KEYS[1], 'a permit count')
local kind = redis.call('type', KEYS[3])['ok']
if kind ~= 'none' and kind ~= 'zset' then return wrong_type('a permit timeout key holding a ' .. kind) end
local score = redis.call('zscore', KEYS[3], id)
if score == false then return 0 end
redis.call('zrem', KEYS[3], id)
local available = redis.call('incrby', KEYS[1], 1)
redis.call(ARGV[3], KEYS[2], available)
if tonumber(score) <= tonumber(ARGV[2]) then return -1 end
return 1
