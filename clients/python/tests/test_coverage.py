"""test_coverage.py -- clients/coverage.py's own test: on a small tree of its own (two
operations, three clients), it passes when every operation has a method that exists, and
fails, saying why, for each way a coverage.txt can be wrong."""
import importlib.util
import os
import shutil
import tempfile
import unittest

from helpers import REPO

spec = importlib.util.spec_from_file_location("clients_coverage",
                                              os.path.join(REPO, "clients", "coverage.py"))
coverage = importlib.util.module_from_spec(spec)
spec.loader.exec_module(coverage)

OPENAPI = """openapi: 3.1.0
paths:
  /locks/{name}:
    parameters:
      - $ref: '#/components/parameters/Name'
    post:
      operationId: acquireLock
    get:
      operationId: inspectLock
components:
  schemas: {}
"""
FILES = {
    "clients/python/redlockd/client.py":
        "class Base:\n    def status(self): pass\n\nclass Client(Base):\n"
        "    async def acquire(self): pass\n",
    "clients/python/coverage.txt":
        "# a comment\nacquireLock Client.acquire\ninspectLock Client.status\n",
    "clients/go/client.go":
        "package redlock\n\nfunc (c *Client) Acquire(ctx context.Context) error {\n}\n"
        "func Status[T any](x T) {}\n",
    "clients/go/client_test.go": "package redlock\n\nfunc (c *Client) Inspect() {}\n",
    "clients/go/coverage.txt": "acquireLock (*Client).Acquire()\ninspectLock redlock.Status\n",
    "clients/typescript/src/client.ts":
        "export class Client extends Base {\n  async acquire(name: string): Promise<void> {\n"
        "    status(1);\n  }\n  get url(): string { return ''; }\n}\n",
    "clients/typescript/coverage.txt": "acquireLock client.acquire()\ninspectLock - not here\n",
}


class Coverage(unittest.TestCase):
    def setUp(self):
        self.repo = tempfile.mkdtemp(prefix="coverage-test.")
        self.addCleanup(shutil.rmtree, self.repo)
        self.write("api/openapi.yaml", OPENAPI)
        for path, text in FILES.items():
            self.write(path, text)

    def write(self, path, text):
        p = os.path.join(self.repo, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)

    def problems(self):
        return coverage.check(self.repo)[0]

    def test_the_real_document(self):
        with open(os.path.join(REPO, "api", "openapi.yaml")) as f:
            ops = coverage.operations(f.read())
        self.assertIn(("acquireLock", "POST /locks/{name}"), ops)
        self.assertIn(("releaseLocks", "DELETE /locks"), ops)
        self.assertGreaterEqual(len(ops), 14)

    def test_a_whole_tree_passes_and_renders(self):
        self.assertEqual(self.problems(), [])
        problems, table, ops = coverage.check(self.repo)
        self.assertEqual(ops, [("acquireLock", "POST /locks/{name}"),
                               ("inspectLock", "GET /locks/{name}")])
        text = coverage.render(table, ops)
        self.assertIn("| `inspectLock` | `GET /locks/{name}` | `Client.status` | "
                      "`redlock.Status` | — not here |", text)
        self.assertIsNone(coverage.readme_problem("x\n" + text + "\ny", text))
        self.assertIn("--write", coverage.readme_problem(text.replace("not here", "x"), text))

    def test_each_fault_is_named(self):
        cases = [
            ("clients/python/coverage.txt", "acquireLock Client.acquire\n",
             "clients/python/coverage.txt: no line for inspectLock"),
            ("clients/python/coverage.txt",
             "acquireLock Client.acquire\ninspectLock Client.watch\n",
             "Client.watch is not defined in the Python client's source"),
            ("clients/go/coverage.txt", "acquireLock Client.Acquire\ninspectLock Client.Inspect\n",
             "Client.Inspect is not defined"),         # only a test file has it
            ("clients/typescript/coverage.txt", "acquireLock Client.status\ninspectLock -\n",
             "Client.status is not defined"),          # a call, not a member
            ("clients/typescript/coverage.txt", "acquireLock Client.acquire\ninspectLock -\n",
             "'-' needs the reason"),
            ("clients/go/coverage.txt", "acquireLock Client.Acquire\ninspectLock Status\n"
             "watchLock Client.Acquire\n", "'watchLock' is not an operationId"),
            ("clients/go/coverage.txt", "acquireLock Client.Acquire\nacquireLock Status\n",
             "acquireLock has a line already"),
        ]
        for path, text, expected in cases:
            with self.subTest(expected=expected):
                self.write(path, text)
                problems = self.problems()
                self.assertTrue(any(expected in p for p in problems), problems)
                self.write(path, FILES[path])
                self.assertEqual(self.problems(), [])

    def test_a_missing_file_is_said_clearly(self):
        os.unlink(os.path.join(self.repo, "clients/go/coverage.txt"))
        problems = self.problems()
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("clients/go/coverage.txt is missing: the Go client's engineer writes it",
                      problems[0])
        problems, table, ops = coverage.check(self.repo)
        self.assertIn("(no coverage.txt)", coverage.render(table, ops))


if __name__ == "__main__":
    unittest.main()
