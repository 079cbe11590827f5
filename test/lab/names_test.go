package lab

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLeftoverNamespaces(t *testing.T) {
	alive := func(pid int) bool { return pid == 200 }
	names := []string{
		"kpl-100-0-node1", // dead owner
		"kpl-200-0-node1", // alive owner
		"kpl-300-1-ext",   // self
		"kpl-garbage",     // unparseable, with prefix
		"other-100-0-node1",
		"kplx-1-0-node1",
	}
	got := LeftoverNamespaces(names, "kpl-", 300, alive)
	want := []string{"kpl-100-0-node1", "kpl-garbage"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestInstanceIDRoundTrip(t *testing.T) {
	id := instanceID("kpl-", 4242, 7)
	if id != "kpl-4242-7-" {
		t.Fatalf("instanceID = %q", id)
	}
	pid, ok := ownerPID(id+"node1", "kpl-")
	if !ok || pid != 4242 {
		t.Fatalf("ownerPID = %d, %v", pid, ok)
	}
}

func TestParseNetnsList(t *testing.T) {
	got := parseNetnsList("kpl-1-0-node1 (id: 3)\nkpl-1-0-ext\n\n")
	if diff := cmp.Diff([]string{"kpl-1-0-node1", "kpl-1-0-ext"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
