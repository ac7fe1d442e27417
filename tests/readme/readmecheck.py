#!/usr/bin/env python3
"""readmecheck.py -- run the console examples of Markdown files against a live redlockd.

Usage: readmecheck.py [--redlockd BIN] [--keep] [--only FILE:LINE] [--expect-fail] FILE.md...

`make readme-check` runs it on README.md and the clients' READMEs (`make test` on README.md,
`make test-all` on the clients' too).
It starts five real redis-server masters and, for each example, a new bin/redlockd on
free ports (a new --key-prefix each time, so every example meets an empty cluster), runs
the example's commands one by one in one bash, and compares what they print with the
README's text.  Exit status: 0 every example matches, 1 some do not, 2 a setup error.

THE EXAMPLE FORMAT (how to write an example that this checks)

Every ```console block is an example, and every example is run unless it says otherwise.
In the block, a line starting with "$ " is a command (bash; "> " lines right after it
continue it), and the lines up to the next command are what it prints, stdout and stderr
as a terminal shows them (interleaved).  Blank lines at the end of a command's output are
ignored (leave one between commands for readability).  The commands run in a scratch
directory that links every top-level entry of the repository (so `bin/redlock`,
`cd clients/go` work) with:
  - the service on localhost:8080 / 127.0.0.1:8080 as the README shows it (the live port
    is substituted in the commands and turned back in the output), its masters shown as
    127.0.0.1:7001..7005, REDLOCK_URL set to the live service (the CLI and the clients
    read it); nothing else of the caller's environment but PATH, HOME, LANG, TMPDIR and
    the CA/Go/npm settings;
  - RC_MASTER_PIDS, RC_MASTER_PORTS (space-separated, in order) and RC_SERVICE_PID, for
    setup lines that freeze or stop processes;
  - TIMEFORMAT=$'real\\t%3lR' (so `time CMD` prints one line, `real\t0m2.000s`);
  - the service started with --node-timeout-ms 250 (a loaded machine's slow replies are not
    the example's 503s; nothing shown depends on it) and a new --key-prefix.
curl prints a JSON body without a final newline; the README shows each on its own line
(so does the checker: a line break after a command's output, between back-to-back JSON
objects `}{"`, and before the line of `time`).  The shell's notices about background jobs ("Killed") are dropped.
A command ending in `&` runs in the background: the checker then waits until the service
sees its connection (or it wrote its output) before the next command, as a person would.
Output that a background command prints is compared where the README shows it: the
checker waits (up to 15 s) for as many lines as the README shows after each command.
`cat FILE` is repeated (up to 15 s) while FILE has fewer lines than the README shows.

What is masked (compared as "any value"), in the README's text and in the live output:
  leases      "lease":"...", --lease X, lease: '...', lease='...', ?lease=...: any value,
              but the same README lease must be the same live lease throughout an example
              (and a README lease in a later command is replaced by its live value; one
              that no output showed yet is looked up in the files the example wrote)
  request ids X-Request-Id: ..., "request_id":"..."
  dates       Date: ..., ISO-8601 timestamps
  timings     validity_ms, retry_after_ms, latency_ms, duration_ms, down_for_ms,
              quarantine_remaining_ms, resting_ms, max_hold_left_ms (JSON "k":N, k=N,
              camelCase k: N), any "N ms",
              Retry-After: N, Content-Length: N (it follows the timings' digits),
              real\t0mN.NNNs, (pid N)
Everything else (fencing tokens, indexes, messages, exit codes) is compared exactly.

Directives: an HTML comment right above the block (blank lines between are allowed),
    <!-- readme-check: DIRECTIVE; DIRECTIVE ... -->
one or more such lines.  Unknown directives are an error.
  skip: REASON          not run (say why: the summary lists every skipped example)
  continue              the same service, shell, directory and leases as the previous
                        example in the file (default: all new)
  tokens: LINE | LINE   the service gets a tokens file with these lines
  service: FLAGS        more redlockd flags (e.g. --log-format text)
  setup: COMMAND        a shell command run before the block's commands, not shown
                        (may be repeated; e.g. variables, a holder taken beforehand)
  file: NAME            the README's output of `$ cat NAME` in this block is written to
                        NAME before the block runs (a script the block then runs; the
                        service's address in it is the live one)
  url: URL              the address the README shows for the service in this block
                        (default http://localhost:8080), e.g. a port a test stack had
  unordered             within each command's output, lines may come in any order
                        (a background command and a foreground one printing together)
  mask: REGEX           a further masked part (Python regex), e.g. order-dependent tokens
  repeat: REGEX         a run of consecutive lines matching REGEX counts as one line
                        (e.g. how many extensions a stream printed depends on timing)
  timeout: SECONDS      per command (default 120)

A new example that fails: run `make readme-check READMES=README.md` (or
`python3 tests/readme/readmecheck.py --only README.md:LINE README.md`), which prints the
README's lines against the live ones; fix the example (or the code), or add a directive.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DOC_MASTER_PORTS = [7001, 7002, 7003, 7004, 7005]
WAIT_OUTPUT_S = 15.0
GRACE_S = 0.15
PACE_S = 0.3

LEASE_RE = re.compile(
    r'(?P<pre>"lease":\s*"|lease: \'|lease=\'|--lease[ =]"?|[?&]lease=|\blease=)'
    r'(?P<v>[A-Za-z0-9_-]{16,128})')
MASKS = [
    (re.compile(r'(?im)^(date: ).*$'), r'\1<date>'),
    (re.compile(r'(?im)^(x-request-id: ).*$'), r'\1<id>'),
    (re.compile(r'(?im)^(content-length: )\d+'), r'\1<n>'),
    (re.compile(r'(?im)^(retry-after: )\d+'), r'\1<n>'),
    (re.compile(r'"request_id":"[^"]*"'), '"request_id":"<id>"'),
    (re.compile(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z'), '<time>'),
    (re.compile(r'("(?:validity_ms|retry_after_ms|latency_ms|duration_ms|down_for_ms|'
                r'quarantine_remaining_ms|resting_ms|max_hold_left_ms)":\s*)[\d.]+'), r'\1<n>'),
    (re.compile(r'\b((?:validity_ms|retry_after_ms|latency_ms|duration_ms|validityMs|retryAfterMs|'
                r'remainingMs|quarantine_remaining_ms)(?:=|: ))[\d.]+'), r'\1<n>'),
    (re.compile(r'\b\d+(\.\d+)? ?ms\b'), '<n> ms'),
    (re.compile(r'(real\t)\d+m[\d.]+s'), r'\1<time>'),
    (re.compile(r'\(pid \d+\)'), '(pid <n>)'),
]
DIRECTIVE_RE = re.compile(r'^\s*<!--\s*readme-check:\s*(.*?)\s*-->\s*$')
KNOWN = {'skip', 'continue', 'tokens', 'service', 'setup', 'file', 'url', 'unordered', 'mask',
         'repeat', 'timeout'}


class SetupError(Exception):
    pass


# ---- parsing -------------------------------------------------------------------------

class Block:
    def __init__(self, path, line):
        self.path, self.line = path, line
        self.directives = []       # (name, value)
        self.lines = []            # the block's text lines
        self.steps = []            # [command, [expected lines], line number]

    def get(self, name):
        return [v for n, v in self.directives if n == name]

    def has(self, name):
        return any(n == name for n, _ in self.directives)

    @property
    def where(self):
        return f"{os.path.relpath(self.path, REPO)}:{self.line}"


def parse(path):
    with open(path, encoding='utf-8') as f:
        text = f.read().split('\n')
    blocks, pending, i = [], [], 0
    while i < len(text):
        line = text[i]
        m = DIRECTIVE_RE.match(line)
        if m:
            for part in split_directives(m.group(1)):
                name, _, value = part.partition(':')
                name, value = name.strip(), value.strip()
                if name not in KNOWN:
                    raise SetupError(f"{path}:{i + 1}: unknown directive '{name}' (see readmecheck.py)")
                pending.append((name, value))
            i += 1
            continue
        fence = re.match(r'^(\s*)(```+|~~~+)\s*(\S*)', line)
        if fence:
            indent, mark, lang = fence.group(1), fence.group(2), fence.group(3)
            j = i + 1
            body = []
            while j < len(text) and not re.match(r'^\s*' + re.escape(mark[0]) * len(mark) + r'\s*$', text[j]):
                body.append(text[j][len(indent):] if text[j].startswith(indent) else text[j].lstrip())
                j += 1
            if lang == 'console':
                b = Block(path, i + 1)
                b.directives = pending
                b.lines = body
                parse_steps(b, i + 2)
                blocks.append(b)
            elif pending:
                raise SetupError(f"{path}:{i + 1}: readme-check directives above a ```{lang} block")
            pending = []
            i = j + 1
            continue
        if line.strip():
            if pending:
                raise SetupError(f"{path}:{i + 1}: readme-check directives not right above a ```console block")
        i += 1
    return blocks


def split_directives(s):
    """DIRECTIVE; DIRECTIVE -- a ';' inside setup:, mask: and repeat: values is kept when
    it is followed by a space and no known directive name."""
    parts, cur = [], ''
    for piece in s.split(';'):
        head = piece.strip().partition(':')[0].strip()
        if cur and head not in KNOWN:
            cur += ';' + piece
        else:
            if cur:
                parts.append(cur)
            cur = piece
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def parse_steps(b, first_line):
    step = None
    for k, line in enumerate(b.lines):
        if line.startswith('$ ') or line == '$':
            step = [line[2:], [], first_line + k]
            b.steps.append(step)
        elif line.startswith('> ') and step is not None and not step[1]:
            step[0] += '\n' + line[2:]
        elif step is None:
            if line.strip():
                b.steps.append(step := [None, [line], first_line + k])
        else:
            step[1].append(line)
    for s in b.steps:
        while s[1] and not s[1][-1].strip():
            s[1].pop()


# ---- processes ---------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_for(cond, deadline_s, step=0.02):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return cond()


class Masters:
    def __init__(self, n, workdir):
        self.procs, self.ports = [], []
        for k in range(n):
            port = free_port()
            d = os.path.join(workdir, f'master-{port}')
            os.makedirs(d)
            p = subprocess.Popen(
                ['redis-server', '--port', str(port), '--bind', '127.0.0.1', '--dir', d, '--save', '',
                 '--appendonly', 'no', '--maxmemory-policy', 'noeviction', '--logfile', 'redis.log'],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append(p)
            self.ports.append(port)
        for port in self.ports:
            if not wait_for(lambda: tcp_ok(port), 10):
                raise SetupError(f"redis-server on port {port} did not start")

    def cont(self):
        for p in self.procs:
            try:
                os.kill(p.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def stop(self):
        self.cont()
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()


def tcp_ok(port):
    try:
        with socket.create_connection(('127.0.0.1', port), 0.5):
            return True
    except OSError:
        return False


def http_status(port, path):
    try:
        with socket.create_connection(('127.0.0.1', port), 2) as s:
            s.sendall(f'GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'.encode())
            s.settimeout(2)
            return s.recv(64).split(b' ')[1].decode()
    except (OSError, IndexError):
        return None


class Service:
    n = 0

    def __init__(self, bin_, masters, workdir, flags, tokens):
        Service.n += 1
        self.port = None
        self.log = os.path.join(workdir, f'redlockd-{Service.n}.log')
        # A node timeout above the default 50 ms: on a loaded machine a master's reply may
        # take longer, and a 503 would be the load's, not the example's (no output shown
        # depends on it; `service: --node-timeout-ms N` overrides it).
        args = [bin_, '--masters', ','.join(f'127.0.0.1:{p}' for p in masters.ports),
                '--key-prefix', f'readme{os.getpid()}x{Service.n}:', '--node-timeout-ms', '250']
        if tokens:
            tf = os.path.join(workdir, f'tokens-{Service.n}')
            with open(tf, 'w') as f:
                f.write('\n'.join(tokens) + '\n')
            args += ['--auth-tokens-file', tf]
        args += flags
        env = {k: v for k, v in os.environ.items() if not k.startswith('REDLOCK_')}
        for attempt in range(5):
            self.port = free_port()
            with open(self.log, 'ab') as lf:
                self.proc = subprocess.Popen(args + ['--listen', f'127.0.0.1:{self.port}'], env=env,
                                             stdin=subprocess.DEVNULL, stdout=lf, stderr=lf)
            if wait_for(lambda: self.proc.poll() is not None or http_status(self.port, '/readyz') == '200', 15):
                if self.proc.poll() is None:
                    return
                if self.proc.returncode == 3:   # the port was taken meanwhile
                    continue
            break
        self.stop()
        with open(self.log, errors='replace') as f:
            tail = f.read()[-2000:]
        raise SetupError(f"redlockd did not become ready ({' '.join(args)}):\n{tail}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def server_sockets(port):
    """Established and closing server-side connections of the service's port."""
    est, closing = set(), 0
    hexport = f'{port:04X}'
    for name in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local, remote, st = fields[1], fields[2], fields[3]
                    if local.rsplit(':', 1)[1] != hexport:
                        continue
                    if st == '01':
                        est.add(remote)
                    elif st in ('08', '03'):   # CLOSE_WAIT, SYN_RECV
                        closing += 1
        except OSError:
            pass
    return est, closing


class Shell:
    """One bash reading commands from a pipe; stdout and stderr into one pipe, read by a
    thread.  A marker after each command says it finished, and its status."""

    def __init__(self, cwd, env):
        self.buf = bytearray()
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(['bash', '--noprofile', '--norc'], cwd=cwd, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.seq = 0
        threading.Thread(target=self._read, daemon=True).start()
        self.send("set +m; TIMEFORMAT=$'real\\t%3lR'", 10)

    def _read(self):
        fd = self.proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            with self.lock:
                self.buf += chunk

    def take(self):
        with self.lock:
            out = bytes(self.buf)
            self.buf.clear()
        return out

    def peek(self):
        with self.lock:
            return bytes(self.buf)

    def send(self, cmd, timeout):
        """Runs cmd; returns (output up to the marker, status) or raises TimeoutError."""
        self.seq += 1
        mark = f'\x1eRCMARK {self.seq} '.encode()
        script = (f"{cmd}\n__rc=$?; printf '\\036RCMARK %d %d\\036\\n' {self.seq} $__rc; "
                  f"(exit $__rc)\n")
        try:
            self.proc.stdin.write(script.encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise TimeoutError('the shell exited')
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            data = self.peek()
            k = data.find(mark)
            if k >= 0:
                e = data.find(b'\x1e\n', k + 1)
                if e >= 0:
                    with self.lock:
                        del self.buf[:e + 2]
                    rc = int(data[k + len(mark):e].split()[0])
                    return data[:k], rc
            if self.proc.poll() is not None:
                raise TimeoutError('the shell exited')
            time.sleep(0.01)
        raise TimeoutError(f'no end after {timeout} s')

    def close(self):
        """Ends the shell and everything it started (its session), by process id."""
        sid = self.proc.pid
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in session_pids(sid):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            if not wait_for(lambda: not session_pids(sid), 3):
                continue
            break
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass


def session_pids(sid):
    pids = []
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open(f'/proc/{d}/stat') as f:
                st = f.read()
            fields = st[st.rindex(')') + 2:].split()
            if int(fields[3]) == sid and fields[0] != 'Z':
                pids.append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    return pids


# ---- comparing ---------------------------------------------------------------------

JOB_NOTICE = re.compile(r'^bash: line \d+: +\d+ (Killed|Terminated|Hangup|Aborted|Quit|Stopped)\b')


def normalise(text):
    text = text.replace('\r\n', '\n').replace('\r', '\n')
    # JSON bodies come without a final newline; the README shows each on its own line.
    text = re.sub(r'\}(?=\{"|real\t)', '}\n', text)
    lines = [ln.rstrip() for ln in text.split('\n') if not JOB_NOTICE.match(ln)]
    while lines and not lines[-1]:
        lines.pop()
    return lines


class Leases:
    def __init__(self):
        self.doc_to_live = {}
        self.live_to_doc = {}

    def bind(self, doc, live):
        """False if doc was bound to another live lease (or live to another doc one)."""
        if doc in self.doc_to_live:
            return self.doc_to_live[doc] == live
        if live in self.live_to_doc:
            return self.live_to_doc[live] == doc
        self.doc_to_live[doc] = live
        self.live_to_doc[live] = doc
        return True


def shape(line, masks):
    """(the line with leases as <lease> and masks applied, [leases in order])."""
    leases = [m.group('v') for m in LEASE_RE.finditer(line)]
    line = LEASE_RE.sub(lambda m: m.group('pre') + '<lease>', line)
    for rx, rep in masks:
        line = rx.sub(rep, line)
    return line, leases


def collapse(lines, repeats):
    """Runs of consecutive lines matching one of repeats -> one line."""
    out = []
    for ln in lines:
        rx = next((r for r in repeats if r.search(ln[0])), None)
        if rx is not None and out and out[-1][2] is rx:
            continue
        out.append((ln[0], ln[1], rx))
    return [(a, b) for a, b, _ in out]


def compare(expected, actual, masks, repeats, unordered, leases):
    """Lists of lines; returns None when they match, else a reason."""
    exp = collapse([shape(x, masks) for x in expected], repeats)
    act = collapse([shape(x, masks) for x in actual], repeats)
    if len(exp) != len(act):
        return f"{len(expected)} lines expected, {len(actual)} printed"
    pairs = []
    if unordered:
        left = list(act)
        for e in exp:
            k = next((i for i, a in enumerate(left) if a[0] == e[0]), None)
            if k is None:
                return f"no printed line matches: {e[0]}"
            pairs.append((e, left.pop(k)))
    else:
        for n, (e, a) in enumerate(zip(exp, act)):
            if e[0] != a[0]:
                return f"line {n + 1} differs"
            pairs.append((e, a))
    for e, a in pairs:
        for d, lv in zip(e[1], a[1]):
            if not leases.bind(d, lv):
                return f"lease {d} stands for {leases.doc_to_live.get(d)} earlier, here for {lv}"
    return None


# ---- running -----------------------------------------------------------------------

class Run:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix='readmecheck-')
        self.masters = Masters(5, self.tmp)
        self.ctx = None   # (service, shell, workdir, leases, doc ports) of the example running
        self.results = []

    def close(self):
        self.end_context()
        self.masters.stop()
        if not self.args.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            print(f"readme-check: kept {self.tmp}")

    def end_context(self):
        if self.ctx:
            svc, sh, _, _, _ = self.ctx
            sh.close()
            self.masters.cont()
            svc.stop()
            self.ctx = None

    def new_context(self, b):
        self.end_context()
        workdir = tempfile.mkdtemp(prefix='example-', dir=self.tmp)
        for name in os.listdir(REPO):
            if name not in ('.git',):
                os.symlink(os.path.join(REPO, name), os.path.join(workdir, name))
        tokens = [t.strip() for v in b.get('tokens') for t in v.split('|') if t.strip()]
        flags = [f for v in b.get('service') for f in v.split()]
        svc = Service(self.args.redlockd, self.masters, self.tmp, flags, tokens)
        env = {k: v for k, v in os.environ.items()
               if k in ('PATH', 'HOME', 'LANG', 'LC_ALL', 'TMPDIR', 'USER', 'LOGNAME', 'GOPATH',
                        'GOCACHE', 'GOFLAGS', 'GOPROXY', 'NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE',
                        'SSL_CERT_DIR', 'npm_config_cache', 'NPM_CONFIG_CACHE')}
        env.setdefault('LANG', 'C.UTF-8')
        env.update({'TERM': 'dumb', 'REDLOCK_URL': f'http://127.0.0.1:{svc.port}',
                    'RC_MASTER_PIDS': ' '.join(str(p.pid) for p in self.masters.procs),
                    'RC_MASTER_PORTS': ' '.join(str(p) for p in self.masters.ports),
                    'RC_SERVICE_PID': str(svc.proc.pid)})
        sh = Shell(workdir, env)
        self.ctx = (svc, sh, workdir, Leases(), None)

    def doc_ports(self, b):
        url = (b.get('url') or ['http://localhost:8080'])[-1]
        m = re.match(r'^(?:https?://)?([^/:]+|\[[^]]+\]):(\d+)', url)
        if not m:
            raise SetupError(f"{b.where}: url: '{url}' has no host:port")
        return int(m.group(2))

    def to_live(self, cmd, doc_port, leases):
        svc = self.ctx[0]
        cmd = re.sub(r'\b(localhost|127\.0\.0\.1|\[::1\]):' + str(doc_port) + r'\b',
                     lambda m: f'{m.group(1)}:{svc.port}', cmd)
        for d, lv in leases.doc_to_live.items():
            cmd = cmd.replace(d, lv)
        return cmd

    def to_doc(self, text, doc_port):
        svc = self.ctx[0]
        text = re.sub(r'\b(localhost|127\.0\.0\.1|\[::1\]):' + str(svc.port) + r'\b',
                      lambda m: f'{m.group(1)}:{doc_port}', text)
        for live, doc in zip(self.masters.ports, DOC_MASTER_PORTS):
            text = re.sub(r'\b127\.0\.0\.1:' + str(live) + r'\b', f'127.0.0.1:{doc}', text)
        return text

    def lease_from_files(self, cmd, leases, workdir, deadline_s):
        """README leases in cmd that no output showed: look for unbound live leases in the
        files the example wrote (a background command's output)."""
        doc = [m.group('v') for m in LEASE_RE.finditer(cmd) if m.group('v') not in leases.doc_to_live]
        if not doc:
            return
        def found():
            live = []
            for name in sorted(os.listdir(workdir)):
                p = os.path.join(workdir, name)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                try:
                    with open(p, errors='replace') as f:
                        for m in LEASE_RE.finditer(f.read()):
                            v = m.group('v')
                            if v not in leases.live_to_doc and v not in live:
                                live.append(v)
                except OSError:
                    pass
            return live
        wait_for(lambda: len(found()) >= len(doc), deadline_s, 0.05)
        for d, lv in zip(doc, found()):
            leases.bind(d, lv)

    def run_block(self, b):
        if b.has('skip'):
            reason = b.get('skip')[-1] or '(no reason given)'
            if not b.get('skip')[-1]:
                return 'fail', 'skip: without a reason'
            return 'skip', reason
        if not any(s[0] is not None for s in b.steps):
            return 'fail', 'a console block without a "$ " command: run it, or say why not (skip: REASON)'
        if b.has('continue') and self.ctx is not None and self.ctx[4] == b.path:
            pass
        else:
            if b.has('continue'):
                return 'fail', 'continue: but no example before it in this file ran'
            self.new_context(b)
        svc, sh, workdir, leases, _ = self.ctx
        self.ctx = (svc, sh, workdir, leases, b.path)
        doc_port = self.doc_ports(b)
        timeout = float((b.get('timeout') or ['120'])[-1])
        masks = list(MASKS)
        try:
            masks += [(re.compile(m), '<masked>') for m in b.get('mask')]
            repeats = [re.compile(r) for r in b.get('repeat')]
        except re.error as e:
            return 'fail', f'a bad regex in a directive: {e}'
        unordered = b.has('unordered')
        for name in b.get('file'):
            step = next((s for s in b.steps if s[0] and s[0].strip() == f'cat {name}'), None)
            if step is None:
                return 'fail', f'file: {name} but no "$ cat {name}" in the block'
            with open(os.path.join(workdir, name), 'w') as f:
                f.write(self.to_live('\n'.join(step[1]), doc_port, leases) + '\n')
        for cmd in b.get('setup'):
            try:
                out, rc = sh.send(self.to_live(cmd, doc_port, leases), timeout)
            except TimeoutError as e:
                return 'fail', f'setup: {cmd}: {e}'
            if rc != 0:
                return 'fail', f'setup: {cmd}: exit {rc}: {out.decode(errors="replace")}'
        sh.take()
        went_background = False
        for cmd, expected, lineno in b.steps:
            if cmd is None:
                return 'fail', f'line {lineno}: output before any command'
            # A lease from a file only a background command can still be writing.
            self.lease_from_files(cmd, leases, workdir, WAIT_OUTPUT_S if went_background else 0)
            live_cmd = self.to_live(cmd, doc_port, leases)
            background = re.search(r'&\s*(#.*)?$', cmd) is not None and not cmd.rstrip().endswith('&&')
            est0, _ = server_sockets(svc.port)
            t0 = time.monotonic()
            try:
                out, rc = sh.send(live_cmd, timeout)
            except TimeoutError as e:
                return 'fail', f'line {lineno}: $ {cmd}\n  {e}'
            printed = out if not out or out.endswith(b'\n') else out + b'\n'
            want = len(expected)
            def lines_now():
                return normalise(self.to_doc((printed + sh.peek()).decode(errors='replace'), doc_port))
            # Background output the README shows here: wait for that many lines.
            wait_for(lambda: len(lines_now()) >= want, WAIT_OUTPUT_S)
            if background:
                went_background = True
                target = re.search(r'>\s*(\S+)\s*&', cmd)
                def started():
                    est, _ = server_sockets(svc.port)
                    if est - est0:
                        return True
                    if target:
                        p = os.path.join(workdir, target.group(1))
                        return os.path.exists(p) and os.path.getsize(p) > 0
                    return want > 0 and len(lines_now()) >= want
                wait_for(started, WAIT_OUTPUT_S)
                time.sleep(PACE_S)
            # The service settles: no connection half closed (a killed client's hang-up
            # seen, a lock it held released) and no new connection for a moment.
            self.settle(svc.port)
            time.sleep(GRACE_S)
            actual = lines_now()
            # `cat FILE`: again while FILE has fewer lines than the README shows.
            if re.fullmatch(r'cat [\w./-]+', cmd.strip()):
                end = time.monotonic() + WAIT_OUTPUT_S
                while len(actual) < want and time.monotonic() < end:
                    time.sleep(0.1)
                    sh.take()
                    out, rc = sh.send(live_cmd, timeout)
                    printed = out if not out or out.endswith(b'\n') else out + b'\n'
                    actual = lines_now()
            sh.take()
            why = compare(expected, actual, masks, repeats, unordered, leases)
            if why:
                return 'fail', self.explain(lineno, cmd, expected, actual, why, time.monotonic() - t0)
        return 'pass', f'{sum(1 for s in b.steps if s[0])} commands'

    def settle(self, port):
        last = None
        stable_since = time.monotonic()
        end = time.monotonic() + 5
        while time.monotonic() < end:
            est, closing = server_sockets(port)
            if closing or est != last:
                last = est
                stable_since = time.monotonic()
            elif time.monotonic() - stable_since >= 0.1:
                return
            time.sleep(0.02)

    @staticmethod
    def explain(lineno, cmd, expected, actual, why, took):
        out = [f'line {lineno}: $ {cmd}', f'  {why} (after {took:.1f} s)', '  README:']
        out += [f'    | {x}' for x in expected] or ['    (nothing)']
        out.append('  live:')
        out += [f'    | {x}' for x in actual] or ['    (nothing)']
        return '\n'.join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('files', nargs='+')
    ap.add_argument('--redlockd', default=os.path.join(REPO, 'bin', 'redlockd'))
    ap.add_argument('--keep', action='store_true', help='keep the scratch directory and logs')
    ap.add_argument('--only', action='append', default=[], help='FILE:LINE of a block (repeatable)')
    ap.add_argument('--expect-fail', action='store_true',
                    help='self-test: every example must fail (a wrong example is caught)')
    args = ap.parse_args()
    for tool in ('bash', 'redis-server'):
        if not shutil.which(tool):
            print(f"readme-check: {tool} missing", file=sys.stderr)
            return 2
    if not os.access(args.redlockd, os.X_OK):
        print(f"readme-check: {args.redlockd} missing (make)", file=sys.stderr)
        return 2
    try:
        blocks = [b for f in args.files for b in parse(os.path.abspath(f))]
    except (SetupError, OSError) as e:
        print(f"readme-check: {e}", file=sys.stderr)
        return 2
    if args.only:
        blocks = [b for b in blocks if any(b.where.endswith(o) or f'{b.path}:{b.line}'.endswith(o)
                                           for o in args.only)]
    run = None
    counts = {'pass': 0, 'fail': 0, 'skip': 0}
    bad = []
    try:
        run = Run(args)
        for b in blocks:
            t0 = time.monotonic()
            try:
                verdict, note = run.run_block(b)
            except SetupError as e:
                verdict, note = 'fail', str(e)
            took = time.monotonic() - t0
            if args.expect_fail:
                verdict = {'fail': 'pass', 'pass': 'fail'}.get(verdict, verdict)
                note = ('caught, as it must be: ' + note.split('\n')[1].strip() if verdict == 'pass'
                        and '\n' in note else note if verdict != 'fail' else 'NOT caught: it matched')
            counts[verdict] += 1
            if verdict == 'fail':
                bad.append(b.where)
                print(f"readme-check: {b.where}: FAILED ({took:.1f} s)\n" +
                      '\n'.join('  ' + x for x in note.split('\n')))
            elif verdict == 'skip':
                print(f"readme-check: {b.where}: skipped: {note}")
            else:
                print(f"readme-check: {b.where}: ok, {note} ({took:.1f} s)")
            sys.stdout.flush()
    except SetupError as e:
        print(f"readme-check: {e}", file=sys.stderr)
        return 2
    finally:
        if run:
            run.close()
    what = 'wrong examples caught' if args.expect_fail else 'examples'
    print(f"readme-check ({what}): {counts['pass']} passed, {counts['fail']} failed, "
          f"{counts['skip']} skipped")
    if bad:
        print("readme-check: failed: " + ' '.join(bad))
    return 1 if counts['fail'] else 0


if __name__ == '__main__':
    sys.exit(main())
