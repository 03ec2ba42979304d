package crosslock.interop;

import java.time.LocalTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;

import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * The Java side of {@code ./dev demo}: a plain Redisson client taking turns on the lock
 * {@code demo:orders} with a Python and a Node process. Arguments: the Redis URL and the epoch
 * millisecond at which to start (so the three processes start together).
 */
public final class Demo {
    private static final DateTimeFormatter CLOCK = DateTimeFormatter.ofPattern("HH:mm:ss.SSS");

    private Demo() {}

    public static void main(String[] args) throws InterruptedException {
        Config config = new Config();
        config.useSingleServer().setAddress(args[0]);
        RedissonClient redisson = Redisson.create(config);
        try {
            long start = args.length > 1 ? Long.parseLong(args[1]) : 0;
            Thread.sleep(Math.max(0, start - System.currentTimeMillis()));
            RLock lock = redisson.getLock("demo:orders");
            for (int turn = 0; turn < 3; turn++) {
                long asked = System.nanoTime();
                lock.lock();
                try {
                    long waited = (System.nanoTime() - asked) / 1_000_000;
                    System.out.printf("%s  java   (pid %d) holds demo:orders as %s:%d  (waited %d ms)%n",
                            LocalTime.now(ZoneOffset.UTC).format(CLOCK), ProcessHandle.current().pid(),
                            redisson.getId(), Thread.currentThread().getId(), waited);
                    System.out.flush();
                    Thread.sleep(300);
                } finally {
                    lock.unlock();
                }
                Thread.sleep(400); // out for longer than one hold: the others take their turns
            }
        } finally {
            redisson.shutdown();
        }
        System.exit(0); // Netty may leave non-daemon threads behind
    }
}
