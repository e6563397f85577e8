package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// failures are the errors of every provider's run, in the order they happened. The providers run
// side by side and log a lot (a failing run prints its processes' logs), so the line that says
// why one failed is far from the end of the output; printFailures repeats them after the last
// test, where a log cut to its tail (CI's) still shows them.
var failures struct {
	sync.Mutex
	lines []string
}

// recordingT is the *testing.T of one provider's run (or of one of its subtests) whose errors and
// fatal errors are also kept for printFailures.
type recordingT struct {
	*testing.T
}

// summaryLines is how much of one error's message printFailures repeats (a fatal error's message
// may end with a process's log).
const summaryLines = 4

func (r *recordingT) record(msg string) {
	lines := strings.Split(strings.TrimRight(msg, "\n"), "\n")
	if len(lines) > summaryLines {
		lines = append(lines[:summaryLines], fmt.Sprintf("... (%d more lines above, in the test's output)", len(lines)-summaryLines))
	}
	failures.Lock()
	defer failures.Unlock()
	failures.lines = append(failures.lines, fmt.Sprintf("%s: %s", r.Name(), strings.Join(lines, "\n        ")))
}

// Error records args and reports them as testing.T's Error does.
func (r *recordingT) Error(args ...any) {
	r.Helper()
	r.record(fmt.Sprintln(args...))
	r.T.Error(args...)
}

// Errorf records the message and reports it as testing.T's Errorf does.
func (r *recordingT) Errorf(format string, args ...any) {
	r.Helper()
	r.record(fmt.Sprintf(format, args...))
	r.T.Errorf(format, args...)
}

// Fatal records args and ends the test as testing.T's Fatal does.
func (r *recordingT) Fatal(args ...any) {
	r.Helper()
	r.record(fmt.Sprintln(args...))
	r.T.Fatal(args...)
}

// Fatalf records the message and ends the test as testing.T's Fatalf does.
func (r *recordingT) Fatalf(format string, args ...any) {
	r.Helper()
	r.record(fmt.Sprintf(format, args...))
	r.T.Fatalf(format, args...)
}

// printFailures prints every recorded error again, after the last test.
func printFailures() {
	failures.Lock()
	defer failures.Unlock()
	if len(failures.lines) == 0 {
		return
	}
	fmt.Printf("FAILURES (%d, each also above where it happened):\n", len(failures.lines))
	for _, l := range failures.lines {
		fmt.Println("    " + l)
	}
}

func TestRecordingTKeepsTheFirstLinesOfEachError(t *testing.T) {
	failures.Lock()
	saved := failures.lines
	failures.lines = nil
	failures.Unlock()
	defer func() {
		failures.Lock()
		failures.lines = saved
		failures.Unlock()
	}()
	r := &recordingT{T: t}
	r.record("one\ntwo\nthree\nfour\nfive\nsix\n")
	r.record(fmt.Sprintln("single", 1))
	failures.Lock()
	got := append([]string(nil), failures.lines...)
	failures.Unlock()
	want := []string{
		t.Name() + ": one\n        two\n        three\n        four\n        ... (2 more lines above, in the test's output)",
		t.Name() + ": single 1",
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("recorded %q, want %q", got, want)
	}
}
