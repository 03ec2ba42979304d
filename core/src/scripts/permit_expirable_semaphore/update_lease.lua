-- RPermitExpirableSemaphore updateLeaseTime / the watchdog's renewal of one permit.
-- KEYS[1] counter, KEYS[2] timeouts, KEYS[3] channel; ARGV[1] id (hex); ARGV[2] new expiry (epoch
-- ms); ARGV[3] now; ARGV[4] publish command.
-- Returns 1 when the permit was there (and now expires at ARGV[2]), 0 when it is gone.
local id = permit_id(ARGV[1])
int_arg(ARGV[2], 'the expiry', 1)
counter_of(KEYS[1], 'a permit count')
reclaim(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[3]), ARGV[4], nil)
if redis.call('zscore', KEYS[2], id) == false then return 0 end
redis.call('zadd', KEYS[2], 'xx', ARGV[2], id)
return 1
