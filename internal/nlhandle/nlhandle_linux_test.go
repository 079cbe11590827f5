package nlhandle

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOpenNamesAMissingNamespace(t *testing.T) {
	_, err := Open("/run/netns/kproxy-no-such-namespace", unix.NETLINK_ROUTE)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "/run/netns/kproxy-no-such-namespace") {
		t.Errorf("Open of a missing namespace = %v, want a not-exist error naming it", err)
	}
}

func TestOpenInTheCurrentNamespace(t *testing.T) {
	h, err := Open("", unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("Open in the current namespace: %v", err)
	}
	defer h.Close()
	if _, err := h.LinkByName("lo"); err != nil {
		t.Errorf("the handle cannot read lo: %v", err)
	}
}
