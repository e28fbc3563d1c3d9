#!/usr/bin/env python3
"""Checks a benchmark's progress display (bench/progress.c), on ring.

On a terminal (script(1)'s pseudo-terminal): a progress line appears on
stderr, and the screen a terminal would show at the end has no progress
left on it and the RESULT line last. Without one: stderr stays empty and
RESULT is the last line of stdout. Where no pseudo-terminal can be had
(script missing, or unable to open one), the terminal half is skipped and
the test exits 77, which meson reports as skipped.

usage: progress_test.py RING_EXECUTABLE
"""
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

# Small: the first progress line is drawn before the run starts, so a run
# of any length shows one.
ARGS = ["-w", "2", "2000", "20"]


def fail(msg):
    print("bench-progress: " + msg, file=sys.stderr)
    sys.exit(1)


def render(raw):
    """The lines a terminal shows for `raw`: CR goes back to the line's
    start, ESC [K erases to its end, LF starts a new line."""
    lines, line, col, i = [], [], 0, 0
    while i < len(raw):
        if raw.startswith("\x1b[K", i):
            del line[col:]
            i += 3
            continue
        c = raw[i]
        i += 1
        if c == "\r":
            col = 0
        elif c == "\n":
            lines.append("".join(line))
            line, col = [], 0
        else:
            if col < len(line):
                line[col] = c
            else:
                line.append(c)
            col += 1
    if line:
        lines.append("".join(line))
    return lines


def last_line(lines):
    shown = [l for l in lines if l.strip()]
    return shown[-1] if shown else ""


def without_terminal(cmd, env):
    run = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                         env=env, timeout=60)
    if run.returncode != 0:
        fail("%s failed with status %d" % (cmd[0], run.returncode))
    if run.stderr:
        fail("stderr is not a terminal, yet got: %r" % run.stderr[:200])
    last = last_line(run.stdout.decode().split("\n"))
    if not last.startswith("RESULT "):
        fail("without a terminal the last line is not RESULT: %r" % last)


def terminal_unavailable(env):
    """Why script(1) cannot give a program a pseudo-terminal here, or None
    when it can: missing, or no pty to be had (a container without
    /dev/pts, a sandbox), where script fails before it runs anything."""
    if shutil.which("script", path=env.get("PATH")) is None:
        return "no script(1)"
    with tempfile.TemporaryDirectory() as tmp:
        typescript = os.path.join(tmp, "typescript")
        try:
            run = subprocess.run(["script", "-qec", "true", typescript],
                                 stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, env=env, timeout=60)
        except OSError as e:
            return "script(1) cannot run: %s" % e
        if run.returncode != 0 or not os.path.exists(typescript):
            why = run.stderr.decode(errors="replace").strip()
            return "script(1) cannot open a pseudo-terminal (%s)" % (
                why or "status %d" % run.returncode)
    return None


def on_terminal(cmd, env):
    why = terminal_unavailable(env)
    if why is not None:
        print("bench-progress: %s, terminal half skipped" % why)
        return False
    with tempfile.TemporaryDirectory() as tmp:
        typescript = os.path.join(tmp, "typescript")
        # -q: no "Script started" chatter; -e: the program's exit status.
        run = subprocess.run(
            ["script", "-qec", shlex.join(cmd), typescript],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env=env, timeout=60)
        with open(typescript, encoding="utf-8", errors="replace",
                  newline="") as f:
            raw = f.read()
    if run.returncode != 0:
        fail("%s under script failed with status %d; output:\n%s"
             % (cmd[0], run.returncode, raw))
    # script's own header and footer lines, where it writes them, are not
    # the program's.
    raw = "\n".join(l for l in raw.split("\n")
                    if not l.startswith(("Script started", "Script done")))
    if "ring: " not in raw or "turns/s" not in raw:
        fail("no progress line on the terminal; output:\n%r" % raw)
    screen = render(raw)
    if any("turns/s" in l for l in screen):
        fail("a progress line was left on the screen:\n%s" % "\n".join(screen))
    last = last_line(screen)
    if not last.startswith("RESULT "):
        fail("on the terminal the last line is not RESULT: %r" % last)
    return True


def main():
    if len(sys.argv) != 2:
        fail("usage: progress_test.py RING_EXECUTABLE")
    cmd = [sys.argv[1]] + ARGS
    env = dict(os.environ)
    env.pop("BENCH_PROGRESS", None)
    without_terminal(cmd, env)
    if not on_terminal(cmd, env):
        sys.exit(77)  # meson: skipped
    print("bench-progress: ok")


main()
