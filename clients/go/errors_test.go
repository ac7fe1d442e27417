// errors_test.go -- the client's error codes are the document's, and errors.Is works.

package redlock

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

// openapiErrorCodes reads the enum of components/schemas/Error's "error" member from
// api/openapi.yaml (by its indentation: no YAML library in the standard library).
func openapiErrorCodes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	i := 0
	find := func(want string, indent int) {
		t.Helper()
		for ; i < len(lines); i++ {
			l := lines[i]
			if strings.TrimSpace(l) == want && len(l)-len(strings.TrimLeft(l, " ")) == indent {
				i++
				return
			}
		}
		t.Fatalf("api/openapi.yaml: no %q at indent %d", want, indent)
	}
	find("components:", 0)
	find("schemas:", 2)
	find("Error:", 4)
	find("error:", 8)
	find("enum:", 10)
	var codes []string
	for ; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "- ") {
			break
		}
		codes = append(codes, strings.TrimSpace(strings.TrimPrefix(l, "- ")))
	}
	if len(codes) < 10 {
		t.Fatalf("api/openapi.yaml: only %d error codes found: %v", len(codes), codes)
	}
	return codes
}

func TestCodesAreTheDocumentsCodes(t *testing.T) {
	doc := openapiErrorCodes(t)
	var ours []string
	seen := map[ErrorCode]bool{}
	for _, c := range Codes() {
		if seen[c] {
			t.Errorf("Codes() repeats %s", c)
		}
		seen[c] = true
		ours = append(ours, string(c))
	}
	if strings.Join(ours, ",") != strings.Join(doc, ",") {
		a, b := append([]string(nil), ours...), append([]string(nil), doc...)
		sort.Strings(a)
		sort.Strings(b)
		t.Errorf("the client's codes differ from api/openapi.yaml's\n client:   %v\n document: %v", a, b)
	}
}

func TestErrorIsMatchesTheCode(t *testing.T) {
	var err error = fmt.Errorf("wrapped: %w", &Error{Status: 409, Code: ErrLockHeld})
	if !errors.Is(err, ErrLockHeld) {
		t.Error("an *Error with lock_held is not ErrLockHeld")
	}
	if errors.Is(err, ErrLockContended) || errors.Is(err, ErrLockLost) {
		t.Error("an *Error with lock_held matches another code")
	}
	if errors.Is(&Error{Status: 502}, ErrorCode("")) {
		t.Error("an answer without a code matches the empty code")
	}
	var e *Error
	if !errors.As(err, &e) || e.Status != 409 {
		t.Error("errors.As does not reach the *Error")
	}
	lost := error(&LostError{Name: "x", Reason: "lease_lost", Err: &Error{Status: 404, Code: ErrLeaseNotFound}})
	if !errors.Is(lost, ErrLockLost) || !errors.Is(lost, ErrLeaseNotFound) || errors.Is(lost, ErrUnlocked) {
		t.Errorf("a LostError matches wrongly: %v", lost)
	}
}
