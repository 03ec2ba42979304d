-- RFairLock acquire (docs/protocol.md, FairLock). FIFO: the lock goes to the head of the queue.
-- KEYS[1] lock hash, KEYS[2] queue "redisson_lock_queue:{name}", KEYS[3] timeouts
-- "redisson_lock_timeout:{name}".
-- ARGV[1] lease ms; ARGV[2] holder; ARGV[3] the fair wait ms (how long a waiter may take to come
-- back before it is considered dead); ARGV[4] now (client epoch ms); ARGV[5] "1" for a single try
-- (never enqueue), "0" otherwise; ARGV[6] "1" for the non-reentrant fair lock (Redisson 4.4): a
-- second acquire by the holder is refused with the error NON_REENTRANT_REACQUIRE, as Redisson's.
-- Returns nil when acquired or re-entered; otherwise how long (ms) to wait at most before trying
-- again (a message on the caller's own channel may come sooner).
--
-- Beyond Redisson (compatible with it): a queued caller resets its own deadline on every try to
-- now + wait × its 1-based position (each waiter served ahead of it moves it `wait` earlier), so a
-- live waiter stays in line however long it waits, while a dead one is purged about `wait` after
-- its last try (Redisson's first deadline also includes the holder's whole remaining lease); a
-- taker moves each waiter's deadline up by that waiter's own step, not by the taker's wait (see
-- below); and the retry hint never makes a queued caller spin on a free lock whose head is another
-- waiter.
local lease = ms_arg(ARGV[1], 'the lease')
local wait = ms_arg(ARGV[3], 'the fair-lock wait')
local now = tonumber(ARGV[4])
local bad = check_fair_keys(KEYS[2], KEYS[3])
if bad then return wrong_type(bad) end
local head = purge_stale_heads(KEYS[2], KEYS[3], now)

local exists = redis.call('exists', KEYS[1]) == 1
if not exists then
    if head == false or head == ARGV[2] then
        redis.call('zrem', KEYS[3], ARGV[2])
        if head == ARGV[2] then
            redis.call('lpop', KEYS[2])
            move_up(KEYS[2], KEYS[3], 1, wait, now)
        end
        redis.call('hset', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], ARGV[1])
        return nil
    end
else
    local held = redis.pcall('hexists', KEYS[1], ARGV[2])
    if type(held) == 'table' then return wrong_type(not_a_lock(KEYS[1]) or 'another type of value') end
    if held == 1 then
        if ARGV[6] == '1' then return redis.error_reply('NON_REENTRANT_REACQUIRE ' .. ARGV[2]) end
        redis.call('hincrby', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], ARGV[1])
        return nil
    end
    local bad_hash = not_a_lock_hash(KEYS[1])
    if bad_hash then return wrong_type(bad_hash) end
end

-- Busy: how long to wait at most before the next try.
local function hint()
    local pttl = redis.call('pttl', KEYS[1])
    local h
    if pttl >= 0 then
        h = pttl
    elseif pttl == -1 then
        h = wait
    else
        -- Free, but another waiter is at the head: wait until its deadline at most.
        local head = redis.call('lindex', KEYS[2], 0)
        local score = head and redis.call('zscore', KEYS[3], head)
        h = score and (tonumber(score) - now) or 1
    end
    return math.max(1, math.min(h, math.floor(wait / 2)))
end

if ARGV[5] == '1' then
    return hint()
end

local mine = redis.call('zscore', KEYS[3], ARGV[2])
if mine ~= false then
    local position = redis.call('lpos', KEYS[2], ARGV[2])
    if position ~= false then
        redis.call('zadd', KEYS[3], now + wait * (position + 1), ARGV[2])
        return hint()
    end
    -- A score without a queue entry: drop it and enqueue afresh below.
    redis.call('zrem', KEYS[3], ARGV[2])
end

local last = redis.call('lindex', KEYS[2], -1)
local base
local last_score = last and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last)
if last_score then
    base = tonumber(last_score) - now
else
    base = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], base + wait + now, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
end
return hint()
