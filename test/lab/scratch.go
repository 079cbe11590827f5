package lab

import (
	"context"
	"errors"
	"fmt"
)

// NewScratchNamespace creates an extra, empty namespace of the lab (loopback up, the
// lab's common sysctls, no links), for tests that run a program whose side effects
// must stay private: a proxy's --cleanup, or a command that may write netfilter rules
// before it fails. Its name is <lab ID><role>; the lab deletes it at Close at the
// latest, or DeleteNamespace deletes it earlier.
func (l *Lab) NewScratchNamespace(ctx context.Context, role string) (*NS, error) {
	if role == "" {
		return nil, errors.New("lab: scratch namespace needs a role")
	}
	ns, err := l.newNamespace(ctx, role, false)
	if err != nil {
		return nil, fmt.Errorf("lab: scratch namespace %s: %w", role, err)
	}
	if _, err := ns.IP(ctx, "link", "set", "lo", "up"); err != nil {
		return nil, fmt.Errorf("lab: scratch namespace %s: %w", role, err)
	}
	return ns, nil
}

// DeleteNamespace kills what runs in ns and deletes it now (a scratch namespace that
// is no longer needed); Close skips namespaces that are already gone.
func (l *Lab) DeleteNamespace(ctx context.Context, ns *NS) error {
	ns.closeHandle()
	return deleteNamespace(ctx, ns.Name)
}
