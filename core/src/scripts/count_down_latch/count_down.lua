-- RCountDownLatch countDown (docs/protocol.md, CountDownLatch): one less; at zero the key goes and
-- "0" is published (every waiter wakes). KEYS[1] count, KEYS[2] channel; ARGV[1] publish command.
-- Returns the count left (0 when open; a missing latch stays open and publishes nothing).
local count = counter_of(KEYS[1], 'a latch count')
if count == nil then return 0 end
local left = redis.call('decr', KEYS[1])
if left <= 0 then redis.call('del', KEYS[1]) end
if left == 0 then redis.call(ARGV[1], KEYS[2], '0') end
return math.max(left, 0)
