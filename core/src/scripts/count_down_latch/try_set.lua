-- RCountDownLatch trySetCount (docs/protocol.md, CountDownLatch): sets the count to ARGV[1] unless
-- the latch is already counting, and publishes "1" (closed). KEYS[1] count, KEYS[2] channel
-- "redisson_countdownlatch__channel__{name}"; ARGV[2] publish command. Returns 1 when set, else 0.
int_arg(ARGV[1], 'the count', 1)
if counter_of(KEYS[1], 'a latch count') ~= nil then return 0 end
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], '1')
return 1
