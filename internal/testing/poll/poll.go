// Package poll is the tests' bounded wait for a condition that another goroutine
// makes true: Until polls it every millisecond and fails the test, naming what it
// awaited, when 10 s pass first. Tests wait with it instead of sleeping.
package poll

import (
	"testing"
	"time"
)

// Timeout bounds every Until.
const Timeout = 10 * time.Second

// Until polls cond every millisecond until it holds; after Timeout it fails t with
// "timed out after 10s waiting for <what>".
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", Timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}
