package crosslock.interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/**
 * Line-oriented interop driver around real Redisson.
 *
 * <p>Reads one command per line from stdin and executes the commands in order on the main thread
 * (Redisson lock ownership is per Java thread, so every lock command must run on the same thread).
 * For every command exactly one line is written to stdout and flushed:
 *
 * <pre>
 *   &lt;nanoTime&gt; OK[ &lt;result&gt;]
 *   &lt;nanoTime&gt; ERR &lt;ExceptionSimpleName&gt;[ &lt;message on one line&gt;]
 * </pre>
 *
 * where nanoTime is {@link System#nanoTime()} (CLOCK_MONOTONIC on Linux) taken when the command
 * finished. {@code <nanoTime> READY} is printed once at startup. Blank lines are ignored.
 * See tests-java/README.md for the command list.
 */
public final class Driver {

    private final OutputStream out;

    private Driver(OutputStream out) {
        this.out = out;
    }

    public static void main(String[] args) throws IOException {
        // stdout is reserved for the protocol: anything else that prints to System.out
        // (libraries, stray debug output) goes to stderr instead.
        OutputStream protocolOut = new FileOutputStream(FileDescriptor.out);
        System.setOut(new PrintStream(new FileOutputStream(FileDescriptor.err), true, StandardCharsets.UTF_8));

        Driver driver = new Driver(protocolOut);
        Session session = new Session();
        driver.emit(System.nanoTime() + " READY");

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        boolean clean;
        while (true) {
            String line = in.readLine();
            if (line == null) { // EOF behaves like quit
                clean = driver.finish(session);
                break;
            }
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] argv = line.split("\\s+");
            if (argv[0].equals("quit")) {
                clean = driver.finish(session);
                break;
            }
            driver.respond(session, argv);
        }
        // exit explicitly: Redisson/Netty may leave non-daemon threads behind
        System.exit(clean ? 0 : 1);
    }

    private void respond(Session session, String[] argv) throws IOException {
        String result;
        try {
            result = session.execute(argv);
        } catch (Throwable t) {
            emit(System.nanoTime() + " ERR " + describe(t));
            return;
        }
        long now = System.nanoTime();
        emit(result == null ? now + " OK" : now + " OK " + result);
    }

    /** quit / EOF: shut Redisson down, then print OK (or ERR if shutdown failed). */
    private boolean finish(Session session) throws IOException {
        try {
            session.shutdown();
        } catch (Throwable t) {
            emit(System.nanoTime() + " ERR " + describe(t));
            return false;
        }
        emit(System.nanoTime() + " OK");
        return true;
    }

    static String describe(Throwable t) {
        Throwable cause = t;
        while ((cause instanceof CompletionException || cause instanceof ExecutionException)
                && cause.getCause() != null) {
            cause = cause.getCause();
        }
        String msg = cause.getMessage();
        String name = cause.getClass().getSimpleName();
        if (name.isEmpty()) {
            name = cause.getClass().getName();
        }
        if (msg == null || msg.isBlank()) {
            return name;
        }
        return name + " " + msg.replaceAll("[\\r\\n]+", " ").trim();
    }

    private void emit(String line) throws IOException {
        out.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }
}
