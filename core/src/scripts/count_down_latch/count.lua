-- RCountDownLatch getCount: KEYS[1] count. Returns it (0 when absent: the latch is open).
return math.max(counter_of(KEYS[1], 'a latch count') or 0, 0)
