// coverage_test.go -- coverage.txt names, for every operationId of api/openapi.yaml,
// the methods of this client that call it; each must exist here.  (clients/coverage.py
// checks the three clients the same way.)

package redlock

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestCoverageOfTheDocumentsOperations(t *testing.T) {
	doc, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ops := regexp.MustCompile(`(?m)^\s+operationId:\s*(\S+)\s*$`).FindAllStringSubmatch(string(doc), -1)
	if len(ops) < 10 {
		t.Fatalf("api/openapi.yaml: only %d operationIds", len(ops))
	}
	cov, err := os.ReadFile("coverage.txt")
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, _ := os.ReadFile(f)
		src.Write(b)
	}
	lines := map[string][]string{}
	for _, l := range strings.Split(string(cov), "\n") {
		if i := strings.Index(l, "#"); i >= 0 {
			l = l[:i]
		}
		f := strings.Fields(strings.ReplaceAll(l, ",", " "))
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 {
			t.Errorf("coverage.txt: %q names no method", l)
			continue
		}
		lines[f[0]] = f[1:]
	}
	for _, op := range ops {
		methods, ok := lines[op[1]]
		if !ok {
			t.Errorf("coverage.txt has no line for %s", op[1])
			continue
		}
		delete(lines, op[1])
		for _, m := range methods {
			if m == "-" {
				break
			}
			// Type.Method: a method of Type (or of the *Lock a Permit embeds).
			typ, meth, ok := strings.Cut(m, ".")
			if !ok {
				t.Errorf("coverage.txt: %s: %s is not Type.Method", op[1], m)
				continue
			}
			recv := regexp.QuoteMeta(typ)
			if typ == "Permit" {
				recv = "(Permit|Lock)"
			}
			if !regexp.MustCompile(`(?m)^func \(\w+ \*?` + recv + `\) ` + regexp.QuoteMeta(meth) + `\(`).MatchString(src.String()) {
				t.Errorf("coverage.txt: %s names %s, which is no method of this client", op[1], m)
			}
		}
	}
	for op := range lines {
		t.Errorf("coverage.txt: %s is no operationId of api/openapi.yaml", op)
	}
}
